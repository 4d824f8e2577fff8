import { randomUUID } from 'node:crypto';
import type { Sql } from '../adapters/sql/types';
import type { Clock } from '../core/clock';
import type { Logger } from '../shared/logger';
import type { Metrics } from '../shared/metrics';
import { backoffDelay, JOB_BACKOFF, type BackoffPolicy } from './backoff';

import type { ScheduledJob } from '../core/jobs';

export type { ScheduledJob } from '../core/jobs';

/**
 * The scheduler role: one active instance at a time across every process sharing the SQL store.
 * Leadership is a lease row (scheduler_lease) renewed on every tick and taken over when it expires;
 * a lease rather than a session advisory lock because PGlite is a single session shared by every
 * role of the process (docs/architecture.md). Jobs run one after the other on the leader.
 *
 * A job whose run throws is logged and counted (`ludus_scheduler_job_failures_total`) and backs
 * off: after n consecutive failures it is skipped for initial * 2^(n-1) ms (capped; real time,
 * ./backoff.ts), shown in `ludus_scheduler_job_backoff_seconds`; the other jobs run as usual.
 */
export class Scheduler {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private stopped = false;
  readonly id = randomUUID();
  /** Consecutive failures and the real time before which a failing job is not run again. */
  private readonly failing = new Map<string, { failures: number; retryAt: number }>();

  constructor(
    private readonly deps: { sql: Sql; clock: Clock; log: Logger; metrics?: Metrics },
    private readonly jobs: ScheduledJob[],
    private readonly intervalMs = 1000,
    private readonly leaseMs = 15_000,
    private readonly backoff: BackoffPolicy & { time?: () => number } = JOB_BACKOFF,
  ) {}

  start(): void {
    this.stopped = false;
    this.schedule();
  }

  /** Takes or renews the lease; true when this instance leads. */
  async lead(): Promise<boolean> {
    const now = this.deps.clock.now();
    const r = await this.deps.sql.query<{ holder: string }>(
      `INSERT INTO scheduler_lease (id, holder, expires_at) VALUES (1, $1, $2)
       ON CONFLICT (id) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
         WHERE scheduler_lease.holder = EXCLUDED.holder OR scheduler_lease.expires_at < $3
       RETURNING holder`,
      [this.id, now + this.leaseMs, now],
    );
    return r.rows[0]?.holder === this.id;
  }

  /** Runs one tick now; resolves false when another instance leads. */
  async tick(): Promise<boolean> {
    if (!(await this.lead())) return false;
    const now = this.deps.clock.now();
    const time = this.backoff.time ?? Date.now;
    for (const job of this.jobs) {
      const f = this.failing.get(job.name);
      if (f && time() < f.retryAt) continue;
      try {
        await job.run(now);
        if (f) {
          this.failing.delete(job.name);
          this.deps.metrics?.schedulerJobBackoff.set({ job: job.name }, 0);
          this.deps.log.info({ job: job.name, failures: f.failures }, 'scheduled job recovered');
        }
      } catch (err) {
        const failures = (f?.failures ?? 0) + 1;
        const delayMs = backoffDelay(this.backoff, failures);
        this.failing.set(job.name, { failures, retryAt: time() + delayMs });
        this.deps.metrics?.schedulerJobFailures.inc({ job: job.name });
        this.deps.metrics?.schedulerJobBackoff.set({ job: job.name }, delayMs / 1000);
        this.deps.log.error(
          { err, job: job.name, failures, retry_in_ms: delayMs },
          'scheduled job failed; backing off',
        );
      }
    }
    return true;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.tick()
        .then(() => undefined)
        .catch((err) => this.deps.log.error({ err }, 'scheduler tick failed'))
        .finally(() => {
          this.running = null;
          this.schedule();
        });
    }, this.intervalMs);
  }

  /** Stops scheduling, waits for a tick in progress and gives the lease up. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.running) await this.running;
    await this.deps.sql
      .query('DELETE FROM scheduler_lease WHERE holder = $1', [this.id])
      .catch(() => undefined);
  }
}
