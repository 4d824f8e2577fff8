/**
 * The events of the bench and the definitions that score them.
 *
 * Mix (issue 7 "mixed types"): 70% match_finished {mode, kills, assists, region, variant},
 * 20% login {}, 10% purchase {amount, variant}. Users u000000000000.. (12 digits, so that
 * redis-benchmark's __rand_int__ can name them). A seeded PRNG makes every run and its baseline
 * see the same events.
 *
 * The standard deployment (pipeline workload): 3 leaderboards and 2 earning rules per tenant:
 *   kills    weekly, ranked matches, attrs.kills * 10 + max(attrs.assists, 0), sum
 *   matches  all time, every match_finished, count
 *   spend    monthly, purchases, attrs.amount, sum
 *   rule 1   purchase: 1 coin per unit of attrs.amount
 *   rule 2   login: 10 coins, at most 10 per day (a daily login bonus)
 * There is no streak feature yet, so no streak-like counter (issue 7 says "where available").
 *
 * The scaling deployment: K leaderboards and K earning rules per tenant, each event matching
 * exactly one board (attrs.variant) and purchases exactly one rule, so that the work per event
 * stays the same and only the number of active definitions grows.
 */
import type { EventRecord } from '../../schemas/topics';
import { prng } from './util';

export interface BenchEvent {
  tenant: string;
  event_id: string;
  type: 'match_finished' | 'login' | 'purchase';
  user: string;
  occurred_at: number;
  attrs: Record<string, unknown>;
}

export const userId = (i: number) => `u${String(i).padStart(12, '0')}`;

export interface GenOptions {
  tenants: string[];
  users: number;
  seed: number;
  /** Prefix of event ids (unique per run). */
  idPrefix: string;
  /** attrs.variant in [0, variants): which scaling board an event scores on. */
  variants?: number;
  /** occurred_at of every event (ms); default now - 1 s. */
  at?: number;
}

export function generate(n: number, o: GenOptions): BenchEvent[] {
  const rnd = prng(o.seed);
  const at = o.at ?? Date.now() - 1000;
  const variants = o.variants ?? 1;
  const out: BenchEvent[] = [];
  for (let i = 0; i < n; i++) {
    const r = rnd();
    // Users belong to one tenant each: 10,000 users in all, spread over the tenants.
    const ui = Math.floor(rnd() * o.users);
    const tenant = o.tenants[ui % o.tenants.length]!;
    const user = userId(ui);
    const variant = Math.floor(rnd() * variants);
    let type: BenchEvent['type'];
    let attrs: Record<string, unknown>;
    if (r < 0.7) {
      type = 'match_finished';
      attrs = {
        mode: rnd() < 0.8 ? 'ranked' : 'casual',
        kills: Math.floor(rnd() * 21),
        assists: Math.floor(rnd() * 11),
        region: ['eu', 'us', 'asia'][Math.floor(rnd() * 3)],
        variant,
      };
    } else if (r < 0.9) {
      type = 'login';
      attrs = {};
    } else {
      type = 'purchase';
      attrs = { amount: 1 + Math.floor(rnd() * 100), variant };
    }
    out.push({ tenant, event_id: `${o.idPrefix}-${i}`, type, user, occurred_at: at, attrs });
  }
  return out;
}

/** The JSON of one event as a client sends it. */
export function eventJson(e: BenchEvent, eventId = e.event_id): string {
  return JSON.stringify({
    event_id: eventId,
    type: e.type,
    actor: { user_id: e.user },
    occurred_at: new Date(e.occurred_at).toISOString(),
    attrs: e.attrs,
  });
}

/** The record the ingestion gateway appends for an event. */
export function eventRecord(e: BenchEvent, receivedAt = Date.now()): EventRecord {
  return {
    tenant_id: e.tenant,
    event_id: e.event_id,
    type: e.type,
    user_id: e.user,
    occurred_at: e.occurred_at,
    received_at: receivedAt,
    attrs_json: JSON.stringify(e.attrs),
    actor_metadata_json: null,
    subject_json: null,
  };
}

export const CURRENCY = 'coins';

export function standardBoards(): object[] {
  return [
    {
      leaderboard_id: 'kills',
      name: 'Weekly kills',
      config: {
        timeframe: { type: 'weekly', timezone: 'UTC', reset_day: 'monday', reset_time: '00:00' },
        scoring: {
          rules: [
            {
              event_type: 'match_finished',
              conditions: { 'attrs.mode': { eq: 'ranked' } },
              points_expression: 'attrs.kills * 10 + max(attrs.assists, 0)',
            },
          ],
          aggregation: 'sum',
        },
      },
    },
    {
      leaderboard_id: 'matches',
      name: 'Matches played',
      config: {
        timeframe: { type: 'all_time' },
        scoring: { rules: [{ event_type: 'match_finished' }], aggregation: 'count' },
      },
    },
    {
      leaderboard_id: 'spend',
      name: 'Monthly spend',
      config: {
        timeframe: { type: 'monthly', timezone: 'UTC' },
        scoring: {
          rules: [{ event_type: 'purchase', points_expression: 'attrs.amount' }],
          aggregation: 'sum',
        },
      },
    },
  ];
}

