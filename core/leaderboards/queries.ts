/**
 * Reading standings: window selection (SPEC.md "Query: leaderboards", rules 1 to 4), pages,
 * around-user pages, rank and score lookups. Open windows are read from the rank index; closed
 * windows from the SQL scores, which no longer change.
 */
import { centredOffset, type RankedEntry, type RankIndex } from '../../adapters/ranks/types';
import type { Queryable } from '../../adapters/sql/types';
import type { Clock } from '../clock';
import { windowAt, windowByKey } from '../windows';
import { boardKey } from './board-key';
import { LeaderboardCache } from './cache';
import { rankPolicy, type Leaderboard } from './definition';
import { rankRun } from './ranking';
import {
  countAbove,
  getScore,
  latestClosedWindow,
  positionOf,
  type WindowKey,
  type WindowRow,
} from './store';

export interface ResolvedWindow {
  key: WindowKey;
  /** live: read the rank index; closed: read SQL. */
  source: 'live' | 'closed';
  /** May come from the cache: an open row up to its TTL old (see ./cache.ts). */
  row: WindowRow | null;
}

export interface Entry {
  user_id: string;
  score: number;
  rank: number;
}

export interface Page {
  window: ResolvedWindow;
  entries: Entry[];
  total: number;
  offset: number;
  limit: number;
}

/** A user's entry in a window: 0-based position and score. */
export interface Located {
  position: number;
  score: number;
}

export class WindowNotFound extends Error {}

const toRows = (es: RankedEntry[]) => es.map((e) => ({ user_id: e.member, score: e.score }));

export class LeaderboardQueries {
  private readonly cache: LeaderboardCache;

  /** Without a shared cache, a private one with TTL 0: open rows are read each time, closed (final) rows kept. */
  constructor(
    private readonly deps: { sql: Queryable; ranks: RankIndex; clock: Clock; cache?: LeaderboardCache },
  ) {
    this.cache = deps.cache ?? new LeaderboardCache({ clock: deps.clock, ttlMs: 0 });
  }

  /** SPEC rules: omitted = live window with data, else latest completed; `current`; a specific key (404 if unknown). */
  async resolve(board: Leaderboard, windowKey: string | undefined): Promise<ResolvedWindow> {
    const base = { tenant_id: board.tenant_id, leaderboard_id: board.leaderboard_id };
    const current = windowAt(board.config.timeframe, this.deps.clock.now()).key;
    const at = async (key: string): Promise<ResolvedWindow> => {
      const k = { ...base, window_key: key };
      const row = await this.cache.window(this.deps.sql, k);
      return { key: k, source: row?.status === 'closed' ? 'closed' : 'live', row };
    };
    if (windowKey === undefined || windowKey === '') {
      const live = await at(current);
      if (live.source === 'live' && (await this.deps.ranks.count(boardKey(live.key))) > 0) return live;
      const done = await latestClosedWindow(this.deps.sql, board.tenant_id, board.leaderboard_id);
      return done ? { key: { ...base, window_key: done.window_key }, source: 'closed', row: done } : live;
    }
    if (windowKey === 'current') return at(current);
    if (!windowByKey(board.config.timeframe, windowKey))
      throw new WindowNotFound(`Window ${windowKey} not found`);
    const w = await at(windowKey);
    if (!w.row && windowKey !== current) throw new WindowNotFound(`Window ${windowKey} not found`);
    return w;
  }

  /**
   * The current window when it is not closed (per the cache): the candidate of an omitted key,
   * which `resolve` takes when it has data.
   */
  private async liveCandidate(board: Leaderboard): Promise<ResolvedWindow | null> {
    const key = {
      tenant_id: board.tenant_id,
      leaderboard_id: board.leaderboard_id,
      window_key: windowAt(board.config.timeframe, this.deps.clock.now()).key,
    };
    const row = await this.cache.window(this.deps.sql, key);
    return row?.status === 'closed' ? null : { key, source: 'live', row };
  }

  /**
   * `page(resolve(windowKey))`: with an omitted key and a live window with data, the page and the
   * board's size come from one rank-index call (the data check of `resolve` is the page's total).
   */
  async pageOf(
    board: Leaderboard,
    windowKey: string | undefined,
    offset: number,
    limit: number,
  ): Promise<Page> {
    if (windowKey === undefined || windowKey === '') {
      const live = await this.liveCandidate(board);
      if (live) {
        const r = await this.deps.ranks.page(boardKey(live.key), offset, limit);
        if (r.total > 0) return this.ranked(board, live, toRows(r.entries), r.total, offset, limit);
      }
    }
    return this.page(board, await this.resolve(board, windowKey), offset, limit);
  }

