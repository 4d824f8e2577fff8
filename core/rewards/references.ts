/**
 * References to reward definitions (issue 12): a leaderboard or level system names a reward config
 * by `reward_config_id`, a reward config names reward items in its tiers. The store enforces them
 * with foreign keys (adapters/sql/migrations/009_reward_references.sql), which hold under any race;
 * the functions here run in the caller's transaction first, so that a refusal names the field or
 * the users instead of surfacing a constraint name:
 * - `lockConfigRef` / `lockItemRefs` read the referenced rows FOR KEY SHARE (the lock a foreign
 *   key check takes), so they cannot be deleted before the caller's write commits;
 * - `usersOfConfig` / `usersOfItem` say who still uses a definition about to be deleted;
 * - `isForeignKeyViolation` recognises the store's own refusal (SQLSTATE 23503) when a concurrent
 *   transaction slipped between the check and the write.
 */
import type { Queryable } from '../../adapters/sql/types';

/** Null when the reward config exists (and is now locked against deletion), else the problem. */
export async function lockConfigRef(
  q: Queryable,
  tenantId: string,
  configId: string | null | undefined,
  field = 'body.reward_config_id',
): Promise<string | null> {
  if (!configId) return null;
  const r = await q.query('SELECT 1 FROM reward_configs WHERE tenant_id = $1 AND id = $2 FOR KEY SHARE', [
    tenantId,
    configId,
  ]);
  return r.rowCount > 0 ? null : `${field}: reward config ${configId} does not exist`;
}

/** The ids among `itemIds` that exist, locked against deletion until the caller commits. */
export async function lockItemRefs(q: Queryable, tenantId: string, itemIds: string[]): Promise<Set<string>> {
  if (itemIds.length === 0) return new Set();
  const r = await q.query<{ id: string }>(
    'SELECT id FROM reward_items WHERE tenant_id = $1 AND id = ANY($2::text[]) ORDER BY id FOR KEY SHARE',
    [tenantId, [...new Set(itemIds)]],
  );
  return new Set(r.rows.map((x) => x.id));
}

export interface Users {
  leaderboards: string[];
  level_systems: string[];
  reward_configs: string[];
}

const some = (u: Users) => u.leaderboards.length + u.level_systems.length + u.reward_configs.length > 0;

/** Leaderboards (any status) and level systems whose `reward_config_id` is this config. */
export async function usersOfConfig(q: Queryable, tenantId: string, configId: string): Promise<Users> {
  const boards = await q.query<{ id: string }>(
    'SELECT id FROM leaderboards WHERE tenant_id = $1 AND reward_config_id = $2 ORDER BY id',
    [tenantId, configId],
  );
  const systems = await q.query<{ id: string }>(
    'SELECT id FROM level_systems WHERE tenant_id = $1 AND reward_config_id = $2 ORDER BY id',
    [tenantId, configId],
  );
  return {
    leaderboards: boards.rows.map((r) => r.id),
    level_systems: systems.rows.map((r) => r.id),
    reward_configs: [],
  };
}

/** Reward configs whose tiers name this item. */
export async function usersOfItem(q: Queryable, tenantId: string, itemId: string): Promise<Users> {
  const r = await q.query<{ config_id: string }>(
    'SELECT config_id FROM reward_config_items WHERE tenant_id = $1 AND item_id = $2 ORDER BY config_id',
    [tenantId, itemId],
  );
  return { leaderboards: [], level_systems: [], reward_configs: r.rows.map((x) => x.config_id) };
}

/** `reward config rc_1 is used by leaderboards lb_1, lb_2; level systems ls_1`, or null when unused. */
export function inUseMessage(what: string, u: Users): string | null {
  if (!some(u)) return null;
  const parts = [
    u.leaderboards.length ? `leaderboards ${u.leaderboards.join(', ')}` : '',
    u.level_systems.length ? `level systems ${u.level_systems.join(', ')}` : '',
    u.reward_configs.length ? `reward configs ${u.reward_configs.join(', ')}` : '',
  ].filter(Boolean);
  return `${what} is used by ${parts.join('; ')}; detach it first`;
}

/** The store refused a write for a missing or still-referenced row (foreign key, SQLSTATE 23503). */
export function isForeignKeyViolation(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === '23503';
}
