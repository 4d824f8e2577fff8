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

  it('answers ping', async () => {
    await expect(sql.ping()).resolves.toBeUndefined();
  });
});
