/**
 * Every request's objects share one shape (V8 hidden class): the gateway's request state
 * (`ctx.state`) and the request a handler gets. A getter defined on each request's own object
 * (Object.defineProperty, or `get log()` in an object literal) gives every request a shape of its
 * own; the query gateway spent about a third of its CPU per request on that (docs/performance.md,
 * issue 19, twelfth pass). Checked with V8's own %HaveSameMap.
 */
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { setFlagsFromString } from 'node:v8';
import type { RateLimiter } from '../adapters/ratelimit/types';
import type { Sql } from '../adapters/sql/types';
import { createLogger } from '../shared/logger';
import { Metrics } from '../shared/metrics';
import type { Authenticator } from './auth/authenticator';
import { closeServer, createListenerApp, listen } from './gateway';
import { mountRoutes, route, type RouteRequest } from './route';

setFlagsFromString('--allow-natives-syntax');
const haveSameMap = new Function('a', 'b', 'return %HaveSameMap(a, b)') as (a: object, b: object) => boolean;

describe('request objects', () => {
  const states: object[] = [];
  const requests: RouteRequest[] = [];
  let server: Server;
  let url: string;

  beforeAll(async () => {
    const log = createLogger('silent');
    const { app, router } = createListenerApp('query', { log, metrics: new Metrics(false), checks: [] });
    mountRoutes(
      router,
      'query',
      [
        route({
          gateway: 'query',
          method: 'GET',
          path: '/v1/things/:thing_id',
          summary: 'records its request',
          tag: 'Test',
          auth: { kind: 'public' },
          handler: async (req) => {
            states.push(req.ctx.state);
            requests.push(req);
            // Both accessors work: the id the gateway gave, a child logger made on use.
            return { id: req.requestId, logs: typeof req.log.info };
          },
        }),
      ],
      {
        auth: { failures: { refusedUntil: () => null, refuse: () => undefined } } as unknown as Authenticator,
        rateLimiter: {} as RateLimiter,
        rateLimit: [],
        clock: { now: () => 0 },
        sql: {} as Sql,
      },
    );
    server = await listen({ name: 'query', app }, '127.0.0.1', 0);
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => closeServer(server, 1000));

  it('share one shape from request to request, with the request id and logger on use', async () => {
    const answers = [];
    for (let i = 0; i < 3; i++) {
      const r = await fetch(`${url}/v1/things/t${i}`, { headers: { 'x-request-id': `req-${i}` } });
      answers.push({ status: r.status, body: await r.json(), header: r.headers.get('x-request-id') });
    }
    expect(answers).toEqual(
      [0, 1, 2].map((i) => ({
        status: 200,
        body: { id: `req-${i}`, logs: 'function' },
        header: `req-${i}`,
      })),
    );
    expect(states).toHaveLength(3);
    expect(requests.map((r) => r.params)).toEqual([
      { thing_id: 't0' },
      { thing_id: 't1' },
      { thing_id: 't2' },
    ]);
    expect(haveSameMap(states[0]!, states[1]!)).toBe(true);
    expect(haveSameMap(states[1]!, states[2]!)).toBe(true);
    expect(haveSameMap(requests[0]!, requests[1]!)).toBe(true);
    expect(haveSameMap(requests[1]!, requests[2]!)).toBe(true);
  });
});
