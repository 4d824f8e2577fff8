/**
 * Earning rules (SPEC.md "Earning rule"): credit a currency when a matching event arrives. Rules
 * are matched by `event_type` (exact or `*`) and `event_filter`, evaluated in descending
 * `priority` (then id), each credited independently, capped by `max_per_event` and per user by
 * `max_per_day` and `max_per_week` (days and ISO weeks starting Monday, in the tenant's time zone,
 * of the event's occurred_at). Credits are exactly once per (rule, event): the ledger row's
 * idempotency key is `earning:<rule>:<event>`.
 */
import { randomUUID } from 'node:crypto';
import type { Queryable } from '../../adapters/sql/types';
import { matchConditions, readField, validateConditions, type EventView } from '../expressions';
import { windowAt } from '../windows';
import { WalletError, type Wallet } from './wallet';

export type Calculation =
  | { type: 'fixed'; amount: number }
  | { type: 'per_unit'; points: number; per: number; field: string }
  | { type: 'percentage'; rate: number; field: string };

export interface EventFilter {
  op: 'eq' | 'ne' | 'gt' | 'gte' | 'lt' | 'lte' | 'in';
  field: string;
  value: unknown;
}

export interface EarningRule {
  rule_id: string;
  tenant_id: string;
  name: string;
  currency_id: string;
  event_type: string;
  event_filter: EventFilter | null;
  calculation: Calculation;
  max_per_event: number | null;
  max_per_day: number | null;
  max_per_week: number | null;
  priority: number;
  active: boolean;
  created_at: string;
  updated_at: string;
}

interface Row extends Omit<EarningRule, 'rule_id'> {
  id: string;
}

const num = (v: unknown) => (v === null || v === undefined ? null : Number(v));
const toRule = (r: Row): EarningRule => ({
  rule_id: r.id,
  tenant_id: r.tenant_id,
  name: r.name,
  currency_id: r.currency_id,
  event_type: r.event_type,
  event_filter: r.event_filter,
  calculation: r.calculation,
  max_per_event: num(r.max_per_event),
  max_per_day: num(r.max_per_day),
  max_per_week: num(r.max_per_week),
  priority: r.priority,
  active: r.active,
  created_at: new Date(r.created_at).toISOString(),
  updated_at: new Date(r.updated_at).toISOString(),
});

/** `amount` and other bare names are attribute paths (`attrs.amount`); standard fields stay as they are. */
export function fieldPath(field: string): string {
  return /^(attrs|subject|actor|type|user_id|event_id|occurred_at)(\.|$)/.test(field)
    ? field
    : `attrs.${field}`;
}

/** Semantic checks beyond the schema; null when valid. */
export function validateRule(r: {
  event_filter?: EventFilter | null;
  calculation: Calculation;
}): string | null {
  if (r.event_filter) {
    const err = validateConditions(
      { [fieldPath(r.event_filter.field)]: { [r.event_filter.op]: r.event_filter.value } },
      'body.event_filter',
    );
    if (err) return err;
  }
  const c = r.calculation;
  if (c.type === 'per_unit' || c.type === 'percentage') {
    const err = validateConditions({ [fieldPath(c.field)]: { gte: 0 } }, 'body.calculation.field');
    if (err) return err.replace(/\.gte must be a number/, '');
  }
  return null;
}

/** The amount a rule gives for an event before caps; null when a field is missing. */
export function ruleAmount(c: Calculation, e: EventView): number | null {
  if (c.type === 'fixed') return c.amount;
  const v = readField(e, fieldPath(c.field));
  if (typeof v !== 'number' || !Number.isFinite(v)) return null;
  if (c.type === 'per_unit') return Math.floor(v / c.per) * c.points;
  return Math.floor(v * c.rate);
}

export async function createRule(
  q: Queryable,
  tenantId: string,
  b: Omit<EarningRule, 'rule_id' | 'tenant_id' | 'created_at' | 'updated_at'>,
  now: number,
) {
  const at = new Date(now).toISOString();
  const r = await q.query<Row>(
    `INSERT INTO earning_rules (tenant_id, id, name, currency_id, event_type, event_filter, calculation, max_per_event, max_per_day, max_per_week, priority, active, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13) RETURNING *`,
    [
      tenantId,
      randomUUID(),
      b.name,
      b.currency_id,
      b.event_type,
      b.event_filter ? JSON.stringify(b.event_filter) : null,
      JSON.stringify(b.calculation),
      b.max_per_event,
      b.max_per_day,
      b.max_per_week,
      b.priority,
      b.active,
      at,
    ],
  );
  return toRule(r.rows[0]!);
}

