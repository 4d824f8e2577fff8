/**
 * The plan of the batch state's `lock` (core/batch-state.ts) on a large table, on both SQL
 * adapters: one index lookup per key of the round, never a scan of the whole table. With the
 * planner's default `random_page_cost` (4), both hashed every row of a table of 20 to 100 times
 * the round's keys (100,000 rows and 3,000 keys here) on every round; the adapters set it to 1.1
 * on every session (adapters/sql/planner.ts, docs/performance.md, twenty-first pass).
 */
import type { Sql } from '../../adapters/sql/types';
import { scores } from '../../processors/pipeline/scoring';
import { dropTestPg, openTestPg, openTestPglite, uniqueName } from '../support/stack';

const ROWS = 100_000;
const KEYS = 3_000;

const adapters: Array<[string, () => Promise<{ sql: Sql; done: () => Promise<void> }>]> = [
  [
    'pglite',
    async () => {
      const sql = await openTestPglite();
      return { sql, done: () => sql.close() };
    },
  ],
  [
    'pg',
    async () => {
      const schema = uniqueName('plan');
      const sql = await openTestPg(schema);
      return { sql, done: () => dropTestPg(sql, schema) };
    },
  ],
];

describe.each(adapters)('the lock statement of a round on a large table [%s]', (_name, open) => {
  let sql: Sql;
  let done: () => Promise<void>;

  beforeAll(async () => {
    ({ sql, done } = await open());
    await sql.query(
      `INSERT INTO leaderboard_scores (tenant_id, leaderboard_id, window_key, user_id, score, total, n, tiebreak, partition)
       SELECT 'plan-tenant', 'lb' || (i % 3), 'all', 'user-' || i, i, i, 1, i, i % 12
       FROM generate_series(1, $1::int) AS i`,
      [ROWS],
    );
    await sql.exec('ANALYZE leaderboard_scores');
  }, 60_000);
  afterAll(() => done());

  const keys = () =>
    Array.from({ length: KEYS }, (_, j) => {
      const i = 1 + ((j * 7919) % ROWS);
      return {
        tenant_id: 'plan-tenant',
        leaderboard_id: `lb${i % 3}`,
        window_key: 'all',
        user_id: `user-${i}`,
      };
    });

  it('runs with the planner settings of adapters/sql/planner.ts', async () => {
    const r = await sql.query<{ random_page_cost: string }>('SHOW random_page_cost');
    expect(r.rows[0]!.random_page_cost).toBe('1.1');
  });

  it(`looks up ${KEYS} keys of a ${ROWS}-row table by its primary key, without reading the table`, async () => {
    const k = keys();
    const plan = await sql.tx(async (q) => {
      const r = await q.query<{ 'QUERY PLAN': string }>(
        `EXPLAIN ${scores.lockSql}`,
        scores.spec.keys.map((c) => k.map((x) => (x as Record<string, unknown>)[c.column])),
      );
      return r.rows.map((x) => x['QUERY PLAN']).join('\n');
    });
    expect(plan).toMatch(/Index Scan using leaderboard_scores_pkey/);
    expect(plan).not.toMatch(/Seq Scan on leaderboard_scores/);
    // And it finds them all.
    const found = await sql.tx((q) => scores.lock(q, k));
    expect(found.size).toBe(KEYS);
  });
});
