/**
 * Issue 11, items 3 and 4, in both shapes:
 * - forged identity-provider tokens (RS256/ES256) cost one indexed lookup, whatever the number of
 *   tenants, and cannot delay a legitimate request; an address that keeps failing is refused with
 *   429 before any verification;
 * - signed requests sign the canonical request target (path and query), and an exact replay
 *   inside the skew window is refused, across instances in the distributed shape.
 */
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, importPKCS8, SignJWT } from 'jose';
import { signRequest } from '../../http/auth/authenticator';
import { ManualClock } from '../../core/clock';
import {
  call,
  createTenant,
  SHAPES,
  shapeEnv,
  startTestApp,
  tenantToken,
  type Shape,
  type TestApp,
} from '../support/app';

jest.setTimeout(180_000);

const SHARED_ISSUER = 'https://shared.idp.example/';
const rolesFor = (shape: Shape) => (shape === 'embedded' ? undefined : 'ingest,api');

describe.each(SHAPES)('forged identity-provider tokens with many tenants [%s]', (shape) => {
  let app: TestApp;
  let jwks: Awaited<ReturnType<typeof startJwks>>;
  let legit: Awaited<ReturnType<typeof createTenant>>;
  let forge: ForgeKit;
  let idpPem: string;

  beforeAll(async () => {
    app = await startTestApp(shape, { roles: rolesFor(shape) });
    legit = await createTenant(app);
    const idpKey = generateKeyPairSync('rsa', { modulusLength: 2048 });
    jwks = await startJwks([
      { ...(await exportJWK(idpKey.publicKey)), kid: 'real', alg: 'RS256', use: 'sig' },
    ]);
    idpPem = idpKey.privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
    forge = await forgeKit();
  });
  afterAll(async () => {
    await app.stop();
    await jwks.close();
  });

  /** Adds tenants in one statement (the tenancy store's table), half on one shared issuer. */
  async function addTenants(from: number, to: number) {
    await app.ctx.adapters.sql.query(
      `INSERT INTO tenants (id, name, jwt_secret_enc, hmac_secret_enc,
                            idp_jwks_url, idp_issuer, idp_org_claim, idp_org_value)
       SELECT 'bulk-' || g, 'bulk ' || g, t.jwt_secret_enc, t.hmac_secret_enc, $2,
              CASE WHEN g % 2 = 0 THEN $3 ELSE 'https://idp.example/bulk-' || g END,
              'org_id', 'org-' || g
         FROM tenants t, generate_series($4::int, $5::int) g WHERE t.id = $1`,
      [legit.id, jwks.url, SHARED_ISSUER, from, to],
    );
  }

  /**
   * Median round trips (ms) of forged tokens of three kinds and, interleaved so both see the same
   * machine load, of a control: an HS256 token naming an unknown tenant (one primary-key lookup).
   */
  async function medians(n: number): Promise<{ forged: number; control: number }> {
    const forged: number[] = [];
    const control: number[] = [];
    const timed = async (token: string, into: number[]) => {
      const t0 = performance.now();
      const r = await call('GET', `${app.url.query}/v1/whoami`, {
        headers: { authorization: `Bearer ${token}` },
      });
      into.push(performance.now() - t0);
      expect(r.status).toBe(401);
    };
    for (let i = 0; i < n; i++) {
      await timed(await forge.kind(i % 3, i), forged);
      await timed(await tenantToken({ id: `ghost-${i}`, jwt_secret: 'x'.repeat(32) }), control);
    }
    const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    return { forged: median(forged), control: median(control) };
  }

  it('costs the same with 10 and with 10,000 tenants, and never delays a legitimate request', async () => {
    await addTenants(2, 10);
    await medians(9); // warm-up: connections, JIT, the JWKS of the bulk tenants
    const small = await medians(60);

    await addTenants(11, 10000);
    const count = await app.ctx.adapters.sql.query<{ n: number }>('SELECT count(*)::int AS n FROM tenants');
    expect(count.rows[0]!.n).toBeGreaterThanOrEqual(10000);
    const fetchesBefore = jwks.hits();
    const large = await medians(60);
    const ms = (m: { forged: number; control: number }) =>
      `${m.forged.toFixed(2)} ms (control ${m.control.toFixed(2)} ms)`;
    console.log(`[${shape}] forged-token median: ${ms(small)} with 10 tenants, ${ms(large)} with 10,000`);
    // Listing tenants cost 207 ms per token at 10,000 (issue 11). Generous bounds for a shared,
    // loaded test machine: absolute, against the control measured at the same time, and against
    // the same measure with 10 tenants.
    expect(large.forged).toBeLessThan(50);
    expect(large.forged).toBeLessThan(3 * Math.max(large.control, 2));
    expect(large.forged).toBeLessThan(3 * Math.max(small.forged, large.control, 2));
    // Forged tokens naming a real issuer and organisation with unknown key ids fetch the JWKS
    // at most once per cooldown (30 s), not once per token.
    expect(jwks.hits() - fetchesBefore).toBeLessThanOrEqual(1);

    // 100 forged tokens in flight do not hold up a legitimate request.
    const forged = await Promise.all(Array.from({ length: 100 }, (_, i) => forge.kind(i % 3, 1000 + i)));
    const inFlight = forged.map((token) =>
      call('GET', `${app.url.query}/v1/whoami`, { headers: { authorization: `Bearer ${token}` } }),
    );
    const t0 = performance.now();
    const ok = await call('GET', `${app.url.query}/v1/whoami`, {
      headers: { authorization: `Bearer ${await tenantToken(legit)}` },
    });
    const waited = performance.now() - t0;
    const statuses = (await Promise.all(inFlight)).map((r) => r.status);
    console.log(`[${shape}] legitimate request with 100 forged in flight: ${waited.toFixed(0)} ms`);
    expect(ok.status).toBe(200);
    expect(ok.body).toEqual({ principal: 'tenant', via: 'jwt', tenant_id: legit.id });
    // Bounded by what 100 forged tokens cost with 10 tenants (measured above, same load), so it does
    // not grow with the tenant count: listing tenants made this 100 x 207 ms = 20 s (issue 11).
    expect(waited).toBeLessThan(Math.max(2000, 100 * small.forged));
    expect(new Set(statuses)).toEqual(new Set([401]));

    // A genuine token of a bulk tenant's provider still finds its tenant among the 10,000.
    const real = await new SignJWT({ org_id: 'org-9998' })
      .setProtectedHeader({ alg: 'RS256', kid: 'real' })
      .setIssuer(SHARED_ISSUER)
      .setSubject('carol')
      .setExpirationTime('1h')
      .sign(await importPKCS8(idpPem, 'RS256'));
    const me = await call('GET', `${app.url.query}/v1/whoami`, {
      headers: { authorization: `Bearer ${real}` },
    });
    expect(me.body).toEqual({ principal: 'user', via: 'idp', tenant_id: 'bulk-9998', user_id: 'carol' });
  });

  it('looks the issuer up by index, not by listing tenants', async () => {
    const plan = await app.ctx.adapters.sql.query<{ 'QUERY PLAN': string }>(
      `EXPLAIN SELECT * FROM tenants WHERE idp_issuer = 'https://shared.idp.example/'
         AND idp_org_value = ANY(ARRAY['org-2', 'nobody'])`,
    );
    const text = plan.rows.map((r) => r['QUERY PLAN']).join('\n');
    expect(text).toMatch(/Index Scan|Bitmap Index Scan/);
    expect(text).toMatch(/tenants_idp/);
  });

  it('keys the provider cache by claim name: the same value under another claim is not the organisation', async () => {
    const cached = await startTestApp(shape, {
      env: { ...shapeEnv(shape), LUDUS_TENANT_CACHE_MS: '60000' },
      roles: rolesFor(shape),
    });
    try {
      const t = await createTenant(cached);
      const org = `org-${randomUUID()}`;
      await cached.ctx.adapters.sql.query(
        `UPDATE tenants SET idp_jwks_url = $2, idp_issuer = $3, idp_org_claim = 'org_id', idp_org_value = $4
          WHERE id = $1`,
        [t.id, jwks.url, 'https://cached.idp.example/', org],
      );
      const token = (claims: Record<string, string>) =>
        importPKCS8(idpPem, 'RS256').then((k) =>
          new SignJWT(claims)
            .setProtectedHeader({ alg: 'RS256', kid: 'real' })
            .setIssuer('https://cached.idp.example/')
            .setSubject('carol')
            .setExpirationTime('1h')
            .sign(k),
        );
      const whoami = async (claims: Record<string, string>) =>
        call('GET', `${cached.url.query}/v1/whoami`, {
          headers: { authorization: `Bearer ${await token(claims)}` },
        });
      // The genuine token fills the provider cache with the tenant...
      expect((await whoami({ org_id: org })).body).toMatchObject({ via: 'idp', tenant_id: t.id });
      // ...and a token with the same string values under another claim name does not get it from there.
      expect((await whoami({ team: org })).status).toBe(401);
    } finally {
      await cached.stop();
    }
  });

  // Kept apart from the timing test so its lowered limit does not interfere.
  it('refuses an address that keeps failing with 429 before verifying anything, until the window resets', async () => {
    const clock = new ManualClock(Math.floor(Date.now() / 60000) * 60000 + 1000);
    const env = { ...shapeEnv(shape), LUDUS_RATE_LIMIT_QUERY: '10/m' };
    const gated = await startTestApp(shape, { env, clock, roles: rolesFor(shape) });
    try {
      const t = await createTenant(gated);
      const good = { authorization: `Bearer ${await tenantToken(t)}` };
      expect((await call('GET', `${gated.url.query}/v1/whoami`, { headers: good })).status).toBe(200);
      const statuses: number[] = [];
      for (let i = 0; i < 12; i++) {
        const r = await call('GET', `${gated.url.query}/v1/whoami`, {
          headers: { authorization: `Bearer ${await forge.kind(i % 3, 5000 + i)}` },
        });
        statuses.push(r.status);
      }
      expect(statuses).toEqual([...Array(10).fill(401), 429, 429]);
      // Even a valid credential from this address is refused unverified now, with the reset time.
      const refused = await call('GET', `${gated.url.query}/v1/whoami`, { headers: good });
      expect(refused.status).toBe(429);
      expect(refused.body.error.code).toBe('RATE_LIMITED');
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      // The tenant's own budget was not touched by the refusals: after the reset it is served.
      clock.advance(60_000);
      const after = await call('GET', `${gated.url.query}/v1/whoami`, { headers: good });
      expect(after.status).toBe(200);
      expect(after.body.tenant_id).toBe(t.id);
    } finally {
      await gated.stop();
    }
  });
});

