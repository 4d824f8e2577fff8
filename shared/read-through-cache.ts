/**
 * A per-process read-through cache of store reads with a staleness bound, used by the gateways for
 * tenant credentials, identity-provider lookups, board definitions and window rows.
 *
 * - **Bound.** An entry is served while it is younger than `ttlMs`, its age counted from the start
 *   of the read that produced it: a change made by another process is seen within `ttlMs`. Changes
 *   made through this process call `forget` (or `clear`) and are seen at once.
 * - **Refresh ahead.** A hit older than a quarter of the TTL starts one read in the background and
 *   is answered from the entry meanwhile. An entry in use is thus renewed before it runs out, and
 *   requests never wait for a store read of it. This matters in the embedded shape: a read waits
 *   for the pipeline round running on the one database session (up to 700 ms measured, issue 19),
 *   and a gateway answer must not; a refresh at half of a 1-s TTL left it 500 ms and was late. A
 *   failed background read is forgotten; the entry serves until it runs out, and then the next
 *   request reads and waits as on a miss.
 * - **One read per key.** Concurrent misses of one key share one read. `forget` drops the read in
 *   flight as well, and a read whose key was forgotten meanwhile is not remembered.
 * - **Misses.** A `null` result is remembered only with `cacheMisses` (lookups that must not hit
 *   the store for every request naming something that does not exist); otherwise the next request
 *   reads again, so something created in another process is seen at once.
 * - **Kept.** `keep(value)` true: the value never changes (a closed window), it is served until
 *   evicted and never read again.
 * - **Memory.** At `maxEntries` entries the map is cleared before a new key goes in.
 */

export interface ReadThroughCacheOptions<V> {
  /** Unix milliseconds (the injected clock). */
  now: () => number;
  /** The staleness bound; 0 reads every time (except kept values). */
  ttlMs: number;
  maxEntries: number;
  /** Remember `null` results (default false). */
  cacheMisses?: boolean;
  /** Values that never change: served until evicted. */
  keep?: (value: V) => boolean;
}

interface Entry<V> {
  at: number;
  value: V | null;
}

export class ReadThroughCache<V> {
  private readonly entries = new Map<string, Entry<V>>();
  private readonly reading = new Map<string, Promise<V | null>>();

  constructor(private readonly opts: ReadThroughCacheOptions<V>) {}

  /** The value of `key`: from the cache when fresh enough, otherwise from `load` (shared). */
  get(key: string, load: () => Promise<V | null>): Promise<V | null> {
    const hit = this.entries.get(key);
    if (hit) {
      if (hit.value !== null && this.opts.keep?.(hit.value)) return Promise.resolve(hit.value);
      const age = this.opts.now() - hit.at;
      // An entry from the future (a clock set back) is not trusted.
      if (age >= 0 && age < this.opts.ttlMs) {
        if (age >= this.opts.ttlMs / 4 && !this.reading.has(key)) this.read(key, load).catch(() => undefined);
        return Promise.resolve(hit.value);
      }
    }
    return this.reading.get(key) ?? this.read(key, load);
  }

  /** Forget one key (after a change through this process), with its read in flight. */
  forget(key: string): void {
    this.entries.delete(key);
    this.reading.delete(key);
  }

  /** Forget everything. */
  clear(): void {
    this.entries.clear();
    this.reading.clear();
  }

  private read(key: string, load: () => Promise<V | null>): Promise<V | null> {
    const at = this.opts.now();
    const p: Promise<V | null> = load()
      .then((value) => {
        if (this.reading.get(key) === p) {
          if (value !== null || this.opts.cacheMisses) {
            if (this.entries.size >= this.opts.maxEntries && !this.entries.has(key)) this.entries.clear();
            this.entries.set(key, { at, value });
          } else this.entries.delete(key);
        }
        return value;
      })
      .finally(() => {
        if (this.reading.get(key) === p) this.reading.delete(key);
      });
    this.reading.set(key, p);
    return p;
  }
}
