/**
 * What the fault tests need to kill a child process at a chosen moment and know it is really gone:
 * its Postgres sessions, found in pg_stat_activity by the application_name the child connects with
 * (`?application_name=` in its database URL), and a progress line on stderr for the long runs.
 */
import type { Sql } from '../../adapters/sql/types';
import type { Spawned } from './process';
import { waitFor } from './wait';

export interface SessionFilter {
  /** Only sessions in a transaction that has written (has an xid): a batch under way. */
  writing?: boolean;
  /** Only sessions whose transaction has been open longer than this. */
  openLongerThanMs?: number;
  /** Only sessions whose current query matches this ILIKE pattern. */
  queryLike?: string;
}

/** How many sessions the child named `app` holds, narrowed by the filter. */
export async function sessionCount(sql: Sql, app: string, f: SessionFilter = {}): Promise<number> {
  const where = ['application_name = $1'];
  const params: unknown[] = [app];
  if (f.writing) where.push('backend_xid IS NOT NULL');
  if (f.openLongerThanMs !== undefined) {
    params.push(`${f.openLongerThanMs} milliseconds`);
    where.push(`xact_start IS NOT NULL AND now() - xact_start > $${params.length}::interval`);
  }
  if (f.queryLike !== undefined) {
    params.push(f.queryLike);
    where.push(`query ILIKE $${params.length}`);
  }
  const r = await sql.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_stat_activity WHERE ${where.join(' AND ')}`,
    params,
  );
  return r.rows[0]?.n ?? 0;
}

/**
 * SIGKILLs the child and waits until it has exited and Postgres has seen every session of `app`
 * end (so its open transaction is rolled back, and the process was not a wrapper around another).
 */
export async function killAndWaitGone(sql: Sql, proc: Spawned, app: string): Promise<void> {
  proc.child.kill('SIGKILL');
  await proc.exited;
  await waitFor(async () => (await sessionCount(sql, app)) === 0, {
    what: `the killed process's sessions (${app}) to end`,
  });
}

/** A progress printer for long fault tests: `[label] what at 12.3 s` on stderr. */
export function progressMarker(label: string): (what: string) => void {
  const started = Date.now();
  return (what) =>
    process.stderr.write(`[${label}] ${what} at ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
}
