/**
 * Group commit: callers submit items and wait; one flush at a time takes everything queued (in
 * order, within `maxBytes`, at least one item) and resolves or rejects every item of that group
 * together. Items submitted during a flush form the next group, so under load one write serves
 * many callers, and with no load an item is flushed at once (no linger).
 *
 * An item's size is a number of bytes, or its bytes in each of several bins that are limited one by
 * one (the file log's partitions, each written to its own file: `maxBytes` holds per partition).
 *
 * Users: the Kafka adapter's appends (kafka.ts: one produce request per group instead of one per
 * append, which the idempotent producer, one request in flight, would send one after another) and
 * the file log's appends (file.ts: one write and one fsync per partition file per group).
 */
export interface GroupCommitOptions<T> {
  /**
   * Bytes of one group at most (in each bin, for items sized by bin); an item larger than this
   * alone forms a group of its own.
   */
  maxBytes: number;
  /** Writes a group; resolves when every item of it is durable. */
  flush(items: T[]): Promise<void>;
}

/** An item's bytes: all in one bin, or per bin (any key: a partition, a file). */
export type ItemBytes = number | ReadonlyMap<unknown, number>;

const WHOLE = Symbol('whole group');

interface Queued<T> {
  item: T;
  bins: ReadonlyMap<unknown, number>;
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
  submit(item: T, bytes: ItemBytes): Promise<void> {
    const bins = typeof bytes === 'number' ? new Map([[WHOLE, bytes]]) : bytes;
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ item, bins, resolve, reject });
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

  /** The queued items, in order, while every bin's bytes stay within `maxBytes` (at least one). */
  private take(): Queued<T>[] {
    const used = new Map(this.queue[0].bins);
    let n = 1;
    for (; n < this.queue.length; n++) {
      const { bins } = this.queue[n];
      let fits = true;
      for (const [bin, b] of bins) if ((used.get(bin) ?? 0) + b > this.o.maxBytes) fits = false;
      if (!fits) break;
      for (const [bin, b] of bins) used.set(bin, (used.get(bin) ?? 0) + b);
    }
    return this.queue.splice(0, n);
  }
}
