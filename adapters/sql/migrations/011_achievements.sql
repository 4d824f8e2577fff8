-- Achievements (issue 15, docs/achievements.md): definitions, per-user progress of each part of
-- their criteria, completions (once per user, ever), the users counted as active for rarity, and
-- the durable backfill jobs with their seam to live processing.

CREATE TABLE achievements (
  tenant_id        text    NOT NULL,
  id               text    NOT NULL,
  name             text    NOT NULL,
  description      text,
  badge_url        text,
  criteria         jsonb   NOT NULL,
  -- What the criteria react to, for the reactions' lookups: `cumulative:<currency>`,
  -- `streak_milestone:<streak>`, `leaderboard_rank:<board>`, `events` (event_count or streak).
  refs             text[]  NOT NULL DEFAULT '{}',
  reward_config_id text,
  active           boolean NOT NULL DEFAULT true,
  version          integer NOT NULL DEFAULT 1,
  created_at       timestamptz NOT NULL,
  updated_at       timestamptz NOT NULL,
  PRIMARY KEY (tenant_id, id),
  FOREIGN KEY (tenant_id, reward_config_id) REFERENCES reward_configs (tenant_id, id)
);
CREATE INDEX achievements_active ON achievements (tenant_id) WHERE active;

-- One row per user, achievement and part of its criteria. `part` is the fingerprint of the leaf
-- criterion without its threshold (core/achievements/criteria.ts), so a changed threshold keeps
-- the progress made and a changed event type or condition starts that part afresh.
--   event_count: value = matching events; streak: value = current run of days, best = longest,
--   last_day = the tenant-local day of the last counted event; cumulative: value = lifetime
--   earned; streak_milestone: value = highest streak_days reached; leaderboard_rank: value = best
--   final rank (lowest).
CREATE TABLE achievement_progress (
  tenant_id      text   NOT NULL,
  achievement_id text   NOT NULL,
  user_id        text   NOT NULL,
  part           text   NOT NULL,
  value          bigint NOT NULL,
  best           bigint NOT NULL,
  last_day       text   NOT NULL,
  updated_at     bigint NOT NULL,
  PRIMARY KEY (tenant_id, achievement_id, user_id, part)
);
CREATE INDEX achievement_progress_user ON achievement_progress (tenant_id, user_id);

-- A user completed an achievement: once, ever (criteria changes never remove a row). The row is
-- the badge's record of ownership; `items` what the reward config granted.
CREATE TABLE achievement_completions (
  tenant_id      text   NOT NULL,
  achievement_id text   NOT NULL,
  user_id        text   NOT NULL,
  completed_at   bigint NOT NULL,
  items          jsonb  NOT NULL DEFAULT '[]',
  via            text   NOT NULL DEFAULT 'live' CHECK (via IN ('live', 'backfill')),
  PRIMARY KEY (tenant_id, achievement_id, user_id)
);
CREATE INDEX achievement_completions_user ON achievement_completions (tenant_id, user_id);

-- Users with an event in a tenant that has achievements, and when last (rarity's denominator).
CREATE TABLE achievement_active_users (
  tenant_id      text   NOT NULL,
  user_id        text   NOT NULL,
  last_active_at bigint NOT NULL,
  PRIMARY KEY (tenant_id, user_id)
);

-- Backfill jobs (one per achievement at a time; a new run replaces a finished one).
--   state: pending (waiting for the seam) -> running -> done | failed; dry runs end in `done`
--   without writing progress. `seam` holds per partition the pipeline offset before which the
--   history scan counts events; `cursor` is the last user done (jobs resume after it).
CREATE TABLE achievement_backfills (
  tenant_id      text    NOT NULL,
  achievement_id text    NOT NULL,
  id             text    NOT NULL,
  dry_run        boolean NOT NULL,
  state          text    NOT NULL CHECK (state IN ('pending', 'running', 'done', 'failed')),
  cutoff         bigint,
  seam           jsonb,
  cursor         text,
  users_done     integer NOT NULL DEFAULT 0,
  users_total    integer,
  events_read    bigint  NOT NULL DEFAULT 0,
  would_complete integer NOT NULL DEFAULT 0,
  completed      integer NOT NULL DEFAULT 0,
  error          text,
  created_at     bigint  NOT NULL,
  updated_at     bigint  NOT NULL,
  finished_at    bigint,
  -- Creation order (jobs created at the same clock reading stay ordered).
  seq            bigserial,
  PRIMARY KEY (tenant_id, achievement_id, id)
);
CREATE INDEX achievement_backfills_open ON achievement_backfills (state) WHERE state IN ('pending', 'running');

-- Events live processing counted for an achievement while its backfill runs: the history scan
-- skips them (no event counted twice at the seam). Deleted when the backfill is done.
CREATE TABLE achievement_backfill_live (
  tenant_id      text NOT NULL,
  achievement_id text NOT NULL,
  event_id       text NOT NULL,
  PRIMARY KEY (tenant_id, achievement_id, event_id)
);
