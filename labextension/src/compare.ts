/**
 * "Compare in tdview": what the file-browser entry applies to, and the code it runs.
 * Pure functions with no JupyterLab imports, so that they can be tested on their own.
 *
 * The entry applies when exactly two items are selected and both are checkpoints tdview
 * opens (a `.tdz`, a folder with `meta.json`, a folder of checkpoints). The older side
 * (`a`) is the one whose name sorts first, numbers by value (`step_999` before
 * `step_1000`), as a training run names its checkpoints.
 */

import { pythonString, rootRelative } from './paths.js';

/** Session names of tdview compare consoles start with this; then `a ⇄ b`. */
export const COMPARE_NAME_PREFIX = 'tdview compare: ';
const BETWEEN = ' ⇄ ';

/** The last path segment, for ordering the two sides. */
function nameOf(path: string): string {
  const parts = path.split('/').filter(Boolean);
  return parts[parts.length - 1] ?? path;
}

/** Whether `a` is the older side: its name sorts first (numbers by value), then its path. */
function before(a: string, b: string): boolean {
  const options = { numeric: true, sensitivity: 'base' } as const;
  const byName = nameOf(a).localeCompare(nameOf(b), undefined, options);
  return byName !== 0 ? byName < 0 : a.localeCompare(b, undefined, options) <= 0;
}

/**
 * The two checkpoints to compare, older first, or null unless exactly two distinct
 * items are selected and both are checkpoints (`checkpointOf` gives an item's
 * root-relative path, or null when tdview does not open it).
 */
export function compareTargets<T>(
  items: readonly T[],
  checkpointOf: (item: T) => string | null
): [string, string] | null {
  if (items.length !== 2) {
    return null;
  }
  const [first, second] = items.map(checkpointOf);
  if (!first || !second || first === second) {
    return null;
  }
  return before(first, second) ? [first, second] : [second, first];
}

/** The code a tdview compare console runs first: the view, kept as `view`. */
export function compareConsoleCode(a: string, b: string, variable = 'view'): string {
  const call = `TDView(${pythonString(a)}, compare=${pythonString(b)})`;
  return `from tdview import TDView\n${variable} = ${call}\n${variable}`;
}

/** The name of a compare console's session (what a reload shows it again from). */
export function compareSessionName(a: string, b: string): string {
  return `${COMPARE_NAME_PREFIX}${rootRelative(a)}${BETWEEN}${rootRelative(b)}`;
}

/** The two checkpoints a compare console's session name records, or null. */
export function comparisonOfSession(name: string): [string, string] | null {
  if (!name.startsWith(COMPARE_NAME_PREFIX)) {
    return null;
  }
  const sides = name.slice(COMPARE_NAME_PREFIX.length).split(BETWEEN);
  if (sides.length !== 2) {
    return null;
  }
  try {
    return [rootRelative(sides[0] ?? ''), rootRelative(sides[1] ?? '')];
  } catch {
    return null;
  }
}
