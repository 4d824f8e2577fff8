-- Per-tenant summaries of the definitions the event pipeline reads every batch (issue 19: fewer
-- statements per batch). The pipeline reads them with the batch's tenants (one statement, the
-- tenants' rows FOR KEY SHARE, with their time zones): processors/pipeline/definitions.ts.
--
-- - `*_version` grows by one with every insert, update or delete of one of the tenant's rows of
--   that table: the pipeline keeps what it loaded for (tenant, version) in memory and loads again
--   only when the version moved (leaderboards, earning rules, streak definitions).
-- - `*_n` counts the tenant's rows of that table (every status): a feature with no row for a tenant
--   issues no statement for it (achievements, tiers, level systems).
--
-- Kept by triggers, in the transaction of the definition write: a batch that read the tenant's row
-- sees every definition change committed before that read, and the next batch sees the ones
-- committed after it. The trigger's UPDATE of the tenant's row takes FOR NO KEY UPDATE, which does
-- not conflict with the pipeline's FOR KEY SHARE (writes of definitions of one tenant serialise on
-- that row among themselves).
ALTER TABLE tenants
  ADD COLUMN leaderboards_version       bigint  NOT NULL DEFAULT 0,
  ADD COLUMN earning_rules_version      bigint  NOT NULL DEFAULT 0,
  ADD COLUMN streak_definitions_version bigint  NOT NULL DEFAULT 0,
  ADD COLUMN achievements_n             integer NOT NULL DEFAULT 0,
  ADD COLUMN tiers_n                    integer NOT NULL DEFAULT 0,
  ADD COLUMN level_systems_n            integer NOT NULL DEFAULT 0;

UPDATE tenants t SET
  achievements_n  = (SELECT count(*) FROM achievements a WHERE a.tenant_id = t.id),
  tiers_n         = (SELECT count(*) FROM tiers x WHERE x.tenant_id = t.id),
  level_systems_n = (SELECT count(*) FROM level_systems s WHERE s.tenant_id = t.id);

-- TG_ARGV[0]: the tenants column to bump (a name from this file, never input).
CREATE FUNCTION ludus_bump_definitions_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'INSERT' THEN
    EXECUTE format('UPDATE tenants SET %1$I = %1$I + 1 WHERE id = $1', TG_ARGV[0]) USING OLD.tenant_id;
  END IF;
  IF TG_OP <> 'DELETE' AND (TG_OP = 'INSERT' OR NEW.tenant_id IS DISTINCT FROM OLD.tenant_id) THEN
    EXECUTE format('UPDATE tenants SET %1$I = %1$I + 1 WHERE id = $1', TG_ARGV[0]) USING NEW.tenant_id;
  END IF;
  RETURN NULL;
END $$;

CREATE FUNCTION ludus_count_definitions() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'INSERT' AND (TG_OP = 'DELETE' OR NEW.tenant_id IS DISTINCT FROM OLD.tenant_id) THEN
    EXECUTE format('UPDATE tenants SET %1$I = %1$I - 1 WHERE id = $1', TG_ARGV[0]) USING OLD.tenant_id;
  END IF;
  IF TG_OP <> 'DELETE' AND (TG_OP = 'INSERT' OR NEW.tenant_id IS DISTINCT FROM OLD.tenant_id) THEN
    EXECUTE format('UPDATE tenants SET %1$I = %1$I + 1 WHERE id = $1', TG_ARGV[0]) USING NEW.tenant_id;
  END IF;
  RETURN NULL;
END $$;

-- A tenant's row inserted after some of its definitions (no code path does it; a restore or a
-- hand-made row could) starts with their counts, not 0.
CREATE FUNCTION ludus_tenant_definition_counts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.achievements_n  := (SELECT count(*) FROM achievements a WHERE a.tenant_id = NEW.id);
  NEW.tiers_n         := (SELECT count(*) FROM tiers x WHERE x.tenant_id = NEW.id);
  NEW.level_systems_n := (SELECT count(*) FROM level_systems s WHERE s.tenant_id = NEW.id);
  RETURN NEW;
END $$;

CREATE TRIGGER tenants_definition_counts BEFORE INSERT ON tenants
  FOR EACH ROW EXECUTE FUNCTION ludus_tenant_definition_counts();

CREATE TRIGGER leaderboards_version AFTER INSERT OR UPDATE OR DELETE ON leaderboards
  FOR EACH ROW EXECUTE FUNCTION ludus_bump_definitions_version('leaderboards_version');
CREATE TRIGGER earning_rules_version AFTER INSERT OR UPDATE OR DELETE ON earning_rules
  FOR EACH ROW EXECUTE FUNCTION ludus_bump_definitions_version('earning_rules_version');
CREATE TRIGGER streak_definitions_version AFTER INSERT OR UPDATE OR DELETE ON streak_definitions
  FOR EACH ROW EXECUTE FUNCTION ludus_bump_definitions_version('streak_definitions_version');
CREATE TRIGGER achievements_n AFTER INSERT OR UPDATE OF tenant_id OR DELETE ON achievements
  FOR EACH ROW EXECUTE FUNCTION ludus_count_definitions('achievements_n');
CREATE TRIGGER tiers_n AFTER INSERT OR UPDATE OF tenant_id OR DELETE ON tiers
  FOR EACH ROW EXECUTE FUNCTION ludus_count_definitions('tiers_n');
CREATE TRIGGER level_systems_n AFTER INSERT OR UPDATE OF tenant_id OR DELETE ON level_systems
  FOR EACH ROW EXECUTE FUNCTION ludus_count_definitions('level_systems_n');
