/**
 * ClickHouseAnalytics: the distributed shape's analytics store (@clickhouse/client over HTTP).
 * The SQL runs on ClickHouse 18.16 (the Debian server of the test stack) and on current servers:
 *
 * - No query parameters: every literal goes through ./chsql.ts; names are allow-listed.
 * - No DateTime64: times are Int64 milliseconds plus a DateTime (seconds) MATERIALIZED from them,
 *   used only for monthly partitions and partition pruning.
 * - Idempotency: ReplacingMergeTree on the natural key; every read uses FINAL, so a row inserted
 *   twice counts once even before a background merge (a merge only happens within a partition,
 *   and a row's partition is a function of the row, so duplicates always meet).
 * - 64-bit integers come back as JSON strings; they are converted to numbers and checked safe.
 * - UTC days are computed as intDiv(ms, 86400000), independent of the server's time zone.
 *
 * Tables (in `database`, each name prefixed with `tablePrefix`):
 *   events        ORDER BY (tenant_id, event_id), PARTITION BY toYYYYMM(occurred)
 *   transactions  ORDER BY (tenant_id, transaction_id), PARTITION BY toYYYYMM(created)
 *   snapshots     ORDER BY (tenant_id, leaderboard_id, snapshot_time_ms, user_id),
 *                 PARTITION BY toYYYYMM(snapshot_time)
 */
