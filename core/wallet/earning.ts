/**
 * Earning rules (SPEC.md "Earning rule"): credit a currency when a matching event arrives. Rules
 * are matched by `event_type` (exact or `*`) and `event_filter`, evaluated in descending
 * `priority` (then id), each credited independently, capped by `max_per_event` and per user by
 * `max_per_day` and `max_per_week` (days and ISO weeks starting Monday, in the tenant's time zone,
 * of the event's occurred_at). Credits are exactly once per (rule, event): the ledger row's
 * idempotency key is `earning:<rule>:<event>`.
 *
 * Fields: a bare name is an attribute (`amount` is `attrs.amount`), in filters and calculations
 * (core/rules `bareNames: 'attrs'`). The pipeline step is processors/pipeline/earning.ts; this
 * module holds the rules' store, their validation, and their evaluation (compiled once per rule
 * version: `EarningRules`), pure apart from the store.
 */
import { randomUUID } from 'node:crypto';
import type { Queryable } from '../../adapters/sql/types';
import { definitionTable } from '../definitions/table';
import type { EventView } from '../expressions';
import {
  compile,
  CompileCache,
  eventTypeMatcher,
  fieldReader,
  fromFilter,
  validateField,
  validateFilter,
  type FieldOptions,
} from '../rules/rules';
import { WindowLookup } from '../windows';

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

/** Earning rules read bare names as attributes: `amount` is `attrs.amount`. */
export const EARNING_FIELDS: FieldOptions = { bareNames: 'attrs' };

/** Semantic checks beyond the schema; null when valid. */
export function validateRule(r: {
  event_filter?: EventFilter | null;
  calculation: Calculation;
}): string | null {
  if (r.event_filter) {
    const err = validateFilter(r.event_filter, 'body.event_filter', EARNING_FIELDS);
    if (err) return err;
  }
  const c = r.calculation;
  if (c.type === 'per_unit' || c.type === 'percentage')
    return validateField(c.field, 'body.calculation.field', EARNING_FIELDS);
  return null;
}

/** A calculation compiled once: the amount a rule gives for an event before caps; null when a field is missing. */
export function compileCalculation(c: Calculation): (e: EventView) => number | null {
  if (c.type === 'fixed') {
    const amount = c.amount;
    return () => amount;
  }
  const read = fieldReader(c.field, EARNING_FIELDS);
  const unit = (e: EventView) => {
    const v = read(e);
    return typeof v !== 'number' || !Number.isFinite(v) ? null : v;
  };
  if (c.type === 'per_unit') {
    const { per, points } = c;
    return (e) => {
      const v = unit(e);
      return v === null ? null : Math.floor(v / per) * points;
    };
  }
  const rate = c.rate;
  return (e) => {
    const v = unit(e);
    return v === null ? null : Math.floor(v * rate);
  };
}

/** The amount a rule gives for an event before caps; null when a field is missing. */
export function ruleAmount(c: Calculation, e: EventView): number | null {
  return compileCalculation(c)(e);
}

/**
 * Earning rules one tenant may hold, active or not. An event is credited once per rule it matches,
 * each credit with an idempotency key the wallet locks until the batch's commit, in a lock table
 * every session of the store shares (about 12,000 locks on a default Postgres): without a bound, a
 * tenant's thousands of rules on one event type made a single event need more locks than exist,
 * and the pipeline retried it forever, holding up every tenant of its partition
 * (processors/framework.ts `isTooLarge`).
 */
export const MAX_EARNING_RULES = 100;

/** A create refused because the tenant holds MAX_EARNING_RULES rules already. */
export class RuleLimitError extends Error {
  constructor() {
    super(
      `A tenant holds at most ${MAX_EARNING_RULES} earning rules; delete one (or change an existing one) first`,
    );
  }
}

/**
 * Creates a rule, or throws RuleLimitError. Give it a transaction: it locks the tenant's row, so
 * that concurrent creates are counted one after the other.
 */
