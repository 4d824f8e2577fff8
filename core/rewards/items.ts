/** Reward items: reusable definitions of what a user receives (SPEC.md "Reward item"). */
import { randomUUID } from 'node:crypto';
import type { Queryable } from '../../adapters/sql/types';
import { inUseMessage, usersOfItem } from './references';

export interface RewardItem {
  item_id: string;
  tenant_id: string;
  name: string;
  description: string | null;
  reward_type: string;
  payload: Record<string, unknown>;
  created_at: string;
  updated_at: string;
}

interface Row extends Omit<RewardItem, 'item_id'> {
  id: string;
}

const toItem = (r: Row): RewardItem => ({
  item_id: r.id,
  tenant_id: r.tenant_id,
  name: r.name,
  description: r.description,
  reward_type: r.reward_type,
  payload: r.payload,
  created_at: new Date(r.created_at).toISOString(),
  updated_at: new Date(r.updated_at).toISOString(),
});

/** Payload rules by reward type (SPEC.md); null when valid. Other types are free-form. */
export function validatePayload(type: string, p: Record<string, unknown>): string | null {
  const int = (k: string) => Number.isSafeInteger(p[k]) && (p[k] as number) > 0;
  const str = (k: string) => typeof p[k] === 'string' && (p[k] as string).length > 0;
  switch (type) {
    case 'currency':
      if (!str('currency_id')) return 'body.payload.currency_id is required for a currency reward';
      if (!int('amount')) return 'body.payload.amount must be a positive integer';
      return null;
    case 'xp':
    case 'points':
      return int('amount') ? null : 'body.payload.amount must be a positive integer';
    case 'item':
      if (!str('item_id')) return 'body.payload.item_id is required for an item reward';
      if (p.quantity !== undefined && !int('quantity'))
        return 'body.payload.quantity must be a positive integer';
      return null;
    case 'streak_freeze':
      if (!str('streak_id')) return 'body.payload.streak_id is required for a streak_freeze reward';
      if (!int('count')) return 'body.payload.count must be a positive integer';
      return null;
    case 'badge':
      if (!str('badge_id')) return 'body.payload.badge_id is required for a badge reward';
      if (p.tier !== undefined && typeof p.tier !== 'string') return 'body.payload.tier must be a string';
      return null;
    default:
      return null;
  }
}

export async function createItem(
  q: Queryable,
  tenantId: string,
  b: { name: string; description?: string | null; reward_type: string; payload: Record<string, unknown> },
  now: number,
): Promise<RewardItem> {
  const at = new Date(now).toISOString();
  const r = await q.query<Row>(
    `INSERT INTO reward_items (tenant_id, id, name, description, reward_type, payload, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $7) RETURNING *`,
    [tenantId, randomUUID(), b.name, b.description ?? null, b.reward_type, JSON.stringify(b.payload), at],
  );
  return toItem(r.rows[0]!);
}

export async function getItems(
  q: Queryable,
  tenantId: string,
  ids: string[],
): Promise<Map<string, RewardItem>> {
  if (ids.length === 0) return new Map();
  const r = await q.query<Row>('SELECT * FROM reward_items WHERE tenant_id = $1 AND id = ANY($2::text[])', [
    tenantId,
    ids,
  ]);
  return new Map(r.rows.map((x) => [x.id, toItem(x)]));
}

export async function getItem(q: Queryable, tenantId: string, id: string): Promise<RewardItem | null> {
  return (await getItems(q, tenantId, [id])).get(id) ?? null;
}

export async function listItems(q: Queryable, tenantId: string, limit: number, offset: number) {
  const total = await q.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM reward_items WHERE tenant_id = $1',
    [tenantId],
  );
  const r = await q.query<Row>(
    'SELECT * FROM reward_items WHERE tenant_id = $1 ORDER BY created_at, id LIMIT $2 OFFSET $3',
    [tenantId, limit, offset],
  );
  return { items: r.rows.map(toItem), total: total.rows[0]?.n ?? 0 };
}

export async function updateItem(
  q: Queryable,
  tenantId: string,
  id: string,
  p: { name?: string; description?: string | null; reward_type?: string; payload?: Record<string, unknown> },
  now: number,
): Promise<RewardItem | null> {
  const r = await q.query<Row>(
    `UPDATE reward_items SET name = COALESCE($3, name),
       description = CASE WHEN $4::boolean THEN $5 ELSE description END,
       reward_type = COALESCE($6, reward_type), payload = COALESCE($7::jsonb, payload), updated_at = $8
     WHERE tenant_id = $1 AND id = $2 RETURNING *`,
    [
      tenantId,
      id,
      p.name ?? null,
      p.description !== undefined,
      p.description ?? null,
      p.reward_type ?? null,
      p.payload ? JSON.stringify(p.payload) : null,
      new Date(now).toISOString(),
    ],
  );
  return r.rows[0] ? toItem(r.rows[0]) : null;
}

/**
 * Deletes an item no reward config names: `in_use` names the configs that still do (nothing
 * deleted). Run it in a transaction: the row is locked first, so a concurrent config write either
 * committed before the check (and is named) or fails on the foreign key after it.
 */
export async function deleteItem(
  q: Queryable,
  tenantId: string,
  id: string,
): Promise<{ deleted: RewardItem } | { in_use: string } | null> {
  const cur = await q.query<Row>('SELECT * FROM reward_items WHERE tenant_id = $1 AND id = $2 FOR UPDATE', [
    tenantId,
    id,
  ]);
  if (!cur.rows[0]) return null;
  const inUse = inUseMessage(`reward item ${id}`, await usersOfItem(q, tenantId, id));
  if (inUse) return { in_use: inUse };
  await q.query('DELETE FROM reward_items WHERE tenant_id = $1 AND id = $2', [tenantId, id]);
  return { deleted: toItem(cur.rows[0]) };
}
