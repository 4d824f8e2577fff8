/**
 * SqlAnalytics: the embedded shape's analytics store, on the SQL port (PgSql or PgliteSql), in
 * the tables of migration 003_analytics.sql. Same results as ClickHouseAnalytics for every
 * method (the contract suite runs both):
 *
 * - Idempotent inserts: the primary key is the natural key; INSERT ... ON CONFLICT DO NOTHING.
 * - Text order is byte order (COLLATE "C"), as ClickHouse compares strings; UTC days are
 *   occurred_at / 86400000, as in ClickHouse's intDiv.
 * - Inputs are checked by the same rules (./rows.ts).
 *
 * Rows go in with one statement per batch chunk, passing one array per column to unnest(), so a
 * batch of any size needs only nine parameters.
 */
import { migrate } from '../sql/migrate';
import type { Sql } from '../sql/types';
import {
  DAY_MS,
  checkBounds,
  checkEvent,
  checkId,
  checkLimit,
  checkPage,
  checkRows,
  checkSnapshotEntry,
  checkTime,
  checkTransaction,
  eventCount,
  toFloat,
  toSafeInt,
} from '../../core/history/rows';
import type {
  Analytics,
  AnalyticsEvent,
  AnalyticsTransaction,
  BestRank,
  EventCount,
  SnapshotEntry,
  SnapshotSummary,
} from './types';

const CHUNK = 5000;

export interface SqlAnalyticsOptions {
  /** Close the Sql in close(); default false (the composition root owns the shared Sql). */
  closeSql?: boolean;
}

type Row = Record<string, unknown>;

export class SqlAnalytics implements Analytics {
  readonly kind = 'sql' as const;

  constructor(
    private readonly sql: Sql,
    private readonly opts: SqlAnalyticsOptions = {},
  ) {}

  /** Runs the SQL migrations (idempotent, under the migrator's lock): they create the tables. */
  async ensureSchema(): Promise<void> {
    await migrate(this.sql);
  }

  async insertEvents(rows: AnalyticsEvent[]): Promise<void> {
    const rs = checkRows('events', rows, checkEvent);
    for (let i = 0; i < rs.length; i += CHUNK) {
      const c = rs.slice(i, i + CHUNK);
      await this.sql.query(
        `INSERT INTO analytics_events (tenant_id, event_id, type, user_id, occurred_at, received_at, attrs_json)
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bigint[], $7::text[])
         ON CONFLICT DO NOTHING`,
        [
          c.map((e) => e.tenant_id),
          c.map((e) => e.event_id),
          c.map((e) => e.type),
          c.map((e) => e.user_id),
          c.map((e) => e.occurred_at),
          c.map((e) => e.received_at),
          c.map((e) => e.attrs_json),
        ],
      );
    }
  }

  async insertTransactions(rows: AnalyticsTransaction[]): Promise<void> {
    const rs = checkRows('transactions', rows, checkTransaction);
    for (let i = 0; i < rs.length; i += CHUNK) {
      const c = rs.slice(i, i + CHUNK);
      await this.sql.query(
        `INSERT INTO analytics_transactions
           (tenant_id, transaction_id, user_id, currency_id, amount, balance_after, source_type, source_ref, created_at)
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bigint[], $7::text[], $8::text[], $9::bigint[])
         ON CONFLICT DO NOTHING`,
        [
          c.map((t) => t.tenant_id),
          c.map((t) => t.transaction_id),
          c.map((t) => t.user_id),
          c.map((t) => t.currency_id),
          c.map((t) => t.amount),
          c.map((t) => t.balance_after),
          c.map((t) => t.source_type),
          c.map((t) => t.source_ref),
          c.map((t) => t.created_at),
        ],
      );
    }
  }

  async insertSnapshot(rows: SnapshotEntry[]): Promise<void> {
    const rs = checkRows('snapshot entries', rows, checkSnapshotEntry);
    for (let i = 0; i < rs.length; i += CHUNK) {
      const c = rs.slice(i, i + CHUNK);
      await this.sql.query(
        `INSERT INTO analytics_snapshots (tenant_id, leaderboard_id, window_key, snapshot_time, user_id, rank, score)
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::integer[], $7::double precision[])
         ON CONFLICT DO NOTHING`,
        [
          c.map((s) => s.tenant_id),
          c.map((s) => s.leaderboard_id),
          c.map((s) => s.window_key),
          c.map((s) => s.snapshot_time),
          c.map((s) => s.user_id),
          c.map((s) => s.rank),
          c.map((s) => s.score),
        ],
      );
    }
  }

