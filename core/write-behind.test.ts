/**
 * Write-behind (./write-behind.ts) on a real store (PGlite): writes sent without waiting run in
 * order before the reads that follow them, and a failed write is what the transaction throws
 * (not the "transaction is aborted" of the statements after it), at the next read or at settle.
 */
import { openTestPglite } from '../tests/support/stack';
import type { Sql } from '../adapters/sql/types';
import { write, WriteBehind } from './write-behind';

describe('WriteBehind [PGlite]', () => {
  let sql: Sql;
  beforeAll(async () => {
    sql = await openTestPglite();
    await sql.exec('CREATE TABLE wb (k text PRIMARY KEY, v int NOT NULL CHECK (v >= 0))');
  });
  afterAll(() => sql.close());
  beforeEach(() => sql.exec('DELETE FROM wb'));

  it('sends writes without waiting, in order, and a later read sees them', async () => {
    const seen = await sql.tx(async (q) => {
      const wq = new WriteBehind(q);
      for (let i = 0; i < 5; i++) await write(wq, 'INSERT INTO wb (k, v) VALUES ($1, $2)', [`k${i}`, i]);
      await write(wq, 'UPDATE wb SET v = v + 10 WHERE k = $1', ['k4']);
      const r = await wq.query<{ k: string; v: number }>('SELECT k, v FROM wb ORDER BY k');
      await wq.settle();
      return r.rows.map((x) => [x.k, Number(x.v)]);
    });
    expect(seen).toEqual([
      ['k0', 0],
      ['k1', 1],
      ['k2', 2],
      ['k3', 3],
      ['k4', 14],
    ]);
  });

  it.each([
    ['read', (wq: WriteBehind) => wq.query('SELECT count(*) FROM wb')],
    ['script', (wq: WriteBehind) => wq.exec("INSERT INTO wb (k, v) VALUES ('d', 4)")],
  ])(
    "throws the failed write's own error at the next %s, and the transaction commits nothing",
    async (_, next) => {
      const err = await sql
        .tx(async (q) => {
          const wq = new WriteBehind(q);
          await write(wq, 'INSERT INTO wb (k, v) VALUES ($1, $2)', ['a', 1]);
          await write(wq, 'INSERT INTO wb (k, v) VALUES ($1, $2)', ['b', -1]); // violates the CHECK
          await write(wq, 'INSERT INTO wb (k, v) VALUES ($1, $2)', ['c', 3]); // aborted (25P02)
          await next(wq); // aborted too
        })
        .catch((e: unknown) => e as { code?: string; message: string });
      expect(err).toMatchObject({ code: '23514' });
      expect((await sql.query('SELECT * FROM wb')).rows).toEqual([]);
    },
  );

  it('throws the failed write at settle when no read follows it', async () => {
    const err = await sql
      .tx(async (q) => {
        const wq = new WriteBehind(q);
        await write(wq, 'INSERT INTO wb (k, v) VALUES ($1, $2)', ['a', 1]);
        await write(wq, 'INSERT INTO wb (k, v) VALUES ($1, $2)', ['a', 2]); // duplicate key
        await wq.settle();
      })
      .catch((e: unknown) => e as { code?: string });
    expect(err).toMatchObject({ code: '23505' });
    expect((await sql.query('SELECT * FROM wb')).rows).toEqual([]);
  });

  it('awaits the write on an ordinary Queryable', async () => {
    await sql.tx(async (q) => {
      await write(q, 'INSERT INTO wb (k, v) VALUES ($1, $2)', ['x', 1]);
      expect((await q.query('SELECT k FROM wb')).rows).toEqual([{ k: 'x' }]);
    });
    await expect(
      sql.tx((q) => write(q, 'INSERT INTO wb (k, v) VALUES ($1, $2)', ['x', 1])),
    ).rejects.toMatchObject({ code: '23505' });
  });
});
