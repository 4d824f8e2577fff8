/**
 * The streak state machine, pure (no SQL, no clock: every instant is passed in, Unix ms). The
 * pipeline step (events) and the scheduler's deadline sweep (time passing) both move a user's
 * streak through these functions, so the two paths cannot disagree (docs/streaks.md).
 *
 * A user's streak tracks one period at a time (`period`): the latest one it has seen.
 * - An event whose period is the tracked one adds to its progress; reaching `condition.min`
 *   qualifies the period once and adds one to the count (milestones are thresholds of the count).
 * - An event of a later period first settles the periods that ended before it (below), then
 *   starts tracking its own period. An event of an earlier period is late: it changes nothing.
 * - Settling up to instant t: while the tracked period has ended by t: a qualified (or frozen)
 *   period hands over to the next one (which the user must now qualify); an unqualified one with a
 *   streak running uses a freeze if the user holds one (the period is kept, the count unchanged)
 *   or breaks the streak (count to 0, longest kept, the run ends); without a streak running the
 *   progress is dropped.
 * - At risk: a running streak whose tracked period is not yet qualified, `at_risk_seconds` or less
 *   before that period ends; noticed once per period.
 *
 * Periods: calendar windows come from core/windows.ts (`daily` / `weekly` in the IANA zone, from
 * `reset_time`, DST-correct); rolling windows are `duration_seconds` long, the first one starting
 * at the event that starts the run, each next one where the previous one ended. The next period is
 * always computed from the current config and starts where the stored one ended (a config change
 * applies from the next period: the stored period keeps the bounds it was tracked with).
 */
import { windowAt, type Timeframe } from '../windows';

export interface CalendarWindow {
  type: 'calendar';
  period: 'daily' | 'weekly';
  timezone: string;
  reset_time?: string;
}

export interface RollingWindow {
  type: 'rolling';
  duration_seconds: number;
}

export interface Milestone {
  threshold: number;
  reward_item_id: string | null;
  repeatable: boolean;
}

export interface StreakConfig {
  event_types: string[];
  expression?: { condition: { field: string; operator: string; value: unknown } } | null;
  window: CalendarWindow | RollingWindow;
  condition: { type: 'count' | 'sum'; min: number; field?: string };
  milestones?: Milestone[];
  at_risk_seconds?: number | null;
  /** The most freezes a user may hold for this streak; absent: no cap. */
  max_freezes?: number | null;
}

export interface Period {
  key: string;
  start: number;
  end: number;
}

/** A user's streak of one definition. */
export interface Progress {
  current_count: number;
  longest_count: number;
  /** Runs ended so far (a break ends one). */
  run: number;
  freezes: number;
  period: Period | null;
  /** Progress toward `condition.min` in `period`. */
  value: number;
  /** `period` is qualified, or kept by a freeze. */
  qualified: boolean;
  /** `period` was kept by a freeze. */
  frozen: boolean;
  /** The start of the period whose at-risk notice was given. */
  at_risk_start: number | null;
  last_event_at: number | null;
}

export type Move =
  | { kind: 'qualified'; period: Period; value: number; count: number; at: number }
  | { kind: 'milestone'; threshold: number; count: number; run: number; at: number }
  | { kind: 'frozen'; period: Period; value: number; count: number; freezes_left: number; at: number }
  | {
      kind: 'broken';
      period: Period;
      value: number;
      previous_count: number;
      longest: number;
      /** The run that ended. */
      run: number;
      at: number;
    }
  | { kind: 'at_risk'; period: Period; value: number; count: number; at: number };

export function emptyProgress(): Progress {
  return {
    current_count: 0,
    longest_count: 0,
    run: 0,
    freezes: 0,
    period: null,
    value: 0,
    qualified: false,
    frozen: false,
    at_risk_start: null,
    last_event_at: null,
  };
}

function timeframe(w: CalendarWindow): Timeframe {
  return { type: w.period, timezone: w.timezone, reset_time: w.reset_time ?? '00:00' };
}

