/**
 * Runs tasks one at a time, in order, merging duplicates.
 *
 * The tree uses it for page requests so that the kernel never sees more than one
 * `children` request from a view at once. A task is identified by `key`; asking again
 * for a queued or running task returns its promise. Tasks are "pinned" (someone awaits
 * them: an expand, a reveal) or not (the viewport wants them); `prune` drops unpinned
 * queued tasks the viewport no longer wants. The promises never reject: a task reports
 * its own failure.
 */

interface Task<T> {
  key: string;
  item: T;
  pinned: boolean;
  done: Promise<void>;
  resolve: () => void;
}

export class SerialQueue<T> {
  readonly #run: (item: T) => Promise<void>;
  #queue: Task<T>[] = [];
  #running: Task<T> | null = null;
  #closed = false;

  constructor(run: (item: T) => Promise<void>) {
    this.#run = run;
  }

  /** Queues `item` unless a task with this key is queued or running. */
  add(key: string, item: T, pinned: boolean): Promise<void> {
    if (this.#closed) return Promise.resolve();
    const existing =
      this.#running?.key === key ? this.#running : this.#queue.find((t) => t.key === key);
    if (existing) {
      existing.pinned ||= pinned;
      return existing.done;
    }
    let resolve = () => {};
    const done = new Promise<void>((r) => {
      resolve = r;
    });
    this.#queue.push({ key, item, pinned, done, resolve });
    this.#next();
    return done;
  }

  /** Drops queued, unpinned tasks for which `keep` is false. */
  prune(keep: (item: T) => boolean): void {
    const dropped = this.#queue.filter((t) => !t.pinned && !keep(t.item));
    this.#queue = this.#queue.filter((t) => !dropped.includes(t));
    for (const task of dropped) task.resolve();
  }

  /** Drops every queued task; the running one finishes. */
  close(): void {
    this.#closed = true;
    for (const task of this.#queue) task.resolve();
    this.#queue = [];
  }

  #next(): void {
    if (this.#running || this.#closed) return;
    const task = this.#queue.shift();
    if (!task) return;
    this.#running = task;
    this.#run(task.item)
      .catch(() => {})
      .finally(() => {
        this.#running = null;
        task.resolve();
        this.#next();
      });
  }
}
