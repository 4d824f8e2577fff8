/**
 * Reward configs (SPEC.md "Reward config (tiers)"): tiers that say which reward items a user gets
 * for a rank, a threshold or a milestone. Attached to leaderboards, streaks, achievements and
 * level systems by `reward_config_id`.
 */
import { randomUUID } from 'node:crypto';
import type { Queryable } from '../../adapters/sql/types';
import { getItems } from './items';
import { inUseMessage, lockItemRefs, usersOfConfig } from './references';

export type TierCondition =
  | { type: 'rank_range'; start: number; end: number }
  | { type: 'threshold_range'; metric: string; min: number; max: number }
  | { type: 'milestone'; metric: string; value: number }
  | { type: 'custom'; rules: unknown };

export interface RewardTier {
  condition: TierCondition;
  item_ids?: string[];
  rank_items?: Record<string, string[]>;
}

export interface RewardConfig {
  reward_config_id: string;
  tenant_id: string;
  name: string;
  description: string | null;
  tiers: RewardTier[];
  created_at: string;
  updated_at: string;
}

interface Row {
  id: string;
  tenant_id: string;
  name: string;
  description: string | null;
  tiers: RewardTier[];
  created_at: string;
  updated_at: string;
}

const toConfig = (r: Row): RewardConfig => ({
  reward_config_id: r.id,
  tenant_id: r.tenant_id,
  name: r.name,
  description: r.description,
  tiers: r.tiers,
  created_at: new Date(r.created_at).toISOString(),
  updated_at: new Date(r.updated_at).toISOString(),
});

/** Every reward item id a config's tiers name (item_ids and rank_items), once each. */
export function tierItemIds(tiers: RewardTier[]): string[] {
  return [
    ...new Set(tiers.flatMap((t) => [...(t.item_ids ?? []), ...Object.values(t.rank_items ?? {}).flat()])),
  ];
}

/**
 * SPEC validation of tiers beyond the schema, plus: every item id must exist. Null when valid.
 * Run it in the transaction that writes the config: the items are locked against deletion until
 * it commits (core/rewards/references.ts).
 */
export async function validateTiers(
  q: Queryable,
  tenantId: string,
  tiers: RewardTier[],
): Promise<string | null> {
  const ids = new Set<string>();
  for (const [i, t] of tiers.entries()) {
    const at = `body.tiers[${i}]`;
    if ((t.item_ids === undefined) === (t.rank_items === undefined))
      return `${at} must have exactly one of item_ids or rank_items`;
    const c = t.condition;
    if (c.type === 'rank_range') {
      if (c.start < 1 || c.end < 1) return `${at}.condition: start and end must be >= 1`;
      if (c.start > c.end) return `${at}.condition: start must be <= end`;
    }
    if (c.type === 'threshold_range' && c.min > c.max) return `${at}.condition: min must be <= max`;
    if (t.rank_items) {
      if (c.type !== 'rank_range') return `${at}.rank_items needs a rank_range condition`;
      for (const [k, v] of Object.entries(t.rank_items)) {
        if (!/^[1-9]\d*$/.test(k)) return `${at}.rank_items: key "${k}" is not a rank`;
        if (Number(k) < c.start || Number(k) > c.end)
          return `${at}.rank_items: rank ${k} is outside ${c.start}..${c.end}`;
        v.forEach((id) => ids.add(id));
      }
    }
    t.item_ids?.forEach((id) => ids.add(id));
  }
  const found = await lockItemRefs(q, tenantId, [...ids]);
  const missing = [...ids].find((id) => !found.has(id));
  return missing ? `body.tiers: reward item ${missing} does not exist` : null;
}

export async function createConfig(
  q: Queryable,
  tenantId: string,
  b: { name: string; description?: string | null; tiers: RewardTier[] },
  now: number,
): Promise<RewardConfig> {
  const at = new Date(now).toISOString();
  const r = await q.query<Row>(
    `INSERT INTO reward_configs (tenant_id, id, name, description, tiers, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $6) RETURNING *`,
    [tenantId, randomUUID(), b.name, b.description ?? null, JSON.stringify(b.tiers), at],
  );
  await syncItems(q, tenantId, r.rows[0]!.id, b.tiers);
  return toConfig(r.rows[0]!);
}

/** Keeps reward_config_items (the foreign keys to the items) equal to the items the tiers name. */
async function syncItems(q: Queryable, tenantId: string, configId: string, tiers: RewardTier[]) {
  await q.query('DELETE FROM reward_config_items WHERE tenant_id = $1 AND config_id = $2', [
    tenantId,
    configId,
  ]);
  const ids = tierItemIds(tiers);
  if (ids.length === 0) return;
  await q.query(
    'INSERT INTO reward_config_items (tenant_id, config_id, item_id) SELECT $1, $2, unnest($3::text[])',
    [tenantId, configId, ids],
  );
}

export async function getConfig(q: Queryable, tenantId: string, id: string): Promise<RewardConfig | null> {
  const r = await q.query<Row>('SELECT * FROM reward_configs WHERE tenant_id = $1 AND id = $2', [
    tenantId,
    id,
  ]);
  return r.rows[0] ? toConfig(r.rows[0]) : null;
}

