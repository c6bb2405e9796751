/** A stand-in for anywidget's model: traits, events, and a record of sent messages. */

type Listener = (a?: unknown, b?: unknown) => void;

export class FakeModel {
  readonly sent: unknown[] = [];
  readonly listeners = new Map<string, Set<Listener>>();
  readonly traits: Record<string, unknown>;
  saves = 0;
  /** Called with each sent message (a fake kernel). */
  onSend: ((msg: unknown) => void) | null = null;
  failSend = false;

  constructor(traits: Record<string, unknown> = {}) {
    this.traits = { ...traits };
  }

  get(name: string): unknown {
    return this.traits[name];
  }

  set(name: string, value: unknown): void {
    this.traits[name] = value;
  }

  save_changes(): void {
    this.saves++;
  }

  send(content: unknown): void {
    if (this.failSend) throw new Error("Comm is closed");
    this.sent.push(content);
    this.onSend?.(content);
  }

  on(event: string, callback: Listener): void {
    const set = this.listeners.get(event) ?? new Set();
    set.add(callback);
    this.listeners.set(event, set);
  }

  off(event: string, callback: Listener): void {
    this.listeners.get(event)?.delete(callback);
  }

  emit(event: string, a?: unknown, b?: unknown): void {
    for (const cb of [...(this.listeners.get(event) ?? [])]) cb(a, b);
  }

  /** Sets a trait from the kernel side: updates it and fires change:name. */
  change(name: string, value: unknown): void {
    this.traits[name] = value;
    this.emit(`change:${name}`);
  }

  listenerCount(): number {
    let n = 0;
    for (const set of this.listeners.values()) n += set.size;
    return n;
  }

  /** Sent messages of one kind. */
  sentOf(kind: string): Record<string, unknown>[] {
    return this.sent.filter(
      (m): m is Record<string, unknown> =>
        typeof m === "object" && m !== null && (m as { kind?: unknown }).kind === kind,
    );
  }
}
