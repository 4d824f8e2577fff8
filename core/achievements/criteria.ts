/**
 * Achievement criteria (SPEC.md "Achievement", docs/achievements.md): their validation (each fault
 * named by its field path, e.g. `body.criteria.conditions[1].threshold`), their leaves (the parts
 * whose progress is stored), and pure evaluation: whether a part is met and the progress shown.
 *
 *   event_count       event_type, conditions, threshold        matching events counted
 *   streak            event_type, conditions, threshold,        consecutive tenant-local days with
 *                     reset_on_failure (default true)           a matching event
 *   cumulative        metric (a currency id), threshold         lifetime earned of that currency
 *   streak_milestone  streak_id, threshold                      highest streak_days of a milestone reached
 *   leaderboard_rank  leaderboard_id, threshold                 a final rank <= threshold at a window's close
 *   combined          operator `and`, conditions (criteria)     every part met (nested)
 *
 * Conditions are the one condition language (core/rules, `{path: {op: value}}`); a bare name is an
 * attribute (`level` means `attrs.level`).
 */
import { createHash } from 'node:crypto';
import {
  compile,
  eventTypeMatcher,
  fromPathMap,
  validatePathMap,
  type CompiledCondition,
  type Condition,
  type FieldOptions,
} from '../rules/rules';

export const ACHIEVEMENT_FIELDS: FieldOptions = { bareNames: 'attrs' };

export type LeafType = 'event_count' | 'streak' | 'cumulative' | 'streak_milestone' | 'leaderboard_rank';
export const CRITERIA_TYPES = [
  'event_count',
  'cumulative',
  'streak_milestone',
  'leaderboard_rank',
  'streak',
  'combined',
] as const;

export interface EventCountCriterion {
  type: 'event_count';
  event_type: string;
  conditions?: Condition;
  threshold: number;
}
export interface StreakCriterion {
  type: 'streak';
  event_type: string;
  conditions?: Condition;
  threshold: number;
  reset_on_failure: boolean;
}
export interface CumulativeCriterion {
  type: 'cumulative';
  metric: string;
  threshold: number;
}
export interface StreakMilestoneCriterion {
  type: 'streak_milestone';
  streak_id: string;
  threshold: number;
}
export interface LeaderboardRankCriterion {
  type: 'leaderboard_rank';
  leaderboard_id: string;
  threshold: number;
}
export interface CombinedCriterion {
  type: 'combined';
  operator: 'and';
  conditions: Criterion[];
}
export type Leaf =
  | EventCountCriterion
  | StreakCriterion
  | CumulativeCriterion
  | StreakMilestoneCriterion
  | LeaderboardRankCriterion;
export type Criterion = Leaf | CombinedCriterion;

export const CRITERIA_LIMITS = {
  /** Nesting of combined criteria (the root is level 1). */
  maxDepth: 5,
  /** Leaves in one achievement. */
  maxLeaves: 20,
  /** Parts of one combined criterion. */
  maxParts: 10,
  maxThreshold: Number.MAX_SAFE_INTEGER,
  maxIdLength: 200,
} as const;

/** A definition another feature holds that criteria name (checked to exist in the tenant). */
export interface Reference {
  kind: 'currency' | 'leaderboard' | 'streak';
  id: string;
  /** The field path naming it, e.g. `body.criteria.conditions[0].metric`. */
  where: string;
}

export type Validated = { ok: true; criteria: Criterion; refs: Reference[] } | { ok: false; error: string };

const isObject = (x: unknown): x is Record<string, unknown> =>
  typeof x === 'object' && x !== null && !Array.isArray(x);

const FIELDS: Record<string, readonly string[]> = {
  event_count: ['type', 'event_type', 'conditions', 'threshold'],
  streak: ['type', 'event_type', 'conditions', 'threshold', 'reset_on_failure'],
  cumulative: ['type', 'metric', 'threshold'],
  streak_milestone: ['type', 'streak_id', 'threshold'],
  leaderboard_rank: ['type', 'leaderboard_id', 'threshold'],
  combined: ['type', 'operator', 'conditions'],
};

const CURRENCY_ID = /^[a-z_]{1,64}$/;

class Fault extends Error {}

