/**
 * The one exponential backoff formula of the project: the wait after `failures` consecutive
 * failures (>= 1) is `initialMs * 2^(failures - 1)`, capped at `maxMs`. The scheduler's jobs, the
 * in-process event logs' consumer loops and the consumer framework's index repair all use it.
 */
export function exponentialDelay(failures: number, initialMs: number, maxMs: number): number {
  return Math.min(maxMs, initialMs * 2 ** Math.min(40, Math.max(0, failures - 1)));
}
