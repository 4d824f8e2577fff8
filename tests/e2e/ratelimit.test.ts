/**
 * Rate limits through the running gateways: headers on every API response and a 429 past the
 * limit, in both shapes; in the distributed shape two instances share one budget.
 */
import { signRequest } from '../../http/auth/authenticator';
import {
  call,
  createTenant,
  SHAPES,
  shapeEnv,
  startTestApp,
  tenantToken,
  type TestApp,
} from '../support/app';
import { clearOfWindowEdge } from '../support/wait';

describe.each(SHAPES)('rate limits [%s]', (shape) => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp(shape, {
      env: {
        LUDUS_RATE_LIMIT_QUERY: '5/m',
        LUDUS_RATE_LIMIT_INGEST: '3/m',
        LUDUS_RATE_LIMIT_ADMIN: '1000/s',
      },
    });
  });
  afterAll(() => app.stop());

  it('sends the headers on every response and answers 429 past the limit, per tenant', async () => {
    const t = await createTenant(app);
    const other = await createTenant(app);
    const h = { authorization: `Bearer ${await tenantToken(t)}` };
    const statuses: number[] = [];
    await clearOfWindowEdge();
    for (let i = 0; i < 6; i++) {
      const r = await call('GET', `${app.url.query}/v1/whoami`, { headers: h });
      statuses.push(r.status);
      expect(r.headers.get('x-ratelimit-limit')).toBe('5');
      expect(r.headers.get('x-ratelimit-remaining')).toBe(String(Math.max(0, 4 - i)));
      const reset = Number(r.headers.get('x-ratelimit-reset'));
      expect(reset).toBeGreaterThan(Date.now() / 1000);
      expect(reset).toBeLessThanOrEqual(Date.now() / 1000 + 61);
      if (r.status === 429) {
        expect(r.body.error.code).toBe('RATE_LIMITED');
        expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
      }
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
    // Another tenant has its own budget.
    const o = await call('GET', `${app.url.query}/v1/whoami`, {
      headers: { authorization: `Bearer ${await tenantToken(other)}` },
    });
    expect(o.status).toBe(200);
    // Admin responses carry the headers too.
    const a = await call('GET', `${app.url.admin}/v1/whoami`, { headers: { 'x-api-key': app.rootKey } });
    expect(a.status).toBe(200);
    const a2 = await call('GET', `${app.url.admin}/v1/tenants/${t.id}/whoami`, {
      headers: { 'x-api-key': app.rootKey },
    });
    expect(a2.headers.get('x-ratelimit-limit')).toBe('1000');
  });

  it('answers RATE_001 on the signed variant', async () => {
    const t = await createTenant(app);
    const codes: Array<string | undefined> = [];
    await clearOfWindowEdge();
    for (let i = 0; i < 4; i++) {
      const ts = String(Math.floor(Date.now() / 1000));
      // A distinct query each time: the same signature twice would be refused as a replay.
      const target = `/v1/whoami?n=${i}`;
      const r = await call('GET', `${app.url.ingest}${target}`, {
        headers: {
          'x-tenant-id': t.id,
          'x-timestamp': ts,
          'x-signature': `hmac-sha256=${signRequest(t.hmac_secret, 'GET', target, ts, '')}`,
        },
      });
      codes.push(r.status === 429 ? r.body.code : String(r.status));
      expect(r.headers.get('x-ratelimit-limit')).toBe('3');
    }
    expect(codes).toEqual(['200', '200', '200', 'RATE_001']);
  });

  it('counts failed credentials against the caller address, with headers', async () => {
    const r = await call('GET', `${app.url.query}/v1/whoami`, { headers: { authorization: 'Bearer nope' } });
    expect(r.status).toBe(401);
    expect(r.headers.get('x-ratelimit-limit')).toBe('5');
  });
});

describe('rate limits [distributed] are shared by two instances', () => {
  it('one budget across both', async () => {
    const env = { ...shapeEnv('distributed'), LUDUS_RATE_LIMIT_QUERY: '6/m' };
    const one = await startTestApp('distributed', { env });
    const two = await startTestApp('distributed', { env });
    try {
      const t = await createTenant(one);
      const h = { authorization: `Bearer ${await tenantToken(t)}` };
      const statuses: number[] = [];
      await clearOfWindowEdge();
      for (let i = 0; i < 4; i++) {
        statuses.push((await call('GET', `${one.url.query}/v1/whoami`, { headers: h })).status);
        statuses.push((await call('GET', `${two.url.query}/v1/whoami`, { headers: h })).status);
      }
      expect(statuses.filter((s) => s === 200)).toHaveLength(6);
      expect(statuses.slice(6)).toEqual([429, 429]);
    } finally {
      await one.stop();
      await two.stop();
    }
  });
});
