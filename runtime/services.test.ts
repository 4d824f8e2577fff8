/**
 * The composition root's fact subscriptions: who reacts to what, in which order, and the order of
 * the outbox rows that follows (a credit's webhook before the tier move it causes).
 */
import type { Sql } from '../adapters/sql/types';
import { FactBus } from '../core/facts';
import { Granter } from '../core/rewards/grant';
import { Wallet } from '../core/wallet/wallet';
import { openTestPglite, uniqueName } from '../tests/support/stack';
import { featureReactions } from './services';

function compose() {
  const facts = new FactBus();
  const wallet = new Wallet(facts);
  const granter = new Granter(wallet);
  facts.register(...featureReactions(facts, granter));
  return { facts, wallet };
}

describe('feature reactions', () => {
  it('subscribe the outbox first, then tiers, levels and payouts', () => {
    const { facts } = compose();
    expect(facts.subscribersOf('wallet.credited')).toEqual(['outbox', 'tiers', 'levels', 'achievements']);
    expect(facts.subscribersOf('wallet.debited')).toEqual(['outbox']);
    expect(facts.subscribersOf('tier.changed')).toEqual(['outbox']);
    expect(facts.subscribersOf('level.reached')).toEqual(['levels']);
    expect(facts.subscribersOf('leaderboard.rank_finalized')).toEqual([
      'leaderboard-payouts',
      'coupons',
      'achievements',
    ]);
    expect(facts.subscribersOf('achievement.completed')).toEqual(['outbox', 'coupons']);
    expect(facts.subscribersOf('streak.milestone_reached')).toEqual(['outbox', 'coupons', 'achievements']);
    expect(facts.subscribersOf('order.moved')).toEqual(['outbox']);
    expect(facts.subscribersOf('coupon.redeemed')).toEqual(['outbox']);
    expect(facts.subscribersOf('coupon.generated')).toEqual(['outbox']);
    expect(facts.subscribersOf('leaderboard.window_completed')).toEqual(['outbox']);
    for (const f of ['streak.broken', 'streak.freeze_used', 'streak.at_risk'] as const)
      expect(facts.subscribersOf(f)).toEqual(['outbox']);
  });

  describe('[PGlite]', () => {
    let sql: Sql;
    beforeAll(async () => {
      sql = await openTestPglite();
    });
    afterAll(() => sql.close());

    it("enqueue a credit's webhook before the tier move it causes, in one transaction", async () => {
      const { wallet } = compose();
      const t = uniqueName('t');
      await sql.query(
        `INSERT INTO currencies (tenant_id, id, name, is_spendable, decimal_places, created_at, updated_at)
         VALUES ($1, 'coins', 'Coins', true, 0, now(), now())`,
        [t],
      );
      await sql.query(
        `INSERT INTO tiers (tenant_id, id, tier_name, tier_level, min_lifetime_points, currency_id, created_at, updated_at)
         VALUES ($1, 'silver', 'Silver', 1, 50, 'coins', now(), now())`,
        [t],
      );
      const credit = (amount: number) =>
        sql.tx((q) =>
          wallet.credit(q, {
            tenant_id: t,
            user_id: 'ann',
            currency_id: 'coins',
            amount,
            source_type: 'promotion',
            now: 1_000,
          }),
        );
      await credit(10);
      await credit(60);
      const rows = await sql.query<{ event_type: string; payload: { data: Record<string, unknown> } }>(
        'SELECT event_type, payload FROM outbox WHERE tenant_id = $1 ORDER BY id',
        [t],
      );
      expect(rows.rows.map((r) => r.event_type)).toEqual([
        'currency.earned',
        'currency.earned',
        'tier.changed',
      ]);
      expect(rows.rows[2]!.payload.data).toEqual({
        currency_id: 'coins',
        previous_tier: null,
        new_tier: { tier_id: 'silver', tier_name: 'Silver', tier_level: 1 },
        lifetime_points: 70,
      });
      await expect(
        sql.tx((q) =>
          wallet.debit(q, {
            tenant_id: t,
            user_id: 'ann',
            currency_id: 'coins',
            amount: 5,
            source_type: 'purchase',
            purpose: 'spend',
            now: 2_000,
          }),
        ),
      ).resolves.toMatchObject({ balance_after: 65 });
      const last = await sql.query<{ event_type: string }>(
        'SELECT event_type FROM outbox WHERE tenant_id = $1 ORDER BY id DESC LIMIT 1',
        [t],
      );
      expect(last.rows[0]!.event_type).toBe('currency.spent');
    });
  });
});