export async function listConfigs(q: Queryable, tenantId: string, limit: number, offset: number) {
  const total = await q.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM reward_configs WHERE tenant_id = $1',
    [tenantId],
  );
  const r = await q.query<Row>(
    'SELECT * FROM reward_configs WHERE tenant_id = $1 ORDER BY created_at, id LIMIT $2 OFFSET $3',
    [tenantId, limit, offset],
  );
  return { configs: r.rows.map(toConfig), total: total.rows[0]?.n ?? 0 };
}

export async function updateConfig(
  q: Queryable,
  tenantId: string,
  id: string,
  p: { name?: string; description?: string | null; tiers?: RewardTier[] },
  now: number,
): Promise<RewardConfig | null> {
  const r = await q.query<Row>(
    `UPDATE reward_configs SET name = COALESCE($3, name), description = CASE WHEN $4::boolean THEN $5 ELSE description END,
       tiers = COALESCE($6::jsonb, tiers), updated_at = $7 WHERE tenant_id = $1 AND id = $2 RETURNING *`,
    [
      tenantId,
      id,
      p.name ?? null,
      p.description !== undefined,
      p.description ?? null,
      p.tiers ? JSON.stringify(p.tiers) : null,
      new Date(now).toISOString(),
    ],
  );
  if (r.rows[0] && p.tiers) await syncItems(q, tenantId, id, p.tiers);
  return r.rows[0] ? toConfig(r.rows[0]) : null;
}

/**
 * Deletes a config nobody uses: `in_use` names the leaderboards and level systems that still do
 * (nothing deleted). Run it in a transaction: the row is locked first, so a concurrent attach
 * either committed before the check (and is named) or fails on the foreign key after it.
 */
export async function deleteConfig(
  q: Queryable,
  tenantId: string,
  id: string,
): Promise<{ deleted: RewardConfig } | { in_use: string } | null> {
  const cur = await q.query<Row>('SELECT * FROM reward_configs WHERE tenant_id = $1 AND id = $2 FOR UPDATE', [
    tenantId,
    id,
  ]);
  if (!cur.rows[0]) return null;
  const inUse = inUseMessage(`reward config ${id}`, await usersOfConfig(q, tenantId, id));
  if (inUse) return { in_use: inUse };
  await q.query('DELETE FROM reward_configs WHERE tenant_id = $1 AND id = $2', [tenantId, id]);
  return { deleted: toConfig(cur.rows[0]) };
}

/** Items for a rank: rank_items of the rank when present, else the tier's item_ids; tiers in order. */
export function itemsForRank(c: RewardConfig, rank: number): string[] {
  const out: string[] = [];
  for (const t of c.tiers) {
    if (t.condition.type !== 'rank_range' || rank < t.condition.start || rank > t.condition.end) continue;
    if (t.rank_items) out.push(...(t.rank_items[String(rank)] ?? []));
    else out.push(...(t.item_ids ?? []));
  }
  return out;
}

/** Items for a metric reaching a value: milestone tiers equal to it, threshold ranges containing it. */
export function itemsForMetric(c: RewardConfig, metric: string, value: number): string[] {
  const out: string[] = [];
  for (const t of c.tiers) {
    const k = t.condition;
    if (k.type === 'milestone' && k.metric === metric && k.value === value) out.push(...(t.item_ids ?? []));
    if (k.type === 'threshold_range' && k.metric === metric && value >= k.min && value <= k.max)
      out.push(...(t.item_ids ?? []));
  }
  return out;
}

/**
 * The page form of a config's rank tiers (SPEC.md "Leaderboard page"):
 * `{reward_config_id, tiers: [{rank_start, rank_end, items}]}`. A tier with `item_ids` is one
 * entry for its whole range; a tier with `rank_items` is one entry per ranked key
 * (`rank_start = rank_end = key`) with that rank's items, so a client reading SPEC.md's shape sees
 * every prize (a rank of the range with no key wins nothing and has no entry). Sorted by rank.
 */
export async function rankTiersView(q: Queryable, c: RewardConfig) {
  const items = await getItems(q, c.tenant_id, tierItemIds(c.tiers));
  const brief = (id: string) => {
    const i = items.get(id);
    return i
      ? { item_id: i.item_id, name: i.name, reward_type: i.reward_type, payload: i.payload }
      : { item_id: id };
  };
  const tiers: Array<{ rank_start: number; rank_end: number; items: ReturnType<typeof brief>[] }> = [];
  for (const t of c.tiers) {
    if (t.condition.type !== 'rank_range') continue;
    if (t.rank_items) {
      for (const [k, v] of Object.entries(t.rank_items))
        tiers.push({ rank_start: Number(k), rank_end: Number(k), items: v.map(brief) });
    } else {
      tiers.push({
        rank_start: t.condition.start,
        rank_end: t.condition.end,
        items: (t.item_ids ?? []).map(brief),
      });
    }
  }
  // Stable: tiers covering the same rank keep the config's order.
  tiers.sort((a, b) => a.rank_start - b.rank_start || a.rank_end - b.rank_end);
  return { reward_config_id: c.reward_config_id, tiers };
}
