-- The embedded shape's analytics store (adapters/analytics/sql.ts), the same data as the
-- ClickHouse tables of the distributed shape. Idempotent inserts: each primary key is the row's
-- natural key and rows go in with INSERT ... ON CONFLICT DO NOTHING, so a redelivered batch
-- counts once. Times are Unix milliseconds (bigint), as in the Analytics port.
CREATE TABLE IF NOT EXISTS analytics_events (
  tenant_id   text   NOT NULL,
  event_id    text   NOT NULL,
  type        text   NOT NULL,
  user_id     text   NOT NULL,
  occurred_at bigint NOT NULL,
  received_at bigint NOT NULL,
  attrs_json  text   NOT NULL,
  PRIMARY KEY (tenant_id, event_id)
);
-- eventCounts: one tenant, a time range.
CREATE INDEX IF NOT EXISTS analytics_events_tenant_occurred ON analytics_events (tenant_id, occurred_at);

CREATE TABLE IF NOT EXISTS analytics_transactions (
  tenant_id      text   NOT NULL,
  transaction_id text   NOT NULL,
  user_id        text   NOT NULL,
  currency_id    text   NOT NULL,
  amount         bigint NOT NULL,
  balance_after  bigint NOT NULL,
  source_type    text   NOT NULL,
  source_ref     text,
  created_at     bigint NOT NULL,
  PRIMARY KEY (tenant_id, transaction_id)
);
-- transactionTotals: one tenant and currency, grouped by user.
CREATE INDEX IF NOT EXISTS analytics_transactions_tenant_currency ON analytics_transactions (tenant_id, currency_id, user_id);

CREATE TABLE IF NOT EXISTS analytics_snapshots (
  tenant_id      text             NOT NULL,
  leaderboard_id text             NOT NULL,
  snapshot_time  bigint           NOT NULL,
  user_id        text             NOT NULL,
  window_key     text             NOT NULL,
  rank           integer          NOT NULL,
  score          double precision NOT NULL,
  PRIMARY KEY (tenant_id, leaderboard_id, snapshot_time, user_id)
);
-- snapshotEntries: one snapshot in rank order.
CREATE INDEX IF NOT EXISTS analytics_snapshots_rank ON analytics_snapshots (tenant_id, leaderboard_id, snapshot_time, rank);