export async function getRule(q: Queryable, tenantId: string, id: string): Promise<EarningRule | null> {
  const r = await q.query<Row>('SELECT * FROM earning_rules WHERE tenant_id = $1 AND id = $2', [
    tenantId,
    id,
  ]);
  return r.rows[0] ? toRule(r.rows[0]) : null;
}

export async function listRules(q: Queryable, tenantId: string): Promise<EarningRule[]> {
  const r = await q.query<Row>(
    'SELECT * FROM earning_rules WHERE tenant_id = $1 ORDER BY priority DESC, id',
    [tenantId],
  );
  return r.rows.map(toRule);
}

export async function updateRule(
  q: Queryable,
  tenantId: string,
  id: string,
  patch: Partial<EarningRule>,
  now: number,
) {
  const cur = await getRule(q, tenantId, id);
  if (!cur) return null;
  const next = { ...cur, ...patch };
  const r = await q.query<Row>(
    `UPDATE earning_rules SET name = $3, currency_id = $4, event_type = $5, event_filter = $6, calculation = $7, max_per_event = $8,
       max_per_day = $9, max_per_week = $10, priority = $11, active = $12, updated_at = $13
     WHERE tenant_id = $1 AND id = $2 RETURNING *`,
    [
      tenantId,
      id,
      next.name,
      next.currency_id,
      next.event_type,
      next.event_filter ? JSON.stringify(next.event_filter) : null,
      JSON.stringify(next.calculation),
      next.max_per_event,
      next.max_per_day,
      next.max_per_week,
      next.priority,
      next.active,
      new Date(now).toISOString(),
    ],
  );
  // Deleted since the read: null (the route answers 404), not a crash on the missing row.
  return r.rows[0] ? toRule(r.rows[0]) : null;
}

export async function deleteRule(q: Queryable, tenantId: string, id: string): Promise<EarningRule | null> {
  const r = await q.query<Row>('DELETE FROM earning_rules WHERE tenant_id = $1 AND id = $2 RETURNING *', [
    tenantId,
    id,
  ]);
  return r.rows[0] ? toRule(r.rows[0]) : null;
}

export interface EarningEvent {
  tenant_id: string;
  event_id: string;
  user_id: string;
  occurred_at: number;
  view: EventView;
}

/**
 * Pipeline step: applies every active rule of the events' tenants. Returns, per event, whether
 * any currency was credited.
 */
