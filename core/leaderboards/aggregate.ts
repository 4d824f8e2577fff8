/**
 * How one event's points change a user's standing on a board, per aggregation. Pure and
 * independent of processing order within a user (so replays and redeliveries agree):
 * - sum, count, avg: the tiebreak is the latest occurred_at among counted events (the moment the
 *   score was complete);
 * - max, min: the tiebreak is the earliest occurred_at at which the current best was reached.
 * A lower tiebreak ranks first on equal scores: who got there first ranks higher.
 *
 * Score range (docs/leaderboards.md "Score range"): every score and running total is a finite
 * double in [-MAX_SCORE, MAX_SCORE] whose magnitude is 0 or at least MIN_SCORE_MAGNITUDE. This
 * function is the one place where scores are computed, so it enforces the range on its input (the
 * expression's points) and on everything it returns: overflow saturates at +-MAX_SCORE (never
 * Infinity), values closer to 0 than MIN_SCORE_MAGNITUDE (subnormals included) become 0, and NaN
 * never comes out. SQL, the rank index and the analytics store therefore hold the same values,
 * all of which every one of them accepts (ClickHouse 18.16 cannot read subnormal doubles).
 */
import type { Aggregation } from './definition';

/** Largest score magnitude; sums and averages saturate here. */
export const MAX_SCORE = 1e300;
/** Smallest non-zero score magnitude; anything closer to 0 is stored as 0. */
export const MIN_SCORE_MAGNITUDE = 1e-300;

/** Brings a number into the score range: saturates overflow, flushes tiny values to 0, NaN to 0. */
export function normalizeScore(x: number): number {
  if (Number.isNaN(x)) return 0;
  if (x > MAX_SCORE) return MAX_SCORE;
  if (x < -MAX_SCORE) return -MAX_SCORE;
  if (Math.abs(x) < MIN_SCORE_MAGNITUDE) return 0; // also folds -0 into 0
  return x;
}

export interface ScoreState {
  score: number;
  total: number;
  n: number;
  tiebreak: number;
}

export function applyPoints(agg: Aggregation, s: ScoreState | null, points: number, at: number): ScoreState {
  const next = aggregate(agg, s, normalizeScore(points), at);
  return { ...next, score: normalizeScore(next.score), total: normalizeScore(next.total) };
}

function aggregate(agg: Aggregation, s: ScoreState | null, points: number, at: number): ScoreState {
  if (s === null) {
    const score = agg === 'count' ? 1 : points;
    return { score, total: agg === 'count' ? 1 : points, n: 1, tiebreak: at };
  }
  switch (agg) {
    case 'sum':
      return {
        score: s.total + points,
        total: s.total + points,
        n: s.n + 1,
        tiebreak: Math.max(s.tiebreak, at),
      };
    case 'count':
      return { score: s.n + 1, total: s.n + 1, n: s.n + 1, tiebreak: Math.max(s.tiebreak, at) };
    case 'avg': {
      const total = s.total + points;
      return { score: total / (s.n + 1), total, n: s.n + 1, tiebreak: Math.max(s.tiebreak, at) };
    }
    case 'max':
    case 'min': {
      const better = agg === 'max' ? points > s.score : points < s.score;
      if (better) return { score: points, total: points, n: s.n + 1, tiebreak: at };
      if (points === s.score) return { ...s, n: s.n + 1, tiebreak: Math.min(s.tiebreak, at) };
      return { ...s, n: s.n + 1 };
    }
  }
}
