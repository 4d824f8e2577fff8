/**
 * Exponential backoff for the scheduler: a job that keeps failing waits longer and longer between
 * runs (capped), and an item a job keeps failing on (one leaderboard window, say) is skipped until
 * its own retry time while the job goes on with the other items. Times are the process's real
 * time (like the consumer framework's dead-letter window), not the injected clock: backoff is an
 * operational guard, and a test clock that stands still must not freeze a job forever.
 */
import { exponentialDelay } from '../shared/backoff';

export interface BackoffPolicy {
  /** Delay after the first failure, ms. */
  initialMs: number;
  /** Cap of the delay, ms. */
  maxMs: number;
}

export const JOB_BACKOFF: BackoffPolicy = { initialMs: 1000, maxMs: 5 * 60_000 };
export const ITEM_BACKOFF: BackoffPolicy = { initialMs: 1000, maxMs: 10 * 60_000 };

/** The delay after `failures` consecutive failures (>= 1): initial * 2^(failures - 1), capped. */
export function backoffDelay(p: BackoffPolicy, failures: number): number {
  return exponentialDelay(failures, p.initialMs, p.maxMs);
}

/** Per-item failure memory of one job. */
export class ItemRetry {
  private readonly items = new Map<string, { failures: number; retryAt: number }>();

  constructor(
    private readonly policy: BackoffPolicy = ITEM_BACKOFF,
    private readonly time: () => number = Date.now,
  ) {}

  /** Items waiting for a retry (a job fetches this many more candidates, so they cannot crowd out the rest). */
  get size(): number {
    return this.items.size;
  }

  /** True while the item's retry time has not come. */
  blocked(key: string): boolean {
    const s = this.items.get(key);
    return s !== undefined && this.time() < s.retryAt;
  }

  /** Records a failure; returns the delay before the item is tried again, ms. */
  failed(key: string): number {
    const failures = (this.items.get(key)?.failures ?? 0) + 1;
    const delay = backoffDelay(this.policy, failures);
    this.items.set(key, { failures, retryAt: this.time() + delay });
    return delay;
  }

  failures(key: string): number {
    return this.items.get(key)?.failures ?? 0;
  }

  succeeded(key: string): void {
    this.items.delete(key);
  }

  /** Forgets items that are no longer candidates (closed or exported by someone else). */
  retain(keys: Set<string>): void {
    for (const k of this.items.keys()) if (!keys.has(k)) this.items.delete(k);
  }
}