export async function applyEarningRules(
  q: Queryable,
  wallet: Wallet,
  events: EarningEvent[],
  now: number,
): Promise<boolean[]> {
  const credited = events.map(() => false);
  if (events.length === 0) return credited;
  const tenants = [...new Set(events.map((e) => e.tenant_id))];
  const r = await q.query<Row & { timezone: string }>(
    `SELECT er.*, t.timezone FROM earning_rules er JOIN tenants t ON t.id = er.tenant_id
     WHERE er.tenant_id = ANY($1::text[]) AND er.active ORDER BY er.priority DESC, er.id`,
    [tenants],
  );
  if (r.rows.length === 0) return credited;
  const byTenant = new Map<string, Array<EarningRule & { timezone: string }>>();
  for (const row of r.rows)
    byTenant.set(row.tenant_id, [
      ...(byTenant.get(row.tenant_id) ?? []),
      { ...toRule(row), timezone: row.timezone },
    ]);

  // Every (event, rule) credit in order, then the caps over the usage rows of the batch (locked
  // once), then one batched wallet call and one usage upsert: a fixed number of statements.
  const candidates: Array<{
    i: number;
    e: EarningEvent;
    rule: EarningRule;
    amount: number;
    periods: string[];
  }> = [];
  for (const [i, e] of events.entries()) {
    for (const rule of byTenant.get(e.tenant_id) ?? []) {
      if (rule.event_type !== '*' && rule.event_type !== e.view.type) continue;
      const f = rule.event_filter;
      if (f && !matchConditions({ [fieldPath(f.field)]: { [f.op]: f.value } }, e.view)) continue;
      const amount = ruleAmount(rule.calculation, e.view);
      if (amount === null || amount <= 0) continue;
      const day = windowAt({ type: 'daily', timezone: rule.timezone }, e.occurred_at).key;
      const week = windowAt(
        { type: 'weekly', timezone: rule.timezone, reset_day: 'monday' },
        e.occurred_at,
      ).key;
      candidates.push({
        i,
        e,
        rule,
        amount: rule.max_per_event !== null ? Math.min(amount, rule.max_per_event) : amount,
        periods: [`day:${day}`, `week:${week}`],
      });
    }
  }
  if (candidates.length === 0) return credited;

  const usageKey = (c: (typeof candidates)[number], period: string) =>
    [c.e.tenant_id, c.rule.rule_id, c.e.user_id, period] as const;
  const used = await lockUsage(
    q,
    candidates
      .filter((c) => c.rule.max_per_day !== null || c.rule.max_per_week !== null)
      .flatMap((c) => c.periods.map((p) => usageKey(c, p))),
  );
  const granted: Array<{ c: (typeof candidates)[number]; amount: number }> = [];
  for (const c of candidates) {
    let amount = c.amount;
    const caps = [c.rule.max_per_day, c.rule.max_per_week];
    c.periods.forEach((p, k) => {
      if (caps[k] !== null)
        amount = Math.min(amount, Math.max(0, caps[k]! - (used.get(usageKey(c, p).join('\u0000')) ?? 0)));
    });
    if (amount <= 0) continue;
    for (const p of c.periods) {
      const k = usageKey(c, p).join('\u0000');
      used.set(k, (used.get(k) ?? 0) + amount);
    }
    granted.push({ c, amount });
  }
  const results = await wallet.creditMany(
    q,
    granted.map(({ c, amount }) => ({
      tenant_id: c.e.tenant_id,
      user_id: c.e.user_id,
      currency_id: c.rule.currency_id,
      amount,
      source_type: 'earning_rule',
      source_ref: `${c.rule.rule_id}:${c.e.event_id}`,
      description: c.rule.name,
      idempotency_key: `earning:${c.rule.rule_id}:${c.e.event_id}`,
      now,
    })),
  );
  // An unknown or inactive currency skips the rule (the batch goes on); so does a replayed credit.
  const increments = new Map<string, { key: readonly string[]; amount: number }>();
  results.forEach((r, n) => {
    if (r instanceof WalletError || !r.created) return;
    const { c, amount } = granted[n]!;
    credited[c.i] = true;
    for (const p of c.periods) {
      const key = usageKey(c, p);
      const k = key.join('\u0000');
      increments.set(k, { key, amount: (increments.get(k)?.amount ?? 0) + amount });
    }
  });
  await addUsage(q, [...increments.values()]);
  return credited;
}

/** The usage of (tenant, rule, user, period) keys, their rows locked (in one order). */
async function lockUsage(q: Queryable, keys: Array<readonly string[]>): Promise<Map<string, number>> {
  if (keys.length === 0) return new Map();
  const r = await q.query<{
    tenant_id: string;
    rule_id: string;
    user_id: string;
    period: string;
    amount: number;
  }>(
    `SELECT u.tenant_id, u.rule_id, u.user_id, u.period, u.amount FROM earning_usage u
     JOIN unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS k(tenant_id, rule_id, user_id, period)
       ON u.tenant_id = k.tenant_id AND u.rule_id = k.rule_id AND u.user_id = k.user_id AND u.period = k.period
     ORDER BY u.tenant_id, u.rule_id, u.user_id, u.period FOR UPDATE OF u`,
    [0, 1, 2, 3].map((n) => keys.map((k) => k[n])),
  );
  return new Map(
    r.rows.map((u) => [[u.tenant_id, u.rule_id, u.user_id, u.period].join('\u0000'), Number(u.amount)]),
  );
}

/** Adds credited amounts to the usage rows (one row per key: keys are unique here). */
async function addUsage(
  q: Queryable,
  rows: Array<{ key: readonly string[]; amount: number }>,
): Promise<void> {
  if (rows.length === 0) return;
  const sorted = [...rows].sort((a, b) => (a.key.join('\u0000') < b.key.join('\u0000') ? -1 : 1));
  await q.query(
    `INSERT INTO earning_usage (tenant_id, rule_id, user_id, period, amount)
     SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[])
     ON CONFLICT (tenant_id, rule_id, user_id, period) DO UPDATE SET amount = earning_usage.amount + EXCLUDED.amount`,
    [...[0, 1, 2, 3].map((n) => sorted.map((r) => r.key[n])), sorted.map((r) => r.amount)],
  );
}
