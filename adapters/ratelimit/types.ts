/**
 * The rate-limiter port: fixed windows counted per key (for example `ingest:<tenant>`).
 * Two adapters: Redis (shared by every instance, one Lua script per hit) and memory (one process).
 * A denied hit is not counted, so a client that backs off regains its budget.
 */
export interface RateWindow {
  /** Requests allowed per window. */
  limit: number;
  /** Window length in milliseconds (1 s, 1 min, 1 h, 1 day). */
  windowMs: number;
}

export interface RateDecision {
  allowed: boolean;
  /** The most constraining window: the one with the fewest requests left. */
  limit: number;
  remaining: number;
  /** Unix milliseconds at which that window resets. */
  resetAt: number;
}

export interface RateLimiter {
  readonly kind: 'redis' | 'memory';
  hit(key: string, windows: RateWindow[], now: number): Promise<RateDecision>;
  /**
   * The decision a hit would get now, without counting anything (a budget of failures checked
   * before the attempt that may fail: coupon guessing, docs/coupons.md).
   */
  peek(key: string, windows: RateWindow[], now: number): Promise<RateDecision>;
  /**
   * Remembers `key` for `ttlMs` from now; true the first time, false while it is remembered
   * (signed-request replay refusal; Redis `SET NX PX`, so every instance sees every use).
   */
  firstUse(key: string, ttlMs: number, now: number): Promise<boolean>;
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** Pure decision shared by both adapters: counts are the current window counts before this hit. */
export function decide(windows: RateWindow[], counts: number[], now: number): RateDecision {
  const allowed = windows.every((w, i) => counts[i]! < w.limit);
  let best: RateDecision | null = null;
  windows.forEach((w, i) => {
    const used = counts[i]! + (allowed ? 1 : 0);
    const remaining = Math.max(0, w.limit - used);
    const resetAt = (Math.floor(now / w.windowMs) + 1) * w.windowMs;
    if (!best || remaining < best.remaining || (remaining === best.remaining && resetAt > best.resetAt)) {
      best = { allowed, limit: w.limit, remaining, resetAt };
    }
  });
  return best ?? { allowed: true, limit: 0, remaining: 0, resetAt: now };
}
