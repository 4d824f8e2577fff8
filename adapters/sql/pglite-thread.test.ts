/**
 * PGlite in a worker thread: what crossing the thread could change. Values of every kind the
 * stores use come back as the in-thread adapter returns them, database errors keep their SQLSTATE
 * fields, transactions stay one at a time, a value that cannot cross is refused without reaching
 * the database, the data directory stays locked to one opener, and a thread that dies fails every
 * call instead of leaving it hanging. (The SQL port's contract runs on this adapter too:
 * tests/contract/sql.contract.test.ts.)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DataDirInUse } from './dirlock';
import { PgliteSql } from './pglite';
import { EmbeddedDatabaseStopped, PgliteThreadSql } from './pglite-thread';

jest.setTimeout(60_000);

describe('PgliteThreadSql', () => {
  let sql: PgliteThreadSql;
  beforeAll(async () => {
    sql = await PgliteThreadSql.open();
    await sql.exec(`CREATE TABLE kinds (id int PRIMARY KEY, at timestamptz, data jsonb, raw bytea,
      big bigint, tags text[], amount numeric)`);
  });
  afterAll(() => sql.close());

  it('returns every kind of value as the in-thread adapter does', async () => {
    const local = await PgliteSql.open();
    await local.exec(`CREATE TABLE kinds (id int PRIMARY KEY, at timestamptz, data jsonb, raw bytea,
      big bigint, tags text[], amount numeric)`);
    const params = [
      1,
      new Date('2026-11-27T01:02:03.456Z'),
      JSON.stringify({ a: [1, 'x', null], b: { c: true } }),
      Buffer.from([0, 1, 254, 255]),
      9007199254740991,
      ['a', "b'c", 'ünï'],
      '12345678901234567890.5',
    ];
    const insert = 'INSERT INTO kinds VALUES ($1, $2, $3::jsonb, $4, $5, $6, $7)';
    const select = 'SELECT * FROM kinds WHERE id = 1';
    await sql.query(insert, params);
    await local.query(insert, params);
    const there = await sql.query(select);
    const here = await local.query(select);
    await local.close();
    expect(there).toEqual(here);
    expect(there.rows[0]).toMatchObject({ big: 9007199254740991, data: { b: { c: true } } });
    // A Date still (of the outer realm: Jest's sandbox has its own Date, hence no instanceof).
    expect(Object.prototype.toString.call((there.rows[0] as { at: unknown }).at)).toBe('[object Date]');
  });

  it('sends array parameters as their literals once the statement is prepared, with the same rows', async () => {
    const sent: unknown[][] = [];
    const worker = (sql as unknown as { worker: { postMessage(m: unknown): void } }).worker;
    const post = worker.postMessage.bind(worker);
    worker.postMessage = (m: unknown) => {
      const params = (m as { params?: unknown[] }).params;
      if (params) sent.push(params);
      post(m);
    };
    try {
      const select = `SELECT k.i, k.t FROM unnest($1::text[], $2::int[]) WITH ORDINALITY AS k(t, n, i) ORDER BY k.i`;
      const params = [
        ['a', 'b"c', 'ünï'],
        [1, 2, 3],
      ];
      const first = await sql.query(select, params);
      const second = await sql.query(select, params);
      expect(second).toEqual(first);
      expect(first.rows).toEqual([
        { i: 1, t: 'a' },
        { i: 2, t: 'b"c' },
        { i: 3, t: 'ünï' },
      ]);
      // The first call sent the arrays (the types were not known yet), the second their literals.
      expect(sent[0]).toEqual(params);
      expect(sent[1]).toEqual(['{"a","b\\"c","ünï"}', '{1,2,3}']);
      // A statement that may change the schema forgets the types: arrays again, until the next reply.
      await sql.exec('CREATE TABLE forget_types (id int)');
      await sql.query(select, params);
      expect(sent[2]).toEqual(params);
    } finally {
      worker.postMessage = post;
    }
  });

  it('keeps the SQLSTATE and the fields of a database error', async () => {
    await sql.query('INSERT INTO kinds (id) VALUES (2)');
    const err = await sql.query('INSERT INTO kinds (id) VALUES (2)').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect(err).toMatchObject({ code: '23505', constraint: 'kinds_pkey' });
    expect((err as Error).message).toMatch(/duplicate key/);
  });

  it('rolls back a transaction whose statement failed, and the session goes on', async () => {
    await expect(
      sql.tx(async (q) => {
        await q.query('INSERT INTO kinds (id) VALUES (3)');
        await q.query('INSERT INTO kinds (id) VALUES (2)');
      }),
    ).rejects.toMatchObject({ code: '23505' });
    expect((await sql.query('SELECT id FROM kinds WHERE id = 3')).rowCount).toBe(0);
    await expect(sql.ping()).resolves.toBeUndefined();
  });

  /**
   * A transaction that inserts row `id` and then holds the session for 200 ms: `entered` once the
   * row is in, `done` when it committed (after `then`, if given, ran inside it).
   */
  const holding = (id: number, then?: () => void) => {
    let inside!: () => void;
    const entered = new Promise<void>((r) => (inside = r));
    const done = sql.tx(async (q) => {
      await q.query('INSERT INTO kinds (id) VALUES ($1)', [id]);
      inside();
      await new Promise((r) => setTimeout(r, 200));
      then?.();
    });
    return { entered, done };
  };

  it('runs one transaction at a time: a statement outside waits for the open one', async () => {
    const order: string[] = [];
    const { entered, done: t } = holding(10, () => order.push('tx'));
    await entered;
    const outside = sql.query('SELECT count(*)::int AS n FROM kinds WHERE id = 10').then((r) => {
      order.push('outside');
      return r.rows[0];
    });
    await t;
    expect(await outside).toEqual({ n: 1 });
    expect(order).toEqual(['tx', 'outside']);
  });

  it('runs statements sent with their BEGIN inside the transaction, in order, once it opens', async () => {
    const { entered, done: first } = holding(30);
    await entered;
    // Sent at once, behind the open transaction: none of them may run before it commits, and the
    // second must see the first (the order they were sent in).
    const second = sql.tx((q) =>
      Promise.all([
        q.query('INSERT INTO kinds (id, big) SELECT 31, count(*) FROM kinds WHERE id = 30'),
        q.query('UPDATE kinds SET big = big * 10 WHERE id = 31'),
        q.query<{ big: number }>('SELECT big FROM kinds WHERE id = 31'),
      ]),
    );
    await first;
    const [, , read] = await second;
    expect(read.rows).toEqual([{ big: 10 }]);
    expect((await sql.query('SELECT big FROM kinds WHERE id = 31')).rows).toEqual([{ big: 10 }]);
  });

  it('refuses a parameter that cannot cross the thread, and nothing reaches the database', async () => {
    await expect(sql.query('INSERT INTO kinds (id, data) VALUES (20, $1)', [() => 'code'])).rejects.toThrow(
      /could not be cloned/,
    );
    expect((await sql.query('SELECT id FROM kinds WHERE id = 20')).rowCount).toBe(0);
  });
});

