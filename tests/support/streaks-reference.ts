/**
 * A reference model of streaks (docs/streaks.md): a plain function from a sequence of operations
 * (events, clock moves, freeze grants) to every user's counts and the effects that must have
 * happened (milestones per run, breaks, freezes used, at-risk notices). It knows nothing of SQL,
 * batches, deadlines or the scheduler: calendar periods are plain arithmetic on a fixed-offset
 * zone (no DST), every user is looked at on every clock move. The pipeline and the deadline sweep
 * must end in the same state (tests/scenario/streaks-property.test.ts).
 */

export interface RefConfig {
  /** calendar: daily periods starting at `offsetMs` after midnight UTC; rolling: `durationMs` long. */
  window: { type: 'calendar'; offsetMs: number } | { type: 'rolling'; durationMs: number };
  min: number;
  milestones: Array<{ threshold: number; repeatable: boolean }>;
  atRiskMs: number;
  maxFreezes: number | null;
}

export type RefOp =
  | { kind: 'event'; user: string; id: string; at: number; amount: number }
  | { kind: 'clock'; to: number }
  | { kind: 'freeze'; user: string; key: string; count: number }
  /** The definition paused or resumed at `at`. */
  | { kind: 'pause'; at: number }
  | { kind: 'resume'; at: number }
  /** The config's condition.min changed (future events). */
  | { kind: 'min'; value: number };

export interface RefUser {
  count: number;
  longest: number;
  freezes: number;
  run: number;
  tracked: { start: number; end: number } | null;
  qualified: boolean;
  value: number;
  notified: number | null;
  milestones: Array<{ threshold: number; run: number }>;
  broken: number;
  frozen: number;
  atRisk: number;
}

const DAY = 86_400_000;

function periodOf(cfg: RefConfig, prevEnd: number | null, t: number) {
  const w = cfg.window;
  if (w.type === 'calendar') {
    const i = Math.floor((t - w.offsetMs) / DAY);
    return { start: Math.max(w.offsetMs + i * DAY, prevEnd ?? -Infinity), end: w.offsetMs + (i + 1) * DAY };
  }
  const start = prevEnd === null ? t : prevEnd + Math.floor((t - prevEnd) / w.durationMs) * w.durationMs;
  return { start, end: start + w.durationMs };
}

function fresh(): RefUser {
  return {
    count: 0,
    longest: 0,
    freezes: 0,
    run: 0,
    tracked: null,
    qualified: false,
    value: 0,
    notified: null,
    milestones: [],
    broken: 0,
    frozen: 0,
    atRisk: 0,
  };
}

/** Closes every tracked period that ended at or before t. */
function settle(cfg: RefConfig, u: RefUser, t: number): void {
  while (u.tracked && u.tracked.end <= t) {
    if (u.qualified) {
      u.tracked = periodOf(cfg, u.tracked.end, u.tracked.end);
      u.qualified = false;
      u.value = 0;
    } else if (u.count > 0 && u.freezes > 0) {
      u.freezes -= 1;
      u.frozen += 1;
      u.qualified = true;
    } else {
      if (u.count > 0) {
        u.broken += 1;
        u.count = 0;
        u.run += 1;
      }
      u.tracked = null;
      u.value = 0;
      u.qualified = false;
    }
  }
}

export function referenceStreaks(cfg: RefConfig, ops: readonly RefOp[]): Map<string, RefUser> {
  const users = new Map<string, RefUser>();
  const seen = new Set<string>();
  const keys = new Set<string>();
  const get = (id: string) => {
    let u = users.get(id);
    if (!u) users.set(id, (u = fresh()));
    return u;
  };
  let min = cfg.min;
  let paused = false;
  for (const op of ops) {
    if (op.kind === 'pause') paused = true;
    else if (op.kind === 'resume') {
      // The pause is forgiven: a period that ended while paused is replaced by the one at resume,
      // unless it was qualified and the period after it still runs (that one comes next, as usual).
      paused = false;
      for (const u of users.values()) {
        if (!u.tracked || u.tracked.end > op.at) continue;
        if (u.qualified && periodOf(cfg, u.tracked.end, u.tracked.end).end > op.at) continue;
        u.tracked = u.count > 0 ? periodOf(cfg, null, op.at) : null;
        u.value = 0;
        u.qualified = false;
        u.notified = null;
      }
    } else if (op.kind === 'min') min = op.value;
    else if (op.kind === 'event') {
      if (seen.has(op.id)) continue; // a retry of the same event_id
      seen.add(op.id);
      if (paused) continue; // not counted, and a retry later is still a duplicate
      const u = get(op.user);
      if (u.tracked && op.at < u.tracked.start) continue; // late
      settle(cfg, u, op.at);
      if (!u.tracked) {
        u.tracked = periodOf(cfg, null, op.at);
        u.value = 0;
        u.qualified = false;
      }
      u.value += op.amount;
      if (!u.qualified && u.value >= min) {
        u.qualified = true;
        u.count += 1;
        u.longest = Math.max(u.longest, u.count);
        for (const m of cfg.milestones) {
          if (m.threshold !== u.count) continue;
          const run = m.repeatable ? u.run : 0;
          if (!u.milestones.some((x) => x.threshold === m.threshold && x.run === run))
            u.milestones.push({ threshold: m.threshold, run });
        }
      }
    } else if (op.kind === 'clock') {
      if (paused) continue; // nothing advances, nothing breaks
      // Only running streaks have deadlines; a user without one is left as the last event left it.
      for (const u of users.values()) {
        if (u.count === 0) continue;
        settle(cfg, u, op.to);
        if (
          u.count > 0 &&
          u.tracked &&
          !u.qualified &&
          cfg.atRiskMs > 0 &&
          op.to >= u.tracked.end - cfg.atRiskMs &&
          u.notified !== u.tracked.start
        ) {
          u.notified = u.tracked.start;
          u.atRisk += 1;
        }
      }
    } else {
      if (keys.has(op.key)) continue;
      keys.add(op.key);
      const u = get(op.user);
      u.freezes =
        cfg.maxFreezes === null
          ? u.freezes + op.count
          : Math.max(u.freezes, Math.min(cfg.maxFreezes, u.freezes + op.count));
    }
  }
  return users;
}
