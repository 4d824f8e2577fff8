/**
 * Micro-benchmark of a round's key lookups (issue 19, twenty-first pass): the batch state's `lock`
 * of `leaderboard_scores` (processors/pipeline/scoring.ts `scores`, the real statement) for 3,000
 * keys of a table of growing size, on PGlite (in process) and on the stack's Postgres, with the
 * planner setting the adapters use (`random_page_cost` 1.1, adapters/sql/planner.ts) against
 * Postgres's default (4, set for the transaction only), in the same run. Prints the median of 9
 * transactions per cell and the plan each setting got.
 *
 *   npx tsx bench/round-lookups.ts [rows,rows,...]     (default 20000,200000,1000000)
 * Postgres is the one of `ops/stack env` (bench/lib/stack.ts).
 */
import { migrate } from '../adapters/sql/migrate';
import { PgSql } from '../adapters/sql/pg';
import { PgliteSql } from '../adapters/sql/pglite';
import type { Sql } from '../adapters/sql/types';
import { scores } from '../processors/pipeline/scoring';
import { stackSettings } from './lib/stack';
import { figure, uniqueName } from './lib/util';

const KEYS = 3_000;
const RUNS = 9;

async function fill(sql: Sql, from: number, to: number): Promise<void> {
  for (let start = from; start <= to; start += 200_000) {
    await sql.query(
      `INSERT INTO leaderboard_scores (tenant_id, leaderboard_id, window_key, user_id, score, total, n, tiebreak, partition)
       SELECT 'bench', 'lb' || (i % 3), 'all', 'user-' || i, i, i, 1, i, i % 12
       FROM generate_series($1::int, $2::int) AS i`,
      [start, Math.min(to, start + 199_999)],
    );
  }
  await sql.exec('ANALYZE leaderboard_scores');
}

function keys(rows: number): unknown[][] {
  const picked = new Set<number>();
  while (picked.size < KEYS) picked.add(1 + Math.floor(Math.random() * rows));
  const ks = [...picked].map((i) => ({
    tenant_id: 'bench',
    leaderboard_id: `lb${i % 3}`,
    window_key: 'all',
    user_id: `user-${i}`,
  }));
  return scores.spec.keys.map((c) => ks.map((k) => (k as Record<string, unknown>)[c.column]));
}

/** Median ms of `lock` for KEYS keys, and the join of its plan, at this random_page_cost (or the session's). */
async function measure(sql: Sql, rows: number, cost?: string): Promise<{ ms: number; join: string }> {
  const times: number[] = [];
  let join = '';
  for (let i = 0; i < RUNS; i++) {
    await sql.tx(async (q) => {
      if (cost) await q.exec(`SET LOCAL random_page_cost = ${cost}`);
      const params = keys(rows);
      if (i === 0) {
        const plan = await q.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${scores.lockSql}`, params);
        join =
          plan.rows
            .map((r) => r['QUERY PLAN'])
            .find((l) => /Join|Nested Loop/.test(l))
            ?.trim() ?? '?';
        join = join.replace(/\s+\(cost=.*$/, '').replace(/^->\s*/, '');
      }
      const t0 = performance.now();
      const found = await q.query(scores.lockSql, params);
      times.push(performance.now() - t0);
      if (found.rows.length !== KEYS) throw new Error('keys not all found');
    });
  }
  return { ms: figure(times).median, join };
}

async function main(): Promise<void> {
  const sizes = (process.argv[2] ?? '20000,200000,1000000').split(',').map(Number);
  const url = stackSettings().pgUrl;
  const schema = uniqueName('bench_lookups');
  const engines: Array<[string, () => Promise<Sql>, (s: Sql) => Promise<void>]> = [
    ['PGlite', async () => PgliteSql.open(), (s) => s.close()],
    [
      'Postgres',
      async () => {
        const s = new PgSql({ url, schema, max: 2 });
        await s.init();
        return s;
      },
      async (s) => {
        await s.exec(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
        await s.close();
      },
    ],
  ];
  console.log(
    `| engine | table rows | keys | random_page_cost 4 (default) | 1.1 (Ludus's sessions) | ratio |`,
  );
  console.log(`|---|---:|---:|---|---|---:|`);
  for (const [name, open, close] of engines) {
    const sql = await open();
    try {
      await migrate(sql);
      let filled = 0;
      for (const rows of sizes) {
        process.stderr.write(`${name}: filling ${rows} rows...\n`);
        await fill(sql, filled + 1, rows);
        filled = rows;
        const before = await measure(sql, rows, '4');
        const after = await measure(sql, rows);
        console.log(
          `| ${name} | ${rows.toLocaleString('en')} | ${KEYS.toLocaleString('en')} | ${before.ms.toFixed(1)} ms (${before.join}) | ` +
            `${after.ms.toFixed(1)} ms (${after.join}) | ${(before.ms / after.ms).toFixed(2)}× |`,
        );
      }
    } finally {
      await close(sql);
    }
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