describe.each(SHAPES)('signed requests sign the query and are accepted once [%s]', (shape) => {
  let app: TestApp;
  let t: Awaited<ReturnType<typeof createTenant>>;
  const env = shapeEnv(shape);

  beforeAll(async () => {
    app = await startTestApp(shape, { env, roles: rolesFor(shape) });
    t = await createTenant(app);
  });
  afterAll(() => app.stop());

  const now = () => String(Math.floor(Date.now() / 1000));
  const headers = (ts: string, sig: string) => ({
    'x-tenant-id': t.id,
    'x-timestamp': ts,
    'x-signature': `hmac-sha256=${sig}`,
  });

  it('refuses a changed, added or removed query parameter (AUTH_001); a reordered query is the same request', async () => {
    const path = `/v1/wallet/${t.id}/transactions`;
    const ts = now();
    const sig = signRequest(t.hmac_secret, 'GET', `${path}?user_id=alice&limit=5`, ts, '');
    const cases: Array<[string, string]> = [
      ['changed value', `${path}?user_id=bob&limit=5`],
      ['added parameter', `${path}?user_id=alice&limit=5&offset=0`],
      ['removed parameter', `${path}?user_id=alice`],
      ['no query at all', path],
      ['duplicated parameter', `${path}?user_id=alice&user_id=bob&limit=5`],
    ];
    for (const [what, target] of cases) {
      const r = await call('GET', `${app.url.query}${target}`, { headers: headers(ts, sig) });
      expect([what, r.status, r.body]).toEqual([what, 401, { error: 'Invalid signature', code: 'AUTH_001' }]);
    }
    // The same parameters in another order and encoding are the same canonical target.
    const r = await call('GET', `${app.url.query}${path}?limit=%35&user_id=alice`, {
      headers: headers(ts, sig),
    });
    expect(r.status).toBe(200);
    expect(r.body).toEqual([]);
  });

  it("cannot re-aim a signature seen for one user's balances at another user", async () => {
    const path = `/v1/wallet/${t.id}/balances`;
    const ts = now();
    const sig = signRequest(t.hmac_secret, 'GET', `${path}?user_id=alice`, ts, '');
    const bob = await call('GET', `${app.url.query}${path}?user_id=bob`, { headers: headers(ts, sig) });
    expect(bob.status).toBe(401);
    expect(bob.body.code).toBe('AUTH_001');
    const alice = await call('GET', `${app.url.query}${path}?user_id=alice`, { headers: headers(ts, sig) });
    expect(alice.status).toBe(200);
    expect(alice.body).toMatchObject({ tenant_id: t.id, user_id: 'alice' });
  });

  it('refuses an exact replay inside the window (AUTH_004) and keeps serving fresh signatures', async () => {
    const raw = JSON.stringify({
      event_id: randomUUID(),
      event_type: 'match',
      user_id: 'u1',
      timestamp: new Date().toISOString(),
      attributes: {},
    });
    const ts = now();
    const sig = signRequest(t.hmac_secret, 'POST', '/v1/events', ts, raw);
    const send = (base: string) => call('POST', `${base}/v1/events`, { headers: headers(ts, sig), raw });
    const first = await send(app.url.ingest);
    expect(first.status).toBe(200);
    const again = await send(app.url.ingest);
    expect(again.status).toBe(401);
    expect(again.body).toEqual({ error: expect.stringMatching(/^Replayed request/), code: 'AUTH_004' });
    // A GET replayed too; a fresh signature (another timestamp) is accepted.
    const g = signRequest(t.hmac_secret, 'GET', '/v1/whoami', ts, '');
    expect((await call('GET', `${app.url.ingest}/v1/whoami`, { headers: headers(ts, g) })).status).toBe(200);
    expect((await call('GET', `${app.url.ingest}/v1/whoami`, { headers: headers(ts, g) })).body.code).toBe(
      'AUTH_004',
    );
    const ts2 = String(Number(ts) - 1);
    const g2 = signRequest(t.hmac_secret, 'GET', '/v1/whoami', ts2, '');
    const fresh = await call('GET', `${app.url.ingest}/v1/whoami`, { headers: headers(ts2, g2) });
    expect(fresh.status).toBe(200);
    expect(fresh.body).toEqual({ principal: 'tenant', via: 'signature', tenant_id: t.id });
  });

  if (shape === 'distributed') {
    it('refuses a replay sent to another instance sharing the stores', async () => {
      const second = await startTestApp(shape, { env, roles: 'ingest,api' });
      try {
        const ts = now();
        const path = `/v1/wallet/${t.id}/balances`;
        const sig = signRequest(t.hmac_secret, 'GET', `${path}?user_id=dave`, ts, '');
        const one = await call('GET', `${app.url.query}${path}?user_id=dave`, { headers: headers(ts, sig) });
        expect(one.status).toBe(200);
        const two = await call('GET', `${second.url.query}${path}?user_id=dave`, {
          headers: headers(ts, sig),
        });
        expect(two.status).toBe(401);
        expect(two.body.code).toBe('AUTH_004');
        // The second instance serves a freshly signed request.
        const ts2 = String(Number(ts) - 1);
        const sig2 = signRequest(t.hmac_secret, 'GET', `${path}?user_id=dave`, ts2, '');
        const ok = await call('GET', `${second.url.query}${path}?user_id=dave`, {
          headers: headers(ts2, sig2),
        });
        expect(ok.status).toBe(200);
      } finally {
        await second.stop();
      }
    });
  }
});

