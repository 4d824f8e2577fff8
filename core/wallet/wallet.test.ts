/**
 * The wallet's credits with reads prepared ahead (`prepareCredits`, the pipeline's earning rules)
 * on a real SQL store (PGlite): the same results as without, and every key and currency it does
 * not cover locked and read by `creditMany` itself.
 */
import type { Queryable, Sql } from '../../adapters/sql/types';
import { openTestPglite, uniqueName } from '../../tests/support/stack';
import { FactBus } from '../facts';
import { SeededRandom } from '../random';
import { Wallet, WalletError, type BatchResult, type Movement } from './wallet';

const NOW = Date.UTC(2026, 10, 29);

describe('Wallet.prepareCredits [PGlite]', () => {
  let sql: Sql;
  let wallet: Wallet;
  beforeAll(async () => {
    sql = await openTestPglite();
    wallet = new Wallet(new FactBus(), new SeededRandom('prepared-credits'));
  });
  afterAll(() => sql.close());

  async function tenant(): Promise<string> {
    const t = uniqueName('t');
    for (const [id, active] of [
      ['coins', true],
      ['gems', true],
      ['old', false],
    ] as const)
      await sql.query(
        `INSERT INTO currencies (tenant_id, id, name, is_spendable, decimal_places, active, created_at, updated_at)
         VALUES ($1, $2, $2, true, 0, $3, now(), now())`,
        [t, id, active],
      );
    return t;
  }

  const credit = (t: string, key: string, amount: number, currency = 'coins', user = 'u1'): Movement => ({
    tenant_id: t,
    user_id: user,
    currency_id: currency,
    amount,
    source_type: 'earning_rule',
    idempotency_key: key,
    now: NOW,
  });

  /** The statements a transaction sends, in order (their first words). */
  function logging(q: Queryable, log: string[]): Queryable {
    return {
      query: (text, params) => {
        log.push(text.replace(/\s+/g, ' ').trim().slice(0, 40));
        return q.query(text, params);
      },
      exec: (script) => q.exec(script),
    };
  }

  const summary = (rs: BatchResult[]) =>
    rs.map((r) =>
      r instanceof WalletError
        ? r.code
        : { amount: r.amount, balance_after: r.balance_after, created: r.created },
    );

  it('gives the results creditMany gives alone, without reading again what it prepared', async () => {
    const [a, b] = [await tenant(), await tenant()];
    const earlier = credit(a, 'k-replayed', 5);
    await sql.tx((q) => wallet.creditMany(q, [earlier]));
    await sql.tx((q) => wallet.creditMany(q, [credit(b, 'k-replayed', 5)]));
    const batch = (t: string) => [
      credit(t, 'k1', 10),
      credit(t, 'k-replayed', 5), // a replay of the earlier credit
      credit(t, 'k2', 7, 'gems', 'u2'),
      credit(t, 'k3', 3, 'old'), // inactive currency
      credit(t, 'k4', 2, 'nope'), // unknown currency
      credit(t, 'k1', 10), // the same key twice in the batch: a replay
    ];
    const log: string[] = [];
    const prepared = await sql.tx(async (q) => {
      const lq = logging(q, log);
      // Prepared for every candidate, here with other amounts and users (caps come later).
      const p = wallet.prepareCredits(
        lq,
        batch(a).map((m) => ({ ...m, amount: 1, user_id: 'someone' })),
      );
      return wallet.creditMany(lq, batch(a), p);
    });
    const alone = await sql.tx((q) => wallet.creditMany(q, batch(b)));
    expect(summary(prepared)).toEqual(summary(alone));
    expect(summary(prepared)).toEqual([
      { amount: 10, balance_after: 15, created: true },
      { amount: 5, balance_after: 5, created: false },
      { amount: 7, balance_after: 7, created: true },
      'inactive_currency',
      'unknown_currency',
      { amount: 10, balance_after: 15, created: false },
    ]);
    // The keys' lock and the two reads once, from prepareCredits; then the balances and writes.
    expect(log.filter((s) => /pg_advisory_xact_lock|^SELECT l\.id|FROM currencies c/.test(s))).toHaveLength(
      3,
    );
  });

  it('locks and reads itself the keys and currencies the preparation did not cover', async () => {
    const t = await tenant();
    await sql.tx((q) => wallet.creditMany(q, [credit(t, 'seen', 4, 'gems')]));
    const log: string[] = [];
    const rs = await sql.tx(async (q) => {
      const lq = logging(q, log);
      const p = wallet.prepareCredits(lq, [credit(t, 'k1', 1)]);
      return wallet.creditMany(lq, [credit(t, 'k1', 6), credit(t, 'seen', 4, 'gems')], p);
    });
    expect(summary(rs)).toEqual([
      { amount: 6, balance_after: 6, created: true },
      { amount: 4, balance_after: 4, created: false },
    ]);
    expect(log.filter((s) => /pg_advisory_xact_lock|^SELECT l\.id|FROM currencies c/.test(s))).toHaveLength(
      6,
    );
  });
});
