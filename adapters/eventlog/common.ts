/**
 * Pieces shared by the event-log adapters: the logger hook, retry backoff (the key partitioner is
 * partitioner.ts).
 */
import { exponentialDelay } from '../../shared/backoff';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
/**
 * Where the adapters (and kafkajs, through them) write their diagnostics. The composition root
 * passes one that routes into its pino logger; the default drops everything but errors to stderr.
 */
export type EventLogLogger = (level: LogLevel, message: string, fields?: Record<string, unknown>) => void;

export const defaultLogger: EventLogLogger = (level, message, fields) => {
  if (level === 'error') console.error(`[eventlog] ${message}`, fields ?? '');
};

export interface BackoffOptions {
  /** First wait after a failure. Default 100 ms. */
  initialMs?: number;
  /** Cap of the exponential growth. Default 5000 ms. */
  maxMs?: number;
}

/** Wait before retry number `attempt` (1-based): initial * 2^(attempt-1), capped. */
export function backoffDelay(attempt: number, opts: BackoffOptions = {}): number {
  return exponentialDelay(attempt, opts.initialMs ?? 100, opts.maxMs ?? 5000);
}

export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** A one-shot signal (stop, revoke): `fire` is idempotent; listeners can be added and removed. */
export class Signal {
  fired = false;
  private readonly listeners = new Set<() => void>();

  fire(): void {
    if (this.fired) return;
    this.fired = true;
    for (const l of [...this.listeners]) l();
    this.listeners.clear();
  }

  /** Calls `fn` once when the signal fires (at once if it has); returns an unsubscribe function. */
  on(fn: () => void): () => void {
    if (this.fired) {
      fn();
      return () => undefined;
    }
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }
}

/** Sleeps `ms`, or less when `cancel` (any of them) fires first. Leaves no timer or listener behind. */
export function sleepUnless(ms: number, cancel: Signal | Signal[]): Promise<void> {
  const signals = Array.isArray(cancel) ? cancel : [cancel];
  if (signals.some((s) => s.fired)) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      for (const off of offs) off();
      resolve();
    };
    const timer = setTimeout(done, ms);
    const offs = signals.map((s) => s.on(done));
  });
}

/** A counting semaphore: at most `limit` holders at a time, waiters served in arrival order. */
export class Semaphore {
  private active = 0;
  private readonly waiters: Array<() => void> = [];

  constructor(private readonly limit: number) {
    if (!(limit >= 1)) throw new Error(`invalid concurrency: ${limit}`);
  }

  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.active >= this.limit) await new Promise<void>((r) => this.waiters.push(r));
    else this.active++;
    try {
      return await fn();
    } finally {
      const next = this.waiters.shift();
      if (next) next();
      else this.active--;
    }
  }
}

/** Splits `items` into consecutive chunks of at most `size`. */
export function chunk<T>(items: T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