interface ForgeKit {
  /** A forged token: 0 RS256 unknown issuer, 1 ES256 shared issuer with an unknown organisation,
   * 2 RS256 shared issuer and a real organisation, signed by the attacker's key under a fresh kid. */
  kind(k: number, i: number): Promise<string>;
}

async function forgeKit(): Promise<ForgeKit> {
  const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const rsaKey = await importPKCS8(
    rsa.privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
    'RS256',
  );
  const ecKey = await importPKCS8(ec.privateKey.export({ type: 'pkcs8', format: 'pem' }) as string, 'ES256');
  return {
    kind: (k, i) => {
      const base = { sub: `mallory-${i}` };
      if (k === 0)
        return new SignJWT({ ...base, org_id: 'org-2' })
          .setProtectedHeader({ alg: 'RS256', kid: 'x' })
          .setIssuer(`https://evil.example/${i}`)
          .setExpirationTime('1h')
          .sign(rsaKey);
      if (k === 1)
        return new SignJWT({ ...base, org_id: `org-none-${i}` })
          .setProtectedHeader({ alg: 'ES256', kid: 'x' })
          .setIssuer(SHARED_ISSUER)
          .setExpirationTime('1h')
          .sign(ecKey);
      return new SignJWT({ ...base, org_id: 'org-2' })
        .setProtectedHeader({ alg: 'RS256', kid: `forged-${i}` })
        .setIssuer(SHARED_ISSUER)
        .setExpirationTime('1h')
        .sign(rsaKey);
    },
  };
}

async function startJwks(keys: object[]) {
  let hits = 0;
  const server: Server = createServer((_req, res) => {
    hits++;
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ keys }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/jwks.json`,
    hits: () => hits,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
