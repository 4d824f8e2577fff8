/**
 * The typed route helper: `route()` types a handler's body and query from the schema ids the route
 * names, its params from the path and its tenant from the auth rule (checked by the compiler:
 * `npx tsc`, the `@ts-expect-error` lines must stay errors), and the chain hands the handler
 * exactly that: validated values with their defaults filled, and the tenant its rule promises.
 */
import type { AddressInfo } from 'node:net';
import { createServer, type Server } from 'node:http';
import Koa from 'koa';
import Router from '@koa/router';
import pino from 'pino';
import type { RateLimiter } from '../adapters/ratelimit/types';
import type { Sql } from '../adapters/sql/types';
import { openTestPglite } from '../tests/support/stack';
import type { Tenant } from '../core/tenancy/store';
import { WalletError } from '../core/wallet/wallet';
import type { Authenticator } from './auth/authenticator';
import { renderError } from './gateway';
import { RenderedJson } from './rendered';
import { mountRoutes, route, type RouteSpec } from './route';
import type { GatewayState } from './types';

const open = { kind: 'public' } as const;

/** Route declarations the compiler checks; never mounted. */
export const typed: RouteSpec[] = [
  route({
    gateway: 'admin',
    method: 'POST',
    path: '/v1/things/:thing_id/parts/:part_id',
    summary: 'typed',
    tag: 'Test',
    auth: open,
    body: 'wallet.grant',
    query: 'list.query',
    handler: async ({ body, query, params }) => {
      const user: string = body.user_id;
      const amount: number = body.amount;
      // A property with a default is present after validation.
      const limit: number = query.limit;
      const ids: string[] = [params.thing_id, params.part_id];
      // @ts-expect-error not a field of wallet.grant
      void body.currency;
      // @ts-expect-error optional in the schema, so possibly undefined
      const source: string = body.source_type;
      // @ts-expect-error not a parameter of the path
      void params.other_id;
      return { user, amount, limit, ids, source };
    },
  }),
  route({
    gateway: 'admin',
    method: 'GET',
    path: '/v1/things',
    summary: 'untyped body',
    tag: 'Test',
    auth: open,
    handler: async ({ body, query }) => {
      // @ts-expect-error without a body schema the body is unknown
      void body.user_id;
      const raw: unknown = query.anything;
      return { raw };
    },
  }),
  // The tenant, narrowed by the auth rule.
  route({
    gateway: 'admin',
    method: 'GET',
    path: '/v1/things',
    summary: 'admin, tenant required',
    tag: 'Test',
    auth: { kind: 'admin', scope: 'things:read', tenant: true },
    handler: async ({ tenant }) => tenant.id,
  }),
  route({
    gateway: 'query',
    method: 'GET',
    path: '/v1/things',
    summary: 'tenant credential',
    tag: 'Test',
    auth: { kind: 'tenant', signed: true },
    handler: async ({ tenant }) => tenant.id,
  }),
  route({
    gateway: 'admin',
    method: 'GET',
    path: '/v1/whoami',
    summary: 'admin, tenant optional',
    tag: 'Test',
    auth: { kind: 'admin', scope: null, tenant: 'optional' },
    handler: async ({ tenant }) => {
      // @ts-expect-error may be null
      const t: Tenant = tenant;
      return t;
    },
  }),
  route({
    gateway: 'admin',
    method: 'GET',
    path: '/v1/tenants',
    summary: 'operator',
    tag: 'Test',
    auth: { kind: 'root' },
    handler: async ({ tenant }) => {
      const none: null = tenant;
      return none;
    },
  }),
  route({
    gateway: 'admin',
    method: 'POST',
    path: '/v1/things',
    summary: 'a schema id that does not exist',
    tag: 'Test',
    auth: open,
    // @ts-expect-error not a schema id in schemas/http/
    body: 'thing.create',
    handler: async () => null,
  }),
];

