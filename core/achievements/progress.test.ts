/**
 * Achievement reactions on a real store (PGlite), with the real bus, wallet and granting service:
 * `streak.milestone_reached` (emitted here by hand: the streaks feature that emits it is built in
 * parallel), `wallet.credited` and `leaderboard.rank_finalized` advance their criteria in the
 * emitter's transaction (rolled back with it), complete once, pay once and enqueue the webhook;
 * deactivated achievements do not move; a streak reference must name a definition of the tenant.
 */
import type { Sql } from '../../adapters/sql/types';
import { openTestPglite, uniqueName } from '../../tests/support/stack';
import { FactBus, type StreakMilestoneReached } from '../facts';
import { outboxReactions } from '../outbox';
import { SeededRandom } from '../random';
import { createConfig } from '../rewards/configs';
import { Granter } from '../rewards/grant';
import { createItem } from '../rewards/items';
import { Wallet } from '../wallet/wallet';
import { validateCriteria, type Criterion } from './criteria';
import { AchievementEngine, achievementReactions } from './progress';
import { missingReference, streakExists } from './references';
import { createAchievement, updateAchievement } from './store';
import { userViews } from './views';

const NOW = Date.UTC(2026, 10, 20, 10);

describe('achievement reactions [PGlite]', () => {
  let sql: Sql;
  let facts: FactBus;
  let wallet: Wallet;
  const random = new SeededRandom('achievements');
  beforeAll(async () => {
    sql = await openTestPglite();
    facts = new FactBus();
    wallet = new Wallet(facts, random);
    const granter = new Granter(wallet, random);
    facts.register(outboxReactions, achievementReactions(new AchievementEngine(facts, granter)));
  });
  afterAll(() => sql.close());

  async function tenant() {
    const t = uniqueName('t');
    await sql.query(
      `INSERT INTO currencies (tenant_id, id, name, is_spendable, decimal_places, created_at, updated_at)
       VALUES ($1, 'coins', 'Coins', true, 0, now(), now()), ($1, 'xp', 'XP', false, 0, now(), now())`,
      [t],
    );
    const coins = await createItem(
      sql,
      t,
      { name: '5 coins', reward_type: 'currency', payload: { currency_id: 'coins', amount: 5 } },
      NOW,
    );
    const config = await createConfig(
      sql,
      t,
      {
        name: 'c',
        tiers: [
          { condition: { type: 'milestone', metric: 'achievement', value: 1 }, item_ids: [coins.item_id] },
        ],
      },
      NOW,
    );
    return { t, config: config.reward_config_id };
  }
  const define = (t: string, criteria: unknown, reward_config_id: string | null = null) => {
    const v = validateCriteria(criteria);
    if (!v.ok) throw new Error(v.error);
    return createAchievement(
      sql,
      random,
      t,
      { name: 'a', criteria: v.criteria as Criterion, reward_config_id },
      NOW,
    );
  };
  const milestone = (
    t: string,
    user_id: string,
    streak_days: number,
    streak_id = 's1',
  ): StreakMilestoneReached => ({
    tenant_id: t,
    user_id,
    streak_id,
    threshold: streak_days,
    streak_days,
    reward_item_id: null,
    reward_config_id: null,
    now: NOW,
  });
  const view = async (t: string, user: string, id: string) => {
    const a = (
      await sql.query<{ id: string }>('SELECT id FROM achievements WHERE tenant_id = $1 AND id = $2', [t, id])
    ).rows[0];
    expect(a).toBeDefined();
    const { getAchievement } = await import('./store');
    return (await userViews(sql, t, user, [(await getAchievement(sql, t, id))!], NOW))[0]!;
  };
  const count = async (table: string, t: string, extra = '') =>
    Number(
      (
        await sql.query<{ n: string }>(`SELECT count(*) AS n FROM ${table} WHERE tenant_id = $1 ${extra}`, [
          t,
        ])
      ).rows[0]!.n,
    );

  it('streak.milestone_reached advances streak_milestone criteria, completes once and pays once', async () => {
    const { t, config } = await tenant();
    const a = await define(t, { type: 'streak_milestone', streak_id: 's1', threshold: 7 }, config);
    const other = await define(t, { type: 'streak_milestone', streak_id: 's2', threshold: 3 });
    await sql.tx((q) =>
      facts.emit(q, 'streak.milestone_reached', [milestone(t, 'u1', 3), milestone(t, 'u2', 3)]),
    );
    expect((await view(t, 'u1', a.id)).progress).toEqual({
      type: 'streak_milestone',
      current: 3,
      target: 7,
      percentage: 42.85,
      met: false,
    });
    expect((await view(t, 'u1', other.id)).progress.current).toBe(0); // another streak
    for (let i = 0; i < 3; i++)
      await sql.tx((q) => facts.emit(q, 'streak.milestone_reached', [milestone(t, 'u1', 7)]));
    expect((await view(t, 'u1', a.id)).completed).toBe(true);
    expect((await view(t, 'u2', a.id)).completed).toBe(false);
    expect(await count('achievement_completions', t)).toBe(1);
    expect(await count('ledger', t, "AND source_type = 'achievement_completed'")).toBe(1);
    const hook = await sql.query<{ payload: Record<string, unknown> }>(
      "SELECT payload FROM outbox WHERE tenant_id = $1 AND event_type = 'achievement.completed'",
      [t],
    );
    expect(hook.rows.map((r) => r.payload)).toEqual([
      expect.objectContaining({
        user_id: 'u1',
        achievement_id: a.id,
        items: [expect.objectContaining({ name: '5 coins' })],
      }),
    ]);
  });

  it('rolls back with the emitter and ignores deactivated achievements', async () => {
    const { t } = await tenant();
    const a = await define(t, { type: 'streak_milestone', streak_id: 's1', threshold: 2 });
    await expect(
      sql.tx(async (q) => {
        await facts.emit(q, 'streak.milestone_reached', [milestone(t, 'u1', 5)]);
        throw new Error('the emitter fails');
      }),
    ).rejects.toThrow('the emitter fails');
    expect(await count('achievement_progress', t)).toBe(0);
    expect(await count('achievement_completions', t)).toBe(0);
    await updateAchievement(sql, t, a.id, { active: false }, NOW);
    await sql.tx((q) => facts.emit(q, 'streak.milestone_reached', [milestone(t, 'u1', 5)]));
    expect(await count('achievement_progress', t)).toBe(0);
  });

  it('wallet credits move cumulative criteria and final ranks move leaderboard_rank criteria', async () => {
    const { t } = await tenant();
    const cum = await define(t, { type: 'cumulative', metric: 'xp', threshold: 10 });
    const rank = await define(t, { type: 'leaderboard_rank', leaderboard_id: 'b', threshold: 3 });
    const credit = (amount: number, key: string) =>
      sql.tx((q) =>
        wallet.credit(q, {
          tenant_id: t,
          user_id: 'u1',
          currency_id: 'xp',
          amount,
          source_type: 'manual_grant',
          source_ref: null,
          idempotency_key: key,
          now: NOW,
        }),
      );
    await credit(4, 'k1');
    await credit(4, 'k1'); // the same credit again: no movement, no fact
    expect((await view(t, 'u1', cum.id)).progress.current).toBe(4);
    await credit(6, 'k2');
    expect((await view(t, 'u1', cum.id)).completed).toBe(true);
    const ranks = (r: number) => ({
      tenant_id: t,
      leaderboard_id: 'b',
      window_key: 'w',
      reward_config_id: null,
      user_id: 'u1',
      rank: r,
      score: 1,
      now: NOW,
    });
    await sql.tx((q) => facts.emit(q, 'leaderboard.rank_finalized', [ranks(5)]));
    expect((await view(t, 'u1', rank.id)).progress).toEqual({
      type: 'leaderboard_rank',
      current: 0,
      target: 1,
      percentage: 0,
      met: false,
      best_rank: 5,
    });
    await sql.tx((q) => facts.emit(q, 'leaderboard.rank_finalized', [ranks(2)]));
    expect((await view(t, 'u1', rank.id)).completed).toBe(true);
  });

  it('one transaction completing several users of several achievements pays each once and records its items', async () => {
    const { t, config } = await tenant();
    const low = await define(t, { type: 'cumulative', metric: 'xp', threshold: 5 }, config);
    const high = await define(t, { type: 'cumulative', metric: 'xp', threshold: 12 }, config);
    const credits = (amount: number, key: string, users: string[]) =>
      sql.tx(async (q) => {
        for (const user_id of users)
          await wallet.credit(q, {
            tenant_id: t,
            user_id,
            currency_id: 'xp',
            amount,
            source_type: 'manual_grant',
            source_ref: null,
            idempotency_key: `${key}:${user_id}`,
            now: NOW,
          });
      });
    await credits(6, 'k1', ['u1', 'u2', 'u3']); // all three complete `low`, none `high`
    await credits(6, 'k2', ['u1', 'u2', 'u3', 'u4']); // u1..u3 complete `high` (their `low` no longer moves), u4 `low`
    const rows = await sql.query<{ achievement_id: string; user_id: string; items: Array<{ name: string }> }>(
      'SELECT achievement_id, user_id, items FROM achievement_completions WHERE tenant_id = $1 ORDER BY 1, 2',
      [t],
    );
    const pairs = (id: string, users: string[]) =>
      users.map((user_id) => ({
        achievement_id: id,
        user_id,
        items: [expect.objectContaining({ name: '5 coins' })],
      }));
    expect(rows.rows).toEqual(
      expect.arrayContaining([
        ...pairs(low.id, ['u1', 'u2', 'u3', 'u4']),
        ...pairs(high.id, ['u1', 'u2', 'u3']),
      ]),
    );
    expect(rows.rows).toHaveLength(7);
    expect(await count('ledger', t, "AND source_type = 'achievement_completed'")).toBe(7);
    expect(await count('outbox', t, "AND event_type = 'achievement.completed'")).toBe(7);
    expect((await view(t, 'u1', low.id)).progress.current).toBe(5); // completed at 6, shown at its target
    const stored = await sql.query<{ value: string }>(
      'SELECT value FROM achievement_progress WHERE tenant_id = $1 AND achievement_id = $2 AND user_id = $3',
      [t, low.id, 'u1'],
    );
    expect(stored.rows.map((r) => Number(r.value))).toEqual([6]); // no progress after completion
    expect((await view(t, 'u4', high.id)).progress.current).toBe(6);
    await credits(1, 'k3', ['u1', 'u2', 'u3', 'u4']); // nothing completes again
    expect(await count('ledger', t, "AND source_type = 'achievement_completed'")).toBe(7);
    expect(await count('outbox', t, "AND event_type = 'achievement.completed'")).toBe(7);
  });

  it('checks that a referenced streak definition exists in the tenant', async () => {
    const { t } = await tenant();
    const other = (await tenant()).t;
    const refs = [{ kind: 'streak' as const, id: 's1', where: 'body.criteria.streak_id' }];
    expect(await streakExists(sql, t, 's1')).toBe(false);
    expect(await missingReference(sql, t, refs)).toBe('body.criteria.streak_id: streak s1 does not exist');
    const insert = (tenantId: string) =>
      sql.query(
        `INSERT INTO streak_definitions (tenant_id, id, name, status, config, created_at, updated_at)
         VALUES ($1, 's1', 'S', 'active', '{}', now(), now())`,
        [tenantId],
      );
    // Another tenant's streak of that id is not this tenant's.
    await insert(other);
    expect(await missingReference(sql, t, refs)).toBe('body.criteria.streak_id: streak s1 does not exist');
    await insert(t);
    expect(await streakExists(sql, t, 's1')).toBe(true);
    expect(await missingReference(sql, t, refs)).toBeNull();
  });
});
