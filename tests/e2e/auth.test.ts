/**
 * Every credential kind against the running gateways, accepted and rejected, in both shapes.
 */
import { generateKeyPairSync } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, SignJWT, importPKCS8 } from 'jose';
import { signRequest } from '../../http/auth/authenticator';
import {
  call,
  createKey,
  createTenant,
  jwt,
  SHAPES,
  startTestApp,
  tenantToken,
  userToken,
  type TestApp,
} from '../support/app';

describe.each(SHAPES)('credentials [%s]', (shape) => {
  let app: TestApp;
  let t: Awaited<ReturnType<typeof createTenant>>;
  let other: Awaited<ReturnType<typeof createTenant>>;

  beforeAll(async () => {
    app = await startTestApp(shape);
    t = await createTenant(app);
    other = await createTenant(app);
  });
  afterAll(() => app.stop());

  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

  describe('operator routes (root key)', () => {
    it('creates a tenant and shows its secrets once', async () => {
      const r = await call('POST', `${app.url.admin}/v1/tenants`, {
        headers: { 'x-api-key': app.rootKey },
        body: { name: 'Acme' },
      });
      expect(r.status).toBe(201);
      expect(r.body).toMatchObject({ name: 'Acme', status: 'active' });
      expect(r.body.id).toMatch(/^[0-9a-f-]{36}$/);
      expect(r.body.jwt_secret).toMatch(/^ldt_/);
      expect(r.body.hmac_secret).toMatch(/^ldh_/);
      const got = await call('GET', `${app.url.admin}/v1/tenants/${r.body.id}`, {
        headers: bearer(app.rootKey),
      });
      expect(got.status).toBe(200);
      expect(got.body.jwt_secret).toBeUndefined();
      expect(got.body.hmac_secret).toBeUndefined();
      const list = await call('GET', `${app.url.admin}/v1/tenants`, { headers: bearer(app.rootKey) });
      expect(list.body.tenants.map((x: { id: string }) => x.id)).toContain(r.body.id);
    });

    it('refuses operator routes without the root key', async () => {
      const none = await call('GET', `${app.url.admin}/v1/tenants`);
      expect(none.status).toBe(401);
      expect(none.body).toEqual({
        error: { code: 'UNAUTHORIZED', message: expect.stringContaining('Missing credential'), status: 401 },
      });
      const key = await createKey(app, ['*']);
      const withKey = await call('GET', `${app.url.admin}/v1/tenants`, { headers: { 'x-api-key': key.key } });
      expect(withKey.status).toBe(403);
      expect(withKey.body.error.code).toBe('FORBIDDEN');
      const wrong = await call('GET', `${app.url.admin}/v1/tenants`, {
        headers: { 'x-api-key': app.rootKey + 'x' },
      });
      expect(wrong.status).toBe(401);
    });

    it('validates bodies with messages naming the field, and changes nothing', async () => {
      const before = (await call('GET', `${app.url.admin}/v1/tenants`, { headers: bearer(app.rootKey) })).body
        .total;
      const cases: Array<[unknown, RegExp]> = [
        [{}, /body\.name is required/],
        [{ name: '' }, /body\.name must NOT have fewer than 1 characters/],
        [{ name: 'x', extra: 1 }, /body\.extra is not allowed/],
        [{ name: 5 }, /body\.name must be a string/],
        [{ name: 'x', id: 'Bad Id!' }, /body\.id must match pattern/],
      ];
      for (const [body, message] of cases) {
        const r = await call('POST', `${app.url.admin}/v1/tenants`, { headers: bearer(app.rootKey), body });
        expect(r.status).toBe(400);
        expect(r.body.error.code).toBe('VALIDATION_ERROR');
        expect(r.body.error.message).toMatch(message);
      }
      const malformed = await call('POST', `${app.url.admin}/v1/tenants`, {
        headers: bearer(app.rootKey),
        raw: '{"name": ',
      });
      expect(malformed.status).toBe(400);
      expect(malformed.body.error.message).toMatch(/^Malformed JSON/);
      const badUtf8 = await call('POST', `${app.url.admin}/v1/tenants`, {
        headers: bearer(app.rootKey),
        raw: Buffer.concat([Buffer.from('{"name":"'), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]),
      });
      expect(badUtf8.status).toBe(400);
      expect(badUtf8.body.error.message).toBe('Request body is not valid UTF-8');
      const after = (await call('GET', `${app.url.admin}/v1/tenants`, { headers: bearer(app.rootKey) })).body
        .total;
      expect(after).toBe(before);
    });

    it('answers 409 for a duplicate tenant id and 404 for an unknown one', async () => {
      const body = { name: 'dup', id: `dup-${Date.now()}` };
      expect(
        (await call('POST', `${app.url.admin}/v1/tenants`, { headers: bearer(app.rootKey), body })).status,
      ).toBe(201);
      const again = await call('POST', `${app.url.admin}/v1/tenants`, { headers: bearer(app.rootKey), body });
      expect(again.status).toBe(409);
      expect(again.body.error.code).toBe('CONFLICT');
      const missing = await call('GET', `${app.url.admin}/v1/tenants/nope-nope`, {
        headers: bearer(app.rootKey),
      });
      expect(missing.status).toBe(404);
    });

    it('refuses a body over 1 MB with 413', async () => {
      const r = await call('POST', `${app.url.admin}/v1/tenants`, {
        headers: bearer(app.rootKey),
        raw: JSON.stringify({ name: 'x'.repeat(1024 * 1024) }),
      });
      expect(r.status).toBe(413);
      expect(r.body.error.code).toBe('PAYLOAD_TOO_LARGE');
    });
  });

  describe('API keys and admin JWTs', () => {
    it('accepts a key by X-API-Key and by Bearer, for its tenants only', async () => {
      const key = await createKey(app, [t.id], ['coupons:read']);
      for (const headers of [{ 'x-api-key': key.key }, bearer(key.key)]) {
        const ok = await call('GET', `${app.url.admin}/v1/tenants/${t.id}/whoami`, { headers });
        expect(ok.status).toBe(200);
        expect(ok.body).toMatchObject({
          principal: 'api_key',
          via: 'api_key',
          key_id: key.id,
          tenant_id: t.id,
        });
        const query = await call('GET', `${app.url.admin}/v1/whoami?tenant_id=${t.id}`, { headers });
        expect(query.status).toBe(200);
        const denied = await call('GET', `${app.url.admin}/v1/tenants/${other.id}/whoami`, { headers });
        expect(denied.status).toBe(403);
        expect(denied.body.error.message).toContain(`no access to tenant ${other.id}`);
      }
    });

    it('never shows a key after creation and revokes it at once', async () => {
      const key = await createKey(app, [t.id]);
      const list = await call('GET', `${app.url.admin}/v1/api-keys`, { headers: bearer(app.rootKey) });
      const listed = list.body.api_keys.find((k: { id: string }) => k.id === key.id);
      expect(listed).toMatchObject({ id: key.id, hint: key.key.slice(-4), revoked_at: null });
      expect(JSON.stringify(list.body)).not.toContain(key.key);
      expect(
        (await call('GET', `${app.url.admin}/v1/whoami`, { headers: { 'x-api-key': key.key } })).status,
      ).toBe(200);
      const del = await call('DELETE', `${app.url.admin}/v1/api-keys/${key.id}`, {
        headers: bearer(app.rootKey),
      });
      expect(del.status).toBe(200);
      expect(del.body.revoked_at).not.toBeNull();
      const after = await call('GET', `${app.url.admin}/v1/whoami`, { headers: { 'x-api-key': key.key } });
      expect(after.status).toBe(401);
      expect(after.body.error.message).toBe('Invalid or revoked API key');
    });

    it('validates key creation: known scopes, existing tenants', async () => {
      const bad = await call('POST', `${app.url.admin}/v1/api-keys`, {
        headers: bearer(app.rootKey),
        body: { name: 'k', tenant_ids: [t.id], scopes: ['coupons:delete'] },
      });
      expect(bad.status).toBe(400);
      expect(bad.body.error.message).toMatch(/^body\.scopes\[0\] must match pattern/);
      const noTenant = await call('POST', `${app.url.admin}/v1/api-keys`, {
        headers: bearer(app.rootKey),
        body: { name: 'k', tenant_ids: ['ghost'], scopes: ['*'] },
      });
      expect(noTenant.status).toBe(400);
      expect(noTenant.body.error.message).toBe('body.tenant_ids: tenant ghost not found');
    });

    it('accepts an admin JWT signed with the plaintext key and honours exp', async () => {
      const key = await createKey(app, [t.id]);
      const good = await jwt(key.key, { sub_type: 'admin', sub_id: key.id });
      const r = await call('GET', `${app.url.admin}/v1/tenants/${t.id}/whoami`, { headers: bearer(good) });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ principal: 'api_key', via: 'admin_jwt', key_id: key.id });
      const expired = await jwt(key.key, { sub_type: 'admin', sub_id: key.id }, -10);
      const e = await call('GET', `${app.url.admin}/v1/whoami`, { headers: bearer(expired) });
      expect(e.status).toBe(401);
      expect(e.body.error.message).toBe('Token expired');
      const wrongKey = await jwt('not-the-key', { sub_type: 'admin', sub_id: key.id });
      expect(
        (await call('GET', `${app.url.admin}/v1/whoami`, { headers: bearer(wrongKey) })).body.error.message,
      ).toBe('Invalid token signature');
      const noSub = await jwt(key.key, { sub_type: 'tenant', sub_id: key.id });
      expect((await call('GET', `${app.url.admin}/v1/whoami`, { headers: bearer(noSub) })).status).toBe(401);
    });

    it('checks scopes: write implies read, feature wildcard, none', async () => {
      const { hasScope } = await import('../../http/route');
      expect(hasScope(['coupons:write'], 'coupons:read')).toBe(true);
      expect(hasScope(['coupons:read'], 'coupons:write')).toBe(false);
      expect(hasScope(['coupons:*'], 'coupons:write')).toBe(true);
      expect(hasScope(['wallet:*'], 'coupons:read')).toBe(false);
      expect(hasScope(['*'], 'webhooks:write')).toBe(true);
    });
  });

  describe('tenant and end-user JWTs', () => {
    it('accepts a tenant JWT on the query and ingestion gateways', async () => {
      const token = await tenantToken(t);
      for (const base of [app.url.query, app.url.ingest]) {
        const r = await call('GET', `${base}/v1/whoami`, { headers: bearer(token) });
        expect(r.status).toBe(200);
        expect(r.body).toEqual({ principal: 'tenant', via: 'jwt', tenant_id: t.id });
      }
    });

    it('accepts an end-user JWT and names its user', async () => {
      const token = await userToken(t, 'alice');
      const r = await call('GET', `${app.url.query}/v1/whoami`, { headers: bearer(token) });
      expect(r.body).toEqual({ principal: 'user', via: 'jwt', tenant_id: t.id, user_id: 'alice' });
    });

    it('requires the path tenant to be the credential tenant on long forms', async () => {
      const token = await tenantToken(t);
      expect(
        (await call('GET', `${app.url.query}/v1/whoami/${t.id}`, { headers: bearer(token) })).status,
      ).toBe(200);
      const r = await call('GET', `${app.url.query}/v1/whoami/${other.id}`, { headers: bearer(token) });
      expect(r.status).toBe(403);
    });

    it('rejects missing, malformed, expired, wrongly signed, alg none and foreign-tenant tokens', async () => {
      const now = Math.floor(Date.now() / 1000);
      const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
      const cases: Array<[string, Record<string, string>, number, RegExp]> = [
        ['missing', {}, 401, /Missing credential/],
        ['not bearer', { authorization: 'Basic abc' }, 401, /Missing credential/],
        ['malformed', bearer('abc.def'), 401, /Malformed token/],
        ['garbage parts', bearer('a.b.c'), 401, /Malformed token/],
        [
          'expired',
          bearer(await jwt(t.jwt_secret, { sub_type: 'tenant', sub_id: t.id }, -5)),
          401,
          /Token expired/,
        ],
        [
          'wrong secret',
          bearer(await jwt(other.jwt_secret, { sub_type: 'tenant', sub_id: t.id })),
          401,
          /Invalid token signature/,
        ],
        [
          'alg none',
          bearer(
            `${b64({ alg: 'none', typ: 'JWT' })}.${b64({ sub_type: 'tenant', sub_id: t.id, exp: now + 60 })}.`,
          ),
          401,
          /Unsupported token algorithm none/,
        ],
        [
          'unknown tenant',
          bearer(await jwt(t.jwt_secret, { sub_type: 'tenant', sub_id: 'ghost' })),
          401,
          /Invalid token/,
        ],
        ['no sub_type', bearer(await jwt(t.jwt_secret, { sub_id: t.id })), 401, /sub_type/],
        [
          'user without sub',
          bearer(await jwt(t.jwt_secret, { sub_type: 'user', tenant_id: t.id })),
          401,
          /must carry sub/,
        ],
        ['API key on query', bearer((await createKey(app, ['*'])).key), 401, /Malformed token/],
      ];
      for (const [what, headers, status, message] of cases) {
        const r = await call('GET', `${app.url.query}/v1/whoami`, { headers });
        expect([what, r.status]).toEqual([what, status]);
        expect([what, r.body.error.message]).toEqual([what, expect.stringMatching(message)]);
      }
    });

    it('rejects an HS256 token made with a public key (algorithm confusion)', async () => {
      const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
      const jwks = await startJwks([
        { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' },
      ]);
      try {
        const issuer = `https://idp.example/${t.id}`;
        const put = await call('PUT', `${app.url.admin}/v1/tenants/${t.id}`, {
          headers: bearer(app.rootKey),
          body: { idp: { jwks_url: jwks.url, issuer, org_claim: 'org_id', org_value: `org-${t.id}` } },
        });
        expect(put.status).toBe(200);
        const pem = publicKey.export({ type: 'spki', format: 'pem' }) as string;
        const forged = await new SignJWT({ sub: 'mallory', org_id: `org-${t.id}`, iss: issuer })
          .setProtectedHeader({ alg: 'HS256' })
          .setExpirationTime('1h')
          .sign(new TextEncoder().encode(pem));
        const r = await call('GET', `${app.url.query}/v1/whoami`, { headers: bearer(forged) });
        expect(r.status).toBe(401);
        // A genuine RS256 token of the identity provider is accepted as an end-user token.
        const pk = await importPKCS8(privateKey.export({ type: 'pkcs8', format: 'pem' }) as string, 'RS256');
        const real = await new SignJWT({ org_id: `org-${t.id}` })
          .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
          .setIssuer(issuer)
          .setSubject('bob')
          .setExpirationTime('1h')
          .sign(pk);
        const ok = await call('GET', `${app.url.query}/v1/whoami`, { headers: bearer(real) });
        expect(ok.status).toBe(200);
        expect(ok.body).toEqual({ principal: 'user', via: 'idp', tenant_id: t.id, user_id: 'bob' });
        // Another organisation of the same provider is not this tenant.
        const foreign = await new SignJWT({ org_id: 'org-someone-else' })
          .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
          .setIssuer(issuer)
          .setSubject('bob')
          .setExpirationTime('1h')
          .sign(pk);
        expect((await call('GET', `${app.url.query}/v1/whoami`, { headers: bearer(foreign) })).status).toBe(
          401,
        );
      } finally {
        await call('PUT', `${app.url.admin}/v1/tenants/${t.id}`, {
          headers: bearer(app.rootKey),
          body: { idp: null },
        });
        await jwks.close();
      }
    });

    it('rejects every token of a suspended tenant with 403, and accepts them again on reactivation', async () => {
      const s = await createTenant(app);
      const token = await tenantToken(s);
      expect((await call('GET', `${app.url.query}/v1/whoami`, { headers: bearer(token) })).status).toBe(200);
      const put = await call('PUT', `${app.url.admin}/v1/tenants/${s.id}`, {
        headers: bearer(app.rootKey),
        body: { status: 'suspended' },
      });
      expect(put.body.status).toBe('suspended');
      const r = await call('GET', `${app.url.query}/v1/whoami`, { headers: bearer(token) });
      expect(r.status).toBe(403);
      expect(r.body).toEqual({ error: { code: 'FORBIDDEN', message: 'Tenant is suspended', status: 403 } });
      const key = await createKey(app, [s.id]);
      expect(
        (
          await call('GET', `${app.url.admin}/v1/tenants/${s.id}/whoami`, {
            headers: { 'x-api-key': key.key },
          })
        ).status,
      ).toBe(403);
      await call('PUT', `${app.url.admin}/v1/tenants/${s.id}`, {
        headers: bearer(app.rootKey),
        body: { status: 'active' },
      });
      expect((await call('GET', `${app.url.query}/v1/whoami`, { headers: bearer(token) })).status).toBe(200);
    });

    it('stops old tokens at once when secrets are rotated', async () => {
      const s = await createTenant(app);
      const old = await tenantToken(s);
      const rot = await call('POST', `${app.url.admin}/v1/tenants/${s.id}/rotate-secrets`, {
        headers: bearer(app.rootKey),
      });
      expect(rot.status).toBe(200);
      expect(rot.body.jwt_secret).not.toBe(s.jwt_secret);
      expect((await call('GET', `${app.url.query}/v1/whoami`, { headers: bearer(old) })).status).toBe(401);
      const fresh = await tenantToken({ id: s.id, jwt_secret: rot.body.jwt_secret });
      expect((await call('GET', `${app.url.query}/v1/whoami`, { headers: bearer(fresh) })).status).toBe(200);
    });
  });

  describe('signed requests', () => {
    const sign = (secret: string, path: string, ts: number, body = '') =>
      `hmac-sha256=${signRequest(secret, 'GET', path, String(ts), body)}`;

    it('accepts a correctly signed request on ingestion and on query long forms', async () => {
      const ts = Math.floor(Date.now() / 1000);
      const r = await call('GET', `${app.url.ingest}/v1/whoami`, {
        headers: {
          'x-tenant-id': t.id,
          'x-timestamp': String(ts),
          'x-signature': sign(t.hmac_secret, '/v1/whoami', ts),
        },
      });
      expect(r.status).toBe(200);
      expect(r.body).toEqual({ principal: 'tenant', via: 'signature', tenant_id: t.id });
      const path = `/v1/whoami/${t.id}`;
      const q = await call('GET', `${app.url.query}${path}?x=1`, {
        headers: {
          'x-tenant-id': t.id,
          'x-timestamp': String(ts),
          'x-signature': sign(t.hmac_secret, `${path}?x=1`, ts),
        },
      });
      expect(q.status).toBe(200);
    });

    it('answers the signed-variant errors AUTH_001, AUTH_002, AUTH_004, AUTH_005', async () => {
      const ts = Math.floor(Date.now() / 1000);
      const good = sign(t.hmac_secret, '/v1/whoami', ts);
      const cases: Array<[string, Record<string, string>, number, string]> = [
        ['no timestamp', { 'x-tenant-id': t.id, 'x-signature': good }, 401, 'AUTH_002'],
        ['no signature', { 'x-tenant-id': t.id, 'x-timestamp': String(ts) }, 401, 'AUTH_002'],
        ['no tenant', { 'x-timestamp': String(ts), 'x-signature': good }, 401, 'AUTH_002'],
        [
          'bad signature',
          {
            'x-tenant-id': t.id,
            'x-timestamp': String(ts),
            'x-signature': sign(other.hmac_secret, '/v1/whoami', ts),
          },
          401,
          'AUTH_001',
        ],
        [
          'malformed signature',
          { 'x-tenant-id': t.id, 'x-timestamp': String(ts), 'x-signature': 'sha1=abc' },
          401,
          'AUTH_001',
        ],
        [
          'signed more than the window ago',
          {
            'x-tenant-id': t.id,
            'x-timestamp': String(ts - 301),
            'x-signature': sign(t.hmac_secret, '/v1/whoami', ts - 301),
          },
          401,
          'AUTH_004',
        ],
        [
          'from the future',
          {
            'x-tenant-id': t.id,
            'x-timestamp': String(ts + 400),
            'x-signature': sign(t.hmac_secret, '/v1/whoami', ts + 400),
          },
          401,
          'AUTH_004',
        ],
        [
          'unknown tenant',
          { 'x-tenant-id': 'ghost', 'x-timestamp': String(ts), 'x-signature': good },
          401,
          'AUTH_005',
        ],
        [
          'signed for another path',
          {
            'x-tenant-id': t.id,
            'x-timestamp': String(ts),
            'x-signature': sign(t.hmac_secret, '/v1/other', ts),
          },
          401,
          'AUTH_001',
        ],
      ];
      for (const [what, headers, status, code] of cases) {
        const r = await call('GET', `${app.url.ingest}/v1/whoami`, { headers });
        expect([what, r.status, r.body.code]).toEqual([what, status, code]);
        expect(typeof r.body.error).toBe('string');
      }
      // An exact replay inside the window: accepted once, then refused (AUTH_004).
      const target = '/v1/whoami?case=replay';
      const once = {
        'x-tenant-id': t.id,
        'x-timestamp': String(ts),
        'x-signature': sign(t.hmac_secret, target, ts),
      };
      expect((await call('GET', `${app.url.ingest}${target}`, { headers: once })).status).toBe(200);
      const replay = await call('GET', `${app.url.ingest}${target}`, { headers: once });
      expect([replay.status, replay.body.code]).toEqual([401, 'AUTH_004']);
      expect(replay.body.error).toMatch(/^Replayed request/);
    });

    it('is not accepted on the query short forms', async () => {
      const ts = Math.floor(Date.now() / 1000);
      const r = await call('GET', `${app.url.query}/v1/whoami`, {
        headers: {
          'x-tenant-id': t.id,
          'x-timestamp': String(ts),
          'x-signature': sign(t.hmac_secret, '/v1/whoami', ts),
        },
      });
      expect(r.status).toBe(401);
    });
  });

  describe('plumbing', () => {
    it('serves the OpenAPI document and the HTML reference on each gateway', async () => {
      for (const base of [app.url.admin, app.url.query, app.url.ingest]) {
        const doc = await call('GET', `${base}/openapi.json`);
        expect(doc.status).toBe(200);
        expect(doc.body.openapi).toBe('3.1.0');
        expect(Object.keys(doc.body.paths)).toContain('/v1/whoami');
        // The reference page is Swagger UI served from this process (tests/browser/ renders it).
        const page = await fetch(`${base}/docs`);
        expect(page.headers.get('content-type')).toMatch(/text\/html/);
        const html = await page.text();
        for (const asset of [
          '/docs/assets/swagger-ui.css',
          '/docs/assets/swagger-ui-bundle.js',
          '/docs/assets/init.js',
        ]) {
          expect(html).toContain(asset);
          const r = await fetch(`${base}${asset}`);
          expect(r.status).toBe(200);
          expect((await r.arrayBuffer()).byteLength).toBeGreaterThan(100);
        }
        expect((await fetch(`${base}/docs/assets/package.json`)).status).toBe(404);
      }
      const admin = await call('GET', `${app.url.admin}/openapi.json`);
      expect(admin.body.paths['/v1/tenants'].post.requestBody.content['application/json'].schema.$ref).toBe(
        '#/components/schemas/tenant.create',
      );
    });

    it('hides internals of unexpected errors and echoes a safe request id', async () => {
      const r = await fetch(`${app.url.admin}/v1/whoami`, { headers: { 'x-request-id': 'abc-123' } });
      expect(r.headers.get('x-request-id')).toBe('abc-123');
      const hostile = await fetch(`${app.url.admin}/v1/whoami`, {
        headers: { 'x-request-id': 'a b<script>' },
      });
      expect(hostile.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    });
  });
});

async function startJwks(keys: object[]): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer((_req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ keys }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/jwks.json`,
    close: () => new Promise((r) => server.close(() => r())),
  };
}
