import type { Contents } from '@jupyterlab/services';

/** At most this many folder listings in flight at once. */
const CONCURRENCY = 4;
/** Sub-folders listed, at most, to find a checkpoint below a folder that is none. */
const PROBE_LISTINGS = 8;
/** Folder levels below a folder that the probe looks into (a torchrl.checkpoint keeps
 * its checkpoints in `components/NNNN-name/state/`, three levels down). */
const PROBE_DEPTH = 3;

/**
 * What tdview opens a folder as: a `"checkpoint"` (it holds a `meta.json`, or it is a
 * zarr store, `td.to_zarr`: a `zarr.json` and no `meta.json`), a
 * `"collection"` (a folder of checkpoints: a training run's `step_N/` and `.tdz` files, a
 * torchrl replay-buffer dump, a torchrl.checkpoint), or nothing (`"none"`).
 */
export type FolderKind = 'checkpoint' | 'collection' | 'none';

function isFile(child: Contents.IModel, name: string): boolean {
  return child.name === name && child.type !== 'directory';
}

/** A listing that shows a checkpoint at once: a `meta.json` (the folder is one) or a `.tdz`
 * (hidden names left out, as tdview leaves them out of a folder of checkpoints). */
function showsCheckpoint(children: Contents.IModel[]): boolean {
  const archive = (child: Contents.IModel) =>
    child.type !== 'directory' && child.name.endsWith('.tdz') && !child.name.startsWith('.');
  return children.some(child => isFile(child, 'meta.json') || archive(child));
}

/**
 * Which folders tdview can open, learnt from the contents API's directory listings. A
 * listing carries names and metadata only, never the content of a file.
 *
 * A folder holding a `meta.json` is a checkpoint, and so is a zarr store (its
 * `zarr.json`: tdview opens one as a checkpoint). One that holds neither is a folder of
 * checkpoints when its listing holds a `.tdz`, or when a checkpoint (a `meta.json`, a
 * `.tdz`) is found among its sub-folders, looked into breadth first, at most
 * `PROBE_DEPTH` levels down and `PROBE_LISTINGS` listings in all (hidden folders
 * skipped): a cheap test that finds a run's `step_1000/`, a replay buffer's `storage/`
 * and a torchrl.checkpoint's `components/0000-policy/state/`, and lists no more than
 * nine folders for one that holds none. Its answer can only miss a checkpoint further
 * down (the widget would find it), and offers no folder in which it found none.
 *
 * A context-menu entry is shown or hidden synchronously, so the folders of the file
 * browser's listing are checked as it is shown, and the answers cached by the folder's
 * modification time (adding or removing `meta.json` changes it; a change deeper down
 * is seen when the folder is listed again after it changed).
 */
export class CheckpointFolders {
  readonly #contents: Contents.IManager;
  readonly #known = new Map<string, { modified: string; kind: FolderKind }>();
  readonly #queue: Array<{ path: string; modified: string }> = [];
  readonly #pending = new Set<string>();
  #running = 0;

  constructor(contents: Contents.IManager) {
    this.#contents = contents;
  }

  /** `true` or `false` when known, `undefined` while unchecked. */
  isCheckpoint(path: string): boolean | undefined {
    const kind = this.kindOf(path);
    return kind === undefined ? undefined : kind === 'checkpoint';
  }

  /** Whether tdview opens the folder (a checkpoint or a folder of checkpoints); `undefined`
   * while unchecked. */
  opens(path: string): boolean | undefined {
    const kind = this.kindOf(path);
    return kind === undefined ? undefined : kind !== 'none';
  }

  /** What the folder opens as, `undefined` while unchecked. */
  kindOf(path: string): FolderKind | undefined {
    return this.#known.get(path)?.kind;
  }

  /** Check each folder among `items` that is new or changed since its last check. */
  scan(items: Iterable<Contents.IModel>): void {
    for (const item of items) {
      if (item.type === 'directory') {
        this.request(item.path, item.last_modified);
      }
    }
  }

  /** Queue one folder for checking, unless its answer is current. */
  request(path: string, modified = ''): void {
    const known = this.#known.get(path);
    if ((known && known.modified === modified) || this.#pending.has(path)) {
      return;
    }
    this.#pending.add(path);
    this.#queue.push({ path, modified });
    this.#pump();
  }

  /** Check one folder now (and cache the answer). */
  async check(path: string, modified = ''): Promise<FolderKind> {
    let kind: FolderKind = 'none';
    try {
      const listing = await this.#list(path);
      const children = this.#children(listing);
      if (children.some(child => isFile(child, 'meta.json') || isFile(child, 'zarr.json'))) {
        kind = 'checkpoint';
      } else if (showsCheckpoint(children) || (await this.#probe(children))) {
        kind = 'collection';
      }
      modified = listing.last_modified || modified;
    } catch {
      kind = 'none'; // gone, unreadable: not something tdview can open
    }
    this.#known.set(path, { modified, kind });
    return kind;
  }

  #list(path: string): Promise<Contents.IModel> {
    return this.#contents.get(path, { type: 'directory', content: true });
  }

  #children(listing: Contents.IModel): Contents.IModel[] {
    return Array.isArray(listing.content) ? listing.content : [];
  }

  /** Whether a checkpoint lies below these children (see the class comment). */
  async #probe(children: Contents.IModel[]): Promise<boolean> {
    const folders = (items: Contents.IModel[], depth: number) =>
      items
        .filter(item => item.type === 'directory' && !item.name.startsWith('.'))
        .map(item => ({ path: item.path, depth }));
    const queue = folders(children, 1);
    for (let listed = 0; listed < PROBE_LISTINGS && queue.length > 0; listed++) {
      const next = queue.shift()!;
      let inner: Contents.IModel[];
      try {
        inner = this.#children(await this.#list(next.path));
      } catch {
        continue; // an unreadable sub-folder holds nothing tdview can open
      }
      if (showsCheckpoint(inner)) {
        return true;
      }
      if (next.depth < PROBE_DEPTH) {
        queue.push(...folders(inner, next.depth + 1));
      }
    }
    return false;
  }

  #pump(): void {
    while (this.#running < CONCURRENCY && this.#queue.length > 0) {
      const next = this.#queue.shift()!;
      this.#running += 1;
      void this.check(next.path, next.modified).finally(() => {
        this.#running -= 1;
        this.#pending.delete(next.path);
        this.#pump();
      });
    }
  }
}
