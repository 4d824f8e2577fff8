/**
 * The analytics port: an append-mostly history store for operators' queries.
 * Two adapters: ClickHouse (distributed shape) and SQL tables (embedded shape).
 * Writes are idempotent: inserting the same row twice (same natural key) is counted once by
 * every read, so a sink may redeliver a batch after a crash.
 * SQL must run on ClickHouse 18.16 and on current servers (no query parameters: literals go
 * through one escaping helper; identifiers are allow-listed).
 * Both adapters accept and reject the same input (./rows.ts: no NUL in text, times within
 * ClickHouse's DateTime range, safe-integer amounts, normal finite scores); a rejected batch
 * writes nothing.
 */
export interface AnalyticsEvent {
  tenant_id: string;
  event_id: string;
  type: string;
  user_id: string;
  /** Unix milliseconds. */
  occurred_at: number;
  received_at: number;
  attrs_json: string;
}

export interface AnalyticsTransaction {
  tenant_id: string;
  transaction_id: string;
  user_id: string;
  currency_id: string;
  /** Signed, in the currency's minor units. */
  amount: number;
  balance_after: number;
  source_type: string;
  source_ref: string | null;
  created_at: number;
}

/** One row of a finalised leaderboard window (top standings at close). */
export interface SnapshotEntry {
  tenant_id: string;
  leaderboard_id: string;
  window_key: string;
  /** Unix milliseconds: when the window was finalised. */
  snapshot_time: number;
  user_id: string;
  rank: number;
  score: number;
}

export interface SnapshotSummary {
  leaderboard_id: string;
  window_key: string;
  snapshot_time: number;
  entries: number;
}

/** A user's best (lowest) final rank on a board over every snapshot (achievement backfill). */
export interface BestRank {
  leaderboard_id: string;
  user_id: string;
  rank: number;
}

export interface EventCount {
  /** UTC day, YYYY-MM-DD. */
  day: string;
  type: string;
  events: number;
  users: number;
}

export interface Analytics {
  readonly kind: 'clickhouse' | 'sql';
  /** Creates tables when missing. Idempotent. */
  ensureSchema(): Promise<void>;
  insertEvents(rows: AnalyticsEvent[]): Promise<void>;
  insertTransactions(rows: AnalyticsTransaction[]): Promise<void>;
  insertSnapshot(rows: SnapshotEntry[]): Promise<void>;
  /**
   * Events per UTC day and type for a tenant, in [from, to) (Unix ms), deduplicated on event_id.
   * Ordered by day, then type (byte order); `users` counts distinct user_id exactly.
   */
  eventCounts(tenantId: string, from: number, to: number): Promise<EventCount[]>;
  /**
   * Event history by user (achievement backfill): a tenant's events of `types` (null: every type)
   * of the first `maxUsers` users whose user_id is after `afterUser` (byte order; '' for the
   * first), deduplicated on event_id, ordered by user_id (byte order), occurred_at, event_id.
   */
  userEventHistory(
    tenantId: string,
    types: readonly string[] | null,
    afterUser: string,
    maxUsers: number,
  ): Promise<AnalyticsEvent[]>;
  /**
   * Best final ranks (achievement backfill of leaderboard_rank parts): for the first `maxUsers`
   * users whose user_id is after `afterUser` (byte order; '' for the first) with an entry in a
   * snapshot of one of `leaderboardIds`, each (user, board)'s lowest rank over every snapshot of
   * that board, deduplicated; ordered by user_id, then leaderboard_id (byte order).
   */
  bestSnapshotRanks(
    tenantId: string,
    leaderboardIds: readonly string[],
    afterUser: string,
    maxUsers: number,
  ): Promise<BestRank[]>;
  /**
   * Sum of transaction amounts per user for a tenant and currency, deduplicated. Map entries in
   * user_id byte order. Rejects (throws) rather than round a total beyond 2^53 - 1.
   */
  transactionTotals(tenantId: string, currencyId: string): Promise<Map<string, number>>;
  /**
   * Snapshots of a board with snapshot_time in [from, to), newest first; one summary per
   * (snapshot_time, window_key), ties on snapshot_time by window_key (byte order).
   */
  listSnapshots(
    tenantId: string,
    leaderboardId: string,
    from: number,
    to: number,
    limit: number,
  ): Promise<SnapshotSummary[]>;
  /** Entries of one snapshot ordered by rank, then user_id (byte order), paged. */
  snapshotEntries(
    tenantId: string,
    leaderboardId: string,
    snapshotTime: number,
    offset: number,
    limit: number,
  ): Promise<SnapshotEntry[]>;
  /** One user's entry in a snapshot, or null. */
  snapshotUser(
    tenantId: string,
    leaderboardId: string,
    snapshotTime: number,
    userId: string,
  ): Promise<SnapshotEntry | null>;
  ping(): Promise<void>;
  close(): Promise<void>;
}
