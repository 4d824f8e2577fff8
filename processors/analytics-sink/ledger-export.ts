/**
 * Copies ledger rows to the analytics store (ClickHouse in the distributed shape) for operators.
 * The API reads balances and transactions from SQL (the system of record), so a grant is visible
 * at once; this copy may lag by a second or two.
 *
 * A cursor (export_cursors 'ledger') remembers the highest `seq` exported. Sequence numbers are
 * taken at insert time, so a transaction that commits late can leave a lower seq behind the
 * cursor: every pass therefore re-reads an overlap of OVERLAP rows below the cursor, and the
 * analytics inserts are idempotent (same transaction id counted once). A row the analytics store
 * refuses (core/history/rows.ts) is skipped with a log line and
 * `ludus_skipped_rows_total{stage="analytics_ledger"}`, and the cursor moves on.
 */
import { checkTransaction } from '../../core/history/rows';
import type { Analytics, AnalyticsTransaction } from '../../adapters/analytics/types';
import type { Sql } from '../../adapters/sql/types';
import type { Logger } from '../../shared/logger';
import type { Metrics } from '../../shared/metrics';
import { reportRefused, splitRefused } from '../../core/refused';

export const OVERLAP = 1000;
const BATCH = 5000;

interface Row {
  seq: number;
  id: string;
  tenant_id: string;
  user_id: string;
  currency_id: string;
  amount: number;
  balance_after: number;
  source_type: string;
  source_ref: string | null;
  created_at: number;
}

/** One pass; returns the number of rows copied. */
export async function exportLedger(
  sql: Sql,
  analytics: Analytics,
  report: { log?: Logger; metrics?: Metrics } = {},
): Promise<number> {
  const c = await sql.query<{ position: number }>(
    "SELECT position FROM export_cursors WHERE name = 'ledger'",
  );
  const cursor = Number(c.rows[0]?.position ?? 0);
  const from = Math.max(0, cursor - OVERLAP);
  const r = await sql.query<Row>('SELECT * FROM ledger WHERE seq > $1 ORDER BY seq LIMIT $2', [from, BATCH]);
  if (r.rows.length === 0) return 0;
  const seqOf = new Map(r.rows.map((x) => [x.id, Number(x.seq)]));
  const { accepted, refused } = splitRefused(
    r.rows.map((x): AnalyticsTransaction => ({
      tenant_id: x.tenant_id,
      transaction_id: x.id,
      user_id: x.user_id,
      currency_id: x.currency_id,
      amount: Number(x.amount),
      balance_after: Number(x.balance_after),
      source_type: x.source_type,
      source_ref: x.source_ref,
      created_at: Number(x.created_at),
    })),
    checkTransaction,
  );
  // Every pass re-reads the overlap: a refused row there is reported once, when first seen.
  reportRefused(
    report,
    'analytics_ledger',
    refused.filter((x) => seqOf.get(x.row.transaction_id)! > cursor),
    (t) => ({ tenant_id: t.tenant_id, transaction_id: t.transaction_id }),
  );
  if (accepted.length) await analytics.insertTransactions(accepted);
  const last = Number(r.rows[r.rows.length - 1]!.seq);
  await sql.query(
    `INSERT INTO export_cursors (name, position) VALUES ('ledger', $1)
     ON CONFLICT (name) DO UPDATE SET position = GREATEST(export_cursors.position, EXCLUDED.position)`,
    [last],
  );
  return r.rows.length;
}

/** Runs exportLedger every intervalMs until stopped. */
export function startLedgerExport(
  deps: { sql: Sql; analytics: Analytics; log: Logger; metrics?: Metrics },
  intervalMs = 1000,
): { stop(): Promise<void> } {
  let stopped = false;
  let running: Promise<void> = Promise.resolve();
  let timer: NodeJS.Timeout;
  const tick = () => {
    running = exportLedger(deps.sql, deps.analytics, deps)
      .catch((err) => {
        deps.log.warn({ err }, 'ledger export failed; retrying');
        return 0;
      })
      .then((n) => {
        // A full batch means a backlog: go again at once.
        if (!stopped) timer = setTimeout(tick, n === BATCH ? 0 : intervalMs);
      });
  };
  timer = setTimeout(tick, intervalMs);
  return {
    stop: async () => {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
