/**
 * The streak deadline sweep as a scheduled job (core/streaks/sweep.ts): each tick takes the
 * streaks whose deadline has passed, in batches of `batch` rows, at most `maxBatches` per tick.
 */
import type { Sql } from '../adapters/sql/types';
import type { FactBus } from '../core/facts';
import type { ScheduledJob } from '../core/jobs';
import type { Granter } from '../core/rewards/grant';
import { sweepDue } from '../core/streaks/sweep';
import type { Logger } from '../shared/logger';

export const STREAK_JOB = 'streak-deadlines';

export function streakDeadlinesJob(
  deps: { sql: Sql; facts: FactBus; granter: Granter; log: Logger },
  opts: { batch?: number; maxBatches?: number } = {},
): ScheduledJob {
  return {
    name: STREAK_JOB,
    async run(now) {
      const r = await sweepDue(deps.sql, deps, now, opts);
      if (r.rows > 0)
        deps.log.debug({ job: STREAK_JOB, rows: r.rows, batches: r.batches }, 'streak deadlines swept');
    },
  };
}