/** A gateway of the given routes with the chain and the error renderer, on a free port. */
async function serve(
  routes: RouteSpec[],
  auth: Partial<Authenticator> = {},
  sql: Sql = {} as Sql,
): Promise<{ url: string; server: Server }> {
  const app = new Koa<GatewayState>();
  const log = pino({ level: 'silent' });
  app.use(async (ctx, next) => {
    ctx.state.requestId = 'test';
    ctx.state.log = log;
    try {
      await next();
    } catch (err) {
      renderError(ctx, err);
    }
  });
  const router = new Router<GatewayState>();
  mountRoutes(router, 'admin', routes, {
    auth: {
      failures: { refusedUntil: () => null, refuse: () => undefined },
      ...auth,
    } as unknown as Authenticator,
    rateLimiter: {} as RateLimiter,
    rateLimit: [],
    clock: { now: () => 0 },
    sql,
  });
  app.use(router.routes());
  const server = createServer(app.callback());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

describe('route()', () => {
  let url: string;
  let server: Server;
  let seen: unknown[] = [];
  beforeAll(async () => {
    ({ url, server } = await serve([
      route({
        gateway: 'admin',
        method: 'POST',
        path: '/v1/hooks/:hook_id',
        summary: 'echo',
        tag: 'Test',
        auth: open,
        body: 'webhook.create',
        query: 'list.query',
        handler: async ({ body, query, params }) => {
          seen.push(body, query, params);
          // Typed: `active` has a default, `limit` and `offset` too.
          return { active: body.active, events: body.event_types.length, page: query.limit + query.offset };
        },
      }),
    ]));
  });
  afterAll(() => new Promise((resolve) => server.close(resolve)));
  beforeEach(() => {
    seen = [];
  });

  it('hands the handler the validated body and query with their defaults, and the path params', async () => {
    const res = await fetch(`${url}/v1/hooks/h1?offset=5`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ url: 'https://example.com/hook', event_types: ['*'] }),
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ active: true, events: 1, page: 55 });
    expect(seen).toEqual([
      { url: 'https://example.com/hook', event_types: ['*'], active: true },
      { limit: 50, offset: 5 },
      { hook_id: 'h1' },
    ]);
  });

  it('never runs the handler on a body its schema refuses', async () => {
    const res = await fetch(`${url}/v1/hooks/h1`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ url: 'https://example.com/hook' }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toBe(
      'body.event_types is required',
    );
    expect(seen).toEqual([]);
  });
});

describe('route(): the tenant of the auth rule', () => {
  const tenant: Tenant = {
    id: 't1',
    name: 'T1',
    status: 'active',
    timezone: 'UTC',
    idp: null,
    created_at: '2024-01-01T00:00:00.000Z',
    updated_at: '2024-01-01T00:00:00.000Z',
  };
  let url: string;
  let server: Server;
  let ran = 0;
  beforeAll(async () => {
    const handler = async ({ tenant }: { tenant: Tenant }) => {
      ran++;
      return { tenant_id: tenant.id };
    };
    ({ url, server } = await serve(
      [
        route({
          gateway: 'admin',
          method: 'GET',
          path: '/v1/tenants/:tenant_id/things',
          summary: 'admin',
          tag: 'Test',
          auth: { kind: 'admin', scope: null, tenant: true },
          handler,
        }),
        route({
          gateway: 'admin',
          method: 'GET',
          path: '/v1/things',
          summary: 'tenant credential',
          tag: 'Test',
          auth: { kind: 'tenant', signed: false },
          handler,
        }),
      ],
      {
        admin: async () => ({ kind: 'root' }),
        tenant: async (id: string) => (id === tenant.id ? { tenant, jwtSecret: 'j', hmacSecret: 'h' } : null),
        // A credential check that resolved no tenant: the chain must not run the handler.
        token: async () => ({
          principal: { kind: 'tenant', tenantId: 'x', via: 'jwt' },
          tenant: null as never,
        }),
      },
    ));
  });
  afterAll(() => new Promise((resolve) => server.close(resolve)));

  it('hands an admin route with tenant: true the tenant of the path', async () => {
    const res = await fetch(`${url}/v1/tenants/t1/things`);
    expect([res.status, await res.json()]).toEqual([200, { tenant_id: 't1' }]);
    const missing = await fetch(`${url}/v1/tenants/t2/things`);
    expect(missing.status).toBe(404);
  });

  it('never runs a handler without the tenant its rule promises', async () => {
    ran = 0;
    const res = await fetch(`${url}/v1/things`, { headers: { authorization: 'Bearer x' } });
    expect(res.status).toBe(500);
    expect(ran).toBe(0);
  });
});

