/**
 * Streak definitions (SPEC.md "Streak definition"): validation of what the schema cannot say, the
 * store, and the one state machine of a definition's status (SPEC.md "Coupon definition and streak
 * definition status"): active <-> paused, any -> archived, nothing out of archived.
 */
import type { Queryable } from '../../adapters/sql/types';
import { definitionTable } from '../definitions/table';
import { systemRandom, type Random } from '../random';
import {
  compile,
  CompileCache,
  eventTypeMatcher,
  fieldReader,
  fromStreakExpression,
  validateField,
  validateStreakExpression,
  type ConditionOperator,
  type EventView,
} from '../rules/rules';
import { validateTimeframe } from '../windows';
import { resumePlan, type StreakConfig } from './engine';

export type StreakStatus = 'active' | 'paused' | 'archived';

export interface StreakDefinition {
  id: string;
  tenant_id: string;
  name: string;
  description: string | null;
  status: StreakStatus;
  config: StreakConfig;
  reward_config_id: string | null;
  version: number;
  created_at: string;
  updated_at: string;
}

interface Row {
  tenant_id: string;
  id: string;
  name: string;
  description: string | null;
  status: StreakStatus;
  config: StreakConfig;
  reward_config_id: string | null;
  version: number;
  created_at: string | Date;
  updated_at: string | Date;
}

const toDef = (r: Row): StreakDefinition => ({
  id: r.id,
  tenant_id: r.tenant_id,
  name: r.name,
  description: r.description,
  status: r.status,
  config: r.config,
  reward_config_id: r.reward_config_id,
  version: Number(r.version),
  created_at: new Date(r.created_at).toISOString(),
  updated_at: new Date(r.updated_at).toISOString(),
});

/** The refusals of the definition's state machine and store (http/domain-errors.ts maps them). */
export class StreakError extends Error {
  constructor(
    readonly kind: 'conflict' | 'not_found' | 'invalid',
    message: string,
  ) {
    super(message);
    this.name = 'StreakError';
  }
}

/** Bare names in a streak's fields mean attributes (`amount` is `attrs.amount`), as in earning rules. */
export const FIELD_OPTIONS = { bareNames: 'attrs' } as const;

/**
 * The checks the schema cannot express, each naming the field (`body.config...`); null when valid.
 * The schema already holds types, bounds, the name's charset and length, and unknown fields.
 */
export function validateConfig(c: StreakConfig, where = 'body.config'): string | null {
  const w = c.window;
  if (w.type === 'calendar') {
    const extra = Object.keys(w).find((k) => !['type', 'period', 'timezone', 'reset_time'].includes(k));
    if (extra) return `${where}.window.${extra}: not allowed for a calendar window`;
    if (w.period === undefined)
      return `${where}.window.period is required for a calendar window (daily or weekly)`;
    if (w.timezone === undefined)
      return `${where}.window.timezone is required for a calendar window (an IANA name)`;
    const err = validateTimeframe(
      {
        type: w.period,
        timezone: w.timezone,
        ...(w.reset_time !== undefined ? { reset_time: w.reset_time } : {}),
      },
      `${where}.window`,
    );
    if (err) return err.replace(`${where}.window.type:`, `${where}.window.period:`);
  } else {
    const extra = Object.keys(w).find((k) => !['type', 'duration_seconds'].includes(k));
    if (extra) return `${where}.window.${extra}: not allowed for a rolling window`;
    if ((w as { duration_seconds?: number }).duration_seconds === undefined)
      return `${where}.window.duration_seconds is required for a rolling window`;
  }
  const cond = c.condition;
  if (cond.type === 'sum') {
    if (cond.field === undefined) return `${where}.condition.field is required when condition.type is sum`;
    const err = validateField(cond.field, `${where}.condition.field`, FIELD_OPTIONS);
    if (err) return err;
  } else if (cond.field !== undefined) {
    return `${where}.condition.field: only a sum condition reads a field`;
  }
  const err = validateStreakExpression(
    c.expression as Parameters<typeof validateStreakExpression>[0],
    `${where}.expression`,
    FIELD_OPTIONS,
  );
  if (err) return err;
  const seen = new Set<number>();
  for (const [i, m] of (c.milestones ?? []).entries()) {
    if (seen.has(m.threshold))
      return `${where}.milestones[${i}].threshold: ${m.threshold} is repeated (thresholds must be unique)`;
    seen.add(m.threshold);
  }
  return null;
}

/** The reward items the milestones name. */
export function milestoneItems(c: StreakConfig): string[] {
  return [...new Set((c.milestones ?? []).map((m) => m.reward_item_id).filter((x): x is string => !!x))];
}

