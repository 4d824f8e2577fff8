import { randomUUID } from 'node:crypto';
import type { Sql } from '../adapters/sql/types';
import type { Clock } from '../core/clock';
import type { Logger } from '../runtime/logger';

/** A periodic job. It must be idempotent and crash-safe: a tick may stop anywhere and run again. */
export interface ScheduledJob {
  name: string;
  /** Runs its own transactions; `now` is the tick's clock reading. */
  run(now: number): Promise<void>;
}

/**
 * The scheduler role: one active instance at a time across every process sharing the SQL store.
 * Leadership is a lease row (scheduler_lease) renewed on every tick and taken over when it expires;
 * a lease rather than a session advisory lock because PGlite is a single session shared by every
 * role of the process (docs/architecture.md). Jobs run one after the other on the leader.
 */
export class Scheduler {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private stopped = false;
  readonly id = randomUUID();

  constructor(
    private readonly deps: { sql: Sql; clock: Clock; log: Logger },
    private readonly jobs: ScheduledJob[],
    private readonly intervalMs = 1000,
    private readonly leaseMs = 15_000,
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
    for (const job of this.jobs) {
      try {
        await job.run(now);
      } catch (err) {
        this.deps.log.error({ err, job: job.name }, 'scheduled job failed; it runs again next tick');
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
