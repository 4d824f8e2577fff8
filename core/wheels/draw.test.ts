import { SeededRandom, systemRandom, type Random } from '../random';
import { drawSegment, pick } from './draw';

/** Pearson's chi-square statistic of observed counts against expected proportions. */
function chiSquare(counts: number[], weights: number[]): number {
  const n = counts.reduce((a, b) => a + b, 0);
  const total = weights.reduce((a, b) => a + b, 0);
  return counts.reduce((s, c, i) => {
    const e = (n * weights[i]!) / total;
    return s + (c - e) ** 2 / e;
  }, 0);
}

/** Critical values of chi-square with 2 degrees of freedom: -2 ln(p). */
const CRITICAL_2DF = (p: number) => -2 * Math.log(p);

const tally = (weights: number[], random: Random, n: number) => {
  const counts = weights.map(() => 0);
  for (let i = 0; i < n; i++) counts[drawSegment(weights, random).segment_index]!++;
  return counts;
};

describe('the weighted draw', () => {
  it('100,000 draws of weights 3, 5, 2 pass chi-square at the 0.001 level (seeded path)', () => {
    const counts = tally([3, 5, 2], new SeededRandom('wheels-distribution'), 100_000);
    const stat = chiSquare(counts, [3, 5, 2]);
    expect(CRITICAL_2DF(0.001)).toBeCloseTo(13.8155, 3);
    expect(stat).toBeLessThan(CRITICAL_2DF(0.001));
    // Roughly 30 / 50 / 20 percent.
    expect(counts.map((c) => Math.round(c / 1000))).toEqual([30, 50, 20]);
  });

  it('the same test fails for a draw that is not in proportion (the test can fail)', () => {
    // Counts of a draw that treats the weights as equal.
    const counts = tally([1, 1, 1], new SeededRandom('wheels-distribution'), 100_000);
    expect(chiSquare(counts, [3, 5, 2])).toBeGreaterThan(CRITICAL_2DF(0.001));
  });

  it('the cryptographic source passes too (at 1e-6, so a correct source fails once in a million runs)', () => {
    const counts = tally([3, 5, 2], systemRandom, 100_000);
    expect(chiSquare(counts, [3, 5, 2])).toBeLessThan(CRITICAL_2DF(1e-6));
  });

  it('is deterministic for a seed and replayable from what it returns (the audit)', () => {
    const a = Array.from({ length: 50 }, (_, i) => drawSegment([3, 5, 2], new SeededRandom(`s${i}`)));
    const b = Array.from({ length: 50 }, (_, i) => drawSegment([3, 5, 2], new SeededRandom(`s${i}`)));
    expect(a).toEqual(b);
    for (const d of a) {
      expect(d.weights).toEqual([3, 5, 2]);
      expect(d.total).toBe(10);
      expect(pick(d.weights, d.random)).toBe(d.segment_index);
    }
  });

  it('maps the drawn number to segments by their running sums', () => {
    expect(pick([3, 5, 2], 0)).toBe(0);
    expect(pick([3, 5, 2], 0.2999)).toBe(0);
    expect(pick([3, 5, 2], 0.3)).toBe(1);
    expect(pick([3, 5, 2], 0.7999)).toBe(1);
    expect(pick([3, 5, 2], 0.8)).toBe(2);
    expect(pick([3, 5, 2], 1 - 2 ** -48)).toBe(2);
    // Fractional and very unequal weights.
    expect(pick([0.25, 0.75], 0.24)).toBe(0);
    expect(pick([0.25, 0.75], 0.26)).toBe(1);
    expect(pick([1e-9, 1], 0.5)).toBe(1);
  });

  it('refuses weights without a positive finite sum', () => {
    const r = new SeededRandom(1);
    expect(() => drawSegment([], r)).toThrow(RangeError);
    expect(() => drawSegment([0, 0], r)).toThrow(RangeError);
    expect(() => drawSegment([1.7e308, 1.7e308], r)).toThrow(RangeError);
  });
});
