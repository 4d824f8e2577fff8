/**
 * Planner settings of every Ludus session, on both SQL adapters (issue 19, twenty-first pass).
 *
 * `random_page_cost` 1.1 instead of Postgres's default of 4. The default prices a random page read
 * as a seek on a spinning disk. Ludus's hot statements look up a round's keys in large tables (the
 * batch state's `lock`: up to a few thousand keys of `leaderboard_scores`, `balances`,
 * `earning_usage`...). At 4 the planner chose a hash join that reads and hashes the WHOLE table on
 * every round, a cost that grows with the table, over one index lookup per key. Measured on
 * Postgres 15, 3,000 keys of a 200,000-row table: 107-126 ms with the hash join, 27-36 ms with the
 * index lookups; on PGlite 194-217 ms against 86-94 ms (docs/performance.md, twenty-first pass).
 * PGlite's pages are always in memory; a Postgres server's hot tables and indexes are in its
 * buffers or the page cache, or on SSD, where 1.1 is the usual setting. It is set per session (the
 * server's own default, and other applications' sessions, are left alone), and the planner still
 * hashes a table that is small next to the keys.
 */
export const PLANNER_SETTINGS: ReadonlyArray<readonly [name: string, value: string]> = [
  ['random_page_cost', '1.1'],
];

/** The settings as server command-line options: `-c name=value` each. */
export function plannerOptions(): string[] {
  return PLANNER_SETTINGS.flatMap(([name, value]) => ['-c', `${name}=${value}`]);
}
