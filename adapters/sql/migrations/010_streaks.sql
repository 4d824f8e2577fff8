-- Streaks (issue 14, docs/streaks.md): definitions, per-user progress with its deadline, the
-- history of periods, milestones reached and admin freeze grants.

CREATE TABLE streak_definitions (
  tenant_id        text    NOT NULL,
  id               text    NOT NULL,
  name             text    NOT NULL,
  description      text,
  status           text    NOT NULL CHECK (status IN ('active', 'paused', 'archived')),
  config           jsonb   NOT NULL,
  reward_config_id text,
  -- Bumped by every change of config or status (compile cache key).
  version          integer NOT NULL DEFAULT 1,
  created_at       timestamptz NOT NULL,
  updated_at       timestamptz NOT NULL,
  PRIMARY KEY (tenant_id, id),
  FOREIGN KEY (tenant_id, reward_config_id) REFERENCES reward_configs (tenant_id, id)
);
-- Names are unique within a tenant among definitions that are not archived (an archived name can
-- be used again), compared case-insensitively.
CREATE UNIQUE INDEX streak_definitions_name ON streak_definitions (tenant_id, lower(name))
  WHERE status <> 'archived';

-- One row per user and definition: the streak and the period it is tracking. Times are Unix ms.
-- `due_at` is the deadline index: the next instant at which the scheduler must look at the row
-- (an at-risk notice or the end of the period the user must qualify); null when nothing is due.
CREATE TABLE streak_progress (
  tenant_id      text    NOT NULL,
  streak_id      text    NOT NULL,
  user_id        text    NOT NULL,
  current_count  integer NOT NULL,
  longest_count  integer NOT NULL,
  -- Runs of the streak so far (a break starts the next run): keys repeatable milestones.
  run            integer NOT NULL,
  -- Never below 0 (the writers add a change; no CHECK: the candidate row of an upsert carries the
  -- change, which a CHECK would refuse before the conflict resolves it).
  freezes        integer NOT NULL,
  period_key     text,
  period_start   bigint,
  period_end     bigint,
  period_value   double precision NOT NULL,
  qualified      boolean NOT NULL,
  frozen         boolean NOT NULL,
  at_risk_start  bigint,
  due_at         bigint,
  last_event_at  bigint,
  updated_at     bigint  NOT NULL,
  PRIMARY KEY (tenant_id, streak_id, user_id)
);
CREATE INDEX streak_progress_due ON streak_progress (due_at) WHERE due_at IS NOT NULL;

-- The closed or qualified periods of each user's streak: qualified, frozen (a freeze kept the
-- streak alive) or broken.
CREATE TABLE streak_periods (
  tenant_id    text    NOT NULL,
  streak_id    text    NOT NULL,
  user_id      text    NOT NULL,
  period_start bigint  NOT NULL,
  period_end   bigint  NOT NULL,
  period_key   text    NOT NULL,
  outcome      text    NOT NULL CHECK (outcome IN ('qualified', 'frozen', 'broken')),
  value        double precision NOT NULL,
  streak_count integer NOT NULL,
  at           bigint  NOT NULL,
  PRIMARY KEY (tenant_id, streak_id, user_id, period_start)
);

-- Milestones reached: `run` is the run of the streak for a repeatable milestone, 0 for one that
-- pays once per user ever.
CREATE TABLE streak_milestones (
  tenant_id  text    NOT NULL,
  streak_id  text    NOT NULL,
  user_id    text    NOT NULL,
  threshold  integer NOT NULL,
  run        integer NOT NULL,
  reached_at bigint  NOT NULL,
  PRIMARY KEY (tenant_id, streak_id, user_id, threshold, run)
);

-- Freezes granted (admin route and streak_freeze reward items), once per idempotency key.
CREATE TABLE streak_freeze_grants (
  tenant_id       text    NOT NULL,
  idempotency_key text    NOT NULL,
  streak_id       text    NOT NULL,
  user_id         text    NOT NULL,
  requested       integer NOT NULL,
  granted         integer NOT NULL,
  freezes_after   integer NOT NULL,
  source_type     text    NOT NULL,
  created_at      bigint  NOT NULL,
  PRIMARY KEY (tenant_id, idempotency_key)
);
