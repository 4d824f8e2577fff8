/**
 * The weighted draw of a spin (SPEC.md "Limits": relative weights, not percentages). One number
 * `r` in [0, 1) is drawn from the injected `Random` (the system's CSPRNG in production, a seeded
 * source in tests); the segment is the first whose running sum of weights exceeds `r * total`.
 * Everything needed to re-check a draw is returned (docs/wheels.md "Auditing a spin"): the weights
 * in force, their total and `r`, which has 48 random bits and is exact as a JSON number.
 */
import type { Random } from '../random';

export interface Draw {
  /** The drawn number in [0, 1). */
  random: number;
  /** The weights in force, in segment order. */
  weights: number[];
  /** Their sum, added left to right in IEEE doubles. */
  total: number;
  /** The segment drawn. */
  segment_index: number;
}

/** Draws a segment index in proportion to `weights` (each positive and finite, sum finite). */
export function drawSegment(weights: number[], random: Random): Draw {
  const total = weights.reduce((a, w) => a + w, 0);
  if (weights.length === 0 || !(total > 0) || !Number.isFinite(total))
    throw new RangeError('drawSegment: weights must be positive with a finite sum');
  const r = random.float();
  return { random: r, weights: [...weights], total, segment_index: pick(weights, r) };
}

/**
 * The segment `r` selects: the first i with r * total < w[0] + ... + w[i] (the same left-to-right
 * sums as the total). An auditor reruns this with the stored weights and number.
 */
export function pick(weights: number[], r: number): number {
  const total = weights.reduce((a, w) => a + w, 0);
  const target = r * total;
  let sum = 0;
  let last = 0;
  for (let i = 0; i < weights.length; i++) {
    const w = weights[i]!;
    if (!(w > 0)) continue;
    last = i;
    sum += w;
    if (target < sum) return i;
  }
  // Only reachable through rounding at the very top of the range: the last positive segment.
  return last;
}
