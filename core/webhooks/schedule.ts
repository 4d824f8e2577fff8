/**
 * The retry schedule (docs/webhooks.md "Retries"). `scheduleMs[i]` is the delay before attempt
 * i + 2 of a round; a round has `scheduleMs.length + 1` attempts, then the delivery is
 * dead-lettered. Each delay gets ±20 % jitter so that endpoints coming back after an outage are
 * not hit by every retry at the same instant.
 */
export const JITTER = 0.2;

export type NextStep = { kind: 'retry'; at: number } | { kind: 'dead' };

/**
 * What follows a failed attempt. `roundAttempts` counts the attempts of this round including the
 * one that just failed; `random` returns [0, 1).
 */
export function afterFailure(
  scheduleMs: number[],
  roundAttempts: number,
  now: number,
  random: () => number = Math.random,
): NextStep {
  const base = scheduleMs[roundAttempts - 1];
  if (base === undefined) return { kind: 'dead' };
  const factor = 1 - JITTER + 2 * JITTER * random();
  return { kind: 'retry', at: now + Math.round(base * factor) };
}
