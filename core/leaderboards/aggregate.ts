/**
 * How one event's points change a user's standing on a board, per aggregation. Pure and
 * independent of processing order within a user (so replays and redeliveries agree):
 * - sum, count, avg: the tiebreak is the latest occurred_at among counted events (the moment the
 *   score was complete);
 * - max, min: the tiebreak is the earliest occurred_at at which the current best was reached.
 * A lower tiebreak ranks first on equal scores: who got there first ranks higher.
 */
import type { Aggregation } from './definition';

export interface ScoreState {
  score: number;
  total: number;
  n: number;
  tiebreak: number;
}

export function applyPoints(agg: Aggregation, s: ScoreState | null, points: number, at: number): ScoreState {
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
