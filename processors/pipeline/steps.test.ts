/**
 * Today's two steps under the step contract, on a real store (PGlite): leaderboard scoring and
 * earning rules loaded once per batch and compiled once per definition version, applied to a
 * batch with its views, time zones and `now`, reporting one effect per event. The wallet is a
 * stand-in that records the credits (the real one is covered by tests/scenario/wallet.test.ts).
 */
import type { Sql } from '../../adapters/sql/types';
import * as definition from '../../core/leaderboards/definition';
import { eventView } from '../../core/leaderboards/definition';
import { createBoard } from '../../core/leaderboards/store';
import { createRule, EarningRules, updateRule } from '../../core/wallet/earning';
import type { Movement, MovementResult, PreparedMoves } from '../../core/wallet/wallet';
import type { EventRecord } from '../../schemas/topics';
import { openTestPglite } from '../../tests/support/stack';
import { EarningStep } from './earning';
import { ScoringStep } from './scoring';
import { runSteps, type StepBatch } from './step';

const DAY = 86_400_000;
const T0 = Date.parse('2026-11-20T10:00:00Z');

function batchOf(
  events: Array<Partial<EventRecord> & { attrs?: Record<string, unknown> }>,
  tz = 'UTC',
): StepBatch {
  const evs = events.map(({ attrs, ...e }, index) => {
    const event: EventRecord = {
      tenant_id: 'acme',
      event_id: `e${index}`,
      type: 'match',
      user_id: 'u1',
      occurred_at: T0,
      received_at: T0,
      attrs_json: JSON.stringify(attrs ?? {}),
      actor_metadata_json: null,
      subject_json: null,
      ...e,
    };
    return {
      index,
      record: {
        topic: 'ludus.events',
        partition: 0,
        offset: index,
        key: `acme:${event.user_id}`,
        value: event,
        timestamp: 0,
      },
      event,
      view: eventView(event),
    };
  });
  return {
    parts: [{ partition: 0, firstOffset: 0, nextOffset: evs.length }],
    events: evs,
    replayed: [],
    tenants: ['acme'],
    timezones: new Map([['acme', tz]]),
    now: T0 + 60_000,
  };
}

/** Records credits; every one is new. */
function fakeWallet() {
  const credits: Movement[] = [];
  const prepared: Array<string | null | undefined> = [];
  return {
    credits,
    prepared,
    prepareCredits(_q: unknown, ms: ReadonlyArray<Pick<Movement, 'idempotency_key'>>) {
      prepared.push(...ms.map((m) => m.idempotency_key));
      const none: PreparedMoves['reads'] = Promise.resolve([new Map(), new Map()]);
      return { keys: new Set<string>(), currencies: new Set<string>(), reads: none };
    },
    async creditMany(_q: unknown, ms: Movement[]): Promise<MovementResult[]> {
      credits.push(...ms);
      return ms.map((m) => ({
        transaction_id: m.idempotency_key!,
        amount: m.amount,
        balance_after: 0,
        created: true,
      }));
    },
  };
}