  /** `around(resolve(windowKey), userId)`, the live case in one rank-index call as in `pageOf`. */
  async aroundOf(
    board: Leaderboard,
    windowKey: string | undefined,
    userId: string,
    limit: number,
  ): Promise<Page & { found: boolean }> {
    if (windowKey === undefined || windowKey === '') {
      const live = await this.liveCandidate(board);
      if (live) {
        const r = await this.deps.ranks.around(boardKey(live.key), userId, limit);
        if (r.total > 0)
          return {
            ...(await this.ranked(board, live, toRows(r.entries), r.total, r.offset, limit)),
            found: r.me !== null,
          };
      }
    }
    return this.around(board, await this.resolve(board, windowKey), userId, limit);
  }

  async page(board: Leaderboard, w: ResolvedWindow, offset: number, limit: number): Promise<Page> {
    if (w.source === 'live') {
      const r = await this.deps.ranks.page(boardKey(w.key), offset, limit);
      return this.ranked(board, w, toRows(r.entries), r.total, offset, limit);
    }
    const { rows, total } = await this.cache.closedPage(this.deps.sql, w.key, offset, limit);
    return this.ranked(board, w, rows, total, offset, limit);
  }

  /** Ranks of a page's rows under the board's rank policy. */
  private async ranked(
    board: Leaderboard,
    w: ResolvedWindow,
    rows: Array<{ user_id: string; score: number }>,
    total: number,
    offset: number,
    limit: number,
  ): Promise<Page> {
    const policy = rankPolicy(board.config);
    const above =
      rows.length && policy !== 'unique'
        ? await this.above(board, w, rows[0]!.score)
        : { entries: 0, distinct: 0 };
    const ranks = rankRun(
      policy,
      rows.map((r) => r.score),
      offset,
      above,
    );
    return {
      window: w,
      entries: rows.map((r, i) => ({ user_id: r.user_id, score: r.score, rank: ranks[i]! })),
      total,
      offset,
      limit,
    };
  }

  /** Entries and distinct scores above a score (shared and dense ranks). */
  private async above(
    board: Leaderboard,
    w: ResolvedWindow,
    score: number,
  ): Promise<{ entries: number; distinct: number }> {
    if (rankPolicy(board.config) === 'shared' && w.source === 'live') {
      return { entries: await this.deps.ranks.countAbove(boardKey(w.key), score), distinct: 0 };
    }
    return countAbove(this.deps.sql, w.key, score);
  }

  /** The user's entry and 0-based position, or null. */
  async locate(w: ResolvedWindow, userId: string): Promise<Located | null> {
    if (w.source === 'live') {
      const e = await this.deps.ranks.get(boardKey(w.key), userId);
      return e ? { position: e.position, score: e.score } : null;
    }
    const s = await getScore(this.deps.sql, { ...w.key, user_id: userId });
    return s ? { position: await positionOf(this.deps.sql, s), score: s.score } : null;
  }

  /** SPEC rule 4: a page centred on the user; the top of the board when the user has no score. */
  async around(
    board: Leaderboard,
    w: ResolvedWindow,
    userId: string,
    limit: number,
  ): Promise<Page & { found: boolean }> {
    if (w.source === 'live') {
      const r = await this.deps.ranks.around(boardKey(w.key), userId, limit);
      return {
        ...(await this.ranked(board, w, toRows(r.entries), r.total, r.offset, limit)),
        found: r.me !== null,
      };
    }
    const me = await this.locate(w, userId);
    let offset = 0;
    // The user in the middle (the lower middle for an even limit); a full page near the end.
    if (me) offset = centredOffset(me.position, limit, await this.cache.closedSize(this.deps.sql, w.key));
    return { ...(await this.page(board, w, offset, limit)), found: me !== null };
  }

  /**
   * The latest window (the rule of an omitted key) with the user's entry in it. A user with a live
   * score gets both from one rank-index call: the live window has data, since the user is in it.
   */
  async latestWith(
    board: Leaderboard,
    userId: string,
  ): Promise<{ window: ResolvedWindow; me: Located | null }> {
    const key = {
      tenant_id: board.tenant_id,
      leaderboard_id: board.leaderboard_id,
      window_key: windowAt(board.config.timeframe, this.deps.clock.now()).key,
    };
    const row = await this.cache.window(this.deps.sql, key);
    if (row?.status !== 'closed') {
      const e = await this.deps.ranks.get(boardKey(key), userId);
      if (e) return { window: { key, source: 'live', row }, me: { position: e.position, score: e.score } };
    }
    const w = await this.resolve(board, undefined);
    return { window: w, me: await this.locate(w, userId) };
  }

  /** The rank of an entry found by `locate` or `latestWith` under the board's rank policy. */
  async rankOf(
    board: Leaderboard,
    w: ResolvedWindow,
    me: Located | null,
  ): Promise<{ found: boolean; rank: number; score: number }> {
    if (!me) return { found: false, rank: 0, score: 0 };
    const policy = rankPolicy(board.config);
    if (policy === 'unique') return { found: true, rank: me.position + 1, score: me.score };
    const above = await this.above(board, w, me.score);
    return { found: true, rank: (policy === 'shared' ? above.entries : above.distinct) + 1, score: me.score };
  }
}
