/**
 * A short, bounded, per-process cache of verified HS256 tenant and end-user tokens
 * (docs/authentication.md "Verified-token cache"; LUDUS_TOKEN_CACHE_MS).
 *
 * What it saves: decoding the token twice and jose's HMAC verification on every request of a
 * client that sends the same token again (a game client, a back end polling ranks).
 *
 * What it keeps, so that a cached answer is never one a fresh verification would refuse:
 * - The key is the SHA-256 of the *whole* token (header, claims and signature): a token that
 *   differs in any byte, a forged signature included, is a miss and is verified in full. The map
 *   compares digests, which an attacker cannot steer (a preimage per guess), so the lookup leaks
 *   nothing about stored tokens.
 * - An entry lives until the earlier of `ttlMs` after it was verified and the token's own `exp`
 *   (jose refuses a token once `exp <= now` in seconds: so does the cache).
 * - The caller re-reads the tenant on every hit (through its tenant cache) and accepts the entry
 *   only while the tenant's current JWT secret is the one the token was verified with (the same
 *   object, or a constant-time comparison when the tenant was read again) and the tenant is
 *   active: a rotated secret or a suspension takes effect exactly as it does without this cache.
 * - Only successful verifications are stored; failures are never cached.
 * - At most `maxEntries`: when full, expired entries go first, then the oldest tenth.
 */
import { hash } from 'node:crypto';
import type { TenantSecrets } from '../../core/tenancy/store';

/** `P`: the principal the token stands for (http/auth/authenticator.ts). */
export interface CachedToken<P> {
  principal: P;
  tenantId: string;
  /** The tenant (with the secret) the token was verified against. */
  secrets: TenantSecrets;
  /** Unix ms after which the entry is not used (min of verification + ttl and the token's exp). */
  until: number;
}

export class VerifiedTokenCache<P> {
  private readonly entries = new Map<string, CachedToken<P>>();

  constructor(private readonly opts: { ttlMs: number; maxEntries?: number }) {}

  get enabled(): boolean {
    return this.opts.ttlMs > 0;
  }

  get size(): number {
    return this.entries.size;
  }

  /** One-shot `crypto.hash`: about half the time of a Hash object per request (0.5 against 1.2 µs). */
  private static key(token: string): string {
    return hash('sha256', token, 'base64');
  }

  /** The entry of exactly this token, while it is valid at `now`; else null (and forgotten). */
  get(token: string, now: number): CachedToken<P> | null {
    if (!this.enabled) return null;
    const k = VerifiedTokenCache.key(token);
    const e = this.entries.get(k);
    if (!e) return null;
    if (now >= e.until) {
      this.entries.delete(k);
      return null;
    }
    return e;
  }

  /**
   * Remembers a token just verified at `now`. `exp` is the verified `exp` claim in seconds, if the
   * token has one; a token already expired at `now` is not stored.
   */
  set(
    token: string,
    v: { principal: P; tenantId: string; secrets: TenantSecrets; exp: unknown },
    now: number,
  ): void {
    if (!this.enabled) return;
    let until = now + this.opts.ttlMs;
    if (typeof v.exp === 'number') until = Math.min(until, v.exp * 1000);
    if (!(until > now)) return;
    const max = this.opts.maxEntries ?? 10000;
    if (this.entries.size >= max) this.evict(now, max);
    this.entries.set(VerifiedTokenCache.key(token), {
      principal: v.principal,
      tenantId: v.tenantId,
      secrets: v.secrets,
      until,
    });
  }

  /** Forgets the tokens of one tenant, or every token. */
  invalidate(tenantId?: string): void {
    if (tenantId === undefined) {
      this.entries.clear();
      return;
    }
    for (const [k, e] of this.entries) if (e.tenantId === tenantId) this.entries.delete(k);
  }

  private evict(now: number, max: number): void {
    for (const [k, e] of this.entries) if (now >= e.until) this.entries.delete(k);
    if (this.entries.size < max) return;
    // Still full of live entries: drop the oldest tenth (insertion order), verified again on use.
    let drop = Math.max(1, Math.ceil(max / 10));
    for (const k of this.entries.keys()) {
      if (drop-- <= 0) break;
      this.entries.delete(k);
    }
  }
}
