/**
 * SQL port contract: the same suite against PGlite (embedded) and a real PostgreSQL (pg).
 */
import { loadMigrations, migrate } from '../../adapters/sql/migrate';
import type { Sql } from '../../adapters/sql/types';
import { sqlAdapters } from '../support/stack';

describe.each(sqlAdapters)('SQL contract [%s]', (_name, open) => {
  let sql: Sql;

  beforeAll(async () => {
    sql = await open();
    await sql.exec(
      'CREATE TABLE t_accounts (id text PRIMARY KEY, balance bigint NOT NULL CHECK (balance >= 0))',
    );
  });
  afterAll(async () => {
    await sql.close();
  });

  it('runs parameterised queries and returns bigint columns as numbers', async () => {
    await sql.query('INSERT INTO t_accounts (id, balance) VALUES ($1, $2)', ['a', 9007199254740991]);
    const r = await sql.query<{ id: string; balance: number }>(
      'SELECT id, balance FROM t_accounts WHERE id = $1',
      ['a'],
    );
    expect(r.rows).toEqual([{ id: 'a', balance: 9007199254740991 }]);
    expect(r.rowCount).toBe(1);
  });

  it('treats parameters as data, never as SQL', async () => {
    const hostile = "x'); DROP TABLE t_accounts; --";
    await sql.query('INSERT INTO t_accounts (id, balance) VALUES ($1, 0)', [hostile]);
    const r = await sql.query<{ id: string }>('SELECT id FROM t_accounts WHERE id = $1', [hostile]);
    expect(r.rows[0]?.id).toBe(hostile);
  });

  it('commits a transaction when the function resolves', async () => {
    const out = await sql.tx(async (q) => {
      await q.query("INSERT INTO t_accounts (id, balance) VALUES ('b', 10)");
      return 'done';
    });
    expect(out).toBe('done');
    const r = await sql.query<{ balance: number }>("SELECT balance FROM t_accounts WHERE id = 'b'");
    expect(r.rows[0]?.balance).toBe(10);
  });

  it('rolls back everything when the function throws', async () => {
    await expect(
      sql.tx(async (q) => {
        await q.query("INSERT INTO t_accounts (id, balance) VALUES ('c', 5)");
        await q.query("UPDATE t_accounts SET balance = balance - 100 WHERE id = 'b'"); // violates CHECK
      }),
    ).rejects.toThrow();
    const r = await sql.query("SELECT id FROM t_accounts WHERE id = 'c'");
    expect(r.rowCount).toBe(0);
  });

  it('serialises concurrent read-modify-write transactions that lock their row', async () => {
    await sql.query("INSERT INTO t_accounts (id, balance) VALUES ('counter', 0)");
    await Promise.all(
      Array.from({ length: 25 }, () =>
        sql.tx(async (q) => {
          const r = await q.query<{ balance: number }>(
            "SELECT balance FROM t_accounts WHERE id = 'counter' FOR UPDATE",
          );
          await q.query("UPDATE t_accounts SET balance = $1 WHERE id = 'counter'", [r.rows[0]!.balance + 1]);
        }),
      ),
    );
    const r = await sql.query<{ balance: number }>("SELECT balance FROM t_accounts WHERE id = 'counter'");
    expect(r.rows[0]?.balance).toBe(25);
  });

  it('runs multi-statement scripts with exec, inside and outside transactions', async () => {
    await sql.exec('CREATE TABLE t_x (v int); INSERT INTO t_x VALUES (1); INSERT INTO t_x VALUES (2);');
    await sql.tx((q) => q.exec('INSERT INTO t_x VALUES (3); INSERT INTO t_x VALUES (4);'));
    const r = await sql.query<{ n: number }>('SELECT count(*)::int AS n FROM t_x');
    expect(r.rows[0]?.n).toBe(4);
  });

  it('has applied every migration once and re-running migrate is a no-op', async () => {
    const r = await sql.query<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version');
    expect(r.rows.map((x) => x.version)).toEqual(loadMigrations().map((m) => m.version));
    expect(await migrate(sql)).toEqual([]);
  });

  // Array parameters of strings and numbers are written as literals by the adapters themselves
  // (adapters/sql/array-literal.ts): elements that look like the literal's own syntax stay data.
  it('passes array parameters element for element, hostile elements included', async () => {
    const texts = [
      'plain',
      '',
      'NULL',
      'null',
      '","',
      '{a,b}',
      'back\\slash',
      'quo"te',
      ' pad ',
      "x'); DROP TABLE t_accounts; --",
      'ünï\u{1F600}',
    ];
    const withNulls = ['a', null, 'NULL', null];
    const nums = [0, -1, 2.5, 9007199254740991];
    const json = [JSON.stringify({ q: 'a"b', s: 'c\\d' }), JSON.stringify([1, '","'])];
    const r = await sql.query<{
      t: string[];
      n: (string | null)[];
      b: number[];
      f: number[];
      j: unknown[];
      c: number;
    }>(
      `SELECT $1::text[] AS t, $2::text[] AS n, $3::bigint[] AS b, $4::float8[] AS f,
              $5::jsonb[] AS j, cardinality($1::text[]) AS c`,
      [texts, withNulls, nums.slice(0, 2).concat([9007199254740991]), nums, json],
    );
    const row = r.rows[0]!;
    expect(row.t).toEqual(texts);
    expect(row.c).toBe(texts.length);
    expect(row.n).toEqual(withNulls);
    expect(row.b.map(Number)).toEqual([0, -1, 9007199254740991]);
    expect(row.f).toEqual(nums);
    expect(row.j).toEqual([{ q: 'a"b', s: 'c\\d' }, [1, '","']]);
    const rows = await sql.query<{ v: string; k: number }>(
      'SELECT v, k::int AS k FROM unnest($1::text[], $2::int[]) AS u(v, k) ORDER BY k',
      [texts, texts.map((_, i) => i)],
    );
    expect(rows.rows.map((x) => x.v)).toEqual(texts);
  });

  // The same statement text many times (PGlite runs it as a prepared statement, and Postgres's plan
  // cache turns to a generic plan after five runs): every type the services pass and read back.
  it('returns the same rows for a statement run many times, with every parameter type the services use', async () => {
    await sql.exec(`CREATE TABLE t_types (id text PRIMARY KEY, n bigint, f float8, b boolean, j jsonb,
      at timestamptz, raw bytea, tags text[], nums int[], note text)`);
    const insert = `INSERT INTO t_types (id, n, f, b, j, at, raw, tags, nums, note)
      SELECT $1, $2, $3, $4, $5::jsonb, $6, $7, $8::text[], $9::int[], $10 RETURNING id, n`;
    const at = new Date('2026-11-28T10:00:00.123Z');
    for (let i = 0; i < 12; i++) {
      const r = await sql.query<{ id: string; n: number }>(insert, [
        `r${i}`,
        i * 1_000_000_007,
        i / 3,
        i % 2 === 0,
        JSON.stringify({ i, s: "it's" }),
        at,
        Buffer.from([0, i, 255]),
        ['a', `b${i}`, 'with, comma', 'with "quote"'],
        [i, -i - 1],
        i % 3 === 0 ? null : `note ${i}`,
      ]);
      expect(r.rows).toEqual([{ id: `r${i}`, n: i * 1_000_000_007 }]);
      expect(r.rowCount).toBe(1);
    }
    for (let i = 0; i < 12; i++) {
      const r = await sql.query<Record<string, unknown>>('SELECT * FROM t_types WHERE id = $1', [`r${i}`]);
      expect(r.rows).toHaveLength(1);
      const row = r.rows[0]!;
      expect(row).toMatchObject({ id: `r${i}`, n: i * 1_000_000_007, f: i / 3, b: i % 2 === 0 });
      expect(row.j).toEqual({ i, s: "it's" });
      expect((row.at as Date).toISOString()).toBe(at.toISOString());
      expect([...(row.raw as Uint8Array)]).toEqual([0, i, 255]);
      expect(row.tags).toEqual(['a', `b${i}`, 'with, comma', 'with "quote"']);
      expect(row.nums).toEqual([i, -i - 1]);
      expect(row.note).toBe(i % 3 === 0 ? null : `note ${i}`);
    }
    const none = await sql.query('SELECT * FROM t_types WHERE id = $1', ['absent']);
    expect(none).toEqual({ rows: [], rowCount: 0 });
    const updated = await sql.query('UPDATE t_types SET note = $1 WHERE n >= $2', ['big', 5_000_000_000]);
    expect(updated.rowCount).toBe(7);
  });

  it('sees a change of schema in a statement it ran before (by exec, by query, in a transaction)', async () => {
    await sql.exec('CREATE TABLE t_schema (id text PRIMARY KEY)');
    await sql.query('INSERT INTO t_schema (id) VALUES ($1)', ['a']);
    const read = () => sql.query<Record<string, unknown>>('SELECT * FROM t_schema WHERE id = $1', ['a']);
    for (let i = 0; i < 7; i++) expect((await read()).rows).toEqual([{ id: 'a' }]);
    await sql.exec('ALTER TABLE t_schema ADD COLUMN v int NOT NULL DEFAULT 1');
    expect((await read()).rows).toEqual([{ id: 'a', v: 1 }]);
    await sql.query("ALTER TABLE t_schema ADD COLUMN w text NOT NULL DEFAULT 'x'");
    expect((await read()).rows).toEqual([{ id: 'a', v: 1, w: 'x' }]);
    await sql.tx(async (q) => {
      expect((await q.query('SELECT * FROM t_schema WHERE id = $1', ['a'])).rows).toEqual([
        { id: 'a', v: 1, w: 'x' },
      ]);
      await q.exec('ALTER TABLE t_schema DROP COLUMN v');
      expect((await q.query('SELECT * FROM t_schema WHERE id = $1', ['a'])).rows).toEqual([
        { id: 'a', w: 'x' },
      ]);
    });
    expect((await read()).rows).toEqual([{ id: 'a', w: 'x' }]);
  });

  it("keeps a failed statement's error fields, runs it again afterwards, and rolls back the transaction it failed in", async () => {
    const insert = 'INSERT INTO t_accounts (id, balance) VALUES ($1, $2)';
    await sql.query(insert, ['dup', 1]);
    const err = await sql.query(insert, ['dup', 2]).catch((e: unknown) => e as Record<string, unknown>);
    expect(err).toMatchObject({ code: '23505', constraint: 't_accounts_pkey' });
    await sql.query(insert, ['dup2', 2]);
    const bad = 'SELEKT id FROM t_accounts WHERE id = $1';
    for (let i = 0; i < 2; i++)
      await expect(sql.query(bad, ['dup'])).rejects.toMatchObject({ code: '42601' });
    await expect(
      sql.tx(async (q) => {
        await q.query(insert, ['in-tx', 3]);
        await q.query(insert, ['dup', 3]);
      }),
    ).rejects.toMatchObject({ code: '23505' });
    const r = await sql.query('SELECT id FROM t_accounts WHERE id = ANY($1::text[]) ORDER BY id', [
      ['dup', 'dup2', 'in-tx'],
    ]);
    expect(r.rows).toEqual([{ id: 'dup' }, { id: 'dup2' }]);
  });

  it('keeps the order of statements sent without waiting, with and without parameters', async () => {
    await sql.exec('CREATE TABLE t_order (seq int, v text)');
    const seen = await sql.tx(async (q) => {
      const sent: Array<Promise<unknown>> = [];
      for (let i = 0; i < 30; i++) {
        sent.push(
          i % 3 === 0
            ? q.query(`INSERT INTO t_order (seq, v) VALUES (${i}, 'literal')`)
            : q.query('INSERT INTO t_order (seq, v) VALUES ($1, $2)', [i, 'param']),
        );
        if (i % 10 === 9) sent.push(q.exec(`INSERT INTO t_order (seq, v) VALUES (${i + 100}, 'script')`));
      }
      const counts = sent.map(() => 0);
      sent.push(
        q
          .query('SELECT count(*)::int AS n FROM t_order WHERE seq >= $1', [0])
          .then((r) => (counts[0] = (r.rows[0] as { n: number }).n)),
      );
      await Promise.all(sent);
      return counts[0];
    });
    expect(seen).toBe(33);
  });

  it('never commits a transaction whose statement failed unawaited, when it says so (commitChecksStatements)', async () => {
    if (!sql.commitChecksStatements) {
      // The pg adapter makes no such promise: its callers wait for every statement they send.
      expect(sql.kind).toBe('pg');
      return;
    }
    const insert = 'INSERT INTO t_accounts (id, balance) VALUES ($1, $2)';
    await sql.query(insert, ['unawaited', 1]);
    const swallowed: unknown[] = [];
    // A write that fails on the store, sent and never awaited; the callback resolves.
    await expect(
      sql.tx(async (q) => {
        await q.query(insert, ['kept-out', 1]);
        q.query(insert, ['unawaited', 2]).catch((e: unknown) => swallowed.push(e));
        q.query("UPDATE t_accounts SET balance = 5 WHERE id = 'kept-out'").catch(() => undefined);
        return 'resolved';
      }),
    ).rejects.toMatchObject({ code: '23505', constraint: 't_accounts_pkey' });
    expect(swallowed).toHaveLength(1);
    // A failure the callback caught (and went on from) refuses the COMMIT too: Postgres would
    // otherwise end the aborted transaction with a ROLLBACK that looks like a success.
    await expect(
      sql.tx(async (q) => {
        await q.query(insert, ['kept-out', 1]);
        await q.query(insert, ['unawaited', 3]).catch(() => undefined);
      }),
    ).rejects.toMatchObject({ code: '23505' });
    // A parameter that cannot even be sent.
    await expect(
      sql.tx(async (q) => {
        await q.query(insert, ['kept-out', 1]);
        q.query(insert, ['kept-out-2', () => 1]).catch(() => undefined);
      }),
    ).rejects.toThrow();
    const r = await sql.query('SELECT id FROM t_accounts WHERE id = ANY($1::text[])', [
      ['kept-out', 'kept-out-2'],
    ]);
    expect(r.rows).toEqual([]);
    // The session is usable afterwards, and a transaction without failures commits.
    await sql.tx(async (q) => {
      q.query(insert, ['kept-in', 1]).catch(() => undefined);
    });
    expect((await sql.query("SELECT id FROM t_accounts WHERE id = 'kept-in'")).rowCount).toBe(1);
  });

  it('runs more distinct statements than an adapter keeps prepared', async () => {
    for (let i = 0; i < 1_050; i++) {
      const r = await sql.query<{ v: number }>(`SELECT $1::int + ${i} AS v`, [1]);
      expect(r.rows).toEqual([{ v: i + 1 }]);
    }
    expect((await sql.query('SELECT $1::int AS v', [7])).rows).toEqual([{ v: 7 }]);
  });

  it('answers ping', async () => {
    await expect(sql.ping()).resolves.toBeUndefined();
  });
});
