/**
 * Spin wheels (SPEC.md "Spin wheel"): definitions, the checks of what a config names (reward
 * items, the theme, the cost's currency) and the store. The draw is ./draw.ts, a spin ./spin.ts,
 * themes ./themes.ts. docs/wheels.md has the design.
 */
import type { Queryable } from '../../adapters/sql/types';
import { definitionTable } from '../definitions/table';
import type { Random } from '../random';
import { lockItemRefs } from '../rewards/references';
import type { Wallet } from '../wallet/wallet';
import {
  DEFAULT_TEMPLATE,
  getTheme,
  getThemes,
  resolveTheme,
  type ResolvedTheme,
  type ThemeOverrides,
} from './themes';

export type FrequencyType = 'unlimited' | 'daily_limit' | 'total_limit' | 'cooldown';

export interface Segment {
  /** A reward item of the tenant, or null for a no-win segment. */
  reward_id: string | null;
  /** A relative weight (positive, finite). */
  probability: number;
  label?: string;
}

export interface WheelConfig {
  segments: Segment[];
  /** `value`: spins per UTC day, spins ever, or hours between spins; null for unlimited. */
  frequency: { type: FrequencyType; value?: number | null };
  starts_at?: string | null;
  ends_at?: string | null;
  theme_id?: string | null;
  theme_overrides?: ThemeOverrides | null;
  /** What one spin costs, debited from the user's wallet; null or absent: free. */
  cost?: { currency_id: string; amount: number } | null;
}

/** A config as a request gives it: `frequency` may be left out (unlimited). */
export type WheelConfigInput = Omit<WheelConfig, 'frequency'> & { frequency?: WheelConfig['frequency'] };

export interface Wheel {
  id: string;
  tenant_id: string;
  name: string;
  description: string | null;
  config: WheelConfig;
  active: boolean;
  created_at: string;
  updated_at: string;
}

export type WheelView = Wheel & { resolved_theme: ResolvedTheme };

interface Row {
  tenant_id: string;
  id: string;
  name: string;
  description: string | null;
  config: WheelConfig;
  active: boolean;
  created_at: string | Date;
  updated_at: string | Date;
}

export const toWheel = (r: Row): Wheel => ({
  id: r.id,
  tenant_id: r.tenant_id,
  name: r.name,
  description: r.description,
  config: r.config,
  active: r.active,
  created_at: new Date(r.created_at).toISOString(),
  updated_at: new Date(r.updated_at).toISOString(),
});

/** Hours of a cooldown, spins of a limit: at most this. */
export const MAX_FREQUENCY_VALUE = 1_000_000;

/**
 * The config as stored: frequency defaulted to unlimited (its value dropped), timestamps in one
 * form (ISO 8601 UTC), absent optional fields as null. Null when it breaks a rule the schema cannot
 * state, with the message naming the field.
 */
export function normalizeConfig(
  c: WheelConfigInput,
  at = 'body.config',
): { ok: true; config: WheelConfig } | { ok: false; error: string } {
  const fail = (error: string) => ({ ok: false as const, error });
  if (c.segments.length < 2) return fail(`${at}.segments must have at least 2 segments`);
  let total = 0;
  for (const [i, s] of c.segments.entries()) {
    if (!(s.probability > 0) || !Number.isFinite(s.probability))
      return fail(`${at}.segments[${i}].probability must be a positive finite number`);
    total += s.probability;
  }
  if (!Number.isFinite(total)) return fail(`${at}.segments: the sum of the probabilities must be finite`);
  const f = c.frequency ?? { type: 'unlimited' };
  let frequency: WheelConfig['frequency'];
  if (f.type === 'unlimited') frequency = { type: 'unlimited', value: null };
  else {
    if (f.value === undefined || f.value === null)
      return fail(`${at}.frequency.value is required for ${f.type}`);
    if (!Number.isSafeInteger(f.value) || f.value < 1 || f.value > MAX_FREQUENCY_VALUE)
      return fail(`${at}.frequency.value must be a positive integer up to ${MAX_FREQUENCY_VALUE}`);
    frequency = { type: f.type, value: f.value };
  }
  const time = (v: string | null | undefined, field: string): string | null | Error => {
    if (v === undefined || v === null) return null;
    const t = Date.parse(v);
    return Number.isFinite(t) ? new Date(t).toISOString() : new Error(`${at}.${field} must be a timestamp`);
  };
  const starts = time(c.starts_at, 'starts_at');
  if (starts instanceof Error) return fail(starts.message);
  const ends = time(c.ends_at, 'ends_at');
  if (ends instanceof Error) return fail(ends.message);
  if (starts && ends && Date.parse(starts) >= Date.parse(ends))
    return fail(`${at}.starts_at must be before ${at}.ends_at`);
  for (const k of Object.keys(c.theme_overrides?.segment_overrides ?? {})) {
    if (Number(k) >= c.segments.length)
      return fail(
        `${at}.theme_overrides.segment_overrides[${k}]: the wheel has no segment ${k} (it has ${c.segments.length})`,
      );
  }
  return {
    ok: true,
    config: {
      segments: c.segments.map((s) => ({
        reward_id: s.reward_id ?? null,
        probability: s.probability,
        ...(s.label === undefined ? {} : { label: s.label }),
      })),
      frequency,
      starts_at: starts,
      ends_at: ends,
      theme_id: c.theme_id ?? null,
      theme_overrides: c.theme_overrides ?? null,
      cost: c.cost ?? null,
    },
  };
}

/**
 * Checks what a config names, in the caller's transaction: the reward items exist (and are locked
 * against deletion until it commits; the foreign keys of wheel_items hold after), the theme
 * exists and is active, the cost's currency exists, is active and spendable. Null when all hold,
 * else the problem naming the field.
 */
