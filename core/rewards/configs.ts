/**
 * Reward configs (SPEC.md "Reward config (tiers)"): tiers that say which reward items a user gets
 * for a rank, a threshold or a milestone. Attached to leaderboards, streaks, achievements and
 * level systems by `reward_config_id`.
 */
import { randomUUID } from 'node:crypto';
import type { Queryable } from '../../adapters/sql/types';
import { getItems } from './items';

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

/** SPEC validation of tiers beyond the schema, plus: every item id must exist. Null when valid. */
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
  const found = await getItems(q, tenantId, [...ids]);
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
  return toConfig(r.rows[0]!);
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
  return r.rows[0] ? toConfig(r.rows[0]) : null;
}

export async function deleteConfig(q: Queryable, tenantId: string, id: string): Promise<RewardConfig | null> {
  const r = await q.query<Row>('DELETE FROM reward_configs WHERE tenant_id = $1 AND id = $2 RETURNING *', [
    tenantId,
    id,
  ]);
  return r.rows[0] ? toConfig(r.rows[0]) : null;
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

/** The page form of a config's rank tiers: `{reward_config_id, tiers: [{rank_start, rank_end, items}]}`. */
export async function rankTiersView(q: Queryable, c: RewardConfig) {
  const ids = c.tiers.flatMap((t) => [...(t.item_ids ?? []), ...Object.values(t.rank_items ?? {}).flat()]);
  const items = await getItems(q, c.tenant_id, ids);
  const brief = (id: string) => {
    const i = items.get(id);
    return i
      ? { item_id: i.item_id, name: i.name, reward_type: i.reward_type, payload: i.payload }
      : { item_id: id };
  };
  return {
    reward_config_id: c.reward_config_id,
    tiers: c.tiers
      .filter((t) => t.condition.type === 'rank_range')
      .map((t) => {
        const cond = t.condition as { start: number; end: number };
        return {
          rank_start: cond.start,
          rank_end: cond.end,
          items: (t.item_ids ?? []).map(brief),
          ...(t.rank_items
            ? {
                rank_items: Object.fromEntries(
                  Object.entries(t.rank_items).map(([k, v]) => [k, v.map(brief)]),
                ),
              }
            : {}),
        };
      }),
  };
}
