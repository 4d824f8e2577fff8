/**
 * The deadline sweep: the scheduler's side of streaks. `streak_progress.due_at` indexes the next
 * instant each running streak needs looking at (an at-risk notice, or the end of the period the
 * user must qualify); a sweep takes the rows due at `now` in batches, each batch in one
 * transaction: the rows are locked FOR UPDATE SKIP LOCKED (a second scheduler, or the pipeline
 * holding a user's row, is skipped, never waited for), moved by the same engine as the pipeline
 * (core/streaks/engine.ts `sweep`: freezes used, breaks, at-risk notices), written back with their
 * next deadline, and their effects recorded (facts, history) in that transaction. The work is
 * proportional to the rows whose deadline passed, never a scan of every user; a sweep killed
 * mid-batch rolls that batch back and the next one does it again, once.
 */
import type { Queryable, Sql } from '../../adapters/sql/types';
import { activeDefinitionsById } from './definitions';
import { sweep, type Move } from './engine';
import {
  progressFromSql,
  recordMoves,
  toProgress,
  toRow,
  writeProgress,
  type MoveDeps,
  type ProgressRow,
  type UserMoves,
} from './progress';

export interface SweepResult {
  /** Rows looked at. */
  rows: number;
  /** Batches (transactions) committed. */
  batches: number;
}

/** One batch: up to `limit` rows due at `now`, in one transaction. Returns how many it took. */
export async function sweepBatch(sql: Sql, deps: MoveDeps, now: number, limit: number): Promise<number> {
  return sql.tx(async (q) => {
    const r = await q.query<Record<string, unknown>>(
      // ORDER BY due_at alone: the (due_at) index yields the batch without sorting every row due.
      `SELECT * FROM streak_progress WHERE due_at <= $1 ORDER BY due_at LIMIT $2 FOR UPDATE SKIP LOCKED`,
      [now, limit],
    );
    if (r.rows.length === 0) return 0;
    const rows = r.rows.map(progressFromSql);
    const defs = await activeDefinitionsById(
      q,
      rows.map((x) => ({ tenant_id: x.tenant_id, id: x.streak_id })),
    );
    const out: Array<ProgressRow & { freezeDelta: number }> = [];
    const moved: UserMoves[] = [];
    const idle: ProgressRow[] = [];
    for (const row of rows) {
      const def = defs.get(`${row.tenant_id}\u0000${row.streak_id}`);
      if (!def) {
        idle.push(row); // paused or archived since: resuming brings its deadline back
        continue;
      }
      const p = toProgress(row);
      const freezes0 = p.freezes;
      const moves: Move[] = [];
      sweep(def.config, p, now, moves);
      out.push({ ...toRow(row, def.config, p, now), freezeDelta: p.freezes - freezes0 });
      if (moves.length) moved.push({ def, user_id: row.user_id, moves });
    }
    await writeProgress(q, out);
    await clearDue(q, idle);
    await recordMoves(q, deps, moved, now);
    return rows.length;
  });
}

async function clearDue(q: Queryable, rows: ProgressRow[]): Promise<void> {
  if (rows.length === 0) return;
  await q.query(
    `UPDATE streak_progress s SET due_at = NULL
     FROM unnest($1::text[], $2::text[], $3::text[]) AS k(tenant_id, streak_id, user_id)
     WHERE s.tenant_id = k.tenant_id AND s.streak_id = k.streak_id AND s.user_id = k.user_id`,
    [rows.map((x) => x.tenant_id), rows.map((x) => x.streak_id), rows.map((x) => x.user_id)],
  );
}

/** Sweeps batches until none is full or `maxBatches` ran (the next tick goes on). */
export async function sweepDue(
  sql: Sql,
  deps: MoveDeps,
  now: number,
  opts: { batch?: number; maxBatches?: number } = {},
): Promise<SweepResult> {
  const limit = opts.batch ?? 1000;
  const max = opts.maxBatches ?? 100;
  let rows = 0;
  let batches = 0;
  while (batches < max) {
    const n = await sweepBatch(sql, deps, now, limit);
    if (n === 0) break;
    rows += n;
    batches += 1;
    if (n < limit) break;
  }
  return { rows, batches };
}
