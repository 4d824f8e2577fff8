/**
 * The scheduler's job for achievement backfills (core/achievements/backfill.ts): every tick it
 * moves open backfill jobs, one chunk of users per transaction, for at most `budgetMs`, so a long
 * backfill never holds up the other jobs (window closing) for more than that. The jobs' state is
 * in SQL, so whichever process holds the scheduler lease next resumes them after a restart.
 */
import type { Backfills } from '../core/achievements/backfill';
import type { Logger } from '../shared/logger';
import type { ScheduledJob } from './scheduler';

export function achievementBackfillJob(
  deps: { backfills: Backfills; log: Logger },
  budgetMs = 1000,
): ScheduledJob {
  return {
    name: 'achievement-backfills',
    async run(now) {
      const more = await deps.backfills.runFor(now, budgetMs);
      if (more) deps.log.debug({ job: 'achievement-backfills' }, 'backfill continues next tick');
    },
  };
}
