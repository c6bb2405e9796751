/**
 * The params a load takes, checked once for the two methods that load: `load` and the
 * compare view's `diff_load` (which adds the `side`).
 */

import { array, bool, isPlainObject, literal, nullable, str } from "./validate";

/** The five fields of a load's params, as `object()` checks them. */
export const loadFields = {
  path: array(str),
  device: str,
  mode: literal("r", "r+", null),
  allow_pickle: bool,
  variable: nullable(str),
};

/** A load's optional `replace` (absent: the kernel does not rebind a bound name). */
export function withReplace<P extends object>(
  v: unknown,
  at: string,
  params: P,
): P & { replace?: boolean } {
  const found: P & { replace?: boolean } = params;
  if (isPlainObject(v) && Object.hasOwn(v, "replace")) {
    found.replace = bool(v.replace, `${at}.replace`);
  }
  return found;
}