describe('pipeline steps on today’s features [PGlite]', () => {
  let sql: Sql;
  beforeAll(async () => {
    sql = await openTestPglite();
    await sql.query(
      `INSERT INTO tenants (id, name, jwt_secret_enc, hmac_secret_enc, created_at, updated_at) VALUES ('acme', 'acme', 'x', 'x', now(), now())`,
    );
    await createBoard(
      sql,
      {
        tenant_id: 'acme',
        leaderboard_id: 'kills',
        name: 'kills',
        description: null,
        reward_config_id: null,
        config: {
          timeframe: { type: 'daily', timezone: 'UTC' },
          scoring: {
            rules: [
              {
                event_type: 'match',
                conditions: { 'attrs.mode': { eq: 'ranked' } },
                points_expression: 'attrs.kills',
              },
            ],
            aggregation: 'sum',
          },
          scope: { filters: [{ field: 'attrs.kills', op: 'lt', value: 100 }] },
        },
      },
      T0,
    );
  });
  afterAll(() => sql.close());

  it('scoring: loads the boards once, compiles each version once, applies and reports per event', async () => {
    const spy = jest.spyOn(definition, 'compileScorer');
    const step = new ScoringStep();
    const batch = batchOf([
      { attrs: { mode: 'ranked', kills: 3 } },
      { attrs: { mode: 'casual', kills: 5 } }, // condition fails
      { attrs: { mode: 'ranked', kills: 400 } }, // scope filter fails
      { attrs: { mode: 'ranked', kills: 2 }, user_id: 'u2' },
      { attrs: { mode: 'ranked', kills: 9 }, occurred_at: T0 - 2 * DAY }, // window closed (grace 60 s)
    ]);
    const r = await sql.tx((q) => runSteps(q, [step], batch));
    expect(r.outcomes.map((o) => o.kind)).toEqual(['ok', 'skip', 'skip', 'ok', 'skip']);
    expect(r.outcomes[4]).toEqual({ kind: 'skip', reason: 'late: the window has closed' });
    expect(r.outcomes[1]).toEqual({ kind: 'skip', reason: 'no matching rule' });
    const scores = await sql.query<{ user_id: string; score: number }>(
      'SELECT user_id, score FROM leaderboard_scores ORDER BY user_id',
    );
    expect(scores.rows.map((s) => [s.user_id, Number(s.score)])).toEqual([
      ['u1', 3],
      ['u2', 2],
    ]);
    // A second batch: the same board version is not compiled again, and scores add up.
    await sql.tx((q) => runSteps(q, [step], batchOf([{ attrs: { mode: 'ranked', kills: 10 } }])));
    expect(spy).toHaveBeenCalledTimes(1);
    const u1 = await sql.query<{ score: number }>(
      "SELECT score FROM leaderboard_scores WHERE user_id = 'u1'",
    );
    expect(Number(u1.rows[0]!.score)).toBe(13);
    spy.mockRestore();
  });

  it('scoring: windows that exist are read, missing ones created, a window closed in SQL refuses its events', async () => {
    const step = new ScoringStep();
    // 2026-11-25 exists (open), 2026-11-26 exists but was closed (a reset), 2026-11-27 is missing.
    await sql.query(
      `INSERT INTO leaderboard_windows (tenant_id, leaderboard_id, window_key, starts_at, ends_at, closes_at, status)
       VALUES ('acme', 'kills', '2026-11-25', $1, $2, $3, 'open'), ('acme', 'kills', '2026-11-26', $2, $4, $5, 'closed')`,
      [
        T0 + 5 * DAY - 10 * 3_600_000,
        T0 + 6 * DAY - 10 * 3_600_000,
        T0 + 6 * DAY,
        T0 + 7 * DAY - 10 * 3_600_000,
        T0 + 7 * DAY,
      ],
    );
    const batch = batchOf([
      { attrs: { mode: 'ranked', kills: 1 }, occurred_at: T0 + 5 * DAY, user_id: 'w1' },
      { attrs: { mode: 'ranked', kills: 2 }, occurred_at: T0 + 6 * DAY, user_id: 'w1' },
      { attrs: { mode: 'ranked', kills: 4 }, occurred_at: T0 + 7 * DAY, user_id: 'w1' },
      { attrs: { mode: 'ranked', kills: 8 }, occurred_at: T0 + 7 * DAY + 60_000, user_id: 'w2' },
    ]);
    const r = await sql.tx((q) => runSteps(q, [step], batch));
    expect(r.outcomes.map((o) => o.kind)).toEqual(['ok', 'skip', 'ok', 'ok']);
    expect(r.outcomes[1]).toEqual({ kind: 'skip', reason: 'late: the window has closed' });
    const windows = await sql.query<{ window_key: string; status: string; starts_at: number }>(
      `SELECT window_key, status, starts_at FROM leaderboard_windows WHERE window_key >= '2026-11-25' ORDER BY window_key`,
    );
    expect(windows.rows.map((w) => [w.window_key, w.status, Number(w.starts_at)])).toEqual([
      ['2026-11-25', 'open', T0 + 5 * DAY - 10 * 3_600_000],
      ['2026-11-26', 'closed', T0 + 6 * DAY - 10 * 3_600_000],
      ['2026-11-27', 'open', Date.parse('2026-11-27T00:00:00Z')],
    ]);
    const scores = await sql.query<{ window_key: string; user_id: string; score: number }>(
      `SELECT window_key, user_id, score FROM leaderboard_scores WHERE window_key >= '2026-11-25' ORDER BY window_key, user_id`,
    );
    expect(scores.rows.map((x) => [x.window_key, x.user_id, Number(x.score)])).toEqual([
      ['2026-11-25', 'w1', 1],
      ['2026-11-27', 'w1', 4],
      ['2026-11-27', 'w2', 8],
    ]);
  });

  it('earning rules: bare names are attributes, caps in the tenant time zone, usage written once per key', async () => {
    await sql.query(
      `INSERT INTO currencies (tenant_id, id, name, is_spendable, decimal_places, created_at, updated_at) VALUES ('acme', 'coins', 'Coins', true, 0, now(), now())`,
    );
    const rule = await createRule(
      sql,
      'acme',
      {
        name: 'big spender',
        currency_id: 'coins',
        event_type: 'purchase',
        event_filter: { op: 'gte', field: 'amount', value: 100 },
        calculation: { type: 'percentage', rate: 0.1, field: 'amount' },
        max_per_event: 15,
        max_per_day: 25,
        max_per_week: null,
        priority: 0,
        active: true,
      },
      T0,
    );
    const wallet = fakeWallet();
    const step = new EarningStep(wallet);
    // Auckland (UTC+13): 10:30 UTC is 23:30 on the 20th, 11:05 UTC is the 21st.
    const batch = batchOf(
      [
        { type: 'purchase', attrs: { amount: 500 } }, // 50 -> 15 per event
        { type: 'purchase', attrs: { amount: 99 } }, // filtered out
        { type: 'purchase', attrs: { amount: 120 }, occurred_at: Date.parse('2026-11-20T10:30:00Z') }, // 12 -> 10 (day cap 25)
        { type: 'purchase', attrs: { amount: 200 }, occurred_at: Date.parse('2026-11-20T11:05:00Z') }, // next day: 15
        { type: 'match', attrs: { amount: 500 } }, // another type
      ],
      'Pacific/Auckland',
    );
    const r = await sql.tx((q) => runSteps(q, [step], batch));
    expect(r.outcomes.map((o) => o.kind)).toEqual(['ok', 'skip', 'ok', 'ok', 'skip']);
    expect(wallet.credits.map((c) => [c.amount, c.idempotency_key, c.now])).toEqual([
      [15, `earning:${rule.rule_id}:e0`, batch.now],
      [10, `earning:${rule.rule_id}:e2`, batch.now],
      [15, `earning:${rule.rule_id}:e3`, batch.now],
    ]);
    // The wallet's reads were prepared for every candidate before the caps were known.
    expect(wallet.prepared).toEqual(wallet.credits.map((c) => c.idempotency_key));
    const usage = await sql.query<{ period: string; amount: number }>(
      'SELECT period, amount FROM earning_usage ORDER BY period',
    );
    expect(usage.rows.map((u) => [u.period, Number(u.amount)])).toEqual([
      ['day:2026-11-20', 25],
      ['day:2026-11-21', 15],
      ['week:2026-W47', 40],
    ]);
  });

  it('earning rules are compiled once per rule version, not per batch', async () => {
    const rules = new EarningRules();
    const [rule] = (await sql.query<{ id: string }>("SELECT id FROM earning_rules WHERE tenant_id = 'acme'"))
      .rows;
    const first = (await rules.load(sql, ['acme'])).get('acme')![0]!;
    const again = (await rules.load(sql, ['acme'])).get('acme')![0]!;
    expect(again.matches).toBe(first.matches);
    expect(again.amount).toBe(first.amount);
    const view = (amount: number) => batchOf([{ type: 'purchase', attrs: { amount } }]).events[0]!.view;
    expect([first.matches(view(100)), first.matches(view(99))]).toEqual([true, false]);

    await updateRule(sql, 'acme', rule!.id, { event_filter: { op: 'gte', field: 'amount', value: 50 } }, T0);
    const edited = (await rules.load(sql, ['acme'])).get('acme')![0]!;
    expect(edited.matches).not.toBe(first.matches);
    expect([edited.matches(view(99)), edited.matches(view(49))]).toEqual([true, false]);
    // A change that compiles nothing (the cap) keeps the compiled part.
    await updateRule(sql, 'acme', rule!.id, { max_per_day: 5 }, T0);
    const capped = (await rules.load(sql, ['acme'])).get('acme')![0]!;
    expect(capped.matches).toBe(edited.matches);
    expect(capped.max_per_day).toBe(5);
  });
});
