/**
 * Closing a leaderboard window: the standings become final and are emitted as
 * `leaderboard.rank_finalized` facts (core/facts.ts; the payout, core/leaderboards/payout.ts,
 * reacts by paying the board's rewards and replies with what it paid), then
 * `leaderboard.window_completed` is emitted with that distribution (its webhook follows), and the
 * top `ranking.size` (default 1000) are snapshotted to the analytics store. The scheduler closes
 * windows whose grace period has passed; an operator can close one at once. Both run `closeWindow`.
 *
 * Exactly once: the close is one SQL transaction that locks the window row and moves it from open
 * to closed; a second closer waits on the lock, then finds it closed and does nothing. The snapshot
 * export happens after the commit and is idempotent; windows closed but not yet exported are
 * exported by the scheduler's close job (crash recovery). A failed export never fails the close
 * (the window is closed and paid): it is logged and left to that job. Scores go to the analytics store
 * in the score range (./aggregate.ts), and a row the store still refuses is skipped (logged,
 * counted) so that one row cannot keep a snapshot, and the windows after it, from being exported.
 */
import { Counter } from 'prom-client';
import { checkSnapshotEntry } from '../history/rows';
import type { Analytics, SnapshotEntry } from '../../adapters/analytics/types';
import type { RankIndex } from '../../adapters/ranks/types';
import type { Queryable, Sql } from '../../adapters/sql/types';
import type { FactBus, PayoutReport } from '../facts';
import type { Logger } from '../../shared/logger';
import type { Metrics } from '../../shared/metrics';
import { reportRefused, splitRefused } from '../refused';
import { normalizeScore } from './aggregate';
import { boardKey } from './board-key';
import type { LeaderboardCache } from './cache';
import { rankingSize, rankPolicy, type Leaderboard } from './definition';
import { rankRun } from './ranking';
import {
  countEntries,
  getBoard,
  getWindow,
  markClosed,
  markExported,
  markPayoutError,
  standings,
  type WindowKey,
} from './store';

export interface Standing {
  user_id: string;
  rank: number;
  score: number;
}

export interface ClosingDeps {
  sql: Sql;
  analytics: Analytics;
  ranks: RankIndex;
  /** Carries the close's facts (final ranks, window completed) to their subscribers. */
  facts: FactBus;
  /** The query routes' cache of this process: a close forgets the window's open row at once. */
  cache?: LeaderboardCache;
  /** Where a failed export and skipped snapshot rows are reported. */
  log?: Logger;
  metrics?: Metrics;
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

const PAYOUT_ERRORS = 'ludus_leaderboard_payout_errors_total';

/** Counts closes that could not pay in full (one counter per metrics registry). */
function payoutErrors(metrics: Metrics): Counter<string> {
  return (
    (metrics.registry.getSingleMetric(PAYOUT_ERRORS) as Counter<string> | undefined) ??
    new Counter({
      name: PAYOUT_ERRORS,
      help: 'Leaderboard windows closed whose reward payout could not pay in full (the window records payout_error)',
      registers: [metrics.registry],
    })
  );
}

/**
 * Closes a window. A payout that cannot pay in full (a reward config or item missing at close, a
 * failed grant) does not block the close: the window closes, pays what it can, and records why in
 * `payout_error` (shown by the close route), with an error log line and
 * `ludus_leaderboard_payout_errors_total`, so prizes are never lost silently.
 */
export async function closeWindow(deps: ClosingDeps, k: WindowKey, now: number): Promise<CloseResult> {
  let payoutError: string | null = null;
  const result = await deps.sql.tx(async (q): Promise<CloseResult> => {
    const w = await getWindow(q, k, true);
    if (!w) return 'not_found';
    if (w.status === 'closed') return 'already_closed';
    const board = await getBoard(q, k.tenant_id, k.leaderboard_id);
    const entries = await countEntries(q, k);
    await markClosed(q, k, now, entries);
    if (!board || entries === 0) return 'closed';
    const final = await finalStandings(q, board, k);
    const { distribution, error } = mergeReports(
      await deps.facts.emit(
        q,
        'leaderboard.rank_finalized',
        final.map((s) => ({
          tenant_id: k.tenant_id,
          leaderboard_id: k.leaderboard_id,
          window_key: k.window_key,
          reward_config_id: board.reward_config_id,
          user_id: s.user_id,
          rank: s.rank,
          score: s.score,
          now,
        })),
      ),
    );
    if (error) {
      payoutError = error;
      await markPayoutError(q, k, error);
    }
    await deps.facts.emit(q, 'leaderboard.window_completed', [
      {
        tenant_id: k.tenant_id,
        leaderboard_id: k.leaderboard_id,
        window_key: k.window_key,
        reward_distribution: distribution,
        now,
      },
    ]);
    return 'closed';
  });
  if (result === 'closed') {
    if (payoutError) {
      if (deps.metrics) payoutErrors(deps.metrics).inc();
      deps.log?.error(
        {
          tenant_id: k.tenant_id,
          leaderboard_id: k.leaderboard_id,
          window_key: k.window_key,
          payout_error: payoutError,
        },
        'leaderboard window closed but its rewards could not be paid in full',
      );
    }
    deps.cache?.forgetWindow(k);
    try {
      await exportSnapshot(deps, k);
    } catch (err) {
      deps.log?.warn(
        { err, tenant_id: k.tenant_id, leaderboard_id: k.leaderboard_id, window_key: k.window_key },
        'snapshot export failed; the scheduler exports it later',
      );
    }
    await deps.ranks.dropBoard(boardKey(k)).catch(() => undefined);
  }
  return result;
}

/** Payout replies as one: distributions in order, errors joined. */
export function mergeReports(reports: PayoutReport[]): PayoutReport {
  const errors = reports.map((r) => r.error).filter((e): e is string => e !== null);
  return {
    distribution: reports.flatMap((r) => r.distribution),
    error: errors.length ? errors.join('; ') : null,
  };
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
      score: normalizeScore(s.score),
    }));
    const { accepted, refused } = splitRefused(rows, checkSnapshotEntry);
    reportRefused(deps, 'analytics_snapshot', refused, (r) => ({
      tenant_id: r.tenant_id,
      leaderboard_id: r.leaderboard_id,
      window_key: r.window_key,
      user_id: r.user_id,
    }));
    if (accepted.length) await deps.analytics.insertSnapshot(accepted);
  }
  await markExported(deps.sql, k);
}
