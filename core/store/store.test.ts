/**
 * Unit tests of the store's pieces that need no gateway: the pattern check, the order state
 * machine, field checks, and migration 013 turning pending_fulfilment grants into orders.
 */
import { PgliteSql } from '../../adapters/sql/pglite';
import { loadMigrations, migrate } from '../../adapters/sql/migrate';
import { fieldProblems, MAX_PATTERNED_LENGTH } from './catalog';
import { MOVES, move, ORDER_STATES, OrderStateError, type OrderAction } from './order-states';
import { regexProblem } from './safe-regex';

describe('field patterns', () => {
  it.each([
    ['^[0-9]{5}$', null],
    ['^[A-Z]{2}-\\d{3,5}$', null],
    ['^[^@\\s]+@[^@\\s]+\\.[^@\\s]+$', null],
    ['^(?:[a-z]{2})?[0-9]+$', null],
    ['^\\p{L}+$', null],
    ['^(ab){2,3}$', null],
    ['[(a+)+]', null],
    ['^(a+)+$', /nests a quantifier/],
    ['^(a*)*$', /nests a quantifier/],
    ['^(?:\\w+\\s?)+$', /nests a quantifier/],
    ['^((ab)*c)*$', /nests a quantifier/],
    ['^(a|aa)+$', /alternation/],
    ['^(a|b){1,}$', /alternation/],
    ['(a)\\1', /backreferences/],
    ['(?<x>a)\\k<x>', /backreferences/],
    ['a*b*c*d*', /more than 3 unbounded/],
    ['(', /not a valid regular expression/],
  ])('%s', (pattern, expected) => {
    const p = regexProblem(pattern);
    if (expected === null) expect(p).toBeNull();
    else expect(p).toMatch(expected);
  });

  it('keeps the worst accepted pattern fast on the longest value it may see', () => {
    // Three unbounded quantifiers that overlap, unanchored, on a value that never matches.
    const pattern = '\\d*\\d*\\d*x';
    expect(regexProblem(pattern)).toBeNull();
    const value = '1'.repeat(MAX_PATTERNED_LENGTH);
    const started = Date.now();
    const problems = fieldProblems([{ name: 'f', label: 'F', pattern }], { f: value });
    // Stopped at the time limit (50 ms) and refused, instead of holding the process for seconds.
    expect(problems.f).toBe('F could not be checked against its format in time');
    expect(Date.now() - started).toBeLessThan(1000);
    // A value it answers quickly is judged as usual.
    expect(fieldProblems([{ name: 'f', label: 'F', pattern }], { f: '12x' })).toEqual({});
    // A longer value is refused before the pattern runs.
    expect(fieldProblems([{ name: 'f', label: 'F', pattern }], { f: `${value}1` }).f).toMatch(/at most 256/);
  });
});

describe('the order state machine', () => {
  it('allows exactly the listed moves and refuses every other with OrderStateError', () => {
    const allowed: string[] = [];
    for (const action of Object.keys(MOVES) as OrderAction[])
      for (const state of ORDER_STATES) {
        try {
          const m = move(state, action);
          allowed.push(`${state} --${action}--> ${m.to}`);
        } catch (err) {
          expect(err).toBeInstanceOf(OrderStateError);
          expect((err as Error).message).toMatch(new RegExp(`Cannot ${action} an order in state ${state}`));
        }
      }
    expect(allowed.sort()).toEqual(
      [
        'pending_claim --claim--> fulfilling',
        'fulfilling --complete--> completed',
        'failed --complete--> completed',
        'pending_claim --complete--> completed',
        'fulfilling --fail--> failed',
        'pending_claim --fail--> failed',
        'failed --retry--> fulfilling',
        'pending_claim --expire--> expired',
        'pending_claim --refund--> refunded',
        'fulfilling --refund--> refunded',
        'failed --refund--> refunded',
        'completed --refund--> refunded',
      ].sort(),
    );
  });
});

describe('migration 013', () => {
  it('turns each pending_fulfilment grant into an order the grant row names', async () => {
    const all = loadMigrations();
    const at = all.findIndex((m) => m.version === 13);
    expect(at).toBeGreaterThan(0);
    const sql = await PgliteSql.open();
    try {
      await migrate(sql, all.slice(0, at));
      await sql.query(
        `INSERT INTO reward_items (tenant_id, id, name, reward_type, payload, created_at, updated_at)
         VALUES ('t', 'cup', 'Cup', 'physical_item', '{}', now(), now())`,
      );
      await sql.query(
        `INSERT INTO reward_grants (id, tenant_id, grant_key, user_id, item_id, reward_type, payload, status, source_type, source_ref, created_at)
         VALUES ('g1', 't', 'leaderboard:lb:w1:ann:cup', 'ann', 'cup', 'physical_item', '{}', 'pending_fulfilment', 'leaderboard_reward', 'lb:w1', 1763632800000),
                ('g2', 't', 'leaderboard:lb:w1:bob:coins', 'bob', 'coins', 'currency', '{}', 'credited', 'leaderboard_reward', 'lb:w1', 1763632800000)`,
      );
      await migrate(sql, all);
      const grants = await sql.query('SELECT id, status, order_id FROM reward_grants ORDER BY id');
      expect(grants.rows).toEqual([
        { id: 'g1', status: 'ordered', order_id: 'g1' },
        { id: 'g2', status: 'credited', order_id: null },
      ]);
      const orders = await sql.query(
        'SELECT id, user_id, reward_id, reward_slug, reward_name, state, status, fulfillment, source_type, source_ref, grant_key FROM reward_orders',
      );
      expect(orders.rows).toEqual([
        {
          id: 'g1',
          user_id: 'ann',
          reward_id: 'cup',
          reward_slug: null,
          reward_name: 'Cup',
          state: 'fulfilling',
          status: { started_at: '2025-11-20T10:00:00.000Z' },
          fulfillment: { type: 'manual' },
          source_type: 'leaderboard_reward',
          source_ref: 'lb:w1',
          grant_key: 'leaderboard:lb:w1:ann:cup',
        },
      ]);
    } finally {
      await sql.close();
    }
  });
});
