/**
 * The one grant-from-config path on a real SQL store (PGlite): config -> items -> one idempotent
 * grant per award, and what could not be granted reported, never thrown.
 */
import type { Sql } from '../../adapters/sql/types';
import { openTestPglite, uniqueName } from '../../tests/support/stack';
import { FactBus, type WalletMoved } from '../facts';
import { SeededRandom } from '../random';
import { Wallet } from '../wallet/wallet';
import { createConfig, itemsForMetric, itemsForRank, type RewardTier } from './configs';
import { grantFromConfig } from './from-config';
import { Granter } from './grant';
import { createItem } from './items';

const NOW = Date.UTC(2026, 10, 20);

describe('grantFromConfig [PGlite]', () => {
  let sql: Sql;
  let granter: Granter;
  const credited: WalletMoved[] = [];
  beforeAll(async () => {
    sql = await openTestPglite();
    const facts = new FactBus().register({
      feature: 'test',
      on: { 'wallet.credited': async (_q, fs) => void credited.push(...fs) },
    });
    const random = new SeededRandom('from-config');
    granter = new Granter(new Wallet(facts, random), random);
  });
  afterAll(() => sql.close());

  /** A tenant with currency `coins` and items: 10 coins, a badge, a cup (physical) and xp (no xp currency). */
  async function tenant() {
    const t = uniqueName('t');
    await sql.query(
      `INSERT INTO currencies (tenant_id, id, name, is_spendable, decimal_places, created_at, updated_at)
       VALUES ($1, 'coins', 'Coins', true, 0, now(), now())`,
      [t],
    );
    const item = (name: string, reward_type: string, payload: Record<string, unknown>) =>
      createItem(sql, t, { name, reward_type, payload }, NOW).then((i) => i.item_id);
    return {
      t,
      coins: await item('10 coins', 'currency', { currency_id: 'coins', amount: 10 }),
      badge: await item('Badge', 'badge', { badge_id: 'b' }),
      cup: await item('Cup', 'physical_item', { sku: 'cup' }),
      xp: await item('5 xp', 'xp', { amount: 5 }),
    };
  }

  const award = (user_id: string, rank: number) => ({
    user_id,
    rank,
    source_type: 'leaderboard_reward',
    source_ref: 'board:w',
    grant_key: `leaderboard:board:w:${user_id}`,
    now: NOW,
  });
  const byRank = (c: Parameters<typeof itemsForRank>[0], a: { rank: number }) => itemsForRank(c, a.rank);

  it('grants each award the items the config gives it, in order, once per grant key', async () => {
    const { t, coins, badge, cup } = await tenant();
    const tiers: RewardTier[] = [
      { condition: { type: 'rank_range', start: 1, end: 1 }, rank_items: { '1': [coins, cup] } },
      { condition: { type: 'rank_range', start: 2, end: 3 }, item_ids: [coins] },
      { condition: { type: 'milestone', metric: 'level', value: 2 }, item_ids: [badge] },
    ];
    const config = await createConfig(sql, t, { name: 'podium', tiers }, NOW);
    const awards = [award('ann', 1), award('bob', 2), award('cat', 9)];
    const run = () => sql.tx((q) => grantFromConfig(q, granter, t, config.reward_config_id, awards, byRank));

    credited.length = 0;
    const first = await run();
    expect(first.problems).toEqual([]);
    // cat (rank 9) wins nothing and has no entry.
    expect(first.granted.map((g) => [g.award.user_id, g.granted.map((x) => [x.item_id, x.status])])).toEqual([
      [
        'ann',
        [
          [coins, 'credited'],
          [cup, 'pending_fulfilment'],
        ],
      ],
      ['bob', [[coins, 'credited']]],
    ]);
    // The credits went through the wallet, with their facts, under the award's source.
    expect(credited.map((c) => [c.user_id, c.amount, c.source_type])).toEqual([
      ['ann', 10, 'leaderboard_reward'],
      ['bob', 10, 'leaderboard_reward'],
    ]);

    // Again with the same keys: the same answer, nothing written twice.
    const again = await run();
    expect(again.granted).toEqual(first.granted);
    const rows = await sql.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM reward_grants WHERE tenant_id = $1',
      [t],
    );
    expect(rows.rows[0]!.n).toBe(3);
    const ledger = await sql.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM ledger WHERE tenant_id = $1',
      [t],
    );
    expect(ledger.rows[0]!.n).toBe(2);

    // Another reading of the same config (levels: metric `level`).
    const levels = await sql.tx((q) =>
      grantFromConfig(
        q,
        granter,
        t,
        config.reward_config_id,
        [
          {
            user_id: 'dan',
            level: 2,
            source_type: 'level_up',
            source_ref: 's:2',
            grant_key: 'level:s:dan:2',
            now: NOW,
          },
        ],
        (c, a) => itemsForMetric(c, 'level', a.level),
      ),
    );
    expect(levels.granted.map((g) => g.granted.map((x) => [x.item_id, x.status]))).toEqual([
      [[badge, 'owned']],
    ]);
  });

  it('reports a missing config, missing items and failed grants instead of throwing', async () => {
    const { t, coins, xp } = await tenant();
    expect(await sql.tx((q) => grantFromConfig(q, granter, t, 'nope', [award('ann', 1)], byRank))).toEqual({
      granted: [],
      problems: ['reward config nope does not exist; nothing was paid'],
    });

    // A config naming an item that no longer exists (written before the foreign keys), and an xp
    // item while the tenant has no xp currency (the grant fails and is recorded as failed).
    const ghost = uniqueName('ghost');
    const tiers: RewardTier[] = [
      { condition: { type: 'rank_range', start: 1, end: 1 }, item_ids: [coins, ghost] },
      { condition: { type: 'rank_range', start: 2, end: 2 }, item_ids: [ghost] },
      { condition: { type: 'rank_range', start: 3, end: 3 }, item_ids: [xp] },
    ];
    await sql.query(
      `INSERT INTO reward_configs (tenant_id, id, name, description, tiers, created_at, updated_at)
       VALUES ($1, 'old', 'old', null, $2, now(), now())`,
      [t, JSON.stringify(tiers)],
    );
    const r = await sql.tx((q) =>
      grantFromConfig(q, granter, t, 'old', [award('ann', 1), award('bob', 2), award('cat', 3)], byRank),
    );
    expect(r.granted.map((g) => [g.award.user_id, g.granted.map((x) => [x.item_id, x.status])])).toEqual([
      ['ann', [[coins, 'credited']]],
      ['cat', [[xp, 'failed']]],
    ]);
    expect(r.problems).toEqual([
      `reward items ${ghost} do not exist; they were not paid`,
      `grants failed (recorded as failed in reward_grants) for cat (${xp})`,
    ]);
  });
});