import { ClickHouseLogLevel, createClient, type ClickHouseClient } from '@clickhouse/client';
import { chsql, ident, qualified, type ChSql } from './chsql';
import {
  AnalyticsInputError,
  DAY_MS,
  MAX_TIME_MS,
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

export interface ClickHouseAnalyticsOptions {
  /** e.g. http://127.0.0.1:8123 */
  url: string;
  /** Database of the tables; created by ensureSchema() when missing. [A-Za-z_][A-Za-z0-9_]*. */
  database: string;
  username?: string;
  password?: string;
  /** Prefix of the table names (e.g. `t1_`), for several isolated sets in one database. */
  tablePrefix?: string;
  /** Per-request timeout; default 30 s. */
  requestTimeoutMs?: number;
}

type Row = Record<string, unknown>;

export class ClickHouseAnalytics implements Analytics {
  readonly kind = 'clickhouse' as const;
  private readonly client: ClickHouseClient;
  private readonly db: string;
  private readonly events: ChSql;
  private readonly transactions: ChSql;
  private readonly snapshots: ChSql;
  private readonly names: { events: string; transactions: string; snapshots: string };

  constructor(opts: ClickHouseAnalyticsOptions) {
    const prefix = opts.tablePrefix ?? '';
    this.db = ident(opts.database).text;
    this.events = qualified(opts.database, `${prefix}events`);
    this.transactions = qualified(opts.database, `${prefix}transactions`);
    this.snapshots = qualified(opts.database, `${prefix}snapshots`);
    this.names = {
      events: this.events.text,
      transactions: this.transactions.text,
      snapshots: this.snapshots.text,
    };
    // No `database` on the client: the database may not exist yet (ensureSchema creates it), and
    // every statement names its tables in full.
    this.client = createClient({
      url: opts.url,
      ...(opts.username !== undefined ? { username: opts.username } : {}),
      ...(opts.password !== undefined ? { password: opts.password } : {}),
      request_timeout: opts.requestTimeoutMs ?? 30_000,
      // Failures surface as rejected promises with their cause; the client must not print to stderr.
      log: { level: ClickHouseLogLevel.OFF },
    });
  }

  async ensureSchema(): Promise<void> {
    const db = ident(this.db);
    await this.command(chsql`CREATE DATABASE IF NOT EXISTS ${db}`);
    await this.command(chsql`CREATE TABLE IF NOT EXISTS ${this.events} (
      tenant_id String,
      event_id String,
      type String,
      user_id String,
      occurred_ms Int64,
      received_ms Int64,
      attrs_json String,
      occurred DateTime MATERIALIZED toDateTime(intDiv(occurred_ms, 1000))
    ) ENGINE = ReplacingMergeTree()
    PARTITION BY toYYYYMM(occurred)
    ORDER BY (tenant_id, event_id)`);
    await this.command(chsql`CREATE TABLE IF NOT EXISTS ${this.transactions} (
      tenant_id String,
      transaction_id String,
      user_id String,
      currency_id String,
      amount Int64,
      balance_after Int64,
      source_type String,
      source_ref Nullable(String),
      created_ms Int64,
      created DateTime MATERIALIZED toDateTime(intDiv(created_ms, 1000))
    ) ENGINE = ReplacingMergeTree()
    PARTITION BY toYYYYMM(created)
    ORDER BY (tenant_id, transaction_id)`);
    await this.command(chsql`CREATE TABLE IF NOT EXISTS ${this.snapshots} (
      tenant_id String,
      leaderboard_id String,
      window_key String,
      snapshot_time_ms Int64,
      user_id String,
      rank UInt32,
      score Float64,
      snapshot_time DateTime MATERIALIZED toDateTime(intDiv(snapshot_time_ms, 1000))
    ) ENGINE = ReplacingMergeTree()
    PARTITION BY toYYYYMM(snapshot_time)
    ORDER BY (tenant_id, leaderboard_id, snapshot_time_ms, user_id)`);
  }

  async insertEvents(rows: AnalyticsEvent[]): Promise<void> {
    const rs = checkRows('events', rows, checkEvent);
    await this.insert(
      this.names.events,
      ['tenant_id', 'event_id', 'type', 'user_id', 'occurred_ms', 'received_ms', 'attrs_json'],
      rs.map((e) => ({
        tenant_id: e.tenant_id,
        event_id: e.event_id,
        type: e.type,
        user_id: e.user_id,
        occurred_ms: e.occurred_at,
        received_ms: e.received_at,
        attrs_json: e.attrs_json,
      })),
    );
  }

  async insertTransactions(rows: AnalyticsTransaction[]): Promise<void> {
    const rs = checkRows('transactions', rows, checkTransaction);
    await this.insert(
      this.names.transactions,
      [
        'tenant_id',
        'transaction_id',
        'user_id',
        'currency_id',
        'amount',
        'balance_after',
        'source_type',
        'source_ref',
        'created_ms',
      ],
      rs.map((t) => ({
        tenant_id: t.tenant_id,
        transaction_id: t.transaction_id,
        user_id: t.user_id,
        currency_id: t.currency_id,
        amount: t.amount,
        balance_after: t.balance_after,
        source_type: t.source_type,
        source_ref: t.source_ref,
        created_ms: t.created_at,
      })),
    );
  }

  async insertSnapshot(rows: SnapshotEntry[]): Promise<void> {
    const rs = checkRows('snapshot entries', rows, checkSnapshotEntry);
    await this.insert(
      this.names.snapshots,
      ['tenant_id', 'leaderboard_id', 'window_key', 'snapshot_time_ms', 'user_id', 'rank', 'score'],
      rs.map((s) => ({
        tenant_id: s.tenant_id,
        leaderboard_id: s.leaderboard_id,
        window_key: s.window_key,
        snapshot_time_ms: s.snapshot_time,
        user_id: s.user_id,
        rank: s.rank,
        score: s.score,
      })),
    );
  }

  async eventCounts(tenantId: string, from: number, to: number): Promise<EventCount[]> {
    const tenant = checkId('tenantId', tenantId);
    const [lo, hi] = checkBounds(from, to);
    // Stored times are in [0, MAX_TIME_MS]: a range outside it matches nothing.
    if (lo >= hi || hi <= 0 || lo > MAX_TIME_MS) return [];
    // Partition pruning on the DateTime column (implied by the ms bounds, never narrower).
    const loS = Math.floor(Math.max(lo, 0) / 1000);
    const hiS = Math.floor(Math.min(hi - 1, MAX_TIME_MS) / 1000);
    const rows = await this.select(chsql`
      SELECT intDiv(occurred_ms, ${DAY_MS}) AS day, type, count() AS events, uniqExact(user_id) AS users
      FROM ${this.events} FINAL
      WHERE tenant_id = ${tenant}
        AND occurred >= toDateTime(${loS}) AND occurred <= toDateTime(${hiS})
        AND occurred_ms >= ${lo} AND occurred_ms < ${hi}
      GROUP BY day, type
      ORDER BY day ASC, type ASC`);
    return rows.map((r) => eventCount(r.day, r.type, r.events, r.users));
  }

  async userEventHistory(
    tenantId: string,
    types: readonly string[] | null,
    afterUser: string,
    maxUsers: number,
  ): Promise<AnalyticsEvent[]> {
    const tenant = checkId('tenantId', tenantId);
    const limit = Math.max(0, Math.min(Math.floor(maxUsers), 100_000));
    if (limit === 0 || types?.length === 0) return [];
    const typeFilter = types
      ? chsql`AND type IN (${types.map((t) => chsql`${checkId('type', t)}`)})`
      : chsql``;
    const rows = await this.select(chsql`
      SELECT tenant_id, event_id, type, user_id, occurred_ms, received_ms, attrs_json
      FROM ${this.events} FINAL
      WHERE tenant_id = ${tenant} ${typeFilter}
        AND user_id IN (
          SELECT DISTINCT user_id FROM ${this.events}
          WHERE tenant_id = ${tenant} ${typeFilter} AND user_id > ${afterUser}
          ORDER BY user_id ASC LIMIT ${limit})
      ORDER BY user_id ASC, occurred_ms ASC, event_id ASC`);
    return rows.map((r) => ({
      tenant_id: String(r.tenant_id),
      event_id: String(r.event_id),
      type: String(r.type),
      user_id: String(r.user_id),
      occurred_at: toSafeInt('occurred_ms', r.occurred_ms),
      received_at: toSafeInt('received_ms', r.received_ms),
      attrs_json: String(r.attrs_json),
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
    const boards = chsql`${leaderboardIds.map((b) => chsql`${checkId('leaderboardId', b)}`)}`;
    const rows = await this.select(chsql`
      SELECT user_id, leaderboard_id, min(rank) AS best
      FROM ${this.snapshots} FINAL
      WHERE tenant_id = ${tenant} AND leaderboard_id IN (${boards})
        AND user_id IN (
          SELECT DISTINCT user_id FROM ${this.snapshots}
          WHERE tenant_id = ${tenant} AND leaderboard_id IN (${boards}) AND user_id > ${afterUser}
          ORDER BY user_id ASC LIMIT ${limit})
      GROUP BY user_id, leaderboard_id
      ORDER BY user_id ASC, leaderboard_id ASC`);
    return rows.map((r) => ({
      leaderboard_id: String(r.leaderboard_id),
      user_id: String(r.user_id),
      rank: toSafeInt('rank', r.best),
    }));
  }

  async transactionTotals(tenantId: string, currencyId: string): Promise<Map<string, number>> {
    const tenant = checkId('tenantId', tenantId);
    const currency = checkId('currencyId', currencyId);
    const rows = await this.select(chsql`
      SELECT user_id, sum(amount) AS total
      FROM ${this.transactions} FINAL
      WHERE tenant_id = ${tenant} AND currency_id = ${currency}
      GROUP BY user_id
      ORDER BY user_id ASC`);
    return new Map(rows.map((r) => [String(r.user_id), toSafeInt('total', r.total)]));
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
    const rows = await this.select(chsql`
      SELECT leaderboard_id, window_key, snapshot_time_ms, count() AS entries
      FROM ${this.snapshots} FINAL
      WHERE tenant_id = ${tenant} AND leaderboard_id = ${board}
        AND snapshot_time_ms >= ${lo} AND snapshot_time_ms < ${hi}
      GROUP BY leaderboard_id, window_key, snapshot_time_ms
      ORDER BY snapshot_time_ms DESC, window_key ASC
      LIMIT ${lim}`);
    return rows.map((r) => ({
      leaderboard_id: String(r.leaderboard_id),
      window_key: String(r.window_key),
      snapshot_time: toSafeInt('snapshot_time', r.snapshot_time_ms),
      entries: toSafeInt('entries', r.entries),
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
    const rows = await this.select(chsql`
      SELECT tenant_id, leaderboard_id, window_key, snapshot_time_ms, user_id, rank, score
      FROM ${this.snapshots} FINAL
      WHERE tenant_id = ${tenant} AND leaderboard_id = ${board} AND snapshot_time_ms = ${time}
      ORDER BY rank ASC, user_id ASC
      LIMIT ${lim} OFFSET ${off}`);
    return rows.map(toSnapshotEntry);
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
    const rows = await this.select(chsql`
      SELECT tenant_id, leaderboard_id, window_key, snapshot_time_ms, user_id, rank, score
      FROM ${this.snapshots} FINAL
      WHERE tenant_id = ${tenant} AND leaderboard_id = ${board} AND snapshot_time_ms = ${time} AND user_id = ${user}
      LIMIT 1`);
    return rows.length > 0 ? toSnapshotEntry(rows[0]) : null;
  }

  async ping(): Promise<void> {
    const r = await this.client.ping();
    if (!r.success) throw r.error;
  }

  async close(): Promise<void> {
    await this.client.close();
  }

  private async command(q: ChSql): Promise<void> {
    await this.client.command({ query: q.text });
  }

  private async select(q: ChSql): Promise<Row[]> {
    const rs = await this.client.query({ query: q.text, format: 'JSONEachRow' });
    return rs.json<Row>();
  }

  private async insert(table: string, columns: string[], values: Row[]): Promise<void> {
    if (values.length === 0) return;
    // JSONEachRow: numbers as JSON numbers (all checked safe or finite by ./rows.ts).
    await this.client.insert({
      table,
      columns: columns as [string, ...string[]],
      values,
      format: 'JSONEachRow',
    });
  }
}

function toSnapshotEntry(r: Row): SnapshotEntry {
  return {
    tenant_id: String(r.tenant_id),
    leaderboard_id: String(r.leaderboard_id),
    window_key: String(r.window_key),
    snapshot_time: toSafeInt('snapshot_time', r.snapshot_time_ms),
    user_id: String(r.user_id),
    rank: toSafeInt('rank', r.rank),
    score: toFloat('score', r.score),
  };
}

export { AnalyticsInputError };
