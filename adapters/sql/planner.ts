/**
 * Planner settings of every Ludus session, on both SQL adapters (issue 19, twenty-first pass).
 *
 * `random_page_cost` 1.1 instead of Postgres's default of 4. The default prices a random page read
 * as a seek on a spinning disk. Ludus's hot statements look up a round's keys in tables that grow
 * without bound (the batch state's `lock`: up to a few thousand keys of `leaderboard_scores`,
 * `balances`, `earning_usage`...). At 4, for a table of about 20 to 100 times the round's keys,
 * the planner chose a hash join that reads and hashes the whole table on every round over one
 * index lookup per key; only larger tables got the lookups again. `bench/round-lookups.ts`, 3,000
 * keys: on a 200,000-row table 198 ms against 60 ms on Postgres 15, 323 ms against 146 ms on
 * PGlite; at 20,000 rows (hashed either way) and at 1,000,000 (looked up either way) no change
 * (docs/performance.md, twenty-first pass). PGlite's pages are always in memory; a Postgres
 * server's hot tables and indexes are in its buffers or the page cache, or on SSD, where 1.1 is the
 * usual setting. It is set per session: the server's own default, and other applications'
 * sessions, are left alone.
 */
export const PLANNER_SETTINGS: ReadonlyArray<readonly [name: string, value: string]> = [
  ['random_page_cost', '1.1'],
];

/** The settings as server command-line options, `-c name=value` each (PGlite's start parameters). */
export function plannerOptions(): string[] {
  return PLANNER_SETTINGS.flatMap(([name, value]) => ['-c', `${name}=${value}`]);
}