/**
 * Checks criteria as the API receives them and returns them normalised (defaults filled, bare
 * condition names kept as written: they are read as attributes when compiled), with the
 * definitions they reference. `where` names the root (`body.criteria`).
 */
export function validateCriteria(raw: unknown, where = 'body.criteria'): Validated {
  const refs: Reference[] = [];
  let leaves = 0;
  const str = (v: unknown, at: string, max = CRITERIA_LIMITS.maxIdLength): string => {
    if (typeof v !== 'string') throw new Fault(`${at} must be a string`);
    if (v.length === 0) throw new Fault(`${at} must not be empty`);
    if (v.length > max) throw new Fault(`${at} must be at most ${max} characters`);
    return v;
  };
  const threshold = (v: unknown, at: string): number => {
    if (v === undefined) throw new Fault(`${at} is required`);
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1)
      throw new Fault(`${at} must be a positive integer`);
    return v;
  };
  const walk = (c: unknown, at: string, depth: number): Criterion => {
    if (!isObject(c)) throw new Fault(`${at} must be an object with a type`);
    if (c.type === undefined) throw new Fault(`${at}.type is required`);
    if (typeof c.type !== 'string' || !(c.type in FIELDS))
      throw new Fault(`${at}.type must be one of ${CRITERIA_TYPES.map((t) => JSON.stringify(t)).join(', ')}`);
    const allowed = FIELDS[c.type]!;
    for (const k of Object.keys(c))
      if (!allowed.includes(k))
        throw new Fault(`${at}.${k} is not allowed for type ${c.type} (fields: ${allowed.join(', ')})`);
    const need = (k: string) => {
      if (c[k] === undefined) throw new Fault(`${at}.${k} is required`);
      return c[k];
    };
    switch (c.type) {
      case 'combined': {
        if (depth >= CRITERIA_LIMITS.maxDepth)
          throw new Fault(`${at}: combined criteria nest at most ${CRITERIA_LIMITS.maxDepth} levels`);
        if (need('operator') !== 'and') throw new Fault(`${at}.operator must be "and"`);
        const parts = need('conditions');
        if (!Array.isArray(parts) || parts.length === 0)
          throw new Fault(`${at}.conditions must be a non-empty array of criteria`);
        if (parts.length > CRITERIA_LIMITS.maxParts)
          throw new Fault(`${at}.conditions: at most ${CRITERIA_LIMITS.maxParts} parts`);
        return {
          type: 'combined',
          operator: 'and',
          conditions: parts.map((p, i) => walk(p, `${at}.conditions[${i}]`, depth + 1)),
        };
      }
      default: {
        if (++leaves > CRITERIA_LIMITS.maxLeaves)
          throw new Fault(`${at}: at most ${CRITERIA_LIMITS.maxLeaves} criteria in one achievement`);
      }
    }
    switch (c.type) {
      case 'event_count':
      case 'streak': {
        const event_type = str(need('event_type'), `${at}.event_type`);
        let conditions: Condition | undefined;
        if (c.conditions !== undefined && c.conditions !== null) {
          const err = validatePathMap(c.conditions, `${at}.conditions`, ACHIEVEMENT_FIELDS);
          if (err) throw new Fault(err);
          const aliased = fromPathMap(c.conditions as Condition, ACHIEVEMENT_FIELDS)!;
          if (Object.keys(aliased).length !== Object.keys(c.conditions).length)
            throw new Fault(
              `${at}.conditions: a field is named twice (a bare name is the attribute attrs.<name>)`,
            );
          conditions = c.conditions as Condition;
        }
        const t = threshold(c.threshold, `${at}.threshold`);
        if (c.type === 'event_count')
          return { type: 'event_count', event_type, ...(conditions ? { conditions } : {}), threshold: t };
        if (c.reset_on_failure !== undefined && typeof c.reset_on_failure !== 'boolean')
          throw new Fault(`${at}.reset_on_failure must be a boolean`);
        return {
          type: 'streak',
          event_type,
          ...(conditions ? { conditions } : {}),
          threshold: t,
          reset_on_failure: c.reset_on_failure !== false,
        };
      }
      case 'cumulative': {
        const metric = str(need('metric'), `${at}.metric`);
        if (!CURRENCY_ID.test(metric))
          throw new Fault(`${at}.metric must name a currency (lowercase letters and underscores)`);
        refs.push({ kind: 'currency', id: metric, where: `${at}.metric` });
        return { type: 'cumulative', metric, threshold: threshold(c.threshold, `${at}.threshold`) };
      }
      case 'streak_milestone': {
        const streak_id = str(need('streak_id'), `${at}.streak_id`);
        refs.push({ kind: 'streak', id: streak_id, where: `${at}.streak_id` });
        return { type: 'streak_milestone', streak_id, threshold: threshold(c.threshold, `${at}.threshold`) };
      }
      case 'leaderboard_rank': {
        const leaderboard_id = str(need('leaderboard_id'), `${at}.leaderboard_id`);
        refs.push({ kind: 'leaderboard', id: leaderboard_id, where: `${at}.leaderboard_id` });
        return {
          type: 'leaderboard_rank',
          leaderboard_id,
          threshold: threshold(c.threshold, `${at}.threshold`),
        };
      }
    }
    throw new Fault(`${at}.type is not supported`);
  };
  try {
    return { ok: true, criteria: walk(raw, where, 1), refs };
  } catch (e) {
    if (e instanceof Fault) return { ok: false, error: e.message };
    throw e;
  }
}