export async function createRule(
  q: Queryable,
  tenantId: string,
  b: Omit<EarningRule, 'rule_id' | 'tenant_id' | 'created_at' | 'updated_at'>,
  now: number,
) {
  await q.query('SELECT id FROM tenants WHERE id = $1 FOR UPDATE', [tenantId]);
  const held = await q.query<{ n: string | number }>(
    'SELECT count(*) AS n FROM earning_rules WHERE tenant_id = $1',
    [tenantId],
  );
  if (Number(held.rows[0]!.n) >= MAX_EARNING_RULES) throw new RuleLimitError();
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

/** The earning rules table, listed by priority (highest first). */
const rules = definitionTable<Row, EarningRule>({
  table: 'earning_rules',
  columns: [
    'name',
    'currency_id',
    'event_type',
    'event_filter',
    'calculation',
    'max_per_event',
    'max_per_day',
    'max_per_week',
    'priority',
    'active',
  ],
  json: ['event_filter', 'calculation'],
  order: 'priority DESC, id',
  toView: toRule,
});

export async function getRule(q: Queryable, tenantId: string, id: string): Promise<EarningRule | null> {
  return rules.get(q, tenantId, id);
}

export async function listRules(q: Queryable, tenantId: string): Promise<EarningRule[]> {
  return rules.list(q, tenantId);
}

/** Replaces the fields given (null clears a nullable one); null when the rule does not exist. */
export async function updateRule(
  q: Queryable,
  tenantId: string,
  id: string,
  patch: Partial<Omit<EarningRule, 'rule_id' | 'tenant_id' | 'created_at' | 'updated_at'>>,
  now: number,
) {
  return rules.patch(q, tenantId, id, patch, now);
}

export async function deleteRule(q: Queryable, tenantId: string, id: string): Promise<EarningRule | null> {
  return rules.remove(q, tenantId, id);
}

export interface EarningEvent {
  tenant_id: string;
  event_id: string;
  user_id: string;
  occurred_at: number;
  view: EventView;
}

/** An active rule as the pipeline applies it: the row's fields, and its match and amount compiled. */
export interface ActiveRule {
  rule_id: string;
  tenant_id: string;
  name: string;
  currency_id: string;
  max_per_event: number | null;
  max_per_day: number | null;
  max_per_week: number | null;
  priority: number;
  /** Event type (exact or `*`) and filter. */
  matches(e: EventView): boolean;
  /** The amount before caps; null when a field is missing. */
  amount(e: EventView): number | null;
}

type Compiled = Pick<ActiveRule, 'matches' | 'amount'>;

/** Compiles what a rule evaluates (event type, filter, calculation) into its match and amount. */
export function compileRule(r: Pick<EarningRule, 'event_type' | 'event_filter' | 'calculation'>): Compiled {
  const type = eventTypeMatcher(r.event_type);
  const filter = r.event_filter ? compile(fromFilter(r.event_filter, EARNING_FIELDS)).test : () => true;
  return { matches: (e) => type(e.type) && filter(e), amount: compileCalculation(r.calculation) };
}

/**
 * The active rules of some tenants, read once per batch and compiled once per rule version: the
 * compiled part is cached by what it is compiled from (event type, filter and calculation as
 * stored), so an edit compiles the new version and an unchanged rule is never compiled again.
 */
export class EarningRules {
  private readonly compiled = new CompileCache<Compiled>();

  /** Active rules by tenant, each tenant's in descending priority, then id. */
  async load(q: Queryable, tenants: readonly string[]): Promise<Map<string, ActiveRule[]>> {
    const byTenant = new Map<string, ActiveRule[]>();
    if (tenants.length === 0) return byTenant;
    const r = await q.query<{
      id: string;
      tenant_id: string;
      name: string;
      currency_id: string;
      event_type: string;
      event_filter: string | null;
      calculation: string;
      max_per_event: unknown;
      max_per_day: unknown;
      max_per_week: unknown;
      priority: number;
    }>(
      `SELECT id, tenant_id, name, currency_id, event_type, event_filter::text AS event_filter,
              calculation::text AS calculation, max_per_event, max_per_day, max_per_week, priority
       FROM earning_rules WHERE tenant_id = ANY($1::text[]) AND active ORDER BY priority DESC, id`,
      [tenants],
    );
    for (const row of r.rows) {
      const c = this.compiled.get(
        `${row.event_type}\u0000${row.event_filter ?? ''}\u0000${row.calculation}`,
        () =>
          compileRule({
            event_type: row.event_type,
            event_filter: row.event_filter === null ? null : (JSON.parse(row.event_filter) as EventFilter),
            calculation: JSON.parse(row.calculation) as Calculation,
          }),
      );
      const rule: ActiveRule = {
        rule_id: row.id,
        tenant_id: row.tenant_id,
        name: row.name,
        currency_id: row.currency_id,
        max_per_event: num(row.max_per_event),
        max_per_day: num(row.max_per_day),
        max_per_week: num(row.max_per_week),
        priority: row.priority,
        matches: c.matches,
        amount: c.amount,
      };
      const rules = byTenant.get(row.tenant_id);
      if (rules) rules.push(rule);
      else byTenant.set(row.tenant_id, [rule]);
    }
    return byTenant;
  }
}

/** One (event, rule) credit before the caps of the periods. */
export interface Candidate {
  /** The event's position in the list given to `earningCandidates`. */
  i: number;
  e: EarningEvent;
  rule: ActiveRule;
  /** The amount after `max_per_event`. */
  amount: number;
  /** `day:<key>` and `week:<key>` in the tenant's time zone, of the event's occurred_at. */
  periods: [string, string];
}

/** The cap periods' window lookups of a time zone (daily, and weekly from monday), kept per process. */
const capLookups = new Map<string, { day: WindowLookup; week: WindowLookup }>();
function capWindows(timezone: string): { day: WindowLookup; week: WindowLookup } {
  let l = capLookups.get(timezone);
  if (!l) {
    if (capLookups.size >= 1000) capLookups.clear();
    l = {
      day: new WindowLookup({ type: 'daily', timezone }),
      week: new WindowLookup({ type: 'weekly', timezone, reset_day: 'monday' }),
    };
    capLookups.set(timezone, l);
  }
  return l;
}

/**
 * Every (event, rule) credit in order: events in order, each tenant's rules by priority. A rule is
 * skipped when it does not match or gives no positive amount, and so is every rule of a tenant
 * without a time zone (no tenant row).
 */
export function earningCandidates(
  events: readonly EarningEvent[],
  rules: ReadonlyMap<string, readonly ActiveRule[]>,
  timezones: ReadonlyMap<string, string>,
): Candidate[] {
  const out: Candidate[] = [];
  for (const [i, e] of events.entries()) {
    const tenantRules = rules.get(e.tenant_id);
    const timezone = timezones.get(e.tenant_id);
    if (!tenantRules || timezone === undefined) continue;
    let periods: [string, string] | undefined;
    for (const rule of tenantRules) {
      if (!rule.matches(e.view)) continue;
      const amount = rule.amount(e.view);
      if (amount === null || amount <= 0) continue;
      periods ??= [
        `day:${capWindows(timezone).day.at(e.occurred_at).key}`,
        `week:${capWindows(timezone).week.at(e.occurred_at).key}`,
      ];
      out.push({
        i,
        e,
        rule,
        amount: rule.max_per_event !== null ? Math.min(amount, rule.max_per_event) : amount,
        periods,
      });
    }
  }
  return out;
}

/** A cap-usage row: the amount credited per (tenant, rule, user, period). */
export interface Usage {
  tenant_id: string;
  rule_id: string;
  user_id: string;
  period: string;
  amount: number;
}

/** The usage key of a candidate in one of its periods. */
export function usageKey(c: Candidate, period: string): Omit<Usage, 'amount'> {
  return { tenant_id: c.e.tenant_id, rule_id: c.rule.rule_id, user_id: c.e.user_id, period };
}

/** The usage keys the caps of these candidates read (rules with a day or week cap). */
export function cappedKeys(candidates: readonly Candidate[]): Array<Omit<Usage, 'amount'>> {
  return candidates
    .filter((c) => c.rule.max_per_day !== null || c.rule.max_per_week !== null)
    .flatMap((c) => c.periods.map((p) => usageKey(c, p)));
}

/**
 * Applies the day and week caps in candidate order: `used` (usage by `id(key)`, as stored) grows
 * with each credit. Returns the credits that remain (a positive amount).
 */
export function applyCaps(
  candidates: readonly Candidate[],
  used: Map<string, number>,
  id: (k: Omit<Usage, 'amount'>) => string,
): Array<{ c: Candidate; amount: number }> {
  const granted: Array<{ c: Candidate; amount: number }> = [];
  for (const c of candidates) {
    let amount = c.amount;
    const caps = [c.rule.max_per_day, c.rule.max_per_week];
    c.periods.forEach((p, k) => {
      if (caps[k] !== null)
        amount = Math.min(amount, Math.max(0, caps[k]! - (used.get(id(usageKey(c, p))) ?? 0)));
    });
    if (amount <= 0) continue;
    for (const p of c.periods) {
      const k = id(usageKey(c, p));
      used.set(k, (used.get(k) ?? 0) + amount);
    }
    granted.push({ c, amount });
  }
  return granted;
}
