/**
 * Automatic generation on a real SQL store (PGlite), with the outbox and coupons' reactions: the
 * achievement and streak facts emitted on the bus (their emitters are other features), once per
 * outcome however often the fact comes, nothing for paused or archived definitions or for other
 * achievements, streaks or thresholds, and `coupon.generated` in the outbox. Also the code
 * generator: alphabet, length, no modulo bias in the mapping.
 */
import type { Sql } from '../../adapters/sql/types';
import { openTestPglite, uniqueName } from '../../tests/support/stack';
import { FactBus } from '../facts';
import { outboxReactions } from '../outbox';
import { SeededRandom } from '../random';
import { createItem } from '../rewards/items';
import { couponReactions } from './auto';
import { CODE_ALPHABET, randomCodes } from './codes';
import { createDefinition, moveStatus, type CouponConfig } from './definitions';

const NOW = Date.UTC(2026, 10, 20, 12);

describe('coupon auto generation [PGlite]', () => {
  let sql: Sql;
  let facts: FactBus;
  const random = new SeededRandom('coupons-auto');
  beforeAll(async () => {
    sql = await openTestPglite();
    facts = new FactBus();
    // As the composition root registers them (runtime/services.ts): the outbox first, then coupons.
    facts.register(outboxReactions, couponReactions(facts, random));
  });
  afterAll(() => sql.close());

  async function tenantWith(
    configs: Array<Partial<CouponConfig>>,
    pause: number[] = [],
    archive: number[] = [],
  ) {
    const t = uniqueName('t');
    const item = await createItem(
      sql,
      t,
      { name: 'Badge', reward_type: 'badge', payload: { badge_id: 'b' } },
      NOW,
    );
    const defs = [];
    for (const [i, c] of configs.entries()) {
      const d = await createDefinition(
        sql,
        random,
        t,
        {
          name: `d${i}`,
          config: {
            reward_item_id: item.item_id,
            code_format: 'random',
            code_length: 8,
            case_sensitive: false,
            usage_limit: { limit_type: 'per_user', max_uses: 1 },
            ...c,
          },
        },
        NOW,
      );
      if (pause.includes(i)) await moveStatus(sql, t, d.id, 'paused', NOW);
      if (archive.includes(i)) await moveStatus(sql, t, d.id, 'archived', NOW);
      defs.push(d);
    }
    return { t, defs };
  }

  const coupons = async (t: string) =>
    (
      await sql.query<{ user_id: string; definition_id: string; source: string; source_key: string }>(
        'SELECT user_id, definition_id, source, source_key FROM user_coupons WHERE tenant_id = $1 ORDER BY user_id, definition_id',
        [t],
      )
    ).rows;
  const generatedHooks = async (t: string) =>
    (
      await sql.query<{ payload: Record<string, unknown> }>(
        "SELECT payload FROM outbox WHERE tenant_id = $1 AND event_type = 'coupon.generated' ORDER BY id",
        [t],
      )
    ).rows.map((r) => r.payload);

  it('generates one coupon per completed achievement, once, for active definitions only', async () => {
    const auto = (achievement_id: string) => ({
      auto_generate: {
        enabled: true,
        trigger: 'achievement_completed' as const,
        trigger_config: { achievement_id },
      },
    });
    const { t, defs } = await tenantWith([auto('a1'), auto('a2'), auto('a1'), auto('a1'), {}], [2], [3]);
    const fact = (user_id: string, achievement_id: string) => ({
      tenant_id: t,
      user_id,
      achievement_id,
      name: 'First',
      reward_config_id: null,
      items: [],
      now: NOW,
    });
    await sql.tx((q) => facts.emit(q, 'achievement.completed', [fact('ann', 'a1'), fact('bob', 'a2')]));
    // The same outcome again (a retried cause): nothing more.
    await sql.tx((q) => facts.emit(q, 'achievement.completed', [fact('ann', 'a1')]));
    // Another tenant's achievement of the same id: nothing here.
    await sql.tx((q) =>
      facts.emit(q, 'achievement.completed', [{ ...fact('cid', 'a1'), tenant_id: 'elsewhere' }]),
    );
    expect(await coupons(t)).toEqual([
      {
        user_id: 'ann',
        definition_id: defs[0]!.id,
        source: 'achievement_completed',
        source_key: 'achievement:a1:ann',
      },
      {
        user_id: 'bob',
        definition_id: defs[1]!.id,
        source: 'achievement_completed',
        source_key: 'achievement:a2:bob',
      },
    ]);
    const hooks = await generatedHooks(t);
    expect(hooks.map((h) => [h.user_id, h.definition_id, h.trigger])).toEqual([
      ['ann', defs[0]!.id, 'achievement_completed'],
      ['bob', defs[1]!.id, 'achievement_completed'],
    ]);
    expect(hooks[0]!.code).toMatch(new RegExp(`^[${CODE_ALPHABET}]{8}$`));
  });

  it('generates on the matching streak milestone only, and rolls back with the emitter', async () => {
    const { t, defs } = await tenantWith([
      {
        code_format: 'custom',
        custom_code: `STREAK7-${uniqueName('x')}`,
        auto_generate: {
          enabled: true,
          trigger: 'streak_milestone',
          trigger_config: { streak_id: 's1', milestone_threshold: 7 },
        },
      },
    ]);
    const fact = (user_id: string, threshold: number, streak_id = 's1') => ({
      tenant_id: t,
      user_id,
      streak_id,
      threshold,
      streak_days: threshold,
      reward_item_id: null,
      reward_config_id: null,
      now: NOW,
    });
    await sql.tx((q) =>
      facts.emit(q, 'streak.milestone_reached', [fact('ann', 7), fact('bob', 3), fact('cid', 7, 's2')]),
    );
    await sql.tx((q) => facts.emit(q, 'streak.milestone_reached', [fact('ann', 7)]));
    // A cause that rolls back takes its coupon with it.
    await expect(
      sql.tx(async (q) => {
        await facts.emit(q, 'streak.milestone_reached', [fact('dan', 7)]);
        throw new Error('the streak step failed');
      }),
    ).rejects.toThrow('the streak step failed');
    expect((await coupons(t)).map((c) => [c.user_id, c.definition_id])).toEqual([['ann', defs[0]!.id]]);
    expect((await generatedHooks(t)).map((h) => h.user_id)).toEqual(['ann']);
  });

  it('draws codes over the alphabet, of the given length, evenly', () => {
    const codes = randomCodes(new SeededRandom('codes'), 2000, 10, 'P-');
    expect(codes.every((c) => new RegExp(`^P-[${CODE_ALPHABET}]{10}$`).test(c))).toBe(true);
    expect(CODE_ALPHABET).not.toMatch(/[ILO01]/);
    const counts = new Map<string, number>();
    for (const c of codes) for (const ch of c.slice(2)) counts.set(ch, (counts.get(ch) ?? 0) + 1);
    expect(counts.size).toBe(CODE_ALPHABET.length);
    // 20,000 draws over 31 characters: about 645 each; every one within 20 %.
    for (const n of counts.values()) expect(Math.abs(n - 20000 / 31)).toBeLessThan(130);
  });
});
