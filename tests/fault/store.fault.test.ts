/**
 * Fault test (distributed shape): the dispatcher is killed with SIGKILL while api fulfilment calls
 * are in flight (the endpoint holds each call), then another dispatcher starts. Every order ends
 * completed, once (one order.completed each), with the endpoint's answer; the endpoint sees every
 * order, and only the calls cut by the kill are made again, with the same Idempotency-Key (the
 * documented at-least-once call, docs/store.md).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { childEnv, spawnCli, type Spawned } from '../support/process';
import {
  call,
  createKey,
  createTenant,
  shapeEnv,
  startTestApp,
  tenantToken,
  type TestApp,
} from '../support/app';
import { waitFor } from '../support/wait';

const ORDERS = 30;

describe('api fulfilment survives a dispatcher killed mid-call [distributed]', () => {
  let app: TestApp;
  let env: Record<string, string>;
  let server: Server;
  const children: Spawned[] = [];
  /** Calls per Idempotency-Key, and the side effect the endpoint performed once per key. */
  const calls = new Map<string, number>();
  const effects = new Map<string, string>();
  let inFlight = 0;

  beforeAll(async () => {
    server = createServer((req, res) => {
      const key = String(req.headers['idempotency-key']);
      calls.set(key, (calls.get(key) ?? 0) + 1);
      inFlight++;
      req.resume();
      // Holds every call, so the kill finds some in flight.
      setTimeout(() => {
        inFlight--;
        // The endpoint is idempotent on the key: a repeated call answers the first effect.
        if (!effects.has(key)) effects.set(key, `EXT-${effects.size + 1}`);
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ type: 'voucher', external_id: effects.get(key) }));
      }, 1500);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    env = {
      ...shapeEnv('distributed'),
      LUDUS_RATE_LIMIT_ADMIN: 'off',
      LUDUS_RATE_LIMIT_QUERY: 'off',
      LUDUS_WEBHOOK_ALLOW_PRIVATE: 'true',
    };
    app = await startTestApp('distributed', { roles: 'api', env });
  });
  afterAll(async () => {
    for (const c of children) c.child.kill('SIGKILL');
    await app.stop();
    await new Promise<void>((r) => server.close(() => r()));
  });

  const dispatcher = () => {
    const p = spawnCli(
      ['serve', '--roles', 'dispatcher'],
      childEnv({
        ...env,
        LUDUS_WEBHOOK_POLL_MS: '50',
        LUDUS_WEBHOOK_TIMEOUT_MS: '2500',
        LUDUS_WEBHOOK_CONCURRENCY: '8',
      }),
    );
    children.push(p);
    return p;
  };

  it('completes every order once; only the cut calls are repeated, with the same key', async () => {
    const t = await createTenant(app);
    const key = (await createKey(app, [t.id])).key;
    const admin = async (method: string, path: string, body?: unknown) =>
      call(method, `${app.url.admin}${path}${path.includes('?') ? '&' : '?'}tenant_id=${t.id}`, {
        headers: { 'x-api-key': key },
        body,
      });
    expect(
      (
        await admin('POST', '/v1/wallet/currencies', {
          id: 'coins',
          name: 'Coins',
          is_spendable: true,
          decimal_places: 0,
        })
      ).status,
    ).toBe(201);
    const { port } = server.address() as AddressInfo;
    const reward = await admin('POST', '/v1/rewards-catalog', {
      slug: 'voucher',
      name: 'Voucher',
      fulfillment: { type: 'api', retry: { max_attempts: 5, backoff_seconds: [1] } },
      config: { url: `http://127.0.0.1:${port}/fulfil` },
      purchase: { prices: [{ currency: 'coins', amount: 1 }] },
    });
    expect(reward.status).toBe(201);
    expect(
      (await admin('POST', '/v1/wallet/grant', { user_id: 'u', currency_id: 'coins', amount: ORDERS }))
        .status,
    ).toBe(200);
    const token = await tenantToken(t);
    const ids: string[] = [];
    for (let i = 0; i < ORDERS; i++) {
      const r = await call('POST', `${app.url.query}/v1/rewards/purchase/voucher`, {
        headers: { authorization: `Bearer ${token}` },
        body: { user_id: 'u', idempotency_key: `k${i}`, currency: 'coins' },
      });
      expect(r.status).toBe(201);
      ids.push(r.body.order.id);
    }

    const first = dispatcher();
    await waitFor(() => inFlight >= 4, { what: 'calls in flight', timeoutMs: 60_000 });
    first.child.kill('SIGKILL');
    await first.exited;
    // The cut calls: orders the killed dispatcher called whose outcome it did not store. Counted
    // once it is gone (calls it started between the check above and the kill are cut too).
    const sql = app.ctx.adapters.sql;
    const stored = await sql.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM reward_orders WHERE tenant_id = $1 AND state = 'completed'",
      [t.id],
    );
    const cut = calls.size - stored.rows[0]!.n;
    expect(cut).toBeGreaterThanOrEqual(4);
    process.stderr.write(`[store fault] killed the dispatcher with ${cut} calls cut\n`);

    const second = dispatcher();
    await waitFor(
      async () => {
        const r = await sql.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM reward_orders WHERE tenant_id = $1 AND state = 'completed'",
          [t.id],
        );
        return r.rows[0]!.n === ORDERS;
      },
      { what: 'every order completed', timeoutMs: 120_000 },
    );
    second.child.kill('SIGTERM');
    await second.exited;

    // Every order was called, under its own stable key; the repeats are the cut calls at most.
    expect([...calls.keys()].sort()).toEqual([...ids].sort());
    const repeated = [...calls.values()].filter((n) => n > 1).length;
    expect(repeated).toBeLessThanOrEqual(cut);
    // Each order carries the endpoint's one effect, and completed once.
    const rows = await sql.query<{ id: string; status: { data: { external_id: string } } }>(
      'SELECT id, status FROM reward_orders WHERE tenant_id = $1',
      [t.id],
    );
    for (const o of rows.rows) expect([o.id, o.status.data.external_id]).toEqual([o.id, effects.get(o.id)]);
    const completed = await sql.query<{ n: number; d: number }>(
      "SELECT count(*)::int AS n, count(DISTINCT payload->'data'->>'order_id')::int AS d FROM outbox WHERE tenant_id = $1 AND event_type = 'order.completed'",
      [t.id],
    );
    expect(completed.rows[0]).toEqual({ n: ORDERS, d: ORDERS });
  }, 240_000);
});