/** The leaves of criteria in document order (a leaf may repeat: it is stored once). */
export function leavesOf(c: Criterion): Leaf[] {
  return c.type === 'combined' ? c.conditions.flatMap(leavesOf) : [c];
}

function canonical(x: unknown): unknown {
  if (Array.isArray(x)) return x.map(canonical);
  if (isObject(x))
    return Object.fromEntries(
      Object.keys(x)
        .sort()
        .map((k) => [k, canonical(x[k])]),
    );
  return x;
}

/**
 * The key of a leaf's stored progress: a digest of what it counts, without its threshold (and a
 * streak's reset rule), so raising a threshold keeps the progress made and counting something
 * else starts afresh.
 */
export function partKey(l: Leaf): string {
  // Computed once per leaf object (completion checks ask for it per touched pair and batch).
  let key = partKeys.get(l);
  if (key === undefined) partKeys.set(l, (key = digestPart(l)));
  return key;
}

const partKeys = new WeakMap<Leaf, string>();

function digestPart(l: Leaf): string {
  const what: Record<string, unknown> = { type: l.type };
  switch (l.type) {
    case 'event_count':
    case 'streak':
      what.event_type = l.event_type;
      what.conditions = fromPathMap(l.conditions, ACHIEVEMENT_FIELDS) ?? {};
      break;
    case 'cumulative':
      what.metric = l.metric;
      break;
    case 'streak_milestone':
      what.streak_id = l.streak_id;
      break;
    case 'leaderboard_rank':
      what.leaderboard_id = l.leaderboard_id;
      break;
  }
  return `${l.type}:${createHash('sha256')
    .update(JSON.stringify(canonical(what)))
    .digest('hex')
    .slice(0, 20)}`;
}

/** What the reactions look criteria up by (the `refs` column). */
export function refsOf(c: Criterion): string[] {
  const out = new Set<string>();
  for (const l of leavesOf(c)) {
    if (l.type === 'event_count' || l.type === 'streak') out.add('events');
    else if (l.type === 'cumulative') out.add(`cumulative:${l.metric}`);
    else if (l.type === 'streak_milestone') out.add(`streak_milestone:${l.streak_id}`);
    else out.add(`leaderboard_rank:${l.leaderboard_id}`);
  }
  return [...out].sort();
}

/** A leaf's stored progress (one row of achievement_progress). */
export interface PartState {
  value: number;
  best: number;
  /** Tenant-local day (YYYY-MM-DD) of a streak's last counted event, else ''. */
  last_day: string;
}

export const EMPTY: PartState = { value: 0, best: 0, last_day: '' };

/** Whether a leaf is met by its progress. Every measure only grows (a streak's `best`), so a met part stays met. */
export function leafMet(l: Leaf, s: PartState | undefined): boolean {
  if (!s) return false;
  switch (l.type) {
    case 'streak':
      return s.best >= l.threshold;
    case 'leaderboard_rank':
      return s.value > 0 && s.value <= l.threshold;
    default:
      return s.value >= l.threshold;
  }
}

