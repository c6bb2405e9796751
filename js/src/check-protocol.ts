/**
 * The `check` method of protocol v1: the TypeScript mirror of
 * `tdview/protocol/_check.py`. protocol.ts merges it into `Methods` and its decoders.
 *
 * `check` `{path, values}` → `CheckResult`: is the subtree at `path` healthy. What the
 * index flags, each leaf's file against its shape and dtype, every archive entry's
 * CRC-32; `values: true` also reads every value (NaN, Inf, all-zero leaves). On a
 * folder of checkpoints' own node, every member below it (paths from the folder's
 * root, the member's first). Lane `walk`; progress messages while payloads are read
 * (labels name the member), cancellable.
 */

import type { Path } from "./protocol";
import { array, bool, count, type Decoder, object, str } from "./validate";

export interface CheckParams {
  path: Path;
  /** Read every value too (NaN, Inf, all-zero leaves); default false. */
  values?: boolean;
}

/** One problem: the keys from the checkpoint's root to its node, its kind, what it is. */
export interface CheckProblem {
  path: Path;
  /** metadata, refused, missing, empty, size, truncated, crc, stale_crc, corrupt,
   * unreadable, nan, inf or zeros. */
  kind: string;
  message: string;
}

/** What a check covered. */
export interface CheckCounts {
  /** Checkpoints checked: 1, or the members of a folder of checkpoints below its node. */
  checkpoints: number;
  nodes: number;
  leaves: number;
  /** Archive entries whose CRC-32 was computed. */
  entries: number;
  /** Payload bytes read. */
  bytes: number;
  /** Leaves whose values were counted. */
  values: number;
  /** Leaves of a format that records no CRC-32 (a directory, safetensors, consolidated,
   * HDF5, zarr): their sizes were checked, not their bytes. */
  no_crc: number;
}

export interface CheckResult {
  path: Path;
  healthy: boolean;
  /** At most 500; `more` says how many were left out. */
  problems: CheckProblem[];
  more: number;
  /** Groups of leaves stored with the same bytes. */
  duplicates: Path[][];
  checked: CheckCounts;
  values: boolean;
}

export interface CheckMethods {
  check: { params: CheckParams; result: CheckResult };
}

const decodeParams: Decoder<CheckParams> = (v, at) => {
  const params: CheckParams = object({ path: array(str) })(v, at);
  const values = (v as Record<string, unknown>).values;
  if (values !== undefined) params.values = bool(values, `${at}.values`);
  return params;
};

export const checkParamDecoders: {
  [M in keyof CheckMethods]: Decoder<CheckMethods[M]["params"]>;
} = { check: decodeParams };

export const checkResultDecoders: {
  [M in keyof CheckMethods]: Decoder<CheckMethods[M]["result"]>;
} = {
  check: object({
    path: array(str),
    healthy: bool,
    problems: array(object({ path: array(str), kind: str, message: str })),
    more: count,
    duplicates: array(array(array(str))),
    checked: object({
      checkpoints: count,
      nodes: count,
      leaves: count,
      entries: count,
      bytes: count,
      values: count,
      no_crc: count,
    }),
    values: bool,
  }),
};
