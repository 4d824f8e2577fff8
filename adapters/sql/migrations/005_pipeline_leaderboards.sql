-- The event pipeline (dedupe, dead letters), leaderboards, their windows and scores, the outbox,
-- and the scheduler's lease.

-- Events already applied, per tenant: the pipeline inserts here in the same transaction as the
-- effects, so a retry, a redelivery or a crash never applies an event twice. Rows are kept for at
-- least the dedupe window (LUDUS_DEDUPE_WINDOW_SECONDS) and purged by the scheduler after it.
CREATE TABLE processed_events (
  tenant_id   text   NOT NULL,
  event_id    text   NOT NULL,
  received_at bigint NOT NULL,
  PRIMARY KEY (tenant_id, event_id)
);
CREATE INDEX processed_events_received ON processed_events (received_at);

-- Records a processor could not apply (a typed dead-letter outcome), kept for operators.
CREATE TABLE dead_letters (
  id          bigserial PRIMARY KEY,
  group_id    text    NOT NULL,
  topic       text    NOT NULL,
  partition   integer NOT NULL,
  "offset"    bigint  NOT NULL,
  key         text    NOT NULL,
  reason      text    NOT NULL,
  payload     text    NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  UNIQUE (group_id, topic, partition, "offset")
);

CREATE TABLE leaderboards (
  tenant_id        text    NOT NULL,
  id               text    NOT NULL,
  name             text    NOT NULL,
  description      text,
  reward_config_id text,
  status           text    NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'inactive', 'archived')),
  config           jsonb   NOT NULL,
  version          integer NOT NULL DEFAULT 1,
  created_at       timestamptz NOT NULL,
  updated_at       timestamptz NOT NULL,
  PRIMARY KEY (tenant_id, id)
);

-- One row per window that received a score. A window is open until the scheduler (or an
-- operator) closes it: then its standings are final, snapshotted and paid out.
CREATE TABLE leaderboard_windows (
  tenant_id      text    NOT NULL,
  leaderboard_id text    NOT NULL,
  window_key     text    NOT NULL,
  starts_at      bigint  NOT NULL,
  ends_at        bigint  NOT NULL,
  closes_at      bigint  NOT NULL,
  status         text    NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'closed')),
  closed_at      bigint,
  entries        integer,
  exported       boolean NOT NULL DEFAULT false,
  PRIMARY KEY (tenant_id, leaderboard_id, window_key)
);
CREATE INDEX leaderboard_windows_due ON leaderboard_windows (closes_at) WHERE status = 'open';
CREATE INDEX leaderboard_windows_export ON leaderboard_windows (closed_at) WHERE status = 'closed' AND NOT exported;

-- The system of record of scores. `tiebreak` orders equal scores (lower first); `partition` is
-- the event-log partition of the user's key, so the rank index can be rebuilt partition by partition.
CREATE TABLE leaderboard_scores (
  tenant_id      text    NOT NULL,
  leaderboard_id text    NOT NULL,
  window_key     text    NOT NULL,
  user_id        text    NOT NULL,
  score          double precision NOT NULL,
  total          double precision NOT NULL,
  n              bigint  NOT NULL,
  tiebreak       bigint  NOT NULL,
  partition      integer NOT NULL,
  PRIMARY KEY (tenant_id, leaderboard_id, window_key, user_id)
);
CREATE INDEX leaderboard_scores_order ON leaderboard_scores (tenant_id, leaderboard_id, window_key, score DESC, tiebreak, user_id);
CREATE INDEX leaderboard_scores_partition ON leaderboard_scores (partition);

-- Outbound events (webhooks), written in the same transaction as the change that caused them.
CREATE TABLE outbox (
  id          bigserial PRIMARY KEY,
  tenant_id   text   NOT NULL,
  event_type  text   NOT NULL,
  dedupe_key  text   NOT NULL,
  payload     jsonb  NOT NULL,
  created_at  bigint NOT NULL,
  UNIQUE (tenant_id, dedupe_key)
);

-- The scheduler's lease: one active instance at a time, portable to PGlite's single session.
CREATE TABLE scheduler_lease (
  id         integer PRIMARY KEY CHECK (id = 1),
  holder     text   NOT NULL,
  expires_at bigint NOT NULL
);