  async eventCounts(tenantId: string, from: number, to: number): Promise<EventCount[]> {
    const tenant = checkId('tenantId', tenantId);
    const [lo, hi] = checkBounds(from, to);
    if (lo >= hi) return [];
    const r = await this.sql.query<Row>(
      `SELECT occurred_at / ${DAY_MS} AS day, type, count(*) AS events, count(DISTINCT user_id) AS users
       FROM analytics_events
       WHERE tenant_id = $1 AND occurred_at >= $2 AND occurred_at < $3
       GROUP BY day, type
       ORDER BY day ASC, type COLLATE "C" ASC`,
      [tenant, lo, hi],
    );
    return r.rows.map((x) => eventCount(x.day, x.type, x.events, x.users));
  }

  async userEventHistory(
    tenantId: string,
    types: readonly string[] | null,
    afterUser: string,
    maxUsers: number,
  ): Promise<AnalyticsEvent[]> {
    const tenant = checkId('tenantId', tenantId);
    const limit = Math.max(0, Math.min(Math.floor(maxUsers), 100_000));
    const r = await this.sql.query<Row>(
      `WITH users AS (
         SELECT user_id FROM analytics_events
         WHERE tenant_id = $1 AND ($2::text[] IS NULL OR type = ANY($2::text[])) AND user_id COLLATE "C" > $3
         GROUP BY user_id ORDER BY user_id COLLATE "C" LIMIT $4)
       SELECT e.tenant_id, e.event_id, e.type, e.user_id, e.occurred_at, e.received_at, e.attrs_json
       FROM analytics_events e JOIN users u ON u.user_id = e.user_id
       WHERE e.tenant_id = $1 AND ($2::text[] IS NULL OR e.type = ANY($2::text[]))
       ORDER BY e.user_id COLLATE "C", e.occurred_at, e.event_id COLLATE "C"`,
      [tenant, types ? [...types] : null, afterUser, limit],
    );
    return r.rows.map((x) => ({
      tenant_id: String(x.tenant_id),
      event_id: String(x.event_id),
      type: String(x.type),
      user_id: String(x.user_id),
      occurred_at: Number(x.occurred_at),
      received_at: Number(x.received_at),
      attrs_json: String(x.attrs_json),
    }));
  }

  async bestSnapshotRanks(
    tenantId: string,
    leaderboardIds: readonly string[],
    afterUser: string,
    maxUsers: number,
  ): Promise<BestRank[]> {
    const tenant = checkId('tenantId', tenantId);
    const limit = Math.max(0, Math.min(Math.floor(maxUsers), 100_000));
    if (limit === 0 || leaderboardIds.length === 0) return [];
    const boards = leaderboardIds.map((b) => checkId('leaderboardId', b));
    const r = await this.sql.query<Row>(
      `WITH users AS (
         SELECT user_id FROM analytics_snapshots
         WHERE tenant_id = $1 AND leaderboard_id = ANY($2::text[]) AND user_id COLLATE "C" > $3
         GROUP BY user_id ORDER BY user_id COLLATE "C" LIMIT $4)
       SELECT s.user_id, s.leaderboard_id, min(s.rank) AS best
       FROM analytics_snapshots s JOIN users u ON u.user_id = s.user_id
       WHERE s.tenant_id = $1 AND s.leaderboard_id = ANY($2::text[])
       GROUP BY s.user_id, s.leaderboard_id
       ORDER BY s.user_id COLLATE "C", s.leaderboard_id COLLATE "C"`,
      [tenant, boards, afterUser, limit],
    );
    return r.rows.map((x) => ({
      leaderboard_id: String(x.leaderboard_id),
      user_id: String(x.user_id),
      rank: toSafeInt('rank', x.best),
    }));
  }