export async function createDefinition(
  q: Queryable,
  tenantId: string,
  b: { name: string; description?: string | null; config: StreakConfig; reward_config_id?: string | null },
  now: number,
  random: Random = systemRandom,
): Promise<StreakDefinition> {
  const at = new Date(now).toISOString();
  const r = await q.query<Row>(
    `INSERT INTO streak_definitions (tenant_id, id, name, description, status, config, reward_config_id, version, created_at, updated_at)
     VALUES ($1, $2, $3, $4, 'active', $5, $6, 1, $7, $7) RETURNING *`,
    [
      tenantId,
      random.uuid(),
      b.name,
      b.description ?? null,
      JSON.stringify(b.config),
      b.reward_config_id ?? null,
      at,
    ],
  );
  return toDef(r.rows[0]!);
}

/** The definitions table (get, listing); writes of config and status are this module's own. */
const definitions = definitionTable<Row, StreakDefinition>({
  table: 'streak_definitions',
  columns: [],
  filterable: ['status'],
  order: 'tenant_id, created_at, id',
  toView: toDef,
});

export async function getDefinition(
  q: Queryable,
  tenantId: string,
  id: string,
  lock = false,
): Promise<StreakDefinition | null> {
  return definitions.get(q, tenantId, id, { lock });
}

/** A tenant's definitions (archived included), oldest first; or every tenant's with `tenantIds` null. */
export async function listDefinitions(
  q: Queryable,
  tenantIds: string[] | null,
  opts: { status?: StreakStatus; limit: number; offset: number },
): Promise<{ definitions: StreakDefinition[]; total: number }> {
  const { items, total } = await definitions.page(q, tenantIds, {
    filters: { status: opts.status },
    limit: opts.limit,
    offset: opts.offset,
  });
  return { definitions: items, total };
}

/** Another definition of the tenant (not archived) already has this name (case-insensitive). */
export async function nameTaken(
  q: Queryable,
  tenantId: string,
  name: string,
  except?: string,
): Promise<boolean> {
  const r = await q.query(
    `SELECT 1 FROM streak_definitions WHERE tenant_id = $1 AND lower(name) = lower($2) AND status <> 'archived' AND id <> $3`,
    [tenantId, name, except ?? ''],
  );
  return r.rowCount > 0;
}

/**
 * Changes name, description or config (only the fields given). A config change applies from the
 * next event and the next period (core/streaks/engine.ts); user streaks keep their counts. Every
 * user deadline of the definition is brought forward to `now`, so the sweep recomputes it under
 * the new config.
 */
export async function updateDefinition(
  q: Queryable,
  tenantId: string,
  id: string,
  b: { name?: string; description?: string | null; config?: StreakConfig; reward_config_id?: string | null },
  now: number,
): Promise<StreakDefinition | null> {
  const r = await q.query<Row>(
    `UPDATE streak_definitions SET
       name = COALESCE($3, name),
       description = CASE WHEN $4 THEN $5 ELSE description END,
       config = COALESCE($6::jsonb, config),
       reward_config_id = CASE WHEN $7 THEN $8 ELSE reward_config_id END,
       version = version + 1,
       updated_at = $9
     WHERE tenant_id = $1 AND id = $2 RETURNING *`,
    [
      tenantId,
      id,
      b.name ?? null,
      b.description !== undefined,
      b.description ?? null,
      b.config ? JSON.stringify(b.config) : null,
      b.reward_config_id !== undefined,
      b.reward_config_id ?? null,
      new Date(now).toISOString(),
    ],
  );
  if (!r.rows[0]) return null;
  if (b.config)
    await q.query(
      'UPDATE streak_progress SET due_at = $3 WHERE tenant_id = $1 AND streak_id = $2 AND due_at > $3',
      [tenantId, id, now],
    );
  return toDef(r.rows[0]);
}

/** The moves of a definition's status; anything else is refused. */
export function statusMove(from: StreakStatus, to: StreakStatus): 'same' | 'ok' | string {
  if (from === to) return 'same';
  if (from === 'archived')
    return `the definition is archived; an archived definition cannot be ${to === 'active' ? 'reactivated' : 'paused'}`;
  return 'ok';
}

/**
 * Moves the status (in the caller's transaction, the definition locked). Pausing and archiving
 * take every user's deadline out of the sweep. Resuming (paused -> active) forgives the pause
 * (`resumePlan` in ./engine.ts): a user whose tracked period ended while paused continues in the
 * period that contains now, not yet qualified, unless the period was qualified and the one after it
 * still runs (that one is next, as without the pause); so no streak breaks for the time it was
 * paused. Then every running streak is due at once, so the sweep recomputes its deadline under the
 * definition as it is.
 */
