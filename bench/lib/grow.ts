/**
 * A grown store for the pipeline's drain (issue 19, twenty-first pass): the rows a long-running
 * deployment holds for other users, in every table the pipeline looks a round's keys up in or
 * inserts into (scores, balances, earning caps, the ledger, the dedupe table). They belong to a
 * tenant of their own (`bench-grown`), so the drain's checks and effects are untouched; only the
 * tables' sizes, and so the plans and costs of the pipeline's statements, change. Then `ANALYZE`,
 * as a server's autovacuum would have done (PGlite runs none).
 */
import type { Queryable } from '../../adapters/sql/types';
import { progress } from './util';

export const GROWN_TENANT = 'bench-grown';
const CHUNK = 100_000;

const TABLES: Array<[table: string, insert: string]> = [
  [
    'leaderboard_scores',
    `INSERT INTO leaderboard_scores (tenant_id, leaderboard_id, window_key, user_id, score, total, n, tiebreak, partition)
     SELECT '${GROWN_TENANT}', 'grown', 'all', 'grown-' || i, i, i, 1, i, i % 12 FROM generate_series($1::int, $2::int) AS i`,
  ],
  [
    'balances',
    `INSERT INTO balances (tenant_id, user_id, currency_id, available, lifetime_earned)
     SELECT '${GROWN_TENANT}', 'grown-' || i, 'coins', i, i FROM generate_series($1::int, $2::int) AS i`,
  ],
  [
    'earning_usage',
    `INSERT INTO earning_usage (tenant_id, rule_id, user_id, period, amount)
     SELECT '${GROWN_TENANT}', 'grown', 'grown-' || i, 'd:2026-01-01', i FROM generate_series($1::int, $2::int) AS i`,
  ],
  [
    'ledger',
    `INSERT INTO ledger (id, tenant_id, user_id, currency_id, amount, balance_after, source_type, source_ref, description, idempotency_key, created_at)
     SELECT 'grown-' || i, '${GROWN_TENANT}', 'grown-' || i, 'coins', 1, 1, 'earning_rule', 'grown', NULL, 'grown:' || i, 1700000000000 + i
     FROM generate_series($1::int, $2::int) AS i`,
  ],
  [
    'processed_events',
    `INSERT INTO processed_events (tenant_id, event_id, received_at)
     SELECT '${GROWN_TENANT}', 'grown-' || i, 1700000000000 + i FROM generate_series($1::int, $2::int) AS i`,
  ],
];

/** Adds `users` rows to each table (see above), then says so on the progress line of `store`. */
export async function growStore(q: Queryable, users: number, store: string): Promise<void> {
  const t0 = Date.now();
  for (const [table, insert] of TABLES) {
    for (let from = 1; from <= users; from += CHUNK)
      await q.query(insert, [from, Math.min(users, from + CHUNK - 1)]);
    await q.exec(`ANALYZE ${table}`);
  }
  progress(
    `pipeline: ${store} grown by ${users.toLocaleString('en-US')} other users' rows per table in ${((Date.now() - t0) / 1000).toFixed(1)} s`,
  );
}