/**
 * The period containing t, for a streak whose previous period ended at `prevEnd` (t >= prevEnd),
 * or with no previous period (null): calendar windows clipped to start at `prevEnd`; rolling
 * windows of `duration_seconds` from `prevEnd`, or from t itself.
 */
export function periodAt(cfg: StreakConfig, prevEnd: number | null, t: number): Period {
  const w = cfg.window;
  if (w.type === 'calendar') {
    const win = windowAt(timeframe(w), t);
    const start = prevEnd !== null && prevEnd > win.start ? prevEnd : win.start;
    return { key: win.key, start, end: win.end };
  }
  const d = w.duration_seconds * 1000;
  const start = prevEnd === null ? t : prevEnd + Math.floor((t - prevEnd) / d) * d;
  return { key: new Date(start).toISOString(), start, end: start + d };
}

/** The period after `p` (it starts where `p` ends). */
export function nextPeriod(cfg: StreakConfig, p: Period): Period {
  return periodAt(cfg, p.end, p.end);
}

/**
 * What resuming a paused definition at `now` does to a user's tracked period that ended while
 * paused: it becomes `period` (the one containing now, not yet qualified), unless it was qualified
 * and ends after `keepQualifiedEndingAfter` (then the period after it, which contains now, is next,
 * as if there had been no pause). Constants for every user of the definition: one UPDATE.
 */
export function resumePlan(
  cfg: StreakConfig,
  now: number,
): { period: Period; keepQualifiedEndingAfter: number } {
  const period = periodAt(cfg, null, now);
  const w = cfg.window;
  // Calendar: the period after a qualified one contains now only if it is `period` (it starts at
  // its start). Rolling: the period after one ending at e is [e, e + d), which contains now if e > now - d.
  const keepQualifiedEndingAfter = w.type === 'calendar' ? period.start - 1 : now - w.duration_seconds * 1000;
  return { period, keepQualifiedEndingAfter };
}

/** Safety bound of one settle (a freeze per loop at most; caps keep it far lower). */
const MAX_STEPS = 100_000;

/**
 * Settles every period of `p` that ended at or before t (see the module comment), appending the
 * moves (frozen, broken). Mutates `p`.
 */
export function settle(cfg: StreakConfig, p: Progress, t: number, moves: Move[]): void {
  for (let i = 0; p.period && p.period.end <= t; i++) {
    if (i > MAX_STEPS) throw new Error('streaks: settle did not converge');
    const period = p.period;
    if (p.qualified) {
      p.period = nextPeriod(cfg, period);
      p.value = 0;
      p.qualified = false;
      p.frozen = false;
      continue;
    }
    if (p.current_count > 0 && p.freezes > 0) {
      p.freezes -= 1;
      p.qualified = true;
      p.frozen = true;
      moves.push({
        kind: 'frozen',
        period,
        value: p.value,
        count: p.current_count,
        freezes_left: p.freezes,
        at: period.end,
      });
      continue;
    }
    if (p.current_count > 0) {
      moves.push({
        kind: 'broken',
        period,
        value: p.value,
        previous_count: p.current_count,
        longest: p.longest_count,
        run: p.run,
        at: period.end,
      });
      p.current_count = 0;
      p.run += 1;
    }
    p.period = null;
    p.value = 0;
    p.qualified = false;
    p.frozen = false;
  }
}

/**
 * Applies one matching event at t with its contribution (1 for count, the field's value for sum).
 * Returns false when the event is late (its period is before the tracked one) and changed nothing
 * but the settling of ended periods. Mutates `p`, appends moves (qualified, milestone, frozen,
 * broken).
 */
