/**
 * Paths and the Python code generated from them. Pure functions with no JupyterLab
 * imports, so that they can be tested on their own.
 *
 * The file browser's paths are relative to the server's root directory. tdview only
 * ever writes such paths into generated code: never an absolute path, never a `..`
 * that climbs out of the root.
 */

/** The segments of a `/`-separated path, without empty and `.` ones. */
function segments(path: string): string[] {
  return path.split('/').filter(part => part !== '' && part !== '.');
}

/** Whether a segment climbs up: `..`, also as a piece of a `\`-separated segment (Windows). */
function climbs(segment: string): boolean {
  return segment.split('\\').includes('..');
}

/**
 * Normalize a path relative to the server root, refusing anything that could leave it.
 *
 * @throws Error on a NUL byte, a `..` segment, a drive letter or UNC start, or an empty
 * path. Backslashes are kept (they are ordinary characters in a POSIX file name).
 */
export function rootRelative(path: string): string {
  if (path.includes('\0')) {
    throw new Error(`tdview: refusing a path with a NUL byte: ${JSON.stringify(path)}`);
  }
  const parts = segments(path);
  if (parts.some(climbs) || /^([A-Za-z]:|\\)/.test(parts[0] ?? '')) {
    throw new Error(`tdview: refusing a path outside the server root: ${JSON.stringify(path)}`);
  }
  if (parts.length === 0) {
    throw new Error('tdview: refusing an empty path (the server root itself)');
  }
  return parts.join('/');
}

/** The directory part of a root-relative path (`""` for the root). */
export function parentDir(path: string): string {
  const parts = segments(path);
  return parts.slice(0, -1).join('/');
}

/** The last segment of a path. */
export function baseName(path: string): string {
  const parts = segments(path);
  return parts[parts.length - 1] ?? '';
}

/**
 * The path of `target` seen from directory `fromDir`, both relative to the server
 * root. The result may start with `../` but never leaves the root, since both ends
 * lie in it.
 */
export function relativeTo(fromDir: string, target: string): string {
  const from = segments(fromDir);
  const to = segments(rootRelative(target));
  if (from.some(climbs)) {
    throw new Error(`tdview: refusing a directory outside the server root: ${fromDir}`);
  }
  let common = 0;
  while (common < from.length && common < to.length && from[common] === to[common]) {
    common += 1;
  }
  const up: string[] = new Array<string>(from.length - common).fill('..');
  const rest = [...up, ...to.slice(common)];
  return rest.length === 0 ? '.' : rest.join('/');
}

/**
 * A Python string literal for `text`: JSON string escaping, which Python reads the same
 * way, plus the two line separators JSON leaves raw.
 */
export function pythonString(text: string): string {
  return JSON.stringify(text).replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');
}

/** The code a tdview console runs first: the view, kept as `view` for later loads. */
export function consoleCode(path: string, variable = 'view'): string {
  return `from tdview import TDView\n${variable} = TDView(${pythonString(path)})\n${variable}`;
}

/**
 * The name a new view takes in a kernel that views already use (`taken`): `view`, then
 * `view2`, `view3` … (several tdview consoles share one kernel, each its own view).
 */
export function viewVariable(taken: Iterable<string>): string {
  const used = new Set(taken);
  let n = 1;
  while (used.has(n === 1 ? 'view' : `view${n}`)) {
    n++;
  }
  return n === 1 ? 'view' : `view${n}`;
}

/** The code of an inserted notebook cell. */
export function cellCode(path: string): string {
  return `from tdview import TDView\nTDView(${pythonString(path)})`;
}

/**
 * The `n`th name for a notebook opened next to checkpoint `name`: `ckpt-tdview.ipynb`,
 * then `ckpt-tdview-2.ipynb` … (a `.tdz`, `.safetensors`, `.h5`, `.hdf5` or `.zarr`
 * suffix dropped).
 */
export function notebookName(name: string, n = 1): string {
  const stem = name.replace(/\.(tdz|safetensors|h5|hdf5|zarr)$/i, '') || 'checkpoint';
  return `${stem}-tdview${n > 1 ? `-${n}` : ''}.ipynb`;
}
