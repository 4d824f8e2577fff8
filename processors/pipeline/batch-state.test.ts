/**
 * The batch-state helper (./batch-state.ts): the statements it sends (keys locked in the ORDER BY
 * of the key columns, one set-based upsert in key order) and what they do on a real store (PGlite;
 * the lock order between two transactions on Postgres: tests/contract/batch-state-locks.test.ts).
 */
import type { Queryable, Sql } from '../../adapters/sql/types';
import { openTestPglite } from '../../tests/support/stack';
import { BatchState } from './batch-state';

interface Row {
  tenant_id: string;
  user_id: string;
  period: string;
  amount: number;
  best: number;
}

const spec = () =>
  new BatchState<Row>({
    table: 'batch_state_test',
    keys: [
      { column: 'tenant_id', type: 'text' },
      { column: 'user_id', type: 'text' },
      { column: 'period', type: 'text' },
    ],
    values: [
      { column: 'amount', type: 'bigint', merge: 'add' },
      { column: 'best', type: 'float8', merge: 'replace' },
    ],
  });

/** A Queryable that records statements and answers with no rows. */
function recorder(): Queryable & { calls: Array<{ text: string; params: unknown[] }> } {
  const calls: Array<{ text: string; params: unknown[] }> = [];
  return {
    calls,
    async query(text: string, params: unknown[] = []) {
      calls.push({ text, params });
      return { rows: [], rowCount: 0 } as never;
    },
    async exec() {},
  };
}

describe('BatchState: the statements', () => {
  it('locks the keys once each (in their first order: the ORDER BY of the key columns sets the lock order)', async () => {
    const q = recorder();
    await spec().lock(q, [
      { tenant_id: 't', user_id: 'b', period: 'day:2' },
      { tenant_id: 't', user_id: 'a', period: 'week:1' },
      { tenant_id: 't', user_id: 'b', period: 'day:2' },
      { tenant_id: 's', user_id: 'z', period: 'day:1' },
      { tenant_id: 't', user_id: 'a', period: 'day:1' },
    ]);
    expect(q.calls).toHaveLength(1);
    const { text, params } = q.calls[0]!;
    expect(text).toMatch(
      /JOIN unnest\(\$1::text\[\], \$2::text\[\], \$3::text\[\]\) WITH ORDINALITY AS k\(tenant_id, user_id, period, i\)/,
    );
    // The key comes back as its position among the keys sent, not as its columns' text.
    expect(text).toMatch(/^SELECT k\.i, s\.amount, s\.best FROM batch_state_test s/);
    expect(text).toMatch(/ORDER BY s\.tenant_id, s\.user_id, s\.period FOR UPDATE OF s$/);
    expect(params).toEqual([
      ['t', 't', 's', 't'],
      ['b', 'a', 'z', 'a'],
      ['day:2', 'week:1', 'day:1', 'day:1'],
    ]);
  });

  it('writes every row in one statement, in key order, merging per column (add, replace)', async () => {
    const q = recorder();
    await spec().upsert(q, [
      { tenant_id: 't', user_id: 'b', period: 'p', amount: 2, best: 1.5 },
      { tenant_id: 't', user_id: 'a', period: 'p', amount: 3, best: 2.5 },
    ]);
    expect(q.calls).toHaveLength(1);
    const { text, params } = q.calls[0]!;
    expect(text).toMatch(/^INSERT INTO batch_state_test \(tenant_id, user_id, period, amount, best\)/);
    expect(text).toMatch(
      /unnest\(\$1::text\[\], \$2::text\[\], \$3::text\[\], \$4::bigint\[\], \$5::float8\[\]\)/,
    );
    expect(text).toMatch(
      /ON CONFLICT \(tenant_id, user_id, period\) DO UPDATE SET amount = batch_state_test\.amount \+ EXCLUDED\.amount, best = EXCLUDED\.best$/,
    );
    expect(params).toEqual([
      ['t', 't'],
      ['a', 'b'],
      ['p', 'p'],
      [3, 2],
      [2.5, 1.5],
    ]);
  });

  it('sends nothing for no keys and no rows', async () => {
    const q = recorder();
    expect(await spec().lock(q, [])).toEqual(new Map());
    await spec().upsert(q, []);
    expect(q.calls).toEqual([]);
  });

  it('refuses names that are not plain identifiers', () => {
    expect(
      () =>
        new BatchState<Row>({ table: 'x; drop', keys: [{ column: 'tenant_id', type: 'text' }], values: [] }),
    ).toThrow(/not a plain identifier/);
  });
});

describe('BatchState [PGlite]', () => {
  let sql: Sql;
  beforeAll(async () => {
    sql = await openTestPglite();
    await sql.exec(
      `CREATE TABLE batch_state_test (tenant_id text, user_id text, period text, amount bigint NOT NULL, best float8 NOT NULL,
         PRIMARY KEY (tenant_id, user_id, period))`,
    );
  });
  afterAll(() => sql.close());

  it('reads back locked rows as numbers, inserts new keys and merges existing ones', async () => {
    const s = spec();
    await s.upsert(sql, [
      { tenant_id: 't', user_id: 'a', period: 'p', amount: 5, best: 1 },
      { tenant_id: 't', user_id: 'b', period: 'p', amount: 7, best: 2 },
    ]);
    await sql.tx(async (tx) => {
      const rows = await s.lock(tx, [
        { tenant_id: 't', user_id: 'a', period: 'p' },
        { tenant_id: 't', user_id: 'c', period: 'p' },
      ]);
      expect([...rows.entries()]).toEqual([
        [
          s.id({ tenant_id: 't', user_id: 'a', period: 'p' }),
          { tenant_id: 't', user_id: 'a', period: 'p', amount: 5, best: 1 },
        ],
      ]);
      expect(s.id({ tenant_id: 't', user_id: 'a', period: 'p' })).toBe('t\u0000a\u0000p');
      await s.upsert(tx, [
        { tenant_id: 't', user_id: 'a', period: 'p', amount: 10, best: 0.5 },
        { tenant_id: 't', user_id: 'c', period: 'p', amount: 1, best: 9 },
      ]);
    });
    const after = await s.lock(sql, [
      { tenant_id: 't', user_id: 'a', period: 'p' },
      { tenant_id: 't', user_id: 'b', period: 'p' },
      { tenant_id: 't', user_id: 'c', period: 'p' },
    ]);
    expect([...after.values()].map((r) => [r.user_id, r.amount, r.best])).toEqual([
      ['a', 15, 0.5],
      ['b', 7, 2],
      ['c', 1, 9],
    ]);
  });
});