describe('route(): domain errors', () => {
  it('answers what a handler throws as http/domain-errors.ts maps it', async () => {
    const { url, server } = await serve([
      route({
        gateway: 'admin',
        method: 'POST',
        path: '/v1/spend',
        summary: 'throws a wallet error',
        tag: 'Test',
        auth: open,
        handler: async () => {
          throw new WalletError('insufficient_balance', 'Balance 3 is below 5');
        },
      }),
    ]);
    try {
      const res = await fetch(`${url}/v1/spend`, { method: 'POST' });
      expect([res.status, await res.json()]).toEqual([
        402,
        { error: { code: 'INSUFFICIENT_BALANCE', message: 'Balance 3 is below 5', status: 402 } },
      ]);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe('route(): the transaction option', () => {
  it('commits what a transaction route wrote when it answers, and nothing when it throws', async () => {
    const sql = await openTestPglite();
    await sql.query('CREATE TABLE route_tx_test (n int NOT NULL)');
    const write = (fail: boolean) =>
      route({
        gateway: 'admin',
        method: 'POST',
        path: fail ? '/v1/fails' : '/v1/writes',
        summary: 'writes two rows, then maybe fails',
        tag: 'Test',
        auth: open,
        transaction: true,
        handler: async ({ q }) => {
          await q.query('INSERT INTO route_tx_test VALUES (1)');
          await q.query('INSERT INTO route_tx_test VALUES (2)');
          if (fail) throw new WalletError('insufficient_balance', 'short');
          return { ok: true };
        },
      });
    const { url, server } = await serve([write(false), write(true)], {}, sql);
    const count = async () =>
      (await sql.query<{ n: number }>('SELECT count(*)::int AS n FROM route_tx_test')).rows[0]!.n;
    try {
      expect((await fetch(`${url}/v1/fails`, { method: 'POST' })).status).toBe(402);
      expect(await count()).toBe(0);
      expect((await fetch(`${url}/v1/writes`, { method: 'POST' })).status).toBe(200);
      expect(await count()).toBe(2);
    } finally {
      await new Promise((resolve) => server.close(resolve));
      await sql.close();
    }
  });
});

describe('route(): an answer rendered once (RenderedJson)', () => {
  it('sends the bytes as JSON, the same answer as the value, to every request that shares them', async () => {
    const value = { name: 'é "quoted" \u0000 \ud83d\ude00', n: -0, list: [1.5, 'x'] };
    const shared = RenderedJson.of(value);
    const { url, server } = await serve([
      route({
        gateway: 'admin',
        method: 'GET',
        path: '/v1/rendered',
        summary: 'rendered',
        tag: 'Test',
        auth: open,
        handler: async () => shared,
      }),
      route({
        gateway: 'admin',
        method: 'GET',
        path: '/v1/plain',
        summary: 'plain',
        tag: 'Test',
        auth: open,
        handler: async () => value,
      }),
    ]);
    try {
      const plain = await fetch(`${url}/v1/plain`);
      const plainText = await plain.text();
      for (let i = 0; i < 2; i++) {
        const res = await fetch(`${url}/v1/rendered`);
        expect(res.status).toBe(200);
        expect(res.headers.get('content-type')).toBe(plain.headers.get('content-type'));
        expect(res.headers.get('content-length')).toBe(plain.headers.get('content-length'));
        expect(await res.text()).toBe(plainText);
      }
      expect(JSON.parse(plainText)).toEqual({ ...value, n: 0 });
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
