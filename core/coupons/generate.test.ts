/**
 * Code generation on a real SQL store (PGlite): collisions with codes already taken in the tenant
 * (in any case) are drawn again; a code space too full to finish refuses the whole request and
 * leaves nothing behind (the caller's transaction rolls back).
 */
import type { Sql } from '../../adapters/sql/types';
import { openTestPglite, uniqueName } from '../../tests/support/stack';
import { SeededRandom, type Random } from '../random';
import { createItem } from '../rewards/items';
import { createDefinition, getDefinition } from './definitions';
import { CouponError } from './errors';
import { generateCoupons } from './generate';

const NOW = Date.UTC(2026, 10, 20, 12);

describe('coupon generation [PGlite]', () => {
  let sql: Sql;
  beforeAll(async () => {
    sql = await openTestPglite();
  });
  afterAll(() => sql.close());

  async function definition(t: string, code_length = 8, code_prefix?: string) {
    const item = await createItem(
      sql,
      t,
      { name: 'Badge', reward_type: 'badge', payload: { badge_id: 'b' } },
      NOW,
    );
    const d = await createDefinition(
      sql,
      new SeededRandom(uniqueName('d')),
      t,
      {
        name: 'd',
        config: {
          reward_item_id: item.item_id,
          code_format: 'random',
          code_length,
          ...(code_prefix ? { code_prefix } : {}),
          case_sensitive: false,
          usage_limit: { limit_type: 'unlimited' },
        },
      },
      NOW,
    );
    return (await getDefinition(sql, t, d.id))!;
  }
  const count = async (t: string) =>
    Number(
      (
        await sql.query<{ n: number }>('SELECT count(*)::int AS n FROM user_coupons WHERE tenant_id = $1', [
          t,
        ])
      ).rows[0]!.n,
    );

  it('draws again the codes another definition of the tenant already has, in any case', async () => {
    const t = uniqueName('t');
    const first = await definition(t, 4, 'x-');
    const second = await definition(t, 4, 'X-');
    const users = Array.from({ length: 200 }, (_, i) => `u${i}`);
    // Codes from the seed 'same' each time; ids always fresh.
    const same = (): Random => {
      const r = new SeededRandom('same');
      return {
        uuid: () => crypto.randomUUID(),
        bytes: (n) => r.bytes(n),
        int: (x, y) => r.int(x, y),
        float: () => r.float(),
      };
    };
    const a = await sql.tx((q) => generateCoupons(q, same(), first, users, { source: 'admin', now: NOW }));
    // The same seed draws the same codes (upper-case prefix this time): every one collides, ignoring case.
    const b = await sql.tx((q) => generateCoupons(q, same(), second, users, { source: 'admin', now: NOW }));
    expect([a.generated, b.generated]).toEqual([200, 200]);
    const all = [...a.coupons, ...b.coupons].map((c) => c.code.toLowerCase());
    expect(new Set(all).size).toBe(400);
    expect(await count(t)).toBe(400);
  });

  it('refuses, storing nothing, when codes still collide after every draw', async () => {
    const t = uniqueName('t');
    const d = await definition(t, 4);
    // A source that always draws the same bytes: every code is the same, so all but one collide.
    const stuck: Random = {
      ...new SeededRandom('x'),
      bytes: (n: number) => Buffer.alloc(n, 7),
      uuid: () => crypto.randomUUID(),
    } as Random;
    const err = await sql
      .tx((q) => generateCoupons(q, stuck, d, ['a', 'b', 'c'], { source: 'admin', now: NOW }))
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CouponError);
    expect((err as CouponError).reason).toBe('codes_exhausted');
    expect(await count(t)).toBe(0);
    expect(
      Number(
        (
          await sql.query<{ n: number }>('SELECT count(*)::int AS n FROM coupon_codes WHERE tenant_id = $1', [
            t,
          ])
        ).rows[0]!.n,
      ),
    ).toBe(0);
  });
});