export function criteriaMet(c: Criterion, parts: (key: string) => PartState | undefined): boolean {
  if (c.type === 'combined') return c.conditions.every((p) => criteriaMet(p, parts));
  return leafMet(c, parts(partKey(c)));
}

/** Progress as shown (docs/achievements.md "Progress"). */
export interface ProgressView {
  type: Criterion['type'];
  current: number;
  target: number;
  percentage: number;
  met: boolean;
  /** leaderboard_rank: the best final rank so far, or null. */
  best_rank?: number | null;
  /** streak: the current run of days. */
  current_run?: number;
  /** combined: each part's progress. */
  parts?: ProgressView[];
}

const pct = (current: number, target: number) =>
  target <= 0 ? 100 : Math.min(100, Math.floor((current / target) * 10000) / 100);

export function progressOf(c: Criterion, parts: (key: string) => PartState | undefined): ProgressView {
  if (c.type === 'combined') {
    const views = c.conditions.map((p) => progressOf(p, parts));
    const met = views.filter((v) => v.met).length;
    return {
      type: 'combined',
      current: met,
      target: views.length,
      percentage: Math.floor((views.reduce((a, v) => a + v.percentage, 0) / views.length) * 100) / 100,
      met: met === views.length,
      parts: views,
    };
  }
  const s = parts(partKey(c));
  const met = leafMet(c, s);
  switch (c.type) {
    case 'leaderboard_rank':
      return {
        type: c.type,
        current: met ? 1 : 0,
        target: 1,
        percentage: met ? 100 : 0,
        met,
        best_rank: s && s.value > 0 ? s.value : null,
      };
    case 'streak': {
      const current = Math.min(s?.best ?? 0, c.threshold);
      return {
        type: c.type,
        current,
        target: c.threshold,
        percentage: pct(current, c.threshold),
        met,
        current_run: s?.value ?? 0,
      };
    }
    default: {
      const current = Math.min(s?.value ?? 0, c.threshold);
      return { type: c.type, current, target: c.threshold, percentage: pct(current, c.threshold), met };
    }
  }
}

/** A leaf that counts events, compiled once per achievement version. */
export interface EventLeaf {
  key: string;
  leaf: EventCountCriterion | StreakCriterion;
  matchesType: (type: string) => boolean;
  condition: CompiledCondition;
}

export function compileEventLeaves(c: Criterion): EventLeaf[] {
  const seen = new Map<string, EventLeaf>();
  for (const l of leavesOf(c)) {
    if (l.type !== 'event_count' && l.type !== 'streak') continue;
    const key = partKey(l);
    if (seen.has(key)) continue;
    seen.set(key, {
      key,
      leaf: l,
      matchesType: eventTypeMatcher(l.event_type),
      condition: compile(fromPathMap(l.conditions, ACHIEVEMENT_FIELDS)),
    });
  }
  return [...seen.values()];
}

/** Day number of a `YYYY-MM-DD` key (days since 1970-01-01). */
export function dayNumber(day: string): number {
  return Math.round(
    Date.UTC(Number(day.slice(0, 4)), Number(day.slice(5, 7)) - 1, Number(day.slice(8, 10))) / 86_400_000,
  );
}

/**
 * One matching event applied to a leaf's progress. event_count: one more. streak: the first event
 * of a day extends the run when the previous counted day is the day before; after a gap the run
 * starts again at 1 (reset_on_failure, the default) or goes on (false: the days are counted
 * whether consecutive or not); an event of the same day or of an earlier day than the last
 * counted one changes nothing (events of one user arrive in order; a late one is not counted).
 */
export function applyEvent(l: EventCountCriterion | StreakCriterion, s: PartState, day: string): PartState {
  if (l.type === 'event_count') return { value: s.value + 1, best: s.best, last_day: s.last_day };
  if (s.last_day !== '') {
    const last = dayNumber(s.last_day);
    const d = dayNumber(day);
    if (d <= last) return s;
    const value = d === last + 1 || !l.reset_on_failure ? s.value + 1 : 1;
    return { value, best: Math.max(s.best, value), last_day: day };
  }
  return { value: 1, best: Math.max(s.best, 1), last_day: day };
}