export async function setStatus(
  q: Queryable,
  tenantId: string,
  id: string,
  to: StreakStatus,
  now: number,
): Promise<StreakDefinition> {
  const cur = await getDefinition(q, tenantId, id, true);
  if (!cur) throw new StreakError('not_found', `Streak definition ${id} not found`);
  const move = statusMove(cur.status, to);
  if (move === 'same') return cur;
  if (move !== 'ok') throw new StreakError('conflict', move);
  if (to !== 'active') {
    await q.query(
      'UPDATE streak_progress SET due_at = NULL WHERE tenant_id = $1 AND streak_id = $2 AND due_at IS NOT NULL',
      [tenantId, id],
    );
  } else {
    const { period: p, keepQualifiedEndingAfter } = resumePlan(cur.config, now);
    await q.query(
      `UPDATE streak_progress SET
         period_key = CASE WHEN current_count > 0 THEN $4 END,
         period_start = CASE WHEN current_count > 0 THEN $5::bigint END,
         period_end = CASE WHEN current_count > 0 THEN $6::bigint END,
         period_value = 0, qualified = false, frozen = false, at_risk_start = NULL, updated_at = $3
       WHERE tenant_id = $1 AND streak_id = $2 AND period_end <= $3
         AND NOT (qualified AND period_end > $7::bigint)`,
      [tenantId, id, now, p.key, p.start, p.end, keepQualifiedEndingAfter],
    );
    await q.query(
      'UPDATE streak_progress SET due_at = $3 WHERE tenant_id = $1 AND streak_id = $2 AND current_count > 0',
      [tenantId, id, now],
    );
  }
  const r = await q.query<Row>(
    `UPDATE streak_definitions SET status = $3, version = version + 1, updated_at = $4
     WHERE tenant_id = $1 AND id = $2 RETURNING *`,
    [tenantId, id, to, new Date(now).toISOString()],
  );
  return toDef(r.rows[0]!);
}

/** A definition compiled for the pipeline: its event-type matcher, filter and contribution reader. */
export interface CompiledStreak {
  def: StreakDefinition;
  matchesType: (type: string) => boolean;
  filter: (e: EventView) => boolean;
  /** The event's contribution: 1 for count, the field's number for sum; null when it does not count. */
  amount: (e: EventView) => number | null;
}

const cache = new CompileCache<CompiledStreak>();

export function compileDefinition(def: StreakDefinition): CompiledStreak {
  return cache.get(`${def.tenant_id}\u0000${def.id}\u0000${def.version}`, () => {
    const c = def.config;
    const expr = c.expression
      ? fromStreakExpression(
          {
            condition: {
              field: c.expression.condition.field,
              operator: c.expression.condition.operator as ConditionOperator,
              value: c.expression.condition.value,
            },
          },
          FIELD_OPTIONS,
        )
      : undefined;
    const test = compile(expr).test;
    let amount: CompiledStreak['amount'] = () => 1;
    if (c.condition.type === 'sum') {
      const read = fieldReader(c.condition.field!, FIELD_OPTIONS);
      amount = (e) => {
        const v = read(e);
        return typeof v === 'number' && Number.isFinite(v) ? v : null;
      };
    }
    return { def, matchesType: eventTypeMatcher(c.event_types), filter: (e) => test(e), amount };
  });
}

/** The active definitions of these tenants, compiled once per version. */
export async function activeDefinitions(
  q: Queryable,
  tenants: readonly string[],
): Promise<Map<string, CompiledStreak[]>> {
  const out = new Map<string, CompiledStreak[]>();
  if (tenants.length === 0) return out;
  const r = await q.query<Row>(
    `SELECT * FROM streak_definitions WHERE tenant_id = ANY($1::text[]) AND status = 'active' ORDER BY tenant_id, id`,
    [tenants],
  );
  for (const row of r.rows) {
    const c = compileDefinition(toDef(row));
    const list = out.get(row.tenant_id) ?? [];
    list.push(c);
    out.set(row.tenant_id, list);
  }
  return out;
}

/** The active definitions among these ids (`tenant\u0000id` keys). */
export async function activeDefinitionsById(
  q: Queryable,
  ids: ReadonlyArray<{ tenant_id: string; id: string }>,
): Promise<Map<string, StreakDefinition>> {
  if (ids.length === 0) return new Map();
  const uniq = [...new Map(ids.map((x) => [`${x.tenant_id}\u0000${x.id}`, x])).values()];
  const r = await q.query<Row>(
    `SELECT d.* FROM streak_definitions d
       JOIN unnest($1::text[], $2::text[]) AS k(tenant_id, id) ON d.tenant_id = k.tenant_id AND d.id = k.id
     WHERE d.status = 'active'`,
    [uniq.map((x) => x.tenant_id), uniq.map((x) => x.id)],
  );
  return new Map(r.rows.map((x) => [`${x.tenant_id}\u0000${x.id}`, toDef(x)]));
}
