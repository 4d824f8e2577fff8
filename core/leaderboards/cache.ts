/**
 * Per-process caches of the query gateway's SQL reads: board definitions and window rows, so that a
 * rank or score lookup does not pay two SQL round trips before it reaches the rank index.
 *
 * Staleness bound (docs/leaderboards.md "Caching"): a board definition and an open window's row are
 * kept for `ttlMs` (LUDUS_TENANT_CACHE_MS, like tenant credentials). Writes through this process
 * (admin updates, window closes) forget the entry at once; writes by another process take effect
 * within `ttlMs`. A closed window's row never changes back, so it is kept until evicted. Misses (no
 * such board, no window row yet) are never cached: a board created or a window opened elsewhere is
 * seen at once.
 */
import type { Queryable } from '../../adapters/sql/types';
import type { Clock } from '../clock';
import type { Leaderboard } from './definition';
import { getBoard, getWindow, windowId, type WindowKey, type WindowRow } from './store';

/** Entries per map before it is cleared (a bound on memory, as the tenant cache has). */
const MAX_ENTRIES = 10_000;

interface Cached<V> {
  at: number;
  value: V;
}

export class LeaderboardCache {
  private readonly boards = new Map<string, Cached<Leaderboard>>();
  private readonly windows = new Map<string, Cached<WindowRow>>();
  /**
   * Reads in flight, one per entry: concurrent misses of one entry (every request in flight when
   * its TTL runs out) share one SQL read instead of each issuing its own. A forget drops the
   * read in flight too, and a read whose entry was forgotten meanwhile is not remembered.
   */
  private readonly reading = new Map<string, Promise<unknown>>();

  constructor(private readonly opts: { clock: Clock; ttlMs: number }) {}

  /** A board definition, cached for ttlMs; null (not cached) when there is none. */
  async board(q: Queryable, tenantId: string, id: string): Promise<Leaderboard | null> {
    const key = boardId(tenantId, id);
    const hit = this.boards.get(key);
    if (hit && this.fresh(hit)) return hit.value;
    return this.read(`b\u0000${key}`, this.boards, key, () => getBoard(q, tenantId, id));
  }

  /** A window's row: closed rows until evicted, open rows for ttlMs; null (not cached) when there is none. */
  async window(q: Queryable, k: WindowKey): Promise<WindowRow | null> {
    const key = windowId(k);
    const hit = this.windows.get(key);
    if (hit && (hit.value.status === 'closed' || this.fresh(hit))) return hit.value;
    return this.read(`w\u0000${key}`, this.windows, key, () => getWindow(q, k));
  }

  /** One SQL read per entry at a time; the value is remembered (or a miss forgotten) as it lands. */
  private read<V>(
    flight: string,
    map: Map<string, Cached<V>>,
    key: string,
    load: () => Promise<V | null>,
  ): Promise<V | null> {
    const running = this.reading.get(flight) as Promise<V | null> | undefined;
    if (running) return running;
    const p: Promise<V | null> = load()
      .then((v) => {
        if (this.reading.get(flight) === p) {
          if (v) remember(map, key, { at: this.opts.clock.now(), value: v });
          else map.delete(key);
        }
        return v;
      })
      .finally(() => {
        if (this.reading.get(flight) === p) this.reading.delete(flight);
      });
    this.reading.set(flight, p);
    return p;
  }

  /** Forget a board definition (after an update in this process). */
  forgetBoard(tenantId: string, id: string): void {
    this.boards.delete(boardId(tenantId, id));
    this.reading.delete(`b\u0000${boardId(tenantId, id)}`);
  }

  /** Forget a window's row (after a close in this process). */
  forgetWindow(k: WindowKey): void {
    this.windows.delete(windowId(k));
    this.reading.delete(`w\u0000${windowId(k)}`);
  }

  /** Younger than ttlMs; an entry from the future (a clock set back) is not trusted. */
  private fresh(c: Cached<unknown>): boolean {
    const age = this.opts.clock.now() - c.at;
    return age >= 0 && age < this.opts.ttlMs;
  }
}

function boardId(tenantId: string, id: string): string {
  return `${tenantId}\u0000${id}`;
}

function remember<V>(map: Map<string, Cached<V>>, key: string, c: Cached<V>): void {
  if (map.size >= MAX_ENTRIES && !map.has(key)) map.clear();
  map.set(key, c);
}
