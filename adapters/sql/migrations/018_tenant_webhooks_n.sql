-- The number of a tenant's webhook endpoints (every status), beside the definition counts of
-- migration 016 and kept the same way (a trigger in the transaction of every endpoint insert and
-- delete). The pipeline reads it with the batch's tenants: for a tenant without endpoints the
-- outbox renders and writes no event, since no endpoint could receive one (core/outbox.ts,
-- docs/webhooks.md "Which events are recorded").
ALTER TABLE tenants ADD COLUMN webhooks_n integer NOT NULL DEFAULT 0;

UPDATE tenants t SET webhooks_n = (SELECT count(*) FROM webhooks w WHERE w.tenant_id = t.id);

CREATE OR REPLACE FUNCTION ludus_tenant_definition_counts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.achievements_n  := (SELECT count(*) FROM achievements a WHERE a.tenant_id = NEW.id);
  NEW.tiers_n         := (SELECT count(*) FROM tiers x WHERE x.tenant_id = NEW.id);
  NEW.level_systems_n := (SELECT count(*) FROM level_systems s WHERE s.tenant_id = NEW.id);
  NEW.webhooks_n      := (SELECT count(*) FROM webhooks w WHERE w.tenant_id = NEW.id);
  RETURN NEW;
END $$;

CREATE TRIGGER webhooks_n AFTER INSERT OR UPDATE OF tenant_id OR DELETE ON webhooks
  FOR EACH ROW EXECUTE FUNCTION ludus_count_definitions('webhooks_n');
