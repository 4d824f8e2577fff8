/**
 * The contract of a periodic job, between the roles that provide jobs (dispatcher/, scheduler/)
 * and the scheduler that runs them on the lease holder (scheduler/scheduler.ts).
 */

/** A periodic job. It must be idempotent and crash-safe: a tick may stop anywhere and run again. */
export interface ScheduledJob {
  name: string;
  /** Runs its own transactions; `now` is the tick's clock reading. */
  run(now: number): Promise<void>;
}
