/**
 * Runs tasks one at a time, in order, merging duplicates.
 *
 * The tree uses it for page requests so that the kernel never sees more than one
 * `children` request from a view at once. A task is identified by `key`; asking again
 * for a queued or running task returns its promise. Tasks are "pinned" (someone awaits
 * them: an expand, a reveal) or not (the viewport wants them); `prune` drops unpinned
 * queued tasks the viewport no longer wants. Background tasks (subtree totals that a
 * first reply left out) run only when no other task waits, so that what the user asks
 * for next goes first, and only once no other task has run for `backgroundDelayMs` (a
 * background request in flight would hold up a click that comes right after a page).
 * The promises never reject: a task reports its own failure.
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
  #background: Task<T>[] = [];
  #running: Task<T> | null = null;
  #closed = false;

  readonly #backgroundDelayMs: number;
  #lastForeground = 0;
  #timer: ReturnType<typeof setTimeout> | null = null;

  constructor(run: (item: T) => Promise<void>, backgroundDelayMs = 0) {
    this.#run = run;
    this.#backgroundDelayMs = backgroundDelayMs;
  }

  /** Queues `item` unless a task with this key is queued or running. */
  add(key: string, item: T, pinned: boolean, background = false): Promise<void> {
    if (this.#closed) return Promise.resolve();
    const existing =
      this.#running?.key === key
        ? this.#running
        : (this.#queue.find((t) => t.key === key) ?? this.#background.find((t) => t.key === key));
    if (existing) {
      existing.pinned ||= pinned;
      return existing.done;
    }
    let resolve = () => {};
    const done = new Promise<void>((r) => {
      resolve = r;
    });
    (background ? this.#background : this.#queue).push({ key, item, pinned, done, resolve });
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
    if (this.#timer !== null) clearTimeout(this.#timer);
    for (const task of [...this.#queue, ...this.#background]) task.resolve();
    this.#queue = [];
    this.#background = [];
  }

  #next(): void {
    if (this.#running || this.#closed) return;
    let task = this.#queue.shift();
    const foreground = task !== undefined;
    if (!task && this.#background.length) {
      const wait = this.#lastForeground + this.#backgroundDelayMs - Date.now();
      if (wait > 0) {
        this.#timer ??= setTimeout(() => {
          this.#timer = null;
          this.#next();
        }, wait);
        return;
      }
      task = this.#background.shift();
    }
    if (!task) return;
    this.#running = task;
    this.#run(task.item)
      .catch(() => {})
      .finally(() => {
        if (foreground) this.#lastForeground = Date.now();
        this.#running = null;
        task.resolve();
        this.#next();
      });
  }
}