export async function checkReferences(
  q: Queryable,
  wallet: Wallet,
  tenantId: string,
  c: WheelConfig,
  at = 'body.config',
): Promise<string | null> {
  const ids = c.segments.map((s) => s.reward_id).filter((x): x is string => x !== null);
  const found = await lockItemRefs(q, tenantId, ids);
  for (const [i, s] of c.segments.entries()) {
    if (s.reward_id !== null && !found.has(s.reward_id))
      return `${at}.segments[${i}].reward_id: reward item ${s.reward_id} does not exist`;
  }
  if (c.theme_id) {
    const t = await getTheme(q, tenantId, c.theme_id);
    if (!t) return `${at}.theme_id: theme ${c.theme_id} does not exist`;
    if (t.status !== 'active') return `${at}.theme_id: theme ${c.theme_id} is archived`;
  }
  if (c.cost) {
    const cur = await wallet.currency(q, tenantId, c.cost.currency_id);
    if (!cur) return `${at}.cost.currency_id: currency ${c.cost.currency_id} does not exist`;
    if (!cur.active) return `${at}.cost.currency_id: currency ${c.cost.currency_id} is not active`;
    if (!cur.is_spendable)
      return `${at}.cost.currency_id: currency ${c.cost.currency_id} is accumulate-only (is_spendable: false) and cannot be spent`;
  }
  return null;
}

/** Keeps wheel_items in step with the config's reward ids. */
async function syncItems(q: Queryable, tenantId: string, wheelId: string, c: WheelConfig): Promise<void> {
  const ids = [...new Set(c.segments.map((s) => s.reward_id).filter((x): x is string => x !== null))];
  await q.query(
    'DELETE FROM wheel_items WHERE tenant_id = $1 AND wheel_id = $2 AND NOT (item_id = ANY($3::text[]))',
    [tenantId, wheelId, ids],
  );
  if (ids.length)
    await q.query(
      `INSERT INTO wheel_items (tenant_id, wheel_id, item_id) SELECT $1, $2, x FROM unnest($3::text[]) AS x
       ON CONFLICT DO NOTHING`,
      [tenantId, wheelId, ids],
    );
}

export async function createWheel(
  q: Queryable,
  random: Random,
  tenantId: string,
  b: { name: string; description?: string | null; config: WheelConfig; active?: boolean },
  now: number,
): Promise<Wheel> {
  const at = new Date(now).toISOString();
  const r = await q.query<Row>(
    `INSERT INTO wheels (tenant_id, id, name, description, config, active, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $7) RETURNING *`,
    [tenantId, random.uuid(), b.name, b.description ?? null, JSON.stringify(b.config), b.active ?? true, at],
  );
  const w = toWheel(r.rows[0]!);
  await syncItems(q, tenantId, w.id, w.config);
  return w;
}

/** The wheel locked for update (an update reads, merges and writes its config). */
/** The wheels table; `items` (what a wheel can pay) are kept beside it by this module. */
const wheels = definitionTable<Row, Wheel>({
  table: 'wheels',
  columns: ['name', 'description', 'config', 'active'],
  json: ['config'],
  toView: toWheel,
});

/** The wheel, optionally locked for update (an update reads, merges and writes its config). */
export async function getWheel(
  q: Queryable,
  tenantId: string,
  id: string,
  lock = false,
): Promise<Wheel | null> {
  return wheels.get(q, tenantId, id, { lock });
}

export async function updateWheel(
  q: Queryable,
  tenantId: string,
  id: string,
  p: { name?: string; description?: string | null; config?: WheelConfig; active?: boolean },
  now: number,
): Promise<Wheel | null> {
  const w = await wheels.patch(q, tenantId, id, p, now);
  if (w && p.config) await syncItems(q, tenantId, id, w.config);
  return w;
}

export async function listWheels(
  q: Queryable,
  tenantId: string,
  f: { active?: boolean; limit: number; offset: number },
): Promise<{ wheels: Wheel[]; total: number }> {
  const { items, total } = await wheels.page(q, tenantId, {
    filters: { active: f.active },
    limit: f.limit,
    offset: f.offset,
  });
  return { wheels: items, total };
}

/** Where a wheel stands at `now`: available, or why not. */
export function availability(w: Wheel, now: number): 'available' | 'not_active' | 'not_started' | 'ended' {
  if (!w.active) return 'not_active';
  if (w.config.starts_at && now < Date.parse(w.config.starts_at)) return 'not_started';
  if (w.config.ends_at && now >= Date.parse(w.config.ends_at)) return 'ended';
  return 'available';
}

/** The tenant's wheels a user can spin at `now`: active and inside their availability range. */
export async function availableWheels(q: Queryable, tenantId: string, now: number): Promise<Wheel[]> {
  const r = await q.query<Row>(
    'SELECT * FROM wheels WHERE tenant_id = $1 AND active ORDER BY created_at, id',
    [tenantId],
  );
  return r.rows.map(toWheel).filter((w) => availability(w, now) === 'available');
}

/** Wheels with their resolved themes (one read of the themes they name). */
export async function withThemes(q: Queryable, tenantId: string, wheels: Wheel[]): Promise<WheelView[]> {
  const themes = await getThemes(
    q,
    tenantId,
    wheels.map((w) => w.config.theme_id).filter((x): x is string => Boolean(x)),
  );
  return wheels.map((w) => ({
    ...w,
    resolved_theme: resolveTheme(
      (w.config.theme_id && themes.get(w.config.theme_id)) || DEFAULT_TEMPLATE,
      w.config.theme_overrides,
      w.config.segments.length,
    ),
  }));
}
