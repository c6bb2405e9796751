import type { Contents } from '@jupyterlab/services';

/** At most this many folder listings in flight at once. */
const CONCURRENCY = 4;

/**
 * Which folders are tensordict checkpoints (hold a `meta.json`), learnt from the
 * contents API's directory listings. A listing carries names and metadata only, never
 * the content of a file.
 *
 * A context-menu entry is shown or hidden synchronously, so the folders of the file
 * browser's listing are checked as it is shown, and the answers cached by the folder's
 * modification time (adding or removing `meta.json` changes it).
 */
export class CheckpointFolders {
  readonly #contents: Contents.IManager;
  readonly #known = new Map<string, { modified: string; checkpoint: boolean }>();
  readonly #queue: Array<{ path: string; modified: string }> = [];
  readonly #pending = new Set<string>();
  #running = 0;

  constructor(contents: Contents.IManager) {
    this.#contents = contents;
  }

  /** `true` or `false` when known, `undefined` while unchecked. */
  isCheckpoint(path: string): boolean | undefined {
    return this.#known.get(path)?.checkpoint;
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
  async check(path: string, modified = ''): Promise<boolean> {
    let checkpoint = false;
    try {
      const listing = await this.#contents.get(path, { type: 'directory', content: true });
      const children: Contents.IModel[] = Array.isArray(listing.content) ? listing.content : [];
      checkpoint = children.some(child => child.name === 'meta.json' && child.type !== 'directory');
      modified = listing.last_modified || modified;
    } catch {
      checkpoint = false; // gone, unreadable: not something tdview can open
    }
    this.#known.set(path, { modified, checkpoint });
    return checkpoint;
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
