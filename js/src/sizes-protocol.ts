/**
 * The `sizes` method of protocol v1: the TypeScript mirror of `tdview/protocol/_sizes.py`.
 * protocol.ts merges it into `Methods` and its decoders.
 *
 * `sizes` `{path, limit}` → `SizesResult`: one level of where a subtree's bytes go (from
 * metadata alone): its totals by dtype and by section, and its `limit` largest children
 * (less the tiny ones), the rest gathered in `other`. The treemap zooms by asking the
 * next level. Lane `walk`; cancellable.
 */

import type { NodeKind, Path } from "./protocol";
import {
  array,
  bool,
  count,
  type Decoder,
  isPlainObject,
  nullable,
  object,
  record,
  str,
} from "./validate";

/** Children a view asks for per level: more would be cells too small to see. */
export const SIZES_LIMIT = 40;

/** The sections of a checkpoint (the rules: `tdview/answers/_sizes.py`), and "mixed"
 * for a subtree whose bytes span several. */
export const SECTIONS = ["model", "optimizer", "buffers", "rest"] as const;
export type Section = (typeof SECTIONS)[number] | "mixed";

export interface SizesParams {
  path: Path;
  /** At most this many children (the kernel sends at most 200). */
  limit: number;
  /** Also the bytes stored twice (reads payloads, with progress); sent only when true. */
  duplicates?: boolean;
}

/** How a view asks for a level: `duplicates` as the param, progress while they are read. */
export interface SizesOptions {
  signal?: AbortSignal | undefined;
  duplicates?: boolean;
  onProgress?: ((p: { done: number; total: number; label: string }) => void) | undefined;
}

/** The params of a request for a level: `duplicates` only when asked. */
export function sizesParams(path: Path, opts?: SizesOptions): SizesParams {
  return opts?.duplicates
    ? { path, limit: SIZES_LIMIT, duplicates: true }
    : { path, limit: SIZES_LIMIT };
}

export interface SizeChild {
  key: string;
  /** From the root of the view (a folder of checkpoints' member included). */
  path: Path;
  kind: NodeKind | string;
  bytes: number;
  /** Tensors below it. */
  leaves: number;
  /** Its one dtype, "mixed", "pickle" or "files"; null when it holds no bytes. */
  dtype: string | null;
  section: Section | string;
  /** Whether it can be zoomed into. */
  has_children: boolean;
}

export interface SizesResult {
  path: Path;
  kind: string;
  bytes: number;
  leaves: number;
  section: Section | string;
  /** Adding up to `bytes`, largest first. */
  by_dtype: Record<string, number>;
  by_section: Record<string, number>;
  children: SizeChild[];
  /** The children not sent (beyond `limit`, or too small to see). */
  other: { count: number; bytes: number };
  /** Nodes below whose metadata could not be read (their bytes are not counted). */
  problems: number;
  /** Bytes stored twice below (null: not looked for). */
  duplicates_bytes: number | null;
}

export interface SizesMethods {
  sizes: { params: SizesParams; result: SizesResult };
}

export const sizesParamDecoders: { [M in keyof SizesMethods]: Decoder<SizesMethods[M]["params"]> } =
  {
    sizes: (v, at) => {
      const params: SizesParams = object({ path: array(str), limit: count })(v, at);
      if (isPlainObject(v) && Object.hasOwn(v, "duplicates")) {
        params.duplicates = bool(v.duplicates, `${at}.duplicates`);
      }
      return params;
    },
  };

export const decodeSizeChild: Decoder<SizeChild> = object({
  key: str,
  path: array(str),
  kind: str,
  bytes: count,
  leaves: count,
  dtype: nullable(str),
  section: str,
  has_children: bool,
});

export const sizesResultDecoders: {
  [M in keyof SizesMethods]: Decoder<SizesMethods[M]["result"]>;
} = {
  sizes: object({
    path: array(str),
    kind: str,
    bytes: count,
    leaves: count,
    section: str,
    by_dtype: record(count),
    by_section: record(count),
    children: array(decodeSizeChild),
    other: object({ count, bytes: count }),
    problems: count,
    duplicates_bytes: nullable(count),
  }),
};
