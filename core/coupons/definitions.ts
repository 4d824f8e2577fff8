/**
 * Coupon definitions (SPEC.md "Coupon definition"): the store and the validation rules of a
 * config. Status moves (active <-> paused by the status route, any -> archived by DELETE) are
 * the definition's state machine, `moveStatus`.
 */
import type { Queryable } from '../../adapters/sql/types';
import { definitionTable } from '../definitions/table';
import type { Random } from '../random';
import { getItem } from '../rewards/items';
import { codeKey } from './codes';

export type LimitType = 'per_user' | 'global' | 'unlimited';
export type Trigger = 'achievement_completed' | 'streak_milestone' | 'leaderboard_rank';
export type DefinitionStatus = 'active' | 'paused' | 'archived';

export interface TriggerConfig {
  achievement_id?: string;
  streak_id?: string;
  milestone_threshold?: number;
  leaderboard_id?: string;
  rank_threshold?: number;
}

export interface CouponConfig {
  reward_item_id: string;
  code_format: 'random' | 'custom';
  code_prefix?: string;
  code_length: number;
  custom_code?: string;
  case_sensitive: boolean;
  starts_at?: string;
  expires_at?: string;
  usage_limit: { limit_type: LimitType; max_uses?: number };
  auto_generate?: { enabled: boolean; trigger?: Trigger; trigger_config?: TriggerConfig };
}

export interface CouponDefinition {
  id: string;
  tenant_id: string;
  name: string;
  description: string | null;
  config: CouponConfig;
  status: DefinitionStatus;
  created_at: string;
  updated_at: string;
}

/** The row, with the global use count. */
export interface DefinitionRow extends CouponDefinition {
  uses: number;
}

interface Row {
  tenant_id: string;
  id: string;
  name: string;
  description: string | null;
  config: CouponConfig;
  status: DefinitionStatus;
  uses: number;
  created_at: string | Date;
  updated_at: string | Date;
}

export const toDefinition = (r: Row): DefinitionRow => ({
  id: r.id,
  tenant_id: r.tenant_id,
  name: r.name,
  description: r.description,
  config: r.config,
  status: r.status,
  uses: Number(r.uses),
  created_at: new Date(r.created_at).toISOString(),
  updated_at: new Date(r.updated_at).toISOString(),
});

/** The definition as the API shows it (without the use count). */
export function view(d: DefinitionRow | CouponDefinition): CouponDefinition {
  return {
    id: d.id,
    tenant_id: d.tenant_id,
    name: d.name,
    description: d.description,
    config: d.config,
    status: d.status,
    created_at: d.created_at,
    updated_at: d.updated_at,
  };
}

/** How many times one user may redeem a definition: max_uses for per_user, else once. */
export function usesPerUser(c: CouponConfig): number {
  return c.usage_limit.limit_type === 'per_user' ? (c.usage_limit.max_uses ?? 1) : 1;
}

/**
 * The config rules a schema cannot say (SPEC.md "Errors": validation rules producing 400), each
 * naming its field; null when the config holds. Existence of what it names is `checkReferences`.
 */
export function configProblem(c: CouponConfig): string | null {
  const at = 'body.config';
  if (c.code_format === 'custom' && c.code_prefix !== undefined)
    return `${at}.code_prefix applies to the random format only`;
  if (c.code_format === 'random' && c.custom_code !== undefined)
    return `${at}.custom_code applies to the custom format only`;
  if (
    c.starts_at !== undefined &&
    c.expires_at !== undefined &&
    Date.parse(c.starts_at) >= Date.parse(c.expires_at)
  )
    return `${at}.starts_at must be before expires_at`;
  const u = c.usage_limit;
  if ((u.limit_type === 'per_user' || u.limit_type === 'global') && u.max_uses === undefined)
    return `${at}.usage_limit.max_uses is required (an integer > 0) for limit_type ${u.limit_type}`;
  const a = c.auto_generate;
  if (a?.enabled) {
    if (!a.trigger) return `${at}.auto_generate.trigger is required when auto_generate.enabled is true`;
    const t = a.trigger_config ?? {};
    const need = (field: keyof TriggerConfig) =>
      t[field] === undefined
        ? `${at}.auto_generate.trigger_config.${field} is required for trigger ${a.trigger}`
        : null;
    const problem =
      a.trigger === 'achievement_completed'
        ? need('achievement_id')
        : a.trigger === 'streak_milestone'
          ? (need('streak_id') ?? need('milestone_threshold'))
          : (need('leaderboard_id') ?? need('rank_threshold'));
    if (problem) return problem;
    if (c.code_format === 'custom' && c.custom_code === undefined)
      return `${at}.custom_code is required to generate coupons automatically in the custom format`;
  }
  return null;
}

/**
 * Whether the referenced records exist: the reward item always; the trigger's leaderboard,
 * achievement or streak when auto generation is enabled. Null when they do.
 */
export async function referenceProblem(
  q: Queryable,
  tenantId: string,
  c: CouponConfig,
): Promise<string | null> {
  if (!(await getItem(q, tenantId, c.reward_item_id)))
    return `body.config.reward_item_id: reward item ${c.reward_item_id} does not exist`;
  const a = c.auto_generate;
  if (!a?.enabled) return null;
  const t = a.trigger_config ?? {};
  const field = 'body.config.auto_generate.trigger_config';
  if (a.trigger === 'leaderboard_rank' && !(await rowExists(q, 'leaderboards', tenantId, t.leaderboard_id!)))
    return `${field}.leaderboard_id: leaderboard ${t.leaderboard_id} does not exist`;
  if (
    a.trigger === 'achievement_completed' &&
    !(await rowExists(q, 'achievements', tenantId, t.achievement_id!))
  )
    return `${field}.achievement_id: achievement ${t.achievement_id} does not exist`;
  if (a.trigger === 'streak_milestone' && !(await rowExists(q, 'streak_definitions', tenantId, t.streak_id!)))
    return `${field}.streak_id: streak ${t.streak_id} does not exist`;
  return null;
}

