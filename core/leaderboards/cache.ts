/**
 * Per-process caches of the query gateway's SQL reads: board definitions and window rows, so that a
 * rank or score lookup does not pay two SQL round trips before it reaches the rank index, and the
 * pages and sizes of closed windows, which no longer change.
 *
 * Staleness bound (docs/leaderboards.md "Caching"): a board definition and an open window's row are
 * kept for `ttlMs` (LUDUS_TENANT_CACHE_MS, like tenant credentials). Writes through this process
 * (admin updates, window closes) forget the entry at once; writes by another process take effect
 * within `ttlMs`. A closed window's row, pages and size never change, so they are kept until
 * evicted. Misses (no such board, no window row yet) are never cached: a board created or a window
 * opened elsewhere is seen at once.
 */
import type { Queryable } from '../../adapters/sql/types';
import { ReadThroughCache } from '../../shared/read-through-cache';
import type { Clock } from '../clock';
import type { Leaderboard } from './definition';
import {
  countEntries,
  getBoard,
  getWindow,
  standings,
  windowId,
  type WindowKey,
  type WindowRow,
} from './store';

/** Entries per map before it is cleared (a bound on memory, as the tenant cache has). */
const MAX_ENTRIES = 10_000;
/** Pages of closed windows kept per process, and the longest page kept. */
const MAX_CLOSED_PAGES = 1_000;
const CACHED_PAGE_LIMIT = 100;

export interface ClosedPage {
  rows: Array<{ user_id: string; score: number }>;
  total: number;
}

/**
 * Every map is a ReadThroughCache (shared/read-through-cache.ts): concurrent misses of one entry
 * share one SQL read, an entry in use is renewed in the background once it is a quarter of its
 * TTL old (requests do not wait for that read), and a forget drops the read in flight too.
 */
export class LeaderboardCache {
  private readonly boards: ReadThroughCache<Leaderboard>;
  private readonly windows: ReadThroughCache<WindowRow>;
  /**
   * Pages and sizes of closed windows. A closed window's scores never change (the pipeline skips
   * events of a closed window, and nothing else writes scores), so they are kept until evicted,
   * whatever the TTL: a closed window's page is one scan of the window's rows with a top-N sort
   * (migration 017), paid once per page and process.
   */
  private readonly closedPages: ReadThroughCache<ClosedPage>;
  private readonly closedSizes: ReadThroughCache<number>;

  constructor(opts: { clock: Clock; ttlMs: number }) {
    const now = () => opts.clock.now();
    this.boards = new ReadThroughCache({ now, ttlMs: opts.ttlMs, maxEntries: MAX_ENTRIES });
    this.windows = new ReadThroughCache({
      now,
      ttlMs: opts.ttlMs,
      maxEntries: MAX_ENTRIES,
      keep: (w) => w.status === 'closed',
    });
    const always = () => true;
    this.closedPages = new ReadThroughCache({ now, ttlMs: 0, maxEntries: MAX_CLOSED_PAGES, keep: always });
    this.closedSizes = new ReadThroughCache({ now, ttlMs: 0, maxEntries: MAX_ENTRIES, keep: always });
  }

  /**
   * A page of a closed window in board order (user and score), with the window's size. Pages of
   * up to CACHED_PAGE_LIMIT entries are kept until evicted; a longer page is read each time, so
   * that the memory held is bounded by entries, not by what clients ask for (1,000 pages of at
   * most 100 entries).
   */
  async closedPage(q: Queryable, k: WindowKey, offset: number, limit: number): Promise<ClosedPage> {
    const read = async (): Promise<ClosedPage> => {
      const [rows, total] = await Promise.all([standings(q, k, offset, limit), this.closedSize(q, k)]);
      return { rows: rows.map((r) => ({ user_id: r.user_id, score: r.score })), total };
    };
    if (limit > CACHED_PAGE_LIMIT) return read();
    return (await this.closedPages.get(`${windowId(k)}\u0000${offset}\u0000${limit}`, read))!;
  }

  /** The number of entries of a closed window (kept until evicted). */
  async closedSize(q: Queryable, k: WindowKey): Promise<number> {
    return (await this.closedSizes.get(windowId(k), () => countEntries(q, k)))!;
  }

  /** A board definition, cached for ttlMs; null (not cached) when there is none. */
  board(q: Queryable, tenantId: string, id: string): Promise<Leaderboard | null> {
    return this.boards.get(boardId(tenantId, id), () => getBoard(q, tenantId, id));
  }

  /** A window's row: closed rows until evicted, open rows for ttlMs; null (not cached) when there is none. */
  window(q: Queryable, k: WindowKey): Promise<WindowRow | null> {
    return this.windows.get(windowId(k), () => getWindow(q, k));
  }

  /** Forget a board definition (after an update in this process). */
  forgetBoard(tenantId: string, id: string): void {
    this.boards.forget(boardId(tenantId, id));
  }

  /** Forget a window's row (after a close in this process). */
  forgetWindow(k: WindowKey): void {
    this.windows.forget(windowId(k));
  }
}

function boardId(tenantId: string, id: string): string {
  return `${tenantId}\u0000${id}`;
}
