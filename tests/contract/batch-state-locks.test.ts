/**
 * The batch-state helper's lock order on the real Postgres (core/batch-state.ts): the keys are
 * sent in the caller's order, and the statement's ORDER BY alone makes every transaction lock the
 * rows in one order. Two transactions that lock the same rows, given in opposite orders, wait for
 * each other instead of deadlocking (SQLSTATE 40P01, which happened when rows were locked in each
 * batch's own order, issue 7).
 */
import type { PgSql } from '../../adapters/sql/pg';
import { BatchState } from '../../core/batch-state';
import { dropTestPg, openTestPg, uniqueName } from '../support/stack';

interface Row {
  tenant_id: string;
  user_id: string;
  amount: number;
}

const state = new BatchState<Row>({
  table: 'batch_state_locks',
  keys: [
    { column: 'tenant_id', type: 'text' },
    { column: 'user_id', type: 'text' },
  ],
  values: [{ column: 'amount', type: 'bigint', merge: 'add' }],
});

describe('BatchState locks on Postgres', () => {
  const schema = uniqueName('bslocks');
  let sql: PgSql;
  const keys = Array.from({ length: 2000 }, (_, i) => ({
    tenant_id: 't',
    user_id: `u${String(i).padStart(5, '0')}`,
  }));

  beforeAll(async () => {
    sql = await openTestPg(schema);
    await sql.exec(
      `CREATE TABLE batch_state_locks (tenant_id text, user_id text, amount bigint NOT NULL, PRIMARY KEY (tenant_id, user_id))`,
    );
    await state.upsert(
      sql,
      keys.map((k) => ({ ...k, amount: 0 })),
    );
  });
  afterAll(() => dropTestPg(sql, schema));

  it('two transactions locking the same 2,000 rows in opposite orders both commit, one after the other', async () => {
    for (let round = 0; round < 3; round++) {
      const both = [keys, [...keys].reverse()].map((order) =>
        sql.tx(async (q) => {
          const rows = await state.lock(q, order);
          expect(rows.size).toBe(keys.length);
          await new Promise((r) => setTimeout(r, 20));
          await state.upsert(
            q,
            order.map((k) => ({ ...k, amount: 1 })),
          );
        }),
      );
      await Promise.all(both);
    }
    const after = await sql.query<{ total: string }>('SELECT sum(amount) AS total FROM batch_state_locks');
    expect(Number(after.rows[0]!.total)).toBe(2 * 3 * keys.length);
  });
});