export function applyEvent(
  cfg: StreakConfig,
  p: Progress,
  t: number,
  amount: number,
  moves: Move[],
): boolean {
  if (p.period && t < p.period.start) return false;
  settle(cfg, p, t, moves);
  if (!p.period) {
    p.period = periodAt(cfg, null, t);
    p.value = 0;
    p.qualified = false;
    p.frozen = false;
  } else if (t >= p.period.end) {
    // Unreachable after settle (it stops at a period that ends after t); kept as a guard.
    p.period = periodAt(cfg, p.period.end, t);
    p.value = 0;
    p.qualified = false;
    p.frozen = false;
  }
  p.value += amount;
  p.last_event_at = Math.max(p.last_event_at ?? t, t);
  if (!p.qualified && p.value >= cfg.condition.min) {
    p.qualified = true;
    p.current_count += 1;
    p.longest_count = Math.max(p.longest_count, p.current_count);
    moves.push({ kind: 'qualified', period: p.period, value: p.value, count: p.current_count, at: t });
    for (const m of cfg.milestones ?? []) {
      if (m.threshold === p.current_count)
        moves.push({ kind: 'milestone', threshold: m.threshold, count: p.current_count, run: p.run, at: t });
    }
  }
  return true;
}

function atRiskSeconds(cfg: StreakConfig): number {
  return cfg.at_risk_seconds && cfg.at_risk_seconds > 0 ? cfg.at_risk_seconds : 0;
}

/** Settles up to `now`, then notices at-risk (once per period). Mutates `p`, appends moves. */
export function sweep(cfg: StreakConfig, p: Progress, now: number, moves: Move[]): void {
  settle(cfg, p, now, moves);
  const ars = atRiskSeconds(cfg) * 1000;
  const per = p.period;
  if (
    ars > 0 &&
    per &&
    p.current_count > 0 &&
    !p.qualified &&
    now >= per.end - ars &&
    p.at_risk_start !== per.start
  ) {
    p.at_risk_start = per.start;
    moves.push({ kind: 'at_risk', period: per, value: p.value, count: p.current_count, at: now });
  }
}

/**
 * When the scheduler must next look at `p`: the at-risk instant of the period the user must
 * qualify (unless noticed already), else that period's end; null when no streak is running.
 * Earlier is harmless (the sweep recomputes); later would delay a move.
 */
export function dueAt(cfg: StreakConfig, p: Progress): number | null {
  if (p.current_count <= 0 || !p.period) return null;
  const ars = atRiskSeconds(cfg) * 1000;
  if (!p.qualified) {
    const per = p.period;
    if (ars > 0 && p.at_risk_start !== per.start) return Math.max(per.start, per.end - ars);
    return per.end;
  }
  const next = nextPeriod(cfg, p.period);
  return ars > 0 ? Math.max(p.period.end, next.end - ars) : next.end;
}

export type UserStatus = 'active' | 'at_risk' | 'broken' | 'not_started' | 'frozen';

/** What a user sees at `now` (read-only: settles a copy). */
export function viewAt(
  cfg: StreakConfig,
  stored: Progress,
  now: number,
  paused: boolean,
): {
  status: UserStatus;
  current_count: number;
  longest_count: number;
  qualified_this_period: boolean;
  period_progress: { value: number; min: number };
  period_ends_at: number;
  freezes_available: number;
} {
  const p: Progress = { ...stored, period: stored.period ? { ...stored.period } : null };
  if (!paused) settle(cfg, p, now, []);
  const inPeriod = p.period !== null && p.period.start <= now && now < p.period.end;
  const current =
    p.period && now < p.period.end ? p.period : periodAt(cfg, p.period ? p.period.end : null, now);
  const qualified = inPeriod && p.qualified;
  const ars = atRiskSeconds(cfg) * 1000;
  let status: UserStatus;
  if (paused) status = 'frozen';
  else if (p.current_count > 0)
    status = !qualified && ars > 0 && now >= current.end - ars ? 'at_risk' : 'active';
  else status = p.run > 0 ? 'broken' : 'not_started';
  return {
    status,
    current_count: p.current_count,
    longest_count: p.longest_count,
    qualified_this_period: qualified,
    period_progress: { value: inPeriod ? p.value : 0, min: cfg.condition.min },
    period_ends_at: current.end,
    freezes_available: p.freezes,
  };
}