export function standardRules(): object[] {
  return [
    {
      name: 'coins per purchase',
      currency_id: CURRENCY,
      event_type: 'purchase',
      calculation: { type: 'per_unit', points: 1, per: 1, field: 'amount' },
    },
    {
      name: 'daily login bonus',
      currency_id: CURRENCY,
      event_type: 'login',
      calculation: { type: 'fixed', amount: 10 },
      max_per_day: 10,
    },
  ];
}

/** K boards and K rules; board i scores match_finished with attrs.variant = i, rule i purchases with it. */
export function scalingBoards(k: number): object[] {
  return Array.from({ length: k }, (_, i) => ({
    leaderboard_id: `b${i}`,
    name: `Board ${i}`,
    config: {
      timeframe: { type: 'all_time' },
      scoring: {
        rules: [
          {
            event_type: 'match_finished',
            conditions: { 'attrs.variant': { eq: i } },
            points_expression: 'attrs.kills * 10 + max(attrs.assists, 0)',
          },
        ],
        aggregation: 'sum',
      },
    },
  }));
}

export function scalingRules(k: number): object[] {
  return Array.from({ length: k }, (_, i) => ({
    name: `rule ${i}`,
    currency_id: CURRENCY,
    event_type: 'purchase',
    event_filter: { op: 'eq', field: 'variant', value: i },
    calculation: { type: 'per_unit', points: 1, per: 1, field: 'amount' },
  }));
}

/** One score increment: the board's window `${tenant}:${board}:${window}` and the user. */
export interface ScoreEffect {
  /** Index of the event in the list given to `expectedEffects`. */
  event: number;
  tenant: string;
  board: string;
  window: string;
  user: string;
  points: number;
}

/** One credit of an earning rule (a ledger row, a balance change and its cap usage). */
export interface CreditEffect {
  event: number;
  tenant: string;
  user: string;
  amount: number;
  rule: string;
  ref: string;
}

/**
 * What the pipeline does to the rank index and the ledger for these events, for the baselines:
 * score increments per (board window, user) in event order, and one credit per ledger row.
 * Mirrors the standard or the scaling definitions (no caps other than the daily login bonus).
 */
export function expectedEffects(
  events: BenchEvent[],
  shape: { kind: 'standard' } | { kind: 'scaling'; k: number },
  windowKeys: { weekly: string; monthly: string },
): { zincr: ScoreEffect[]; ledger: CreditEffect[] } {
  const zincr: ScoreEffect[] = [];
  const ledger: CreditEffect[] = [];
  const loginSeen = new Set<string>();
  events.forEach((e, event) => {
    const a = e.attrs as {
      mode?: string;
      kills?: number;
      assists?: number;
      amount?: number;
      variant?: number;
    };
    const score = (board: string, window: string, points: number) =>
      zincr.push({ event, tenant: e.tenant, board, window, user: e.user, points });
    const credit = (rule: string, amount: number) =>
      ledger.push({ event, tenant: e.tenant, user: e.user, amount, rule, ref: e.event_id });
    if (shape.kind === 'standard') {
      if (e.type === 'match_finished') {
        if (a.mode === 'ranked') score('kills', windowKeys.weekly, a.kills! * 10 + Math.max(a.assists!, 0));
        score('matches', 'all_time', 1);
      } else if (e.type === 'purchase') {
        score('spend', windowKeys.monthly, a.amount!);
        credit('purchase', a.amount!);
      } else {
        const k = `${e.tenant}\u0000${e.user}`;
        if (!loginSeen.has(k)) {
          loginSeen.add(k);
          credit('login', 10);
        }
      }
    } else {
      if (e.type === 'match_finished')
        score(`b${a.variant}`, 'all_time', a.kills! * 10 + Math.max(a.assists!, 0));
      else if (e.type === 'purchase') credit(`r${a.variant}`, a.amount!);
    }
  });
  return { zincr, ledger };
}

/**
 * wrk templates' bodies: `count` bulk bodies of `batch` events, each of one tenant, with
 * `@@ID@@` in every event id (wrk puts its request counter there), and the tenant of each.
 */
export function bulkBodies(
  events: BenchEvent[],
  count: number,
  batch: number,
  tag: string,
): Array<{ tenant: string; body: string }> {
  const byTenant = new Map<string, BenchEvent[]>();
  for (const e of events) byTenant.set(e.tenant, [...(byTenant.get(e.tenant) ?? []), e]);
  const tenants = [...byTenant.keys()];
  const out: Array<{ tenant: string; body: string }> = [];
  for (let i = 0; i < count; i++) {
    const tenant = tenants[i % tenants.length]!;
    const evs = byTenant.get(tenant)!;
    const parts: string[] = [];
    for (let j = 0; j < batch; j++) {
      const e = evs[(Math.floor(i / tenants.length) * batch + j) % evs.length]!;
      parts.push(eventJson(e, `${tag}-@@ID@@-${j}`));
    }
    out.push({ tenant, body: batch === 1 ? parts[0]! : `{"events":[${parts.join(',')}]}` });
  }
  return out;
}
