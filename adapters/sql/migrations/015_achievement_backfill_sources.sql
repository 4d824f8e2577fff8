-- Achievement backfill of streak parts (docs/achievements.md "Backfill"): while an achievement's
-- backfill runs, the pipeline does not apply a streak part's event itself (a streak depends on the
-- order of its days, and the history scan of that user may not have run yet); it claims the event
-- (achievement_backfill_live) and defers it here. The scan applies a user's deferred days with the
-- history's (in day order); the job's last phase applies the rest in arrival order (`seq`) and,
-- holding the tenant's row FOR UPDATE, hands over to live processing. Deleted as they are applied.
CREATE TABLE achievement_backfill_deferred (
  tenant_id      text   NOT NULL,
  achievement_id text   NOT NULL,
  seq            bigserial,
  user_id        text   NOT NULL,
  part           text   NOT NULL,
  -- The tenant-local day (YYYY-MM-DD) the live step computed for the event.
  day            text   NOT NULL,
  PRIMARY KEY (tenant_id, achievement_id, seq)
);
CREATE INDEX achievement_backfill_deferred_user ON achievement_backfill_deferred (tenant_id, achievement_id, user_id);
