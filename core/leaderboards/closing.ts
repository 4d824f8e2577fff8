/**
 * Closing a leaderboard window: the standings become final, the top `ranking.size` (default 1000)
 * are snapshotted to the analytics store, `leaderboard.window_completed` is enqueued in the outbox,
 * and rewards are paid (a hook for the rewards feature). The scheduler closes windows whose grace
 * period has passed; an operator can close one at once. Both run `closeWindow`.
 *
 * Exactly once: the close is one SQL transaction that locks the window row and moves it from open
 * to closed; a second closer waits on the lock, then finds it closed and does nothing. The snapshot
 * export happens after the commit and is idempotent; windows closed but not yet exported are
 * exported by `exportPending` (crash recovery).
 */
import type { Analytics, SnapshotEntry } from '../../adapters/analytics/types';
import type { RankIndex } from '../../adapters/ranks/types';
import type { Queryable, Sql } from '../../adapters/sql/types';
import { enqueue } from '../outbox';
import type { LeaderboardCache } from './cache';
import { rankingSize, rankPolicy, type Leaderboard } from './definition';
import { rankRun } from './ranking';
import {
  countEntries,
  getBoard,
  getWindow,
  markClosed,
  markExported,
  standings,
  unexportedWindows,
  type WindowKey,
} from './store';

export interface Standing {
  user_id: string;
  rank: number;
  score: number;
}

/** Called inside the closing transaction with the final standings (reward payout). */
export type PayoutHook = (
  q: Queryable,
  board: Leaderboard,
  window: WindowKey,
  standings: Standing[],
  now: number,
) => Promise<unknown[]>;

export interface ClosingDeps {
  sql: Sql;
  analytics: Analytics;
  ranks: RankIndex;
  payout?: PayoutHook;
  /** The query routes' cache of this process: a close forgets the window's open row at once. */
  cache?: LeaderboardCache;
}

/** The final standings of a window: the top `size` in board order, ranked by the board's policy. */
export async function finalStandings(q: Queryable, board: Leaderboard, k: WindowKey): Promise<Standing[]> {
  const rows = await standings(q, k, 0, rankingSize(board.config));
  const ranks = rankRun(
    rankPolicy(board.config),
    rows.map((r) => r.score),
    0,
    { entries: 0, distinct: 0 },
  );
  return rows.map((r, i) => ({ user_id: r.user_id, rank: ranks[i]!, score: r.score }));
}

export type CloseResult = 'closed' | 'already_closed' | 'not_found';

export async function closeWindow(deps: ClosingDeps, k: WindowKey, now: number): Promise<CloseResult> {
  const result = await deps.sql.tx(async (q): Promise<CloseResult> => {
    const w = await getWindow(q, k, true);
    if (!w) return 'not_found';
    if (w.status === 'closed') return 'already_closed';
    const board = await getBoard(q, k.tenant_id, k.leaderboard_id);
    const entries = await countEntries(q, k);
    await markClosed(q, k, now, entries);
    if (!board || entries === 0) return 'closed';
    const final = await finalStandings(q, board, k);
    const distribution = deps.payout ? await deps.payout(q, board, k, final, now) : [];
    await enqueue(q, {
      tenant_id: k.tenant_id,
      event_type: 'leaderboard.window_completed',
      dedupe_key: `leaderboard.window_completed:${k.leaderboard_id}:${k.window_key}`,
      payload: {
        event_type: 'leaderboard.window_completed',
        tenant_id: k.tenant_id,
        timestamp: new Date(now).toISOString(),
        leaderboard_id: k.leaderboard_id,
        window_key: k.window_key,
        completed_at: new Date(now).toISOString(),
        reward_distribution: distribution,
      },
      created_at: now,
    });
    return 'closed';
  });
  if (result === 'closed') {
    deps.cache?.forgetWindow(k);
    await exportSnapshot(deps, k);
    await deps.ranks.dropBoard(`${k.tenant_id}:${k.leaderboard_id}:${k.window_key}`).catch(() => undefined);
  }
  return result;
}

/** Copies a closed window's final standings to the analytics store (idempotent), then marks it exported. */
export async function exportSnapshot(deps: ClosingDeps, k: WindowKey): Promise<void> {
  const w = await getWindow(deps.sql, k);
  if (!w || w.status !== 'closed' || w.exported) return;
  const board = await getBoard(deps.sql, k.tenant_id, k.leaderboard_id);
  if (board && (w.entries ?? 0) > 0) {
    const rows: SnapshotEntry[] = (await finalStandings(deps.sql, board, k)).map((s) => ({
      tenant_id: k.tenant_id,
      leaderboard_id: k.leaderboard_id,
      window_key: k.window_key,
      snapshot_time: w.closed_at!,
      user_id: s.user_id,
      rank: s.rank,
      score: s.score,
    }));
    await deps.analytics.insertSnapshot(rows);
  }
  await markExported(deps.sql, k);
}

/** Exports windows closed before a crash interrupted their export. */
export async function exportPending(deps: ClosingDeps, limit = 100): Promise<number> {
  const pending = await unexportedWindows(deps.sql, limit);
  for (const w of pending) await exportSnapshot(deps, w);
  return pending.length;
}
