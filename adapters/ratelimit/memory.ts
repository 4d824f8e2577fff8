import { decide, type RateDecision, type RateLimiter, type RateWindow } from './types';

/** In-process fixed-window counters (the embedded shape: one process holds every limit). */
export class MemoryRateLimiter implements RateLimiter {
  readonly kind = 'memory' as const;
  private readonly counters = new Map<string, { count: number; expires: number }>();
  private sweeps = 0;

  async hit(key: string, windows: RateWindow[], now: number): Promise<RateDecision> {
    if (++this.sweeps % 10000 === 0) this.sweep(now);
    const keys = windows.map((w) => `${key}|${w.windowMs}|${Math.floor(now / w.windowMs)}`);
    const counts = keys.map((k) => {
      const c = this.counters.get(k);
      return c && c.expires > now ? c.count : 0;
    });
    const d = decide(windows, counts, now);
    if (d.allowed) {
      keys.forEach((k, i) => {
        const w = windows[i]!;
        this.counters.set(k, {
          count: counts[i]! + 1,
          expires: (Math.floor(now / w.windowMs) + 1) * w.windowMs,
        });
      });
    }
    return d;
  }

  async peek(key: string, windows: RateWindow[], now: number): Promise<RateDecision> {
    const counts = windows.map((w) => {
      const c = this.counters.get(`${key}|${w.windowMs}|${Math.floor(now / w.windowMs)}`);
      return c && c.expires > now ? c.count : 0;
    });
    // As a hit would see it, minus the hit itself.
    const d = decide(windows, counts, now);
    return d.allowed ? { ...d, remaining: d.remaining + 1 } : d;
  }

  async firstUse(key: string, ttlMs: number, now: number): Promise<boolean> {
    if (++this.sweeps % 10000 === 0) this.sweep(now);
    const k = `once|${key}`;
    const c = this.counters.get(k);
    if (c && c.expires > now) return false;
    this.counters.set(k, { count: 1, expires: now + ttlMs });
    return true;
  }

  private sweep(now: number): void {
    for (const [k, c] of this.counters) if (c.expires <= now) this.counters.delete(k);
  }

  async ping(): Promise<void> {}

  async close(): Promise<void> {
    this.counters.clear();
  }
}
