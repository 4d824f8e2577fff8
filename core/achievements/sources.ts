/**
 * The read model of other features' state that achievement backfill reads (docs/achievements.md
 * "Backfill"). Features react to each other through facts, never by calling each other's stores
 * (ARCHITECTURE.md); a backfill reads history, and this is the one accepted exception: read-only
 * queries of other features' tables, kept here, so the achievement code never calls the wallet's,
 * the streaks' or the leaderboards' store functions and nothing here writes:
 *
 *   balances            cumulative parts: lifetime earned per user and currency (the wallet's rows)
 *   streak_milestones   streak_milestone parts: the highest milestone threshold each user reached
 *                       (a milestone is reached when the count equals its threshold, so it is the
 *                       `streak_days` of the `streak.milestone_reached` fact live processing takes)
 *   leaderboard_windows leaderboard_rank parts: whether every closed window of the boards has been
 *                       exported to the analytics store (the final ranks themselves are read from
 *                       the snapshots through the analytics port, `bestSnapshotRanks`)
 *
 * Every query pages by user_id in byte order after a cursor, as the event history does.
 */
import type { Queryable, Sql } from '../../adapters/sql/types';

/** Lifetime earned of these currencies for the first `limit` users after `after`. */
export async function lifetimeEarned(
  q: Queryable,
  tenantId: string,
  currencies: readonly string[],
  after: string,
  limit: number,
): Promise<Array<{ user_id: string; currency_id: string; value: number }>> {
  if (currencies.length === 0) return [];
  const r = await q.query<{ user_id: string; currency_id: string; lifetime_earned: string }>(
    `WITH u AS (
       SELECT user_id FROM balances WHERE tenant_id = $1 AND currency_id = ANY($2::text[]) AND user_id COLLATE "C" > $3
       GROUP BY user_id ORDER BY user_id COLLATE "C" LIMIT $4)
     SELECT b.user_id, b.currency_id, b.lifetime_earned FROM balances b JOIN u ON u.user_id = b.user_id
     WHERE b.tenant_id = $1 AND b.currency_id = ANY($2::text[]) ORDER BY b.user_id COLLATE "C"`,
    [tenantId, [...currencies], after, limit],
  );
  return r.rows.map((x) => ({
    user_id: x.user_id,
    currency_id: x.currency_id,
    value: Number(x.lifetime_earned),
  }));
}

/** The highest milestone threshold reached per user and streak, for the first `limit` users after `after`. */
export async function milestonesReached(
  q: Queryable,
  tenantId: string,
  streakIds: readonly string[],
  after: string,
  limit: number,
): Promise<Array<{ user_id: string; streak_id: string; value: number }>> {
  if (streakIds.length === 0) return [];
  const r = await q.query<{ user_id: string; streak_id: string; days: string }>(
    `WITH u AS (
       SELECT user_id FROM streak_milestones WHERE tenant_id = $1 AND streak_id = ANY($2::text[]) AND user_id COLLATE "C" > $3
       GROUP BY user_id ORDER BY user_id COLLATE "C" LIMIT $4)
     SELECT m.user_id, m.streak_id, max(m.threshold) AS days FROM streak_milestones m JOIN u ON u.user_id = m.user_id
     WHERE m.tenant_id = $1 AND m.streak_id = ANY($2::text[])
     GROUP BY m.user_id, m.streak_id ORDER BY m.user_id COLLATE "C"`,
    [tenantId, [...streakIds], after, limit],
  );
  return r.rows.map((x) => ({ user_id: x.user_id, streak_id: x.streak_id, value: Number(x.days) }));
}

/** Whether a closed window of these boards still waits for its snapshot export. */
export async function snapshotsPending(
  q: Queryable,
  tenantId: string,
  boards: readonly string[],
): Promise<boolean> {
  if (boards.length === 0) return false;
  const r = await q.query(
    `SELECT 1 FROM leaderboard_windows
     WHERE tenant_id = $1 AND leaderboard_id = ANY($2::text[]) AND status = 'closed' AND NOT exported LIMIT 1`,
    [tenantId, [...boards]],
  );
  return r.rowCount > 0;
}

/**
 * Waits (up to `maxMs`) until every transaction in progress now has ended; answers whether they
 * all did. Called after a backfill's start has committed: a transaction that ran a reaction
 * (a wallet credit, a milestone, a window's close) without seeing the new achievement began
 * before that commit, so once it has ended its effect is in the state the backfill reads, and
 * every later one sees the achievement and advances it live. The transactions are taken from the
 * current snapshot's in-progress list (PGlite's single session has none).
 */
export async function transactionsInFlightEnded(sql: Sql, maxMs: number): Promise<boolean> {
  const s = await sql.query<{ x: string }>('SELECT txid_snapshot_xip(txid_current_snapshot())::text AS x');
  const xids = s.rows.map((r) => r.x);
  const until = Date.now() + maxMs;
  for (;;) {
    if (xids.length === 0) return true;
    const r = await sql.query<{ n: string }>(
      `SELECT count(*) AS n FROM unnest($1::bigint[]) AS x WHERE txid_status(x) = 'in progress'`,
      [xids],
    );
    if (Number(r.rows[0]!.n) === 0) return true;
    if (Date.now() >= until) return false;
    await new Promise((res) => setTimeout(res, 20));
  }
}
