/**
 * The webhook registration address check fails closed (issue 11, item 9), in both shapes: a DNS
 * lookup that does not finish in time, or fails for another reason than "no such name", refuses
 * with a retryable 503 and registers nothing, even when its late answer would have been public;
 * an answer naming loopback is a 400. The webhook routes are mounted on a gateway of their own
 * over the test app's stores, with an injected resolver and a short deadline, so the slow path is
 * exercised without waiting 2 s.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createGateway } from '../../http/gateway';
import { webhookAdminRoutes } from '../../api/webhooks/admin';
import type { ResolvedAddress, Resolver } from '../../core/webhooks/address';
import { mountDeps } from '../../runtime/context';
import { call, createKey, createTenant, SHAPES, startTestApp, type TestApp } from '../support/app';

describe.each(SHAPES)('webhook registration address check [%s]', (shape) => {
  let app: TestApp;
  let server: Server;
  let url: string;
  let tenantId: string;
  let key: string;
  /** What the injected resolver does for the next lookup. */
  let answer: (hostname: string) => Promise<ResolvedAddress[]>;
  let lookups = 0;

  beforeAll(async () => {
    app = await startTestApp(shape, { roles: 'api,processors', env: { LUDUS_RATE_LIMIT_ADMIN: 'off' } });
    const { ctx } = app;
    const resolve: Resolver = (hostname) => {
      lookups++;
      return answer(hostname);
    };
    const gateway = createGateway('admin', {
      log: ctx.log,
      metrics: ctx.metrics,
      checks: [],
      version: ctx.version,
      mount: mountDeps(ctx, 'admin'),
      routes: webhookAdminRoutes({
        sql: ctx.adapters.sql,
        clock: ctx.clock,
        store: ctx.services.webhooks,
        config: { ...ctx.config.webhooks, allowPrivate: false },
        version: ctx.version,
        resolve,
        resolveTimeoutMs: 100,
      }),
    });
    server = createServer(gateway.app.callback());
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    tenantId = (await createTenant(app)).id;
    key = (await createKey(app, [tenantId])).key;
  }, 120_000);
  afterAll(async () => {
    await new Promise((r) => server?.close(r));
    await app?.stop();
  });

  const register = (host: string) =>
    call('POST', `${url}/v1/webhooks?tenant_id=${tenantId}`, {
      headers: { 'x-api-key': key },
      body: { url: `https://${host}/hook`, event_types: ['*'] },
    });
  const registered = async () => {
    const r = await call('GET', `${url}/v1/webhooks?tenant_id=${tenantId}`, {
      headers: { 'x-api-key': key },
    });
    expect(r.status).toBe(200);
    return r.body.webhooks as Array<{ url: string }>;
  };

  it('refuses with a retryable 503 when the lookup does not finish, and registers nothing after its late answer', async () => {
    let release!: (a: ResolvedAddress[]) => void;
    answer = () => new Promise((r) => (release = r));
    const before = lookups;
    const res = await register('slow.example.com');
    expect(lookups).toBe(before + 1);
    expect(res.status).toBe(503);
    expect(res.body.error.code).toBe('SERVICE_UNAVAILABLE');
    expect(res.body.error.message).toContain('did not finish within 100 ms');
    // The late answer (loopback) arrives after the refusal: nothing is registered.
    release([{ address: '127.0.0.1', family: 4 }]);
    expect((await registered()).map((w) => w.url)).not.toContain('https://slow.example.com/hook');
  });

  it('refuses with 503 when the resolver fails temporarily (EAI_AGAIN)', async () => {
    answer = () => Promise.reject(Object.assign(new Error('getaddrinfo EAI_AGAIN'), { code: 'EAI_AGAIN' }));
    const res = await register('flaky.example.com');
    expect([res.status, res.body.error.code]).toEqual([503, 'SERVICE_UNAVAILABLE']);
    expect(res.body.error.message).toContain('EAI_AGAIN');
  });

  it('refuses a name resolving to loopback with 400, and still registers a public one', async () => {
    answer = async () => [{ address: '127.0.0.1', family: 4 }];
    const refused = await register('loop.example.com');
    expect([refused.status, refused.body.error.code]).toEqual([400, 'VALIDATION_ERROR']);
    expect(refused.body.error.message).toContain('loopback');
    answer = async () => [{ address: '93.184.215.14', family: 4 }];
    const ok = await register('public.example.com');
    expect(ok.status).toBe(201);
    // A name that does not exist (yet) is accepted as before: every delivery checks again.
    answer = () => Promise.reject(Object.assign(new Error('getaddrinfo ENOTFOUND'), { code: 'ENOTFOUND' }));
    expect((await register('not-yet.example.com')).status).toBe(201);
    expect((await registered()).map((w) => w.url).sort()).toEqual([
      'https://not-yet.example.com/hook',
      'https://public.example.com/hook',
    ]);
  });
});