  async transactionTotals(tenantId: string, currencyId: string): Promise<Map<string, number>> {
    const tenant = checkId('tenantId', tenantId);
    const currency = checkId('currencyId', currencyId);
    const r = await this.sql.query<Row>(
      `SELECT user_id, sum(amount)::text AS total
       FROM analytics_transactions
       WHERE tenant_id = $1 AND currency_id = $2
       GROUP BY user_id
       ORDER BY user_id COLLATE "C" ASC`,
      [tenant, currency],
    );
    return new Map(r.rows.map((x) => [String(x.user_id), toSafeInt('total', x.total)]));
  }

  async listSnapshots(
    tenantId: string,
    leaderboardId: string,
    from: number,
    to: number,
    limit: number,
  ): Promise<SnapshotSummary[]> {
    const tenant = checkId('tenantId', tenantId);
    const board = checkId('leaderboardId', leaderboardId);
    const [lo, hi] = checkBounds(from, to);
    const lim = checkLimit(limit);
    if (lim === 0 || lo >= hi) return [];
    const r = await this.sql.query<Row>(
      `SELECT leaderboard_id, window_key, snapshot_time, count(*) AS entries
       FROM analytics_snapshots
       WHERE tenant_id = $1 AND leaderboard_id = $2 AND snapshot_time >= $3 AND snapshot_time < $4
       GROUP BY leaderboard_id, window_key, snapshot_time
       ORDER BY snapshot_time DESC, window_key COLLATE "C" ASC
       LIMIT $5`,
      [tenant, board, lo, hi, lim],
    );
    return r.rows.map((x) => ({
      leaderboard_id: String(x.leaderboard_id),
      window_key: String(x.window_key),
      snapshot_time: toSafeInt('snapshot_time', x.snapshot_time),
      entries: toSafeInt('entries', x.entries),
    }));
  }

  async snapshotEntries(
    tenantId: string,
    leaderboardId: string,
    snapshotTime: number,
    offset: number,
    limit: number,
  ): Promise<SnapshotEntry[]> {
    const tenant = checkId('tenantId', tenantId);
    const board = checkId('leaderboardId', leaderboardId);
    const time = checkTime('snapshotTime', snapshotTime);
    const [off, lim] = checkPage(offset, limit);
    if (lim === 0) return [];
    const r = await this.sql.query<Row>(
      `SELECT tenant_id, leaderboard_id, window_key, snapshot_time, user_id, rank, score
       FROM analytics_snapshots
       WHERE tenant_id = $1 AND leaderboard_id = $2 AND snapshot_time = $3
       ORDER BY rank ASC, user_id COLLATE "C" ASC
       LIMIT $4 OFFSET $5`,
      [tenant, board, time, lim, off],
    );
    return r.rows.map(toSnapshotEntry);
  }

  async snapshotUser(
    tenantId: string,
    leaderboardId: string,
    snapshotTime: number,
    userId: string,
  ): Promise<SnapshotEntry | null> {
    const tenant = checkId('tenantId', tenantId);
    const board = checkId('leaderboardId', leaderboardId);
    const time = checkTime('snapshotTime', snapshotTime);
    const user = checkId('userId', userId);
    const r = await this.sql.query<Row>(
      `SELECT tenant_id, leaderboard_id, window_key, snapshot_time, user_id, rank, score
       FROM analytics_snapshots
       WHERE tenant_id = $1 AND leaderboard_id = $2 AND snapshot_time = $3 AND user_id = $4`,
      [tenant, board, time, user],
    );
    return r.rows.length > 0 ? toSnapshotEntry(r.rows[0]) : null;
  }

  async ping(): Promise<void> {
    await this.sql.ping();
  }

  async close(): Promise<void> {
    if (this.opts.closeSql) await this.sql.close();
  }
}

function toSnapshotEntry(x: Row): SnapshotEntry {
  return {
    tenant_id: String(x.tenant_id),
    leaderboard_id: String(x.leaderboard_id),
    window_key: String(x.window_key),
    snapshot_time: toSafeInt('snapshot_time', x.snapshot_time),
    user_id: String(x.user_id),
    rank: toSafeInt('rank', x.rank),
    score: toFloat('score', x.score),
  };
}
