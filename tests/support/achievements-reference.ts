/**
 * A reference model of achievement progress (docs/achievements.md), small and obviously correct,
 * for the property test of the pipeline step and the backfill tests: from a stream of events (in
 * arrival order, duplicates of an event_id included) to each user's measures, completions and
 * shown progress. It reads the whole stream at once, declaratively:
 *
 * - an event counts once, however often its event_id arrives (the first arrival is the event);
 * - event_count: the number of matching events;
 * - streak: the UTC days with a matching event (or the days of a zone at a fixed offset, `dayOffsetMs`); with reset_on_failure the longest run of
 *   consecutive days, without it the number of days (events of one user arrive in time order);
 * - streak_milestone and leaderboard_rank: from other features' outcomes given as `facts` (the
 *   highest milestone each user reached per streak; each user's final ranks per board): the
 *   highest milestone, met at the threshold; the best (lowest) final rank, met at or above it;
 * - a part is met when its measure reaches the threshold; combined: every part met; an achievement
 *   is completed when its criteria are met (every measure only grows, so "met at some point" and
 *   "met at the end" agree);
 * - shown progress of an open achievement: each leaf's measure capped at its threshold; combined:
 *   the number of parts met; a completed one shows its target.
 *
 * Conditions: `eq` on attributes only (`{mode: {eq: 'x'}}` or `{'attrs.mode': {eq: 'x'}}`), which
 * is what the generators use.
 */
export interface RefEvent {
  event_id: string;
  user_id: string;
  type: string;
  occurred_at: number;
  attrs: Record<string, unknown>;
}

export type RefCriterion =
  | {
      type: 'event_count';
      event_type: string;
      conditions?: Record<string, { eq: unknown }>;
      threshold: number;
    }
  | {
      type: 'streak';
      event_type: string;
      conditions?: Record<string, { eq: unknown }>;
      threshold: number;
      reset_on_failure?: boolean;
    }
  | { type: 'streak_milestone'; streak_id: string; threshold: number }
  | { type: 'leaderboard_rank'; leaderboard_id: string; threshold: number }
  | { type: 'combined'; operator: 'and'; conditions: RefCriterion[] };

/** Other features' outcomes, by user: milestones reached (streak_days) per streak, final ranks per board. */
export interface RefFacts {
  milestones?: ReadonlyMap<string, ReadonlyMap<string, readonly number[]>>;
  ranks?: ReadonlyMap<string, ReadonlyMap<string, readonly number[]>>;
}

export interface RefProgress {
  current: number;
  parts?: RefProgress[];
}

export interface RefOutcome {
  completed: boolean;
  progress: RefProgress;
}

const DAY = 86_400_000;

type RefLeaf = Exclude<RefCriterion, { type: 'combined' }>;
type EventLeaf = Extract<RefLeaf, { type: 'event_count' | 'streak' }>;

/** One user's inputs: their events (first arrivals) and the facts about them. */
interface Mine {
  user: string;
  events: readonly RefEvent[];
  facts: RefFacts;
  dayOffsetMs: number;
}

function matches(c: EventLeaf, e: RefEvent): boolean {
  if (c.event_type !== '*' && c.event_type !== e.type) return false;
  for (const [k, v] of Object.entries(c.conditions ?? {})) {
    const name = k.startsWith('attrs.') ? k.slice(6) : k;
    if (e.attrs[name] !== v.eq) return false;
  }
  return true;
}

function measure(c: RefLeaf, m: Mine): number {
  if (c.type === 'streak_milestone')
    return Math.max(0, ...(m.facts.milestones?.get(m.user)?.get(c.streak_id) ?? []));
  if (c.type === 'leaderboard_rank') {
    const ranks = m.facts.ranks?.get(m.user)?.get(c.leaderboard_id) ?? [];
    return ranks.length ? Math.min(...ranks) : 0;
  }
  const mine = m.events.filter((e) => matches(c, e));
  if (c.type === 'event_count') return mine.length;
  const days = [...new Set(mine.map((e) => Math.floor((e.occurred_at + m.dayOffsetMs) / DAY)))].sort(
    (a, b) => a - b,
  );
  if (c.reset_on_failure === false) return days.length;
  let best = 0;
  let run = 0;
  days.forEach((d, i) => {
    run = i > 0 && d === days[i - 1]! + 1 ? run + 1 : 1;
    best = Math.max(best, run);
  });
  return best;
}

function leafMet(c: RefLeaf, m: Mine): boolean {
  const v = measure(c, m);
  return c.type === 'leaderboard_rank' ? v > 0 && v <= c.threshold : v >= c.threshold;
}

function met(c: RefCriterion, m: Mine): boolean {
  return c.type === 'combined' ? c.conditions.every((p) => met(p, m)) : leafMet(c, m);
}

function shown(c: RefCriterion, m: Mine): RefProgress {
  if (c.type === 'combined') {
    const parts = c.conditions.map((p) => shown(p, m));
    return { current: c.conditions.filter((p) => met(p, m)).length, parts };
  }
  if (c.type === 'leaderboard_rank') return { current: leafMet(c, m) ? 1 : 0 };
  return { current: Math.min(measure(c, m), c.threshold) };
}

function full(c: RefCriterion): RefProgress {
  if (c.type === 'combined') return { current: c.conditions.length, parts: c.conditions.map(full) };
  return { current: c.type === 'leaderboard_rank' ? 1 : c.threshold };
}

/** Each (user, achievement)'s outcome over the stream, by `${user}\u0000${achievement}`. */
export function referenceAchievements(
  defs: ReadonlyArray<{ id: string; criteria: RefCriterion }>,
  stream: readonly RefEvent[],
  facts: RefFacts = {},
  dayOffsetMs = 0,
): Map<string, RefOutcome> {
  const seen = new Set<string>();
  const byUser = new Map<string, RefEvent[]>();
  for (const e of stream) {
    if (seen.has(e.event_id)) continue;
    seen.add(e.event_id);
    const l = byUser.get(e.user_id);
    if (l) l.push(e);
    else byUser.set(e.user_id, [e]);
  }
  const users = new Set([
    ...byUser.keys(),
    ...(facts.milestones?.keys() ?? []),
    ...(facts.ranks?.keys() ?? []),
  ]);
  const out = new Map<string, RefOutcome>();
  for (const user of users) {
    const m: Mine = { user, events: byUser.get(user) ?? [], facts, dayOffsetMs };
    for (const d of defs) {
      const completed = met(d.criteria, m);
      out.set(`${user}\u0000${d.id}`, {
        completed,
        progress: completed ? full(d.criteria) : shown(d.criteria, m),
      });
    }
  }
  return out;
}

/** The outcome of a user the stream never mentions. */
export function nothingYet(c: RefCriterion): RefOutcome {
  return { completed: false, progress: shown(c, { user: '', events: [], facts: {}, dayOffsetMs: 0 }) };
}
