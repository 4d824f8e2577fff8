/** The scheduler's jobs. Each is idempotent: a tick may be cut anywhere and run again. */
import { closeWindow, exportPending, type ClosingDeps } from '../core/leaderboards/closing';
import { dueWindows } from '../core/leaderboards/store';
import { purgeProcessedEvents } from '../processors/pipeline/pipeline';
import type { Logger } from '../runtime/logger';
import type { ScheduledJob } from './scheduler';

/** Closes leaderboard windows whose grace period has passed (and exports snapshots left behind). */
export function closeWindowsJob(deps: ClosingDeps & { log: Logger }, batch = 100): ScheduledJob {
  return {
    name: 'close-leaderboard-windows',
    async run(now) {
      for (const w of await dueWindows(deps.sql, now, batch)) {
        const r = await closeWindow(deps, w, now);
        if (r === 'closed')
          deps.log.info(
            { tenant_id: w.tenant_id, leaderboard_id: w.leaderboard_id, window_key: w.window_key },
            'window closed',
          );
      }
      await exportPending(deps);
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