/**
 * Whether a row of another feature's table exists (tenant_id, id). The table names are constants
 * of this module, never input.
 */
async function rowExists(
  q: Queryable,
  table: 'leaderboards' | 'achievements' | 'streak_definitions',
  tenantId: string,
  id: string,
): Promise<boolean> {
  const r = await q.query(`SELECT 1 FROM ${table} WHERE tenant_id = $1 AND id = $2`, [tenantId, id]);
  return r.rows.length > 0;
}

/** A custom_code another definition (or a user coupon) of the tenant already uses, or null. */
export async function codeTaken(
  q: Queryable,
  tenantId: string,
  code: string,
  definitionId?: string,
): Promise<string | null> {
  const r = await q.query<{ definition_id: string }>(
    'SELECT definition_id FROM coupon_codes WHERE tenant_id = $1 AND code_key = $2',
    [tenantId, codeKey(code)],
  );
  const d = r.rows[0]?.definition_id;
  return d !== undefined && d !== definitionId ? d : null;
}

/** Registers a definition's shared code (custom format); nothing when it is already its own. */
async function registerSharedCode(q: Queryable, tenantId: string, definitionId: string, code: string) {
  await q.query(
    `INSERT INTO coupon_codes (tenant_id, code_key, code, definition_id, coupon_id) VALUES ($1, $2, $3, $4, NULL)
     ON CONFLICT (tenant_id, code_key) DO NOTHING`,
    [tenantId, codeKey(code), code, definitionId],
  );
}

export async function createDefinition(
  q: Queryable,
  random: Random,
  tenantId: string,
  b: { name: string; description?: string | null; config: CouponConfig },
  now: number,
): Promise<CouponDefinition> {
  const at = new Date(now).toISOString();
  const r = await q.query<Row>(
    `INSERT INTO coupon_definitions (tenant_id, id, name, description, config, reward_item_id, status, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, 'active', $7, $7) RETURNING *`,
    [
      tenantId,
      random.uuid(),
      b.name,
      b.description ?? null,
      JSON.stringify(b.config),
      b.config.reward_item_id,
      at,
    ],
  );
  const d = toDefinition(r.rows[0]!);
  if (b.config.custom_code !== undefined) await registerSharedCode(q, tenantId, d.id, b.config.custom_code);
  return view(d);
}

export async function updateDefinition(
  q: Queryable,
  tenantId: string,
  id: string,
  p: { name?: string; description?: string | null; config?: CouponConfig },
  now: number,
): Promise<CouponDefinition | null> {
  const r = await q.query<Row>(
    `UPDATE coupon_definitions SET name = COALESCE($3, name),
       description = CASE WHEN $4::boolean THEN $5 ELSE description END,
       config = COALESCE($6::jsonb, config), reward_item_id = COALESCE($7, reward_item_id), updated_at = $8
     WHERE tenant_id = $1 AND id = $2 RETURNING *`,
    [
      tenantId,
      id,
      p.name ?? null,
      p.description !== undefined,
      p.description ?? null,
      p.config ? JSON.stringify(p.config) : null,
      p.config?.reward_item_id ?? null,
      new Date(now).toISOString(),
    ],
  );
  if (!r.rows[0]) return null;
  if (p.config?.custom_code !== undefined) await registerSharedCode(q, tenantId, id, p.config.custom_code);
  return view(toDefinition(r.rows[0]));
}

/** Reads a definition; `lock` takes its row for update. */
/** The definitions table (get, listing); writes are this module's own (config rules, codes). */
const definitions = definitionTable<Row, DefinitionRow>({
  table: 'coupon_definitions',
  columns: [],
  filterable: ['status'],
  order: 'created_at, tenant_id, id',
  toView: toDefinition,
});

export async function getDefinition(
  q: Queryable,
  tenantId: string,
  id: string,
  lock = false,
): Promise<DefinitionRow | null> {
  return definitions.get(q, tenantId, id, { lock });
}

/**
 * Definitions of some tenants (null: every tenant), oldest first, optionally of one status, with
 * the count of all that match.
 */
export async function listDefinitions(
  q: Queryable,
  tenantIds: string[] | null,
  o: { status?: DefinitionStatus; limit: number; offset: number },
): Promise<{ definitions: CouponDefinition[]; total: number }> {
  const { items, total } = await definitions.page(q, tenantIds, {
    filters: { status: o.status },
    limit: o.limit,
    offset: o.offset,
  });
  return { definitions: items.map(view), total };
}

/**
 * The definition's state machine: the status route moves active <-> paused; DELETE moves any
 * status to archived; nothing moves out of archived (SPEC.md: not shown, so refused). Returns the
 * definition after the move, `refused` with the reason, or null when it does not exist.
 */
export async function moveStatus(
  q: Queryable,
  tenantId: string,
  id: string,
  to: DefinitionStatus,
  now: number,
): Promise<CouponDefinition | { refused: string } | null> {
  const cur = await getDefinition(q, tenantId, id, true);
  if (!cur) return null;
  if (cur.status === 'archived' && to !== 'archived')
    return { refused: `Coupon definition ${id} is archived; an archived definition cannot be reactivated` };
  if (cur.status === to) return view(cur);
  const r = await q.query<Row>(
    'UPDATE coupon_definitions SET status = $3, updated_at = $4 WHERE tenant_id = $1 AND id = $2 RETURNING *',
    [tenantId, id, to, new Date(now).toISOString()],
  );
  return view(toDefinition(r.rows[0]!));
}
