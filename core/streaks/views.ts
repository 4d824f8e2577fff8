/**
 * What users read of their streaks (docs/streaks.md "User routes"): one entry per definition that
 * is active or paused, computed at `now` from the stored progress (settled in memory, so a sweep
 * that has not run yet changes nothing of what is shown), with the milestones reached; and for
 * one definition, the paged history of its periods.
 */
import type { Queryable } from '../../adapters/sql/types';
import { getDefinition, type StreakDefinition } from './definitions';
import { viewAt } from './engine';
import { progressFromSql, toProgress, type ProgressRow } from './progress';

const iso = (ms: number) => new Date(ms).toISOString();

interface MilestoneRow {
  streak_id: string;
  threshold: number;
  run: number;
  reached_at: number;
}

function entry(def: StreakDefinition, row: ProgressRow | undefined, milestones: MilestoneRow[], now: number) {
  const v = viewAt(def.config, toProgress(row), now, def.status === 'paused');
  const repeatable = new Map((def.config.milestones ?? []).map((m) => [m.threshold, m.repeatable]));
  return {
    streak_id: def.id,
    name: def.name,
    status: v.status,
    current_count: v.current_count,
    longest_count: v.longest_count,
    qualified_this_period: v.qualified_this_period,
    period_progress: v.period_progress,
    period_ends_at: iso(v.period_ends_at),
    freezes_available: v.freezes_available,
    milestones: milestones
      .filter((m) => m.streak_id === def.id)
      .map((m) => ({
        threshold: Number(m.threshold),
        reached_at: iso(Number(m.reached_at)),
        repeatable: repeatable.get(Number(m.threshold)) ?? Number(m.run) > 0,
      })),
  };
}

async function rowsOf(q: Queryable, tenantId: string, userId: string, streakId: string | null) {
  const p = await q.query<Record<string, unknown>>(
    'SELECT * FROM streak_progress WHERE tenant_id = $1 AND user_id = $2 AND ($3::text IS NULL OR streak_id = $3)',
    [tenantId, userId, streakId],
  );
  const m = await q.query<MilestoneRow>(
    `SELECT streak_id, threshold, run, reached_at FROM streak_milestones
     WHERE tenant_id = $1 AND user_id = $2 AND ($3::text IS NULL OR streak_id = $3) ORDER BY reached_at, threshold, run`,
    [tenantId, userId, streakId],
  );
  const rows = new Map(p.rows.map((r) => [String(r.streak_id), progressFromSql(r)]));
  return { rows, milestones: m.rows };
}

export async function userStreaks(q: Queryable, tenantId: string, userId: string, now: number) {
  const d = await q.query<{ id: string }>(
    `SELECT id FROM streak_definitions WHERE tenant_id = $1 AND status <> 'archived' ORDER BY created_at, id`,
    [tenantId],
  );
  const defs = (await Promise.all(d.rows.map((x) => getDefinition(q, tenantId, x.id)))).filter(
    (x): x is StreakDefinition => x !== null,
  );
  const { rows, milestones } = await rowsOf(q, tenantId, userId, null);
  const streaks = defs.map((def) => entry(def, rows.get(def.id), milestones, now));
  return { streaks, total: streaks.length };
}

/** One definition's entry with its history (newest first); null when the definition is missing or archived. */
export async function userStreak(
  q: Queryable,
  tenantId: string,
  userId: string,
  streakId: string,
  now: number,
  page: { limit: number; offset: number },
) {
  const def = await getDefinition(q, tenantId, streakId);
  if (!def || def.status === 'archived') return null;
  const { rows, milestones } = await rowsOf(q, tenantId, userId, streakId);
  const total = await q.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM streak_periods WHERE tenant_id = $1 AND streak_id = $2 AND user_id = $3',
    [tenantId, streakId, userId],
  );
  const h = await q.query<{
    period_key: string;
    period_start: number;
    period_end: number;
    outcome: 'qualified' | 'frozen' | 'broken';
    value: number;
    streak_count: number;
    at: number;
  }>(
    `SELECT period_key, period_start, period_end, outcome, value, streak_count, at FROM streak_periods
     WHERE tenant_id = $1 AND streak_id = $2 AND user_id = $3 ORDER BY period_start DESC LIMIT $4 OFFSET $5`,
    [tenantId, streakId, userId, page.limit, page.offset],
  );
  return {
    ...entry(def, rows.get(streakId), milestones, now),
    history: {
      periods: h.rows.map((x) => ({
        period_key: x.period_key,
        period_start: iso(Number(x.period_start)),
        period_end: iso(Number(x.period_end)),
        outcome: x.outcome,
        value: Number(x.value),
        streak_count: Number(x.streak_count),
        at: iso(Number(x.at)),
      })),
      total: total.rows[0]?.n ?? 0,
      limit: page.limit,
      offset: page.offset,
    },
  };
}
