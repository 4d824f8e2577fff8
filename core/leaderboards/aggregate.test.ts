/** The score range enforced by applyPoints (docs/leaderboards.md "Score range"). */
import { applyPoints, MAX_SCORE, MIN_SCORE_MAGNITUDE, normalizeScore } from './aggregate';
import type { Aggregation } from './definition';

describe('score range', () => {
  it('saturates overflow, flushes tiny and subnormal values to 0, and never returns NaN', () => {
    expect(normalizeScore(Infinity)).toBe(MAX_SCORE);
    expect(normalizeScore(-Infinity)).toBe(-MAX_SCORE);
    expect(normalizeScore(1e308)).toBe(MAX_SCORE);
    expect(normalizeScore(NaN)).toBe(0);
    expect(normalizeScore(1e-310)).toBe(0);
    expect(Object.is(normalizeScore(-1e-301), 0)).toBe(true);
    expect(normalizeScore(MIN_SCORE_MAGNITUDE)).toBe(MIN_SCORE_MAGNITUDE);
    expect(normalizeScore(-42.5)).toBe(-42.5);
  });

  it.each<Aggregation>(['sum', 'avg', 'max', 'min', 'count'])(
    '%s stays finite and in range for huge and tiny points',
    (agg) => {
      for (const p of [1e308, -1e308, 1e-310, Number.MAX_VALUE]) {
        let s = applyPoints(agg, null, p, 1);
        for (let i = 0; i < 3; i++) s = applyPoints(agg, s, p, 2 + i);
        for (const v of [s.score, s.total]) {
          expect(Number.isFinite(v)).toBe(true);
          expect(Math.abs(v)).toBeLessThanOrEqual(MAX_SCORE);
          expect(v === 0 || Math.abs(v) >= MIN_SCORE_MAGNITUDE).toBe(true);
        }
      }
      // A state stored before the range existed comes back in range.
      const legacy = { score: Infinity, total: Infinity, n: 2, tiebreak: 1 };
      const next = applyPoints(agg, legacy, 1, 3);
      expect(Number.isFinite(next.score) && Number.isFinite(next.total)).toBe(true);
    },
  );

  it('sums two 1e308 points to 1e300 on sum and avg boards', () => {
    for (const agg of ['sum', 'avg'] as const) {
      const s = applyPoints(agg, applyPoints(agg, null, 1e308, 1), 1e308, 2);
      expect(s.score).toBe(MAX_SCORE);
    }
  });
});
