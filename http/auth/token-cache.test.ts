/**
 * The verified-token cache (./token-cache.ts) alone, and through Authenticator.token(): expiry
 * (the entry's TTL and the token's exp), keying by the whole token, invalidation, bounds, and
 * that secret rotation and suspension take effect as they do without the cache.
 */
import { SignJWT } from 'jose';
import { ManualClock } from '../../core/clock';
import type { Tenant, TenantSecrets, TenantStore } from '../../core/tenancy/store';
import { Authenticator } from './authenticator';
import { VerifiedTokenCache } from './token-cache';

const T0 = Date.UTC(2026, 10, 26, 12, 0, 0);

function tenant(id: string, status: Tenant['status'] = 'active'): Tenant {
  return {
    id,
    name: id,
    status,
    timezone: 'UTC',
    idp: null,
    created_at: '2026-01-01T00:00:00Z',
    updated_at: '2026-01-01T00:00:00Z',
  };
}

function secrets(id: string, jwtSecret: string, status: Tenant['status'] = 'active'): TenantSecrets {
  return { tenant: tenant(id, status), jwtSecret, hmacSecret: 'h' };
}

async function sign(claims: Record<string, unknown>, secret: string, iat: number, exp?: number) {
  const j = new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).setIssuedAt(iat);
  if (exp !== undefined) j.setExpirationTime(exp);
  return j.sign(new TextEncoder().encode(secret));
}

describe('VerifiedTokenCache', () => {
  const principal = { kind: 'tenant', tenantId: 'a' };
  const s = secrets('a', 'secret-a');

  it('answers only the exact token, until the TTL', () => {
    const c = new VerifiedTokenCache<typeof principal>({ ttlMs: 1000 });
    c.set('x.y.z', { principal, tenantId: 'a', secrets: s, exp: undefined }, T0);
    expect(c.get('x.y.z', T0 + 999)?.principal).toEqual(principal);
    expect(c.get('x.y.zz', T0)).toBeNull();
    expect(c.get('x.y.', T0)).toBeNull();
    expect(c.get('x.y.z', T0 + 1000)).toBeNull();
    // Forgotten once expired.
    expect(c.size).toBe(0);
  });

  it("never outlives the token's exp (seconds), and does not store an expired token", () => {
    const c = new VerifiedTokenCache<typeof principal>({ ttlMs: 60_000 });
    const exp = T0 / 1000 + 5;
    c.set('t', { principal, tenantId: 'a', secrets: s, exp }, T0);
    expect(c.get('t', T0 + 4999)).not.toBeNull();
    expect(c.get('t', T0 + 5000)).toBeNull();
    c.set('old', { principal, tenantId: 'a', secrets: s, exp: T0 / 1000 }, T0);
    expect(c.size).toBe(0);
  });

  it('stores nothing with TTL 0', () => {
    const c = new VerifiedTokenCache<typeof principal>({ ttlMs: 0 });
    c.set('t', { principal, tenantId: 'a', secrets: s, exp: undefined }, T0);
    expect(c.get('t', T0)).toBeNull();
    expect(c.size).toBe(0);
  });

  it("forgets one tenant's tokens, or all", () => {
    const c = new VerifiedTokenCache<typeof principal>({ ttlMs: 1000 });
    c.set('a1', { principal, tenantId: 'a', secrets: s, exp: undefined }, T0);
    c.set('b1', { principal, tenantId: 'b', secrets: s, exp: undefined }, T0);
    c.invalidate('a');
    expect(c.get('a1', T0)).toBeNull();
    expect(c.get('b1', T0)).not.toBeNull();
    c.invalidate();
    expect(c.size).toBe(0);
  });

  it('stays within its bound: expired entries first, then the oldest', () => {
    const c = new VerifiedTokenCache<typeof principal>({ ttlMs: 1000, maxEntries: 10 });
    for (let i = 0; i < 5; i++)
      c.set(`old${i}`, { principal, tenantId: 'a', secrets: s, exp: undefined }, T0);
    for (let i = 0; i < 5; i++)
      c.set(`new${i}`, { principal, tenantId: 'a', secrets: s, exp: undefined }, T0 + 600);
    // Full: the five expired at T0 + 1000 go first.
    c.set('next', { principal, tenantId: 'a', secrets: s, exp: undefined }, T0 + 1200);
    expect(c.size).toBe(6);
    expect(c.get('old0', T0 + 1200)).toBeNull();
    expect(c.get('new0', T0 + 1200)).not.toBeNull();
    for (let i = 0; i < 100; i++)
      c.set(`more${i}`, { principal, tenantId: 'a', secrets: s, exp: undefined }, T0 + 1200);
    expect(c.size).toBeLessThanOrEqual(10);
    expect(c.get('more99', T0 + 1200)).not.toBeNull();
  });
});

