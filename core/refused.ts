/**
 * One bad row must not stop a derived store's feed (issue 11): before a batch goes to a store that
 * validates its input (the rank index, the analytics store), each row is checked with the store's
 * own rules (adapters/ranks/validate.ts, core/history/rows.ts, shared by both adapters of
 * each port). Refused rows are skipped with a log line and the `ludus_skipped_rows_total` metric;
 * the rest is written and the feed's position moves on. A store that fails for another reason (it
 * is down) still throws, and the batch is retried.
 */
import type { Logger } from '../shared/logger';
import type { Metrics } from '../shared/metrics';

export interface Refused<T> {
  row: T;
  reason: string;
  reasonClass: string;
}

/** Splits rows into those `check` accepts (as it returns them) and those it throws on. */
export function splitRefused<T, U = T>(
  rows: T[],
  check: (row: T) => U,
): { accepted: U[]; refused: Array<Refused<T>> } {
  const accepted: U[] = [];
  const refused: Array<Refused<T>> = [];
  for (const row of rows) {
    try {
      accepted.push(check(row));
    } catch (err) {
      const e = err as Error;
      refused.push({ row, reason: e?.message ?? String(err), reasonClass: e?.name ?? 'Error' });
    }
  }
  return { accepted, refused };
}

/** Logs and counts skipped rows; `describe` picks the fields that identify a row in the log. */
export function reportRefused<T>(
  deps: { log?: Logger; metrics?: Metrics },
  stage: string,
  refused: Array<Refused<T>>,
  describe: (row: T) => Record<string, unknown>,
): void {
  for (const r of refused) {
    deps.metrics?.skippedRows.inc({ stage, reason_class: r.reasonClass });
    deps.log?.warn(
      { stage, reason: r.reason, ...describe(r.row) },
      'row refused by a derived store; skipped',
    );
  }
}
