-- References between reward definitions are enforced by the store (issue 12): a leaderboard or a
-- level system names an existing reward config, a reward config names existing reward items, and
-- nothing still referenced can be deleted. Foreign keys rather than application checks because
-- they hold under every race: the referencing INSERT/UPDATE takes FOR KEY SHARE on the referenced
-- row, so a concurrent DELETE either waits and then fails (23503) or wins and the reference fails.
-- The admin routes still check first, in the same transaction, to answer with a message naming
-- the field or the users (core/rewards/references.ts); the keys are the guarantee.
--
-- NOT VALID: existing rows are not checked (a store may hold a dangling reference from before;
-- closing such a board records a payout_error instead of failing), new and changed rows are.

ALTER TABLE leaderboards ADD CONSTRAINT leaderboards_reward_config_fk
  FOREIGN KEY (tenant_id, reward_config_id) REFERENCES reward_configs (tenant_id, id) NOT VALID;

ALTER TABLE level_systems ADD CONSTRAINT level_systems_reward_config_fk
  FOREIGN KEY (tenant_id, reward_config_id) REFERENCES reward_configs (tenant_id, id) NOT VALID;

-- The reward items a config's tiers name (item_ids and rank_items), kept in step with
-- reward_configs.tiers by core/rewards/configs.ts, so that an item in use cannot be deleted.
CREATE TABLE reward_config_items (
  tenant_id text NOT NULL,
  config_id text NOT NULL,
  item_id   text NOT NULL,
  PRIMARY KEY (tenant_id, config_id, item_id),
  FOREIGN KEY (tenant_id, config_id) REFERENCES reward_configs (tenant_id, id) ON DELETE CASCADE,
  FOREIGN KEY (tenant_id, item_id) REFERENCES reward_items (tenant_id, id)
);
CREATE INDEX reward_config_items_item ON reward_config_items (tenant_id, item_id);

INSERT INTO reward_config_items (tenant_id, config_id, item_id)
SELECT DISTINCT c.tenant_id, c.id, x.item_id
FROM reward_configs c
CROSS JOIN LATERAL (
  SELECT jsonb_path_query(c.tiers, 'lax $[*].item_ids[*]') #>> '{}' AS item_id
  UNION
  SELECT jsonb_path_query(c.tiers, 'lax $[*].rank_items.*[*]') #>> '{}'
) x
JOIN reward_items i ON i.tenant_id = c.tenant_id AND i.id = x.item_id;

-- Why a closed window's payout could not pay (its reward config or items were missing, or a
-- grant failed); null when it paid in full. Shown by the close route (docs/leaderboards.md).
ALTER TABLE leaderboard_windows ADD COLUMN payout_error text;
