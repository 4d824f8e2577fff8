/**
 * References to reward definitions (issue 12): a leaderboard, level system, streak definition or
 * achievement names a reward config by `reward_config_id`; a reward config names reward items in
 * its tiers, a coupon definition by `reward_item_id`, a wheel in its prizes (`wheel_items`). The
 * store enforces them with foreign keys (adapters/sql/migrations/009_reward_references.sql and
 * 010-014), which hold under any race; the functions here run in the caller's transaction first,
 * so that a refusal names the field or the users instead of surfacing a constraint name:
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

/** Who uses a reward item or config, by kind (every list sorted by id). */
export interface Users {
  leaderboards: string[];
  level_systems: string[];
  reward_configs: string[];
  streak_definitions: string[];
  achievements: string[];
  coupon_definitions: string[];
  wheels: string[];
}

const KINDS: Array<[keyof Users, string]> = [
  ['leaderboards', 'leaderboards'],
  ['level_systems', 'level systems'],
  ['reward_configs', 'reward configs'],
  ['streak_definitions', 'streak definitions'],
  ['achievements', 'achievements'],
  ['coupon_definitions', 'coupon definitions'],
  ['wheels', 'wheels'],
];

const none = (): Users => ({
  leaderboards: [],
  level_systems: [],
  reward_configs: [],
  streak_definitions: [],
  achievements: [],
  coupon_definitions: [],
  wheels: [],
});

/** The ids of a (constant, never input) query's rows, one parameter list `[tenantId, id]`. */
async function ids(q: Queryable, text: string, tenantId: string, id: string): Promise<string[]> {
  const r = await q.query<{ id: string }>(text, [tenantId, id]);
  return r.rows.map((x) => x.id);
}

/**
 * What holds this config by a foreign key: leaderboards (any status), level systems, streak
 * definitions (any status) and achievements (active or not) whose `reward_config_id` is it.
 */
export async function usersOfConfig(q: Queryable, tenantId: string, configId: string): Promise<Users> {
  const by = (table: string) =>
    ids(
      q,
      `SELECT id FROM ${table} WHERE tenant_id = $1 AND reward_config_id = $2 ORDER BY id`,
      tenantId,
      configId,
    );
  return {
    ...none(),
    leaderboards: await by('leaderboards'),
    level_systems: await by('level_systems'),
    streak_definitions: await by('streak_definitions'),
    achievements: await by('achievements'),
  };
}

/**
 * What holds this item by a foreign key: reward configs whose tiers name it, coupon definitions
 * (any status) that grant it, wheels with it as a prize. (A streak milestone's item is not held:
 * deleting it leaves the milestone without a reward, docs/streaks.md.)
 */
export async function usersOfItem(q: Queryable, tenantId: string, itemId: string): Promise<Users> {
  return {
    ...none(),
    reward_configs: await ids(
      q,
      'SELECT DISTINCT config_id AS id FROM reward_config_items WHERE tenant_id = $1 AND item_id = $2 ORDER BY id',
      tenantId,
      itemId,
    ),
    coupon_definitions: await ids(
      q,
      'SELECT id FROM coupon_definitions WHERE tenant_id = $1 AND reward_item_id = $2 ORDER BY id',
      tenantId,
      itemId,
    ),
    wheels: await ids(
      q,
      'SELECT DISTINCT wheel_id AS id FROM wheel_items WHERE tenant_id = $1 AND item_id = $2 ORDER BY id',
      tenantId,
      itemId,
    ),
  };
}

/** `reward config rc_1 is used by leaderboards lb_1, lb_2; level systems ls_1`, or null when unused. */
export function inUseMessage(what: string, u: Users): string | null {
  const parts = KINDS.filter(([k]) => u[k].length > 0).map(([k, label]) => `${label} ${u[k].join(', ')}`);
  if (parts.length === 0) return null;
  return `${what} is used by ${parts.join('; ')}; detach it first`;
}

/** The store refused a write for a missing or still-referenced row (foreign key, SQLSTATE 23503). */
export function isForeignKeyViolation(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === '23503';
}
