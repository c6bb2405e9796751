/**
 * The `duplicates` method of protocol v1 and the `param` of a node's details: the
 * TypeScript mirror of `tdview/protocol/_duplicates.py`. protocol.ts merges it into
 * `Methods`, its decoders and `NodeDetails`.
 *
 * `duplicates` `{path, read}` → `DuplicatesResult`: the other leaves whose payload is the
 * same bytes as the leaf at `path`. `read: false` (browsing) reads no payload byte: an
 * archive answers from the CRC-32s it records (`confirmed: false`), a directory says
 * `searched: false` when leaves of the same size and dtype would have to be read. Lane
 * `walk`; cancellable, with progress while it reads.
 */

import type { NodeDetails, Path } from "./protocol";
import { array, bool, count, type Decoder, nullable, object, str } from "./validate";

export interface DuplicatesParams {
  path: Path;
  /** Read payloads to answer (hash the candidates, compare bytes); default false. */
  read?: boolean;
}

export interface DuplicatesResult {
  path: Path;
  /** The other leaves with the same bytes, in load order. */
  same: Path[];
  /** The payload size of each (null when there is none). */
  bytes: number | null;
  /** Compared byte by byte; false: the archive's recorded CRC-32 and size agree. */
  confirmed: boolean;
  /** False: a directory's candidates were not read (ask again with `read: true`). */
  searched: boolean;
}

/** The parameter an optimizer's `state/<i>` belongs to, or why it is not known. */
export interface ParamLabel {
  name: string | null;
  /** Its leaf in the model beside the optimizer. */
  path: Path | null;
  reason: string | null;
}

export interface DuplicatesMethods {
  duplicates: { params: DuplicatesParams; result: DuplicatesResult };
}

const decodeParams: Decoder<DuplicatesParams> = (v, at) => {
  const params: DuplicatesParams = object({ path: array(str) })(v, at);
  const read = (v as Record<string, unknown>).read;
  if (read !== undefined) params.read = bool(read, `${at}.read`);
  return params;
};

export const duplicatesParamDecoders: {
  [M in keyof DuplicatesMethods]: Decoder<DuplicatesMethods[M]["params"]>;
} = { duplicates: decodeParams };

export const duplicatesResultDecoders: {
  [M in keyof DuplicatesMethods]: Decoder<DuplicatesMethods[M]["result"]>;
} = {
  duplicates: object({
    path: array(str),
    same: array(array(str)),
    bytes: nullable(count),
    confirmed: bool,
    searched: bool,
  }),
};

const decodeParamLabel: Decoder<ParamLabel> = object({
  name: nullable(str),
  path: nullable(array(str)),
  reason: nullable(str),
});

/** Node details with an optimizer state's optional `param` (kept when present). */
export function withParam(decode: Decoder<NodeDetails>): Decoder<NodeDetails> {
  return (v, at) => {
    const details = decode(v, at);
    const param = (v as Record<string, unknown>).param;
    if (param !== undefined) details.param = decodeParamLabel(param, `${at}.param`);
    return details;
  };
}

/** Whether a node may be an optimizer's `state/<i>` (its details then say its `param`):
 * a tensordict keyed by a number below a `state`. */
export function mayHaveParam(node: { kind: string; path: Path }): boolean {
  const { path } = node;
  return (
    node.kind === "tensordict" &&
    path.length >= 2 &&
    path[path.length - 2] === "state" &&
    /^\d+$/.test(path[path.length - 1] ?? "")
  );
}