describe('Authenticator.token with the verified-token cache', () => {
  let clock: ManualClock;
  let stored: Map<string, TenantSecrets>;
  let auth: Authenticator;

  beforeEach(() => {
    clock = new ManualClock(T0);
    stored = new Map([['a', secrets('a', 'secret-a')]]);
    const tenants = {
      getTenantSecrets: async (id: string) => {
        const t = stored.get(id);
        // A fresh object per read, as the SQL store returns.
        return t ? { ...t, tenant: { ...t.tenant } } : null;
      },
    } as unknown as TenantStore;
    auth = new Authenticator({
      tenants,
      clock,
      rootKey: null,
      signatureSkewSeconds: 300,
      tenantCacheMs: 1000,
      tokenCacheMs: 60_000,
      replay: { firstUse: async () => true },
    });
  });

  const now = () => Math.floor(clock.now() / 1000);

  it('accepts a cached token again and refuses a token that differs only in its signature', async () => {
    const token = await sign({ sub_type: 'tenant', sub_id: 'a' }, 'secret-a', now(), now() + 3600);
    const first = await auth.token(`Bearer ${token}`);
    expect(first.principal).toEqual({ kind: 'tenant', tenantId: 'a', via: 'jwt' });
    expect((await auth.token(`Bearer ${token}`)).principal).toEqual(first.principal);
    const [h, p, sig] = token.split('.');
    const forged = `${h}.${p}.${sig!.slice(0, -2)}${sig!.endsWith('AA') ? 'BB' : 'AA'}`;
    await expect(auth.token(`Bearer ${forged}`)).rejects.toMatchObject({ status: 401 });
    const wrongKey = await sign({ sub_type: 'tenant', sub_id: 'a' }, 'not-the-secret', now(), now() + 3600);
    await expect(auth.token(`Bearer ${wrongKey}`)).rejects.toMatchObject({ status: 401 });
  });

  it('refuses a cached token once its exp has passed', async () => {
    const token = await sign({ sub_type: 'tenant', sub_id: 'a' }, 'secret-a', now(), now() + 10);
    await auth.token(`Bearer ${token}`);
    clock.advance(9_000);
    await expect(auth.token(`Bearer ${token}`)).resolves.toBeDefined();
    clock.advance(1_000);
    await expect(auth.token(`Bearer ${token}`)).rejects.toMatchObject({
      status: 401,
      message: 'Token expired',
    });
  });

  it('refuses a cached token after the secret is rotated (within the tenant cache time)', async () => {
    const token = await sign({ sub_type: 'tenant', sub_id: 'a' }, 'secret-a', now(), now() + 3600);
    await auth.token(`Bearer ${token}`);
    stored.set('a', secrets('a', 'secret-b'));
    clock.advance(1_001);
    await expect(auth.token(`Bearer ${token}`)).rejects.toMatchObject({ status: 401 });
    const fresh = await sign({ sub_type: 'tenant', sub_id: 'a' }, 'secret-b', now(), now() + 3600);
    await expect(auth.token(`Bearer ${fresh}`)).resolves.toBeDefined();
  });

  it('keeps a cached token when the tenant is read again with the same secret', async () => {
    const token = await sign({ sub_type: 'tenant', sub_id: 'a' }, 'secret-a', now(), now() + 3600);
    await auth.token(`Bearer ${token}`);
    clock.advance(5_000);
    await expect(auth.token(`Bearer ${token}`)).resolves.toBeDefined();
  });

  it('answers 403 for a cached token of a tenant suspended since', async () => {
    const token = await sign({ sub_type: 'tenant', sub_id: 'a' }, 'secret-a', now(), now() + 3600);
    await auth.token(`Bearer ${token}`);
    stored.set('a', secrets('a', 'secret-a', 'suspended'));
    auth.invalidate('a');
    await expect(auth.token(`Bearer ${token}`)).rejects.toMatchObject({ status: 403 });
  });

  it("keeps an end user's token to its own user", async () => {
    const u1 = await sign({ sub_type: 'user', tenant_id: 'a', sub: 'u1' }, 'secret-a', now(), now() + 3600);
    const u2 = await sign({ sub_type: 'user', tenant_id: 'a', sub: 'u2' }, 'secret-a', now(), now() + 3600);
    await auth.token(`Bearer ${u1}`);
    await auth.token(`Bearer ${u2}`);
    expect((await auth.token(`Bearer ${u1}`)).principal).toMatchObject({ kind: 'user', userId: 'u1' });
    expect((await auth.token(`Bearer ${u2}`)).principal).toMatchObject({ kind: 'user', userId: 'u2' });
  });

  it('caches no failure: a token refused for an unknown tenant is accepted once the tenant exists', async () => {
    const token = await sign({ sub_type: 'tenant', sub_id: 'c' }, 'secret-c', now(), now() + 3600);
    await expect(auth.token(`Bearer ${token}`)).rejects.toMatchObject({ status: 401 });
    stored.set('c', secrets('c', 'secret-c'));
    clock.advance(1_001);
    await expect(auth.token(`Bearer ${token}`)).resolves.toBeDefined();
  });

  it('reads a tenant once for many concurrent requests when its cache entry has run out', async () => {
    let reads = 0;
    const counting = new Authenticator({
      tenants: {
        getTenantSecrets: async (id: string) => {
          reads++;
          const t = stored.get(id);
          return t ? { ...t, tenant: { ...t.tenant } } : null;
        },
      } as unknown as TenantStore,
      clock,
      rootKey: null,
      signatureSkewSeconds: 300,
      tenantCacheMs: 1000,
      tokenCacheMs: 0,
      replay: { firstUse: async () => true },
    });
    const token = await sign({ sub_type: 'tenant', sub_id: 'a' }, 'secret-a', now(), now() + 3600);
    await Promise.all(Array.from({ length: 20 }, () => counting.token(`Bearer ${token}`)));
    expect(reads).toBe(1);
    clock.advance(1_000);
    stored.set('a', secrets('a', 'secret-a', 'suspended'));
    const answers = await Promise.allSettled(
      Array.from({ length: 20 }, () => counting.token(`Bearer ${token}`)),
    );
    expect(
      answers.every((a) => a.status === 'rejected' && (a.reason as { status: number }).status === 403),
    ).toBe(true);
    expect(reads).toBe(2);
  });
});
