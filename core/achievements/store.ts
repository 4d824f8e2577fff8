/**
 * Achievement definitions (SPEC.md "Achievement"): create, update (changed fields; a criteria
 * change bumps `version` and never removes a completion), list, get, deactivate (DELETE keeps the
 * progress and completions). Active definitions are compiled once per version for the pipeline
 * and the reactions (`ActiveAchievements`).
 */
import type { Queryable } from '../../adapters/sql/types';
import { definitionTable } from '../definitions/table';
import type { Random } from '../random';
import { CompileCache } from '../rules/rules';
import {
  compileEventLeaves,
  leavesOf,
  partKey,
  refsOf,
  type Criterion,
  type EventLeaf,
  type Leaf,
} from './criteria';

export interface Achievement {
  id: string;
  tenant_id: string;
  name: string;
  description: string | null;
  badge_url: string | null;
  criteria: Criterion;
  reward_config_id: string | null;
  active: boolean;
  version: number;
  created_at: string;
  updated_at: string;
}

interface Row extends Omit<Achievement, 'created_at' | 'updated_at'> {
  created_at: string | Date;
  updated_at: string | Date;
  refs: string[];
}

const toAchievement = (r: Row): Achievement => ({
  id: r.id,
  tenant_id: r.tenant_id,
  name: r.name,
  description: r.description,
  badge_url: r.badge_url,
  criteria: r.criteria,
  reward_config_id: r.reward_config_id,
  active: r.active,
  version: Number(r.version),
  created_at: new Date(r.created_at).toISOString(),
  updated_at: new Date(r.updated_at).toISOString(),
});

const COLUMNS =
  'tenant_id, id, name, description, badge_url, criteria, reward_config_id, active, version, created_at, updated_at';

export interface AchievementInput {
  name: string;
  description?: string | null;
  badge_url?: string | null;
  criteria: Criterion;
  reward_config_id?: string | null;
  active?: boolean;
}

export async function createAchievement(
  q: Queryable,
  random: Pick<Random, 'uuid'>,
  tenantId: string,
  b: AchievementInput,
  now: number,
): Promise<Achievement> {
  const at = new Date(now).toISOString();
  const r = await q.query<Row>(
    `INSERT INTO achievements (tenant_id, id, name, description, badge_url, criteria, refs, reward_config_id, active, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10) RETURNING ${COLUMNS}`,
    [
      tenantId,
      random.uuid(),
      b.name,
      b.description ?? null,
      b.badge_url ?? null,
      JSON.stringify(b.criteria),
      refsOf(b.criteria),
      b.reward_config_id ?? null,
      b.active ?? true,
      at,
    ],
  );
  return toAchievement(r.rows[0]!);
}

export async function updateAchievement(
  q: Queryable,
  tenantId: string,
  id: string,
  p: Partial<AchievementInput>,
  now: number,
): Promise<Achievement | null> {
  const r = await q.query<Row>(
    `UPDATE achievements SET
       name = COALESCE($3, name),
       description = CASE WHEN $4::boolean THEN $5 ELSE description END,
       badge_url = CASE WHEN $6::boolean THEN $7 ELSE badge_url END,
       criteria = COALESCE($8::jsonb, criteria),
       refs = COALESCE($9::text[], refs),
       reward_config_id = CASE WHEN $10::boolean THEN $11 ELSE reward_config_id END,
       active = COALESCE($12, active),
       version = version + 1,
       updated_at = $13
     WHERE tenant_id = $1 AND id = $2 RETURNING ${COLUMNS}`,
    [
      tenantId,
      id,
      p.name ?? null,
      p.description !== undefined,
      p.description ?? null,
      p.badge_url !== undefined,
      p.badge_url ?? null,
      p.criteria ? JSON.stringify(p.criteria) : null,
      p.criteria ? refsOf(p.criteria) : null,
      p.reward_config_id !== undefined,
      p.reward_config_id ?? null,
      p.active ?? null,
      new Date(now).toISOString(),
    ],
  );
  return r.rows[0] ? toAchievement(r.rows[0]) : null;
}

/** The achievements table (get, listing); writes keep their own SQL (refs, the version on every change). */
const achievements = definitionTable<Row, Achievement>({
  table: 'achievements',
  columns: [],
  filterable: ['active'],
  toView: toAchievement,
});

export async function getAchievement(
  q: Queryable,
  tenantId: string,
  id: string,
): Promise<Achievement | null> {
  return achievements.get(q, tenantId, id);
}

/** Locks the achievement row until the caller's transaction ends (criteria changes, backfills). */
export async function lockAchievement(
  q: Queryable,
  tenantId: string,
  id: string,
): Promise<Achievement | null> {
  const r = await q.query<Row>(
    `SELECT ${COLUMNS} FROM achievements WHERE tenant_id = $1 AND id = $2 FOR UPDATE`,
    [tenantId, id],
  );
  return r.rows[0] ? toAchievement(r.rows[0]) : null;
}

export async function listAchievements(
  q: Queryable,
  tenantId: string,
  opts: { active?: boolean; limit: number; offset: number },
): Promise<{ achievements: Achievement[]; total: number }> {
  const { items, total } = await achievements.page(q, tenantId, {
    filters: { active: opts.active },
    limit: opts.limit,
    offset: opts.offset,
  });
  return { achievements: items, total };
}

/** An active achievement, compiled once per version. */
export interface ActiveAchievement {
  def: Achievement;
  /** Every distinct leaf, by part key. */
  leaves: Map<string, Leaf>;
  /** The leaves counted from events (event_count, streak). */
  eventLeaves: EventLeaf[];
}

const cache = new CompileCache<ActiveAchievement>();

export function compiled(def: Achievement): ActiveAchievement {
  return cache.get(`${def.tenant_id}\u0000${def.id}\u0000${def.version}`, () => ({
    def,
    leaves: new Map(leavesOf(def.criteria).map((l) => [partKey(l), l])),
    eventLeaves: compileEventLeaves(def.criteria),
  }));
}

/**
 * The active achievements of these tenants whose criteria name one of `refs` (`events`,
 * `cumulative:<currency>`, ...; null: all of them), compiled; by tenant.
 */
export async function activeByRefs(
  q: Queryable,
  tenantIds: readonly string[],
  refs: readonly string[] | null,
): Promise<Map<string, ActiveAchievement[]>> {
  const out = new Map<string, ActiveAchievement[]>();
  if (tenantIds.length === 0 || refs?.length === 0) return out;
  const r = await q.query<Row>(
    `SELECT ${COLUMNS} FROM achievements
     WHERE tenant_id = ANY($1::text[]) AND active AND ($2::text[] IS NULL OR refs && $2::text[])
     ORDER BY tenant_id, created_at, id`,
    [[...tenantIds], refs ? [...refs] : null],
  );
  for (const row of r.rows) {
    const a = compiled(toAchievement(row));
    const list = out.get(a.def.tenant_id);
    if (list) list.push(a);
    else out.set(a.def.tenant_id, [a]);
  }
  return out;
}
