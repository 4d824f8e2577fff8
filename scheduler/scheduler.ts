import type { Queryable, Sql } from '../adapters/sql/types';
import type { Clock } from '../core/clock';
import type { Logger } from '../runtime/logger';

/** A periodic job. It must be idempotent: a tick may be retried after a crash. */
export interface ScheduledJob {
  name: string;
  /** Runs inside the tick's transaction, which holds the scheduler lock. */
  run(q: Queryable, now: number): Promise<void>;
}

/** Any constant: one scheduler tick at a time across every instance sharing the SQL store. */
const SCHEDULER_LOCK = 7_461_002;

/**
 * The scheduler role: every `intervalMs`, one instance (whichever takes the transaction-scoped
 * advisory lock) runs every job; the others skip that tick. A crashed instance holds no lock.
 */
export class Scheduler {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private stopped = false;

  constructor(
    private readonly deps: { sql: Sql; clock: Clock; log: Logger },
    private readonly jobs: ScheduledJob[],
    private readonly intervalMs = 1000,
  ) {}

  start(): void {
    this.stopped = false;
    this.schedule();
  }

  /** Runs one tick now; resolves false when another instance holds the lock. */
  async tick(): Promise<boolean> {
    return this.deps.sql.tx(async (q) => {
      const got = await q.query<{ ok: boolean }>('SELECT pg_try_advisory_xact_lock($1) AS ok', [
        SCHEDULER_LOCK,
      ]);
      if (!got.rows[0]?.ok) return false;
      const now = this.deps.clock.now();
      for (const job of this.jobs) await job.run(q, now);
      return true;
    });
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

  /** Stops scheduling and waits for a tick in progress. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.running) await this.running;
  }
}
