/**
 * Cheap refusal of an address that keeps failing authentication (docs/authentication.md).
 *
 * Failed credentials are counted against the caller's address by the rate limiter
 * (`<gateway>:anon:<address>`, http/route.ts). Once that budget is spent, this process
 * remembers the address until the window resets and answers its requests 429 before any
 * credential is looked at: no store lookup, no JWKS fetch, no signature verification and no
 * rate-limiter round trip. Per process and bounded in size; the shared count stays in the limiter.
 */
export class FailureGate {
  private readonly until = new Map<string, number>();

  constructor(private readonly maxEntries = 10000) {}

  /** The reset time (Unix ms) while `key` is refused, else null. */
  refusedUntil(key: string, now: number): number | null {
    const t = this.until.get(key);
    if (t === undefined) return null;
    if (t > now) return t;
    this.until.delete(key);
    return null;
  }

  /** Refuse `key` until `resetAt` (its failure budget is spent). */
  refuse(key: string, resetAt: number, now: number): void {
    if (this.until.size >= this.maxEntries) {
      for (const [k, t] of this.until) if (t <= now) this.until.delete(k);
      // Still full of live entries: drop the oldest insertions (they are refused by the limiter anyway).
      for (const k of this.until.keys()) {
        if (this.until.size < this.maxEntries) break;
        this.until.delete(k);
      }
    }
    this.until.set(key, resetAt);
  }
}