describe('PgliteThreadSql on a data directory', () => {
  const dirs: string[] = [];
  afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
  const tempDir = () => {
    const d = mkdtempSync(join(tmpdir(), 'ludus-pgthread-'));
    dirs.push(d);
    return join(d, 'pg');
  };

  it('keeps what was committed across a reopen, and locks the directory to one opener', async () => {
    const dir = tempDir();
    const first = await PgliteThreadSql.open({ dataDir: dir });
    await first.exec('CREATE TABLE kept (v int)');
    await first.tx((q) => q.query('INSERT INTO kept VALUES (7)'));
    await expect(PgliteThreadSql.open({ dataDir: dir })).rejects.toBeInstanceOf(DataDirInUse);
    await first.close();
    const again = await PgliteThreadSql.open({ dataDir: dir });
    expect((await again.query('SELECT v FROM kept')).rows).toEqual([{ v: 7 }]);
    await again.close();
  });

  it('fails every pending and later call when the thread dies, and says so once', async () => {
    const stopped: Error[] = [];
    const sql = await PgliteThreadSql.open({ onStopped: (e) => stopped.push(e) });
    // Kill the thread from inside while a statement is on its way.
    const pending = sql.query('SELECT pg_sleep(0.5)');
    const worker = (sql as unknown as { worker: import('node:worker_threads').Worker }).worker;
    await worker.terminate();
    await expect(pending).rejects.toBeInstanceOf(EmbeddedDatabaseStopped);
    await expect(sql.query('SELECT 1')).rejects.toBeInstanceOf(EmbeddedDatabaseStopped);
    expect(stopped).toHaveLength(1);
    await expect(sql.close()).resolves.toBeUndefined();
  });
});
