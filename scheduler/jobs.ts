/**
 * The scheduler's jobs. Each is idempotent: a tick may be cut anywhere and run again.
 *
 * A job that fails on one item (a window whose close or snapshot export throws) logs it, counts it
 * (`ludus_scheduler_item_failures_total`), skips it with a per-item backoff (./backoff.ts) and goes
 * on with the other items: one bad window cannot keep later windows from closing or exporting.
 */
import { closeWindow, exportSnapshot, type ClosingDeps } from '../core/leaderboards/closing';
import { dueWindows, unexportedWindows, type WindowKey } from '../core/leaderboards/store';
import { purgeProcessedEvents } from '../core/events/processed';
import type { Logger } from '../shared/logger';
import { ITEM_BACKOFF, ItemRetry } from './backoff';
import type { ScheduledJob } from './scheduler';

const CLOSE_JOB = 'close-leaderboard-windows';

const windowKey = (w: WindowKey) => `${w.tenant_id}\u0000${w.leaderboard_id}\u0000${w.window_key}`;

/**
 * Runs `fn` on each candidate not waiting for a retry (at most `limit` of them), isolating
 * failures. `fetch(n)` returns up to n candidates; it is asked for `limit` plus the number of items
 * waiting, so that waiting items cannot crowd out the others.
 */
async function eachItem<T>(
  deps: { log: Logger; metrics?: ClosingDeps['metrics'] },
  job: string,
  what: string,
  retry: ItemRetry,
  limit: number,
  fetch: (n: number) => Promise<T[]>,
  key: (item: T) => string,
  fn: (item: T) => Promise<void>,
): Promise<void> {
  const n = limit + retry.size;
  const candidates = await fetch(n);
  if (candidates.length < n) retry.retain(new Set(candidates.map(key)));
  for (const item of candidates.filter((c) => !retry.blocked(key(c))).slice(0, limit)) {
    try {
      await fn(item);
      retry.succeeded(key(item));
    } catch (err) {
      const delayMs = retry.failed(key(item));
      deps.metrics?.schedulerItemFailures.inc({ job });
      deps.log.error(
        {
          err,
          job,
          item: key(item).split('\u0000').join(':'),
          failures: retry.failures(key(item)),
          retry_in_ms: delayMs,
        },
        `${what} failed; skipped, retried later`,
      );
    }
  }
}

/** Closes leaderboard windows whose grace period has passed (and exports snapshots left behind). */
export function closeWindowsJob(
  deps: ClosingDeps & { log: Logger },
  batch = 100,
  /** The real time of the per-item backoff (tests move it by hand). */
  time: () => number = Date.now,
): ScheduledJob {
  const closing = new ItemRetry(ITEM_BACKOFF, time);
  const exporting = new ItemRetry(ITEM_BACKOFF, time);
  return {
    name: CLOSE_JOB,
    async run(now) {
      await eachItem(
        deps,
        CLOSE_JOB,
        'closing a window',
        closing,
        batch,
        (n) => dueWindows(deps.sql, now, n),
        windowKey,
        async (w) => {
          const r = await closeWindow(deps, w, now);
          if (r === 'closed')
            deps.log.info(
              { tenant_id: w.tenant_id, leaderboard_id: w.leaderboard_id, window_key: w.window_key },
              'window closed',
            );
        },
      );
      await eachItem(
        deps,
        CLOSE_JOB,
        'exporting a window snapshot',
        exporting,
        batch,
        (n) => unexportedWindows(deps.sql, n),
        windowKey,
        (w) => exportSnapshot(deps, w),
      );
    },
  };
}

/** Forgets processed event ids once the dedupe window (plus an hour of lag) has passed. */
export function purgeDedupeJob(deps: ClosingDeps, windowMs: number, everyMs = 60_000): ScheduledJob {
  let last = 0;
  return {
    name: 'purge-processed-events',
    async run(now) {
      if (now - last < everyMs) return;
      last = now;
      await purgeProcessedEvents(deps.sql, now, windowMs);
    },
  };
}
