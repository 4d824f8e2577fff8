/**
 * Group commit: callers submit items and wait; one flush at a time takes everything queued (in
 * order, up to `maxBytes`, at least one item) and resolves or rejects every item of that group
 * together. Items submitted during a flush form the next group, so under load one write serves
 * many callers, and with no load an item is flushed at once (no linger).
 *
 * The Kafka adapter uses it for appends (kafka.ts): one produce request per group instead of one
 * per append, which the idempotent producer (one request in flight) would send one after another.
 */
export interface GroupCommitOptions<T> {
  /** Bytes of one group at most; an item larger than this alone forms a group of its own. */
  maxBytes: number;
  /** Writes a group; resolves when every item of it is durable. */
  flush(items: T[]): Promise<void>;
}

interface Queued<T> {
  item: T;
  bytes: number;
  resolve: () => void;
  reject: (err: unknown) => void;
}

export class GroupCommit<T> {
  private queue: Queued<T>[] = [];
  private flushing: Promise<void> | undefined;

  constructor(private readonly o: GroupCommitOptions<T>) {
    if (!(o.maxBytes > 0)) throw new Error(`GroupCommit: maxBytes must be positive, not ${o.maxBytes}`);
  }

  /** Queues `item` (`bytes` long) and resolves once the group holding it has been flushed. */
  submit(item: T, bytes: number): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ item, bytes, resolve, reject });
      this.kick();
    });
  }

  /** Resolves when nothing is queued or being flushed. */
  async idle(): Promise<void> {
    while (this.flushing) await this.flushing;
  }

  private kick(): void {
    if (this.flushing) return;
    this.flushing = (async () => {
      try {
        while (this.queue.length > 0) {
          const group = this.take();
          try {
            await this.o.flush(group.map((q) => q.item));
          } catch (err) {
            for (const q of group) q.reject(err);
            continue;
          }
          for (const q of group) q.resolve();
        }
      } finally {
        this.flushing = undefined;
      }
    })();
  }

  /** The queued items, in order, while their bytes stay within `maxBytes` (at least one). */
  private take(): Queued<T>[] {
    let bytes = this.queue[0].bytes;
    let n = 1;
    while (n < this.queue.length && bytes + this.queue[n].bytes <= this.o.maxBytes)
      bytes += this.queue[n++].bytes;
    return this.queue.splice(0, n);
  }
}
