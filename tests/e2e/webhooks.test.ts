/**
 * Outbound webhooks end to end (docs/webhooks.md), against a real HTTP receiver on loopback:
 * registration, signed delivery (checked by our own verifier and by the `standardwebhooks`
 * library), retries, dead letters and replay, redelivery, secret rotation, test pings, the
 * delivery log, disabling, retention, URL safety, and a dispatcher killed mid-delivery.
 *
 * The retry schedule and timeout are shrunk through configuration (LUDUS_WEBHOOK_*), as an operator
 * would, and LUDUS_WEBHOOK_ALLOW_PRIVATE=true lets the dispatcher reach the loopback receiver.
 * Distributed runs get a Postgres schema of their own (tests/support/app.ts), so no other suite's
 * dispatcher sees them.
 */
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Webhook } from 'standardwebhooks';
import type { Sql } from '../../adapters/sql/types';
import { enqueue } from '../../core/outbox';
import { verifySignature } from '../../core/webhooks/signing';
import { WebhookSender } from '../../core/webhooks/sender';
import { webhookRetentionJob } from '../../dispatcher/retention';
import { createLogger } from '../../shared/logger';
import {
  call,
  createKey,
  createTenant,
  shapeEnv,
  SHAPES,
  startTestApp,
  tenantToken,
  type Shape,
  type TestApp,
} from '../support/app';
import { childEnv, spawnCli, type Spawned } from '../support/process';
import { waitFor } from '../support/wait';

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  at: number;
}

/** What the receiver answers to the n-th request (0-based) on a path: a status, or never. */
type Behaviour = (n: number) => number | 'hang';

/** A webhook receiver on loopback that records every request. */
class Receiver {
  readonly received: Received[] = [];
  private readonly behaviours = new Map<string, Behaviour>();
  private readonly counts = new Map<string, number>();
  private readonly hanging = new Set<ServerResponse>();
  /** Requests being answered right now (slow paths), to kill a dispatcher mid-request. */
  inFlight = 0;
  private server!: Server;
  base = '';

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const path = req.url ?? '/';
        this.received.push({
          path,
          headers: req.headers,
          body: Buffer.concat(chunks).toString('utf8'),
          at: Date.now(),
        });
        const n = this.counts.get(path) ?? 0;
        this.counts.set(path, n + 1);
        const slow = /^\/slow/.test(path);
        const answer = (this.behaviours.get(path) ?? (() => 200))(n);
        if (answer === 'hang') {
          this.hanging.add(res);
          res.on('close', () => this.hanging.delete(res));
          return;
        }
        const reply = () => {
          res.writeHead(answer, { 'content-type': 'text/plain' });
          res.end(answer >= 300 ? `nope ${answer}` : 'ok');
        };
        if (slow) {
          this.inFlight++;
          setTimeout(() => {
            this.inFlight--;
            reply();
          }, 150);
        } else reply();
      });
    });
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.base = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  on(path: string, b: Behaviour): string {
    this.behaviours.set(path, b);
    return `${this.base}${path}`;
  }

  at(path: string): Received[] {
    return this.received.filter((r) => r.path === path);
  }

  async stop(): Promise<void> {
    for (const res of this.hanging) res.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

const FAST = {
  LUDUS_WEBHOOK_ALLOW_PRIVATE: 'true',
  LUDUS_WEBHOOK_RETRY_SCHEDULE: '0.4,0.4',
  LUDUS_WEBHOOK_TIMEOUT_MS: '1000',
  LUDUS_WEBHOOK_POLL_MS: '50',
  LUDUS_WEBHOOK_DISABLE_AFTER_SECONDS: '0',
};

async function startApp(
  shape: Shape,
  env: Record<string, string>,
  roles = 'ingest,api,processors,dispatcher',
) {
  // Distributed apps get a Postgres schema of their own (shapeEnv): no other suite's dispatcher sees them.
  const app = await startTestApp(shape, { roles, env });
  return { app, stop: () => app.stop() };
}

/** A tenant with an admin key, and a request helper for its admin routes (?tenant_id form). */
async function tenantOf(app: TestApp) {
  const t = await createTenant(app);
  const key = (await createKey(app, [t.id], ['webhooks:write'])).key;
  const admin = (method: string, path: string, body?: unknown) =>
    call(method, `${app.url.admin}${path}${path.includes('?') ? '&' : '?'}tenant_id=${t.id}`, {
      headers: { 'x-api-key': key },
      body,
    });
  return { tenant: t, key, admin };
}

/** An event in the outbox, as a feature enqueues it (its own transaction). */
async function emit(sql: Sql, tenantId: string, type: string, payload: Record<string, unknown>, key: string) {
  await sql.tx((q) =>
    enqueue(q, { tenant_id: tenantId, event_type: type, dedupe_key: key, payload, created_at: Date.now() }),
  );
}

/**
 * Waits until the dispatcher has fanned every outbox event of a tenant out into deliveries: from
 * then on the set of deliveries is final, so "nothing was sent to X" is a fact of the log, not of
 * how long a test waited.
 */
async function fannedOut(sql: Sql, tenantId: string): Promise<void> {
  await waitFor(
    async () => {
      const r = await sql.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM outbox WHERE tenant_id = $1 AND fanned_out_at IS NULL',
        [tenantId],
      );
      return Number(r.rows[0]!.n) === 0;
    },
    { what: "the tenant's outbox to be fanned out" },
  );
}

/**
 * The attempts the delivery log records for an endpoint, once none of its deliveries is pending (each
 * is succeeded, dead or failed: nothing more is scheduled). The receiver must have seen exactly this
 * many requests: one more would be an attempt the log does not know of.
 */
async function settledAttempts(sql: Sql, tenantId: string, webhookId: string): Promise<number> {
  return waitFor(
    async () => {
      const r = await sql.query<{ pending: number; attempts: number }>(
        `SELECT count(*) FILTER (WHERE status = 'pending')::int AS pending,
                count(*) FILTER (WHERE next_attempt_at IS NOT NULL AND status <> 'pending')::int AS scheduled,
                coalesce(sum(attempts), 0)::int AS attempts
           FROM webhook_deliveries WHERE tenant_id = $1 AND webhook_id = $2`,
        [tenantId, webhookId],
      );
      const row = r.rows[0] as { pending: number; scheduled: number; attempts: number };
      return Number(row.pending) === 0 && Number(row.scheduled) === 0 ? { n: Number(row.attempts) } : null;
    },
    { what: 'every delivery of the endpoint to be final' },
  ).then((r) => r.n);
}

const currencyEarned = (tenantId: string, n: number) => ({
  event_type: 'currency.earned',
  tenant_id: tenantId,
  timestamp: new Date().toISOString(),
  user_id: 'alice',
  data: {
    currency_id: 'coins',
    amount: 10,
    new_balance: 10 * n,
    source_type: 'manual_grant',
    transaction_id: `tx-${n}`,
  },
});

describe.each(SHAPES)('webhooks [%s]', (shape) => {
  let app: TestApp;
  let stopApp: () => Promise<void>;
  const rx = new Receiver();
  let seq = 0;

  beforeAll(async () => {
    await rx.start();
    ({ app, stop: stopApp } = await startApp(shape, FAST));
  });
  afterAll(async () => {
    await stopApp?.();
    await rx.stop();
  });

  const path = (name: string) => `/${shape}/${name}/${++seq}`;
  const sql = () => app.ctx.adapters.sql;

  async function register(admin: Awaited<ReturnType<typeof tenantOf>>['admin'], url: string, types = ['*']) {
    const r = await admin('POST', '/v1/webhooks', { url, event_types: types, description: 'test' });
    expect(r.status).toBe(201);
    return r.body as { id: string; secret: string };
  }

  async function deliveries(
    admin: Awaited<ReturnType<typeof tenantOf>>['admin'],
    webhookId: string,
    query = '',
  ): Promise<any> {
    const r = await admin('GET', `/v1/webhooks/${webhookId}/deliveries${query}`);
    expect(r.status).toBe(200);
    return r.body;
  }

  it('registers, lists, reads, updates and deletes endpoints; the secret is shown once', async () => {
    const { tenant, admin } = await tenantOf(app);
    const url = rx.on(path('crud'), () => 200);
    const created = await admin('POST', '/v1/webhooks', {
      url,
      event_types: ['currency.earned', 'tier.changed'],
      description: 'crm sync',
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      tenant_id: tenant.id,
      url,
      event_types: ['currency.earned', 'tier.changed'],
      description: 'crm sync',
      active: true,
      disabled_reason: null,
    });
    expect(created.body.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    const id = created.body.id as string;

    const got = await admin('GET', `/v1/webhooks/${id}`);
    expect(got.status).toBe(200);
    expect(got.body.secret).toBeUndefined();
    expect(JSON.stringify(got.body)).not.toContain(created.body.secret);
    // The secret is stored encrypted, not in clear.
    const raw = await sql().query<{ secret_enc: string }>('SELECT secret_enc FROM webhooks WHERE id = $1', [
      id,
    ]);
    expect(raw.rows[0]!.secret_enc).not.toContain(created.body.secret.slice(6, 20));

    const list = await call('GET', `${app.url.admin}/v1/tenants/${tenant.id}/webhooks`, {
      headers: { 'x-api-key': (await createKey(app, [tenant.id], ['webhooks:read'])).key },
    });
    expect(list.status).toBe(200);
    expect(list.body).toMatchObject({ total: 1, limit: 50, offset: 0 });
    expect(list.body.webhooks[0].id).toBe(id);

    const upd = await admin('PUT', `/v1/webhooks/${id}`, {
      event_types: ['*'],
      description: null,
      active: false,
    });
    expect(upd.status).toBe(200);
    expect(upd.body).toMatchObject({ event_types: ['*'], description: null, active: false });
    expect((await admin('GET', '/v1/webhooks?active=false')).body.total).toBe(1);
    expect((await admin('GET', '/v1/webhooks?active=true')).body.total).toBe(0);

    // Bad input names what to fix.
    const bad: Array<[unknown, RegExp]> = [
      [{ url, event_types: ['order.shipped'] }, /body\.event_types\[0\] must be one of/],
      [{ url, event_types: [] }, /event_types/],
      [{ url: 'ftp://example.com/x', event_types: ['*'] }, /body\.url: url must use http or https/],
      [{ event_types: ['*'] }, /body\.url is required/],
      [{ url, event_types: ['*'], secret: 'mine' }, /body\.secret is not allowed/],
    ];
    for (const [body, message] of bad) {
      const r = await admin('POST', '/v1/webhooks', body);
      expect([r.status, r.body.error.code]).toEqual([400, 'VALIDATION_ERROR']);
      expect(r.body.error.message).toMatch(message);
    }
    expect((await admin('PUT', `/v1/webhooks/${id}`, {})).status).toBe(400);

    // Another tenant's key cannot see it; a missing one is a 404.
    const other = await tenantOf(app);
    expect((await other.admin('GET', `/v1/webhooks/${id}`)).status).toBe(404);
    expect((await admin('DELETE', `/v1/webhooks/${id}`)).status).toBe(204);
    expect((await admin('GET', `/v1/webhooks/${id}`)).status).toBe(404);
    expect((await admin('DELETE', `/v1/webhooks/${id}`)).status).toBe(404);
  });

  it('delivers leaderboard.window_completed end to end, signed for our check and for standardwebhooks', async () => {
    const { tenant, key, admin } = await tenantOf(app);
    const boardKey = (await createKey(app, [tenant.id], ['leaderboards:write'])).key;
    const p = path('window');
    const hook = await register(
      admin,
      rx.on(p, () => 200),
      ['leaderboard.window_completed'],
    );
    const other = path('currency-only');
    const otherHook = await register(
      admin,
      rx.on(other, () => 200),
      ['currency.earned'],
    );
    void key;

    const lb = await call('POST', `${app.url.admin}/v1/leaderboards?tenant_id=${tenant.id}`, {
      headers: { 'x-api-key': boardKey },
      body: {
        leaderboard_id: 'weekly',
        name: 'Weekly',
        config: {
          timeframe: { type: 'all_time' },
          scoring: { rules: [{ event_type: 'match', points_expression: 'attrs.p' }], aggregation: 'sum' },
        },
      },
    });
    expect(lb.status).toBe(201);
    const ev = await call('POST', `${app.url.ingest}/v1/events/bulk`, {
      headers: { authorization: `Bearer ${await tenantToken(tenant)}` },
      body: {
        events: [
          {
            event_id: 'e1',
            type: 'match',
            actor: { user_id: 'ann' },
            occurred_at: new Date().toISOString(),
            attrs: { p: 5 },
          },
          {
            event_id: 'e2',
            type: 'match',
            actor: { user_id: 'bob' },
            occurred_at: new Date().toISOString(),
            attrs: { p: 9 },
          },
        ],
      },
    });
    expect(ev.status).toBe(202);
    // Close the window once the pipeline has applied both events (dedupe rows are written in the
    // same transaction as the scores), never inside the wait: a close after one event is final.
    await waitFor(
      async () => {
        const r = await sql().query<{ n: number }>(
          'SELECT count(*)::int AS n FROM processed_events WHERE tenant_id = $1',
          [tenant.id],
        );
        return Number(r.rows[0]!.n) === 2;
      },
      { what: 'both events to be scored' },
    );
    const closed = await call(
      'POST',
      `${app.url.admin}/v1/leaderboards/weekly/windows/all_time/close?tenant_id=${tenant.id}`,
      { headers: { 'x-api-key': boardKey } },
    );
    expect([closed.status, closed.body.entries]).toEqual([200, 2]);
    const [got] = await waitFor(() => (rx.at(p).length ? rx.at(p) : null), { what: 'the webhook' });

    // The body is the SPEC.md payload.
    const body = JSON.parse(got!.body);
    expect(Object.keys(body).slice(0, 3)).toEqual(['event_type', 'tenant_id', 'timestamp']);
    expect(body).toMatchObject({
      event_type: 'leaderboard.window_completed',
      tenant_id: tenant.id,
      leaderboard_id: 'weekly',
      window_key: 'all_time',
    });
    expect(Date.parse(body.timestamp)).toBeGreaterThan(0);
    expect(Date.parse(body.completed_at)).toBeGreaterThan(0);
    expect(Array.isArray(body.reward_distribution)).toBe(true);

    // Headers: ours and Standard Webhooks', the same delivery id in both.
    const h = got!.headers;
    expect(h['content-type']).toBe('application/json');
    expect(h['x-webhook-event']).toBe('leaderboard.window_completed');
    expect(h['x-webhook-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(h['webhook-id']).toBe(h['x-webhook-id']);
    expect(h['webhook-timestamp']).toBe(h['x-webhook-timestamp']);
    expect(h['x-webhook-signature']).toMatch(/^sha256=[0-9a-f]{64}$/);
    expect(h['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    expect(
      verifySignature(
        hook.secret,
        { timestamp: h['x-webhook-timestamp'] as string, signature: h['x-webhook-signature'] as string },
        got!.body,
        Math.floor(Date.now() / 1000),
      ),
    ).toEqual({ ok: true });
    const wh = new Webhook(hook.secret);
    expect(wh.verify(got!.body, h as Record<string, string>)).toEqual(body);
    // A tampered body fails both.
    const tampered = got!.body.replace('weekly', 'weekly2');
    expect(
      verifySignature(
        hook.secret,
        { timestamp: h['x-webhook-timestamp'] as string, signature: h['x-webhook-signature'] as string },
        tampered,
        Math.floor(Date.now() / 1000),
      ).ok,
    ).toBe(false);
    expect(() => wh.verify(tampered, h as Record<string, string>)).toThrow();

    // The endpoint subscribed to other types got nothing (every event is fanned out: that is final);
    // the log shows one 200 attempt.
    await fannedOut(sql(), tenant.id);
    expect((await deliveries(admin, otherHook.id)).total).toBe(0);
    expect(rx.at(other)).toHaveLength(0);
    const log = await deliveries(admin, hook.id);
    expect(log.total).toBe(1);
    expect(log.deliveries[0]).toMatchObject({
      id: h['x-webhook-id'],
      event_type: 'leaderboard.window_completed',
      status: 'succeeded',
      attempt_count: 1,
      attempts: [{ attempt: 1, succeeded: true, status_code: 200, error: null, response_body: 'ok' }],
    });
    expect(log.deliveries[0].attempts[0].duration_ms).toBeGreaterThanOrEqual(0);
  });

  it('delivers currency.earned, currency.spent and tier.changed from the wallet, as SPEC.md shapes them', async () => {
    const { tenant, admin } = await tenantOf(app);
    const walletKey = (await createKey(app, [tenant.id], ['wallet:write'])).key;
    const wallet = async (suffix: string, body: unknown) => {
      const r = await call('POST', `${app.url.admin}/v1/wallet${suffix}?tenant_id=${tenant.id}`, {
        headers: { 'x-api-key': walletKey },
        body,
      });
      expect([suffix, r.status]).toEqual([
        suffix,
        suffix.startsWith('/currencies') || suffix.startsWith('/tiers') ? 201 : 200,
      ]);
      return r.body;
    };
    const p = path('wallet');
    await register(
      admin,
      rx.on(p, () => 200),
      ['currency.earned', 'currency.spent', 'tier.changed'],
    );
    await wallet('/currencies', { id: 'coins', name: 'Coins', is_spendable: true, decimal_places: 0 });
    await wallet('/tiers', {
      tier_name: 'Silver',
      tier_level: 1,
      min_lifetime_points: 50,
      currency_id: 'coins',
    });
    const grant = await wallet('/grant', {
      user_id: 'ann',
      currency_id: 'coins',
      amount: 80,
      source_type: 'manual_grant',
    });
    await wallet('/deduct', {
      user_id: 'ann',
      currency_id: 'coins',
      amount: 30,
      source_type: 'manual_deduct',
    });
    const got = await waitFor(() => (rx.at(p).length === 3 ? rx.at(p) : null), {
      what: 'three wallet webhooks',
      describe: () =>
        rx
          .at(p)
          .map((r) => r.body)
          .join('\n'),
    });
    const bodies = got.map((r) => JSON.parse(r.body));
    const byType = Object.fromEntries(bodies.map((b) => [b.event_type, b]));
    expect(byType['currency.earned']).toEqual({
      event_type: 'currency.earned',
      tenant_id: tenant.id,
      timestamp: expect.any(String),
      user_id: 'ann',
      data: {
        currency_id: 'coins',
        amount: 80,
        new_balance: 80,
        source_type: 'manual_grant',
        transaction_id: grant.transaction_id,
      },
    });
    expect(byType['currency.spent']).toMatchObject({
      user_id: 'ann',
      data: { currency_id: 'coins', amount: 30, new_balance: 50, source_type: 'manual_deduct' },
    });
    expect(byType['tier.changed']).toMatchObject({
      tenant_id: tenant.id,
      user_id: 'ann',
      data: {
        currency_id: 'coins',
        previous_tier: null,
        new_tier: { tier_name: 'Silver', tier_level: 1 },
        lifetime_points: 80,
      },
    });
    // The grant's two events came from one transaction; the deduction's after them.
    expect(bodies[2].event_type).toBe('currency.spent');
  });

  it('retries a receiver that fails twice, then stops after the success (three requests, one id)', async () => {
    const { tenant, admin } = await tenantOf(app);
    const p = path('flaky');
    const hook = await register(
      admin,
      rx.on(p, (n) => (n === 0 ? 500 : n === 1 ? 503 : 200)),
    );
    await emit(sql(), tenant.id, 'currency.earned', currencyEarned(tenant.id, 1), 'flaky-1');
    await waitFor(async () => (await deliveries(admin, hook.id)).deliveries[0]?.status === 'succeeded', {
      what: 'the delivery to succeed',
      describe: async () => JSON.stringify(await deliveries(admin, hook.id)),
    });
    // The log is final (succeeded, nothing scheduled) and the receiver saw exactly its attempts.
    expect(await settledAttempts(sql(), tenant.id, hook.id)).toBe(3);
    const got = rx.at(p);
    expect(got).toHaveLength(3);
    expect(new Set(got.map((g) => g.headers['webhook-id'])).size).toBe(1);
    expect(got.map((g) => g.headers['x-webhook-attempt'])).toEqual(['1', '2', '3']);
    // Later attempts come after the schedule's delays (0.4 s ±20 %).
    expect(got[1]!.at - got[0]!.at).toBeGreaterThanOrEqual(300);
    expect(got[2]!.at - got[1]!.at).toBeGreaterThanOrEqual(300);
    const d = (await deliveries(admin, hook.id)).deliveries[0];
    expect(d).toMatchObject({ status: 'succeeded', attempt_count: 3, next_attempt_at: null });
    expect(d.attempts.map((a: any) => [a.attempt, a.status_code, a.succeeded])).toEqual([
      [1, 500, false],
      [2, 503, false],
      [3, 200, true],
    ]);
    expect(d.attempts[0].response_body).toBe('nope 500');
    const w = (await admin('GET', `/v1/webhooks/${hook.id}`)).body;
    expect(w.failing_since).toBeNull();
    expect(w.last_success_at).not.toBeNull();
  });

  it('dead-letters a receiver that never answers after the schedule; replay (one and bulk) delivers it', async () => {
    const { tenant, admin } = await tenantOf(app);
    const p = path('hang');
    let healthy = false;
    const hook = await register(
      admin,
      rx.on(p, () => (healthy ? 200 : 'hang')),
    );
    await emit(sql(), tenant.id, 'currency.earned', currencyEarned(tenant.id, 1), 'hang-1');
    await emit(
      sql(),
      tenant.id,
      'currency.spent',
      { ...currencyEarned(tenant.id, 2), event_type: 'currency.spent' },
      'hang-2',
    );
    await emit(
      sql(),
      tenant.id,
      'tier.changed',
      {
        user_id: 'alice',
        data: {
          currency_id: 'coins',
          previous_tier: null,
          new_tier: { tier_id: 't1', tier_name: 'Gold', tier_level: 1 },
          lifetime_points: 100,
        },
      },
      'hang-3',
    );
    const dead = await waitFor(
      async () => {
        const b = await deliveries(admin, hook.id, '?status=dead');
        return b.total === 3 ? b : null;
      },
      {
        what: 'three dead letters',
        timeoutMs: 30000,
        describe: async () => JSON.stringify(await deliveries(admin, hook.id)),
      },
    );
    for (const d of dead.deliveries) {
      expect(d.attempt_count).toBe(3);
      expect(d.attempts.map((a: any) => a.error)).toEqual([
        'timeout: no answer within 1000 ms',
        'timeout: no answer within 1000 ms',
        'timeout: no answer within 1000 ms',
      ]);
      expect(d.attempts.every((a: any) => a.status_code === null && a.duration_ms >= 900)).toBe(true);
    }
    // Delivered in order to one endpoint: each attempt round went out oldest first.
    const firsts = rx.at(p).filter((r) => r.headers['x-webhook-attempt'] === '1');
    expect(firsts.map((r) => JSON.parse(r.body).event_type)).toEqual([
      'currency.earned',
      'currency.spent',
      'tier.changed',
    ]);
    expect(rx.at(p)).toHaveLength(9);

    // Nothing more is scheduled (the log is final) and the receiver saw exactly the logged attempts;
    // then the receiver is fixed and the dead letters are replayed.
    expect(await settledAttempts(sql(), tenant.id, hook.id)).toBe(9);
    expect(rx.at(p)).toHaveLength(9);
    healthy = true;
    const one = dead.deliveries.find((d: any) => d.event_type === 'tier.changed');
    const r1 = await admin('POST', `/v1/webhooks/${hook.id}/deliveries/${one.id}/replay`);
    expect(r1.status).toBe(200);
    expect(r1.body).toMatchObject({ id: one.id, status: 'pending' });
    await waitFor(
      async () =>
        (await admin('GET', `/v1/webhooks/${hook.id}/deliveries/${one.id}`)).body.status === 'succeeded',
      {
        what: 'the replayed delivery',
      },
    );
    const replayed = rx.at(p).slice(9);
    expect(replayed).toHaveLength(1);
    expect(replayed[0]!.headers['webhook-id']).toBe(one.id); // the same id: receivers can dedupe
    expect(JSON.parse(replayed[0]!.body)).toMatchObject({
      event_type: 'tier.changed',
      tenant_id: tenant.id,
      user_id: 'alice',
      data: { new_tier: { tier_name: 'Gold' } },
    });
    // Replaying something that is not dead is a 409 that says what to do instead.
    const again = await admin('POST', `/v1/webhooks/${hook.id}/deliveries/${one.id}/replay`);
    expect(again.status).toBe(409);
    expect(again.body.error.message).toMatch(/redeliver/);

    const bulk = await admin('POST', `/v1/webhooks/${hook.id}/deliveries/replay?event_type=currency.spent`);
    expect(bulk.body).toEqual({ webhook_id: hook.id, replayed: 1 });
    const rest = await admin('POST', `/v1/webhooks/${hook.id}/deliveries/replay`);
    expect(rest.body).toEqual({ webhook_id: hook.id, replayed: 1 });
    await waitFor(async () => (await deliveries(admin, hook.id, '?status=succeeded')).total === 3, {
      what: 'every dead letter delivered',
    });
    expect(await settledAttempts(sql(), tenant.id, hook.id)).toBe(12);
    expect(rx.at(p)).toHaveLength(12);
    expect((await deliveries(admin, hook.id, '?status=dead')).total).toBe(0);
    expect(
      (await deliveries(admin, hook.id, '?status=succeeded')).deliveries.every(
        (d: any) => d.attempt_count === 4,
      ),
    ).toBe(true);
  });

  it("never lets one endpoint's failures hold up another's", async () => {
    const { tenant, admin } = await tenantOf(app);
    const stuck = path('stuck');
    const fine = path('fine');
    await register(
      admin,
      rx.on(stuck, () => 'hang'),
    );
    await register(
      admin,
      rx.on(fine, () => 200),
    );
    const t0 = Date.now();
    for (let i = 1; i <= 5; i++) {
      await emit(sql(), tenant.id, 'currency.earned', currencyEarned(tenant.id, i), `indep-${i}`);
    }
    await waitFor(() => rx.at(fine).length === 5, { what: 'the healthy endpoint to get all five' });
    // All five arrived while the stuck endpoint was still waiting out its first timeout (1 s).
    expect(Date.now() - t0).toBeLessThan(1000);
    expect(rx.at(stuck).length).toBeLessThanOrEqual(1);
  });

  it('redelivers any past delivery with its id, and filters and pages the delivery log', async () => {
    const { tenant, admin } = await tenantOf(app);
    const p = path('log');
    const hook = await register(
      admin,
      rx.on(p, () => 200),
    );
    const before = new Date(Date.now() - 1000).toISOString();
    for (let i = 1; i <= 3; i++)
      await emit(sql(), tenant.id, 'currency.earned', currencyEarned(tenant.id, i), `log-${i}`);
    await emit(
      sql(),
      tenant.id,
      'currency.spent',
      { ...currencyEarned(tenant.id, 4), event_type: 'currency.spent' },
      'log-4',
    );
    await waitFor(async () => (await deliveries(admin, hook.id, '?status=succeeded')).total === 4, {
      what: '4 deliveries',
    });
    // In order: one endpoint, no failures.
    expect(rx.at(p).map((r) => JSON.parse(r.body).data.transaction_id)).toEqual([
      'tx-1',
      'tx-2',
      'tx-3',
      'tx-4',
    ]);

    expect((await deliveries(admin, hook.id, '?event_type=currency.spent')).total).toBe(1);
    expect((await deliveries(admin, hook.id, '?event_type=currency.earned')).total).toBe(3);
    expect((await deliveries(admin, hook.id, `?since=${encodeURIComponent(before)}`)).total).toBe(4);
    expect((await deliveries(admin, hook.id, `?until=${encodeURIComponent(before)}`)).total).toBe(0);
    const future = new Date(Date.now() + 60000).toISOString();
    expect((await deliveries(admin, hook.id, `?since=${encodeURIComponent(future)}`)).total).toBe(0);
    const page = await deliveries(admin, hook.id, '?limit=2&offset=1');
    expect(page).toMatchObject({ total: 4, limit: 2, offset: 1 });
    expect(page.deliveries).toHaveLength(2);
    const all = await deliveries(admin, hook.id);
    expect(page.deliveries.map((d: any) => d.id)).toEqual(all.deliveries.slice(1, 3).map((d: any) => d.id));
    const bad = await admin('GET', `/v1/webhooks/${hook.id}/deliveries?status=lost`);
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toMatch(/query\.status must be one of/);
    expect((await admin('GET', `/v1/webhooks/${hook.id}/deliveries?since=yesterday`)).status).toBe(400);

    // One delivery with its payload; then a redelivery of a succeeded one.
    const first = all.deliveries[all.deliveries.length - 1];
    const detail = await admin('GET', `/v1/webhooks/${hook.id}/deliveries/${first.id}`);
    expect(detail.body.payload).toMatchObject({
      event_type: 'currency.earned',
      user_id: 'alice',
      data: { transaction_id: 'tx-1' },
    });
    const re = await admin('POST', `/v1/webhooks/${hook.id}/deliveries/${first.id}/redeliver`);
    expect(re.status).toBe(200);
    await waitFor(() => rx.at(p).length === 5, { what: 'the redelivery' });
    const last = rx.at(p)[4]!;
    expect(last.headers['webhook-id']).toBe(first.id);
    expect(JSON.parse(last.body).data.transaction_id).toBe('tx-1');
    expect((await admin('POST', `/v1/webhooks/${hook.id}/deliveries/nope/redeliver`)).status).toBe(404);
  });

  it('rotates the secret: during the overlap both secrets sign, after it only the new one', async () => {
    const { tenant, admin } = await tenantOf(app);
    const p = path('rotate');
    const hook = await register(
      admin,
      rx.on(p, () => 200),
    );
    const rot = await admin('POST', `/v1/webhooks/${hook.id}/rotate-secret?overlap_seconds=3600`);
    expect(rot.status).toBe(200);
    expect(rot.body.secret).toMatch(/^whsec_/);
    expect(rot.body.secret).not.toBe(hook.secret);
    expect(Date.parse(rot.body.previous_secret_expires_at) - Date.now()).toBeGreaterThan(3500_000);
    await emit(sql(), tenant.id, 'currency.earned', currencyEarned(tenant.id, 1), 'rot-1');
    const [during] = await waitFor(() => (rx.at(p).length === 1 ? rx.at(p) : null), { what: 'delivery 1' });
    const h = during!.headers as Record<string, string>;
    expect(h['x-webhook-signature']!.split(' ')).toHaveLength(2);
    expect(h['webhook-signature']!.split(' ')).toHaveLength(2);
    const now = Math.floor(Date.now() / 1000);
    for (const secret of [rot.body.secret, hook.secret]) {
      expect(new Webhook(secret).verify(during!.body, h)).toMatchObject({ event_type: 'currency.earned' });
      expect(
        verifySignature(
          secret,
          { timestamp: h['x-webhook-timestamp'], signature: h['x-webhook-signature'] },
          during!.body,
          now,
        ),
      ).toEqual({ ok: true });
    }

    // A rotation without overlap: the old secrets stop at once.
    const rot2 = await admin('POST', `/v1/webhooks/${hook.id}/rotate-secret?overlap_seconds=0`);
    expect(rot2.body.previous_secret_expires_at).toBeNull();
    await emit(sql(), tenant.id, 'currency.earned', currencyEarned(tenant.id, 2), 'rot-2');
    await waitFor(() => rx.at(p).length === 2, { what: 'delivery 2' });
    const after = rx.at(p)[1]!;
    const h2 = after.headers as Record<string, string>;
    expect(h2['webhook-signature']!.split(' ')).toHaveLength(1);
    expect(new Webhook(rot2.body.secret).verify(after.body, h2)).toBeTruthy();
    expect(() => new Webhook(rot.body.secret).verify(after.body, h2)).toThrow();
    expect(() => new Webhook(hook.secret).verify(after.body, h2)).toThrow();
    expect((await admin('POST', `/v1/webhooks/${hook.id}/rotate-secret?overlap_seconds=-1`)).status).toBe(
      400,
    );
  });

  it('sends a signed test ping and reports its attempt; a failed ping is logged, not retried', async () => {
    const { tenant, admin } = await tenantOf(app);
    const p = path('ping');
    const hook = await register(
      admin,
      rx.on(p, () => 200),
    );
    const ping = await admin('POST', `/v1/webhooks/${hook.id}/ping`);
    expect(ping.status).toBe(200);
    expect(ping.body).toMatchObject({
      event_type: 'ping',
      status: 'succeeded',
      attempt_count: 1,
      attempts: [{ attempt: 1, status_code: 200, succeeded: true }],
      payload: { event_type: 'ping', tenant_id: tenant.id, webhook_id: hook.id },
    });
    const got = rx.at(p);
    expect(got).toHaveLength(1);
    expect(
      new Webhook(hook.secret).verify(got[0]!.body, got[0]!.headers as Record<string, string>),
    ).toMatchObject({
      event_type: 'ping',
    });
    expect(got[0]!.headers['webhook-id']).toBe(ping.body.id);

    const failing = path('ping-fail');
    const bad = await register(
      admin,
      rx.on(failing, () => 404),
    );
    const r = await admin('POST', `/v1/webhooks/${bad.id}/ping`);
    expect(r.body).toMatchObject({ status: 'failed', attempts: [{ status_code: 404, succeeded: false }] });
    // A failed ping is final in the log (nothing scheduled), and that one attempt is all that was sent.
    expect(await settledAttempts(sql(), tenant.id, bad.id)).toBe(1);
    expect(rx.at(failing)).toHaveLength(1);
    // Pings do not count towards disabling and show in the log with their status.
    expect((await deliveries(admin, bad.id, '?status=failed')).total).toBe(1);
    expect((await admin('GET', `/v1/webhooks/${bad.id}`)).body.failing_since).toBeNull();
  });

  it('holds deliveries of an endpoint that is off and fans out only to active, matching endpoints', async () => {
    const { tenant, admin } = await tenantOf(app);
    const on = path('on');
    const off = path('off');
    const onHook = await register(
      admin,
      rx.on(on, () => 200),
      ['currency.earned'],
    );
    const offHook = await register(
      admin,
      rx.on(off, () => 200),
      ['*'],
    );
    expect((await admin('PUT', `/v1/webhooks/${offHook.id}`, { active: false })).status).toBe(200);
    await emit(sql(), tenant.id, 'currency.earned', currencyEarned(tenant.id, 1), 'on-1');
    await emit(
      sql(),
      tenant.id,
      'currency.spent',
      { ...currencyEarned(tenant.id, 2), event_type: 'currency.spent' },
      'on-2',
    );
    await waitFor(() => rx.at(on).length === 1, { what: 'the active endpoint' });
    // Both events are fanned out (final): one delivery to the matching active endpoint, none to the other.
    await fannedOut(sql(), tenant.id);
    expect(await settledAttempts(sql(), tenant.id, onHook.id)).toBe(1);
    expect(rx.at(on)).toHaveLength(1);
    expect(rx.at(off)).toHaveLength(0);
    expect((await deliveries(admin, offHook.id)).total).toBe(0);
    // Replays are refused while it is off, with the way out.
    const r = await admin('POST', `/v1/webhooks/${offHook.id}/deliveries/replay`);
    expect(r.status).toBe(409);
    expect(r.body.error.message).toMatch(/"active": true/);
  });

  it('purges the delivery log after the retention period (scheduler job), never pending deliveries', async () => {
    const { tenant, admin } = await tenantOf(app);
    const p = path('retention');
    let up = true;
    const hook = await register(
      admin,
      rx.on(p, () => (up ? 200 : 'hang')),
    );
    await emit(sql(), tenant.id, 'currency.earned', currencyEarned(tenant.id, 1), 'ret-1');
    await waitFor(async () => (await deliveries(admin, hook.id, '?status=succeeded')).total === 1, {
      what: 'delivery',
    });
    up = false;
    await emit(sql(), tenant.id, 'currency.earned', currencyEarned(tenant.id, 2), 'ret-2');
    await waitFor(async () => (await deliveries(admin, hook.id, '?status=pending')).total === 1, {
      what: 'a pending one',
    });
    await admin('PUT', `/v1/webhooks/${hook.id}`, { active: false }); // held: stays pending

    const job = webhookRetentionJob(
      { sql: sql(), log: createLogger('silent') },
      app.ctx.config.webhooks.retentionMs,
    );
    await job.run(Date.now()); // nothing is old enough
    expect((await deliveries(admin, hook.id)).total).toBe(2);
    await job.run(Date.now() + 31 * 86400_000); // default retention: 30 days
    const left = await deliveries(admin, hook.id);
    expect(left.total).toBe(1);
    expect(left.deliveries[0].status).toBe('pending');
    const events = await sql().query<{ n: number }>(
      "SELECT count(*)::int AS n FROM outbox WHERE tenant_id = $1 AND dedupe_key LIKE 'ret-%'",
      [tenant.id],
    );
    expect(Number(events.rows[0]!.n)).toBe(0);
  });
});

describe('webhook endpoint disabling [embedded]', () => {
  let app: TestApp;
  let stopApp: () => Promise<void>;
  const rx = new Receiver();

  beforeAll(async () => {
    await rx.start();
    ({ app, stop: stopApp } = await startApp('embedded', {
      ...FAST,
      LUDUS_WEBHOOK_RETRY_SCHEDULE: '0.2',
      LUDUS_WEBHOOK_DISABLE_AFTER_SECONDS: '1',
    }));
  });
  afterAll(async () => {
    await stopApp?.();
    await rx.stop();
  });

  it('disables an endpoint that keeps failing, shows why, and resumes when turned back on', async () => {
    const { tenant, admin } = await tenantOf(app);
    let healthy = false;
    const hook = (
      await admin('POST', '/v1/webhooks', {
        url: rx.on('/down', () => (healthy ? 200 : 500)),
        event_types: ['*'],
      })
    ).body;
    const sql = app.ctx.adapters.sql;
    await emit(sql, tenant.id, 'currency.earned', currencyEarned(tenant.id, 1), 'd-1');
    await waitFor(
      async () => (await admin('GET', `/v1/webhooks/${hook.id}/deliveries?status=dead`)).body.total === 1,
      {
        what: 'the first dead letter',
      },
    );
    const failing = (await admin('GET', `/v1/webhooks/${hook.id}`)).body;
    expect(failing).toMatchObject({ active: true });
    // Past LUDUS_WEBHOOK_DISABLE_AFTER_SECONDS (1 s) of failing with no success.
    await waitFor(() => Date.now() > Date.parse(failing.failing_since) + 1100, {
      what: 'the disable-after period to pass',
    });
    await emit(sql, tenant.id, 'currency.earned', currencyEarned(tenant.id, 2), 'd-2');
    const w = await waitFor(
      async () => {
        const b = (await admin('GET', `/v1/webhooks/${hook.id}`)).body;
        return b.active === false ? b : null;
      },
      { what: 'the endpoint to be disabled' },
    );
    expect(w.disabled_reason).toMatch(
      /^No successful delivery for [\d.]+ s \(failing since .*; last attempt: HTTP 500\)/,
    );
    expect(w.disabled_at).not.toBeNull();
    const disabledAt = Date.parse(w.disabled_at);
    // Off: new events are not fanned out to it (d-3 is fanned out: final), and the pending delivery
    // is held (below: no attempt of it is logged between disabling and turning it back on, and the
    // receiver saw exactly the logged attempts).
    await emit(sql, tenant.id, 'currency.earned', currencyEarned(tenant.id, 3), 'd-3');
    await fannedOut(sql, tenant.id);
    // A barrier rather than a sleep: once the held delivery is due, one more event fanned out means
    // one more dispatcher tick (fan out, then claim due endpoints) ran while it was due.
    const held = (await admin('GET', `/v1/webhooks/${hook.id}/deliveries?status=pending`)).body;
    expect(held.total).toBe(1);
    const due = Date.parse(held.deliveries[0].next_attempt_at ?? new Date().toISOString());
    await waitFor(() => Date.now() > due + 100, { what: 'the held delivery to be due' });
    await emit(sql, tenant.id, 'currency.earned', currencyEarned(tenant.id, 4), 'd-4');
    await fannedOut(sql, tenant.id);
    const enabledAt = Date.now();

    healthy = true;
    const on = await admin('PUT', `/v1/webhooks/${hook.id}`, { active: true });
    expect(on.body).toMatchObject({
      active: true,
      disabled_reason: null,
      disabled_at: null,
      failing_since: null,
    });
    await waitFor(
      async () =>
        (await admin('GET', `/v1/webhooks/${hook.id}/deliveries?status=succeeded`)).body.total === 1,
      {
        what: 'the held delivery to go out',
      },
    );
    expect((await admin('POST', `/v1/webhooks/${hook.id}/deliveries/replay`)).body.replayed).toBe(1);
    await waitFor(
      async () =>
        (await admin('GET', `/v1/webhooks/${hook.id}/deliveries?status=succeeded`)).body.total === 2,
      {
        what: 'the replayed dead letter',
      },
    );
    const log = (await admin('GET', `/v1/webhooks/${hook.id}/deliveries`)).body;
    expect(log.total).toBe(2); // d-3 and d-4 were never fanned out to it
    const attemptsWhileOff = log.deliveries
      .flatMap((d: any) => d.attempts)
      .filter((a: any) => Date.parse(a.attempted_at) > disabledAt && Date.parse(a.attempted_at) < enabledAt);
    expect(attemptsWhileOff).toEqual([]);
    expect(await settledAttempts(sql, tenant.id, hook.id)).toBe(rx.at('/down').length);
  });
});

describe('webhook URL safety [embedded, private addresses not allowed]', () => {
  let app: TestApp;
  let stopApp: () => Promise<void>;
  const rx = new Receiver();

  beforeAll(async () => {
    await rx.start();
    ({ app, stop: stopApp } = await startApp('embedded', { LUDUS_WEBHOOK_POLL_MS: '50' }, 'api,processors'));
  });
  afterAll(async () => {
    await stopApp?.();
    await rx.stop();
  });

  it('refuses loopback, private, link-local and obfuscated addresses at registration with a clear 400', async () => {
    const { admin } = await tenantOf(app);
    const cases: Array<[string, RegExp]> = [
      ['http://127.0.0.1:8080/hook', /127\.0\.0\.1 is a loopback address/],
      ['http://localhost/hook', /loopback name/],
      ['http://[::1]/hook', /loopback/],
      ['http://[::ffff:127.0.0.1]/', /loopback/],
      ['http://10.1.2.3/', /private/],
      ['http://172.20.0.1/', /private/],
      ['http://192.168.0.10/', /private/],
      ['http://169.254.169.254/latest/meta-data/', /link-local/],
      ['http://0.0.0.0/', /this network/],
      ['http://[fe80::1]/', /link-local/],
      ['http://2130706433/', /127\.0\.0\.1 is a loopback/],
      ['http://0x7f000001/', /127\.0\.0\.1 is a loopback/],
      ['http://evil@127.0.0.1/', /credentials/],
      ['gopher://example.com/', /http or https/],
    ];
    for (const [url, reason] of cases) {
      const r = await admin('POST', '/v1/webhooks', { url, event_types: ['*'] });
      expect([url, r.status, r.body.error?.code]).toEqual([url, 400, 'VALIDATION_ERROR']);
      expect(r.body.error.message).toMatch(reason);
      expect(r.body.error.message).toMatch(/^body\.url: /);
    }
    expect(
      (await admin('POST', '/v1/webhooks', { url: 'http://10.0.0.1/', event_types: ['*'] })).body.error
        .message,
    ).toMatch(/LUDUS_WEBHOOK_ALLOW_PRIVATE=true/);
    // A public name is accepted (whether or not it resolves here); a PUT is checked the same way.
    const ok = await admin('POST', '/v1/webhooks', {
      url: 'https://hooks.example.com/ludus',
      event_types: ['*'],
    });
    expect(ok.status).toBe(201);
    const put = await admin('PUT', `/v1/webhooks/${ok.body.id}`, { url: 'http://127.0.0.1/' });
    expect(put.status).toBe(400);
    expect(put.body.error.message).toMatch(/loopback/);
  });

  it('checks the addresses again when connecting: a name that resolves to loopback is refused', async () => {
    const target = rx.on('/rebind', () => 200);
    const port = new URL(target).port;
    const rebinding = new WebhookSender({
      allowPrivate: false,
      timeoutMs: 1000,
      userAgent: 'test',
      resolve: async () => [{ address: '127.0.0.1', family: 4 }],
    });
    const r = await rebinding.send(`http://public.example:${port}/rebind`, {}, '{}');
    expect(r).toMatchObject({ ok: false, statusCode: null });
    expect(r.error).toMatch(/^refused: public\.example resolves to 127\.0\.0\.1 is a loopback address/);
    // The real resolver: localhost resolves to loopback and is refused too.
    const real = new WebhookSender({ allowPrivate: false, timeoutMs: 1000, userAgent: 'test' });
    const r2 = await real.send(`http://localhost:${port}/rebind`, {}, '{}');
    expect(r2.error).toMatch(/^refused: /);
    const r3 = await real.send(`http://127.0.0.1:${port}/rebind`, {}, '{}');
    expect(r3.error).toMatch(/^refused: url host 127\.0\.0\.1 is a loopback address/);
    expect(rx.at('/rebind')).toHaveLength(0);
    // With private addresses allowed, the same resolver's answer is used for the connection.
    const allowed = new WebhookSender({
      allowPrivate: true,
      timeoutMs: 1000,
      userAgent: 'test',
      resolve: async () => [{ address: '127.0.0.1', family: 4 }],
    });
    const r4 = await allowed.send(`http://public.example:${port}/rebind`, {}, '{}');
    expect(r4).toMatchObject({ ok: true, statusCode: 200 });
    expect(rx.at('/rebind')).toHaveLength(1);
    expect(rx.at('/rebind')[0]!.headers.host).toBe(`public.example:${port}`);
  });

  it('does not follow redirects and reads only the start of a large answer', async () => {
    const sender = new WebhookSender({ allowPrivate: true, timeoutMs: 1000, userAgent: 'test' });
    const redirect = createServer((req, res) => {
      if (req.url === '/big') {
        res.writeHead(200);
        res.end('x'.repeat(1_000_000));
        return;
      }
      res.writeHead(302, { location: `${rx.base}/redirected` });
      res.end();
    });
    await new Promise<void>((r) => redirect.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(redirect.address() as AddressInfo).port}`;
    try {
      const r = await sender.send(`${base}/go`, {}, '{}');
      expect(r).toMatchObject({ ok: false, statusCode: 302 });
      expect(rx.at('/redirected')).toHaveLength(0);
      const big = await sender.send(`${base}/big`, {}, '{}');
      expect(big).toMatchObject({ ok: true, statusCode: 200 });
      expect(big.responseBody!.length).toBe(4096);
    } finally {
      redirect.closeAllConnections();
      await new Promise<void>((r) => redirect.close(() => r()));
    }
  });
});

const crashShapes = SHAPES.includes('distributed') ? ['distributed'] : [];
describe.each(crashShapes)('webhook dispatcher crash [%s]', () => {
  it('delivers every event at least once when the dispatcher is killed mid-delivery and restarted', async () => {
    const rx = new Receiver();
    await rx.start();
    const env = shapeEnv('distributed'); // one schema, topic and key prefix for the app and its dispatchers
    const dataDir = mkdtempSync(join(tmpdir(), 'ludus-dispatch-'));
    const common = {
      ...env,
      LUDUS_WEBHOOK_ALLOW_PRIVATE: 'true',
      LUDUS_WEBHOOK_RETRY_SCHEDULE: '0.5,0.5,0.5,0.5',
      LUDUS_WEBHOOK_TIMEOUT_MS: '1000',
      LUDUS_WEBHOOK_POLL_MS: '50',
    };
    const app = await startTestApp('distributed', { roles: 'api', env: common });
    const children: Spawned[] = [];
    const spawnDispatcher = () => {
      const p = spawnCli(
        ['serve', '--roles', 'dispatcher,scheduler'],
        childEnv({ ...common, LUDUS_DATA_DIR: dataDir }),
      );
      children.push(p);
      return p;
    };
    try {
      const { tenant, admin } = await tenantOf(app);
      const ENDPOINTS = 3;
      const EVENTS = 20;
      const hooks: string[] = [];
      for (let e = 0; e < ENDPOINTS; e++) {
        const r = await admin('POST', '/v1/webhooks', {
          url: rx.on(`/slow/${e}`, () => 200),
          event_types: ['*'],
        });
        hooks.push(r.body.id);
      }
      for (let i = 1; i <= EVENTS; i++) {
        await emit(
          app.ctx.adapters.sql,
          tenant.id,
          'currency.earned',
          currencyEarned(tenant.id, i),
          `crash-${i}`,
        );
      }

      const first = spawnDispatcher();
      await first.waitForLog((l) => l.msg === 'ludus is up');
      await waitFor(() => rx.received.length >= 20 && rx.inFlight > 0, {
        what: 'deliveries in flight',
        intervalMs: 5,
        timeoutMs: 30000,
      });
      first.child.kill('SIGKILL');
      await first.exited;
      const atKill = rx.received.length;
      expect(atKill).toBeLessThan(ENDPOINTS * EVENTS);

      // Two instances now: the killed one's leases expire, they share the rest without double work.
      const second = spawnDispatcher();
      const third = spawnDispatcher();
      await Promise.all([second, third].map((p) => p.waitForLog((l) => l.msg === 'ludus is up')));
      const sql = app.ctx.adapters.sql;
      await waitFor(
        async () => {
          const r = await sql.query<{ n: number }>(
            "SELECT count(*)::int AS n FROM webhook_deliveries WHERE tenant_id = $1 AND status = 'succeeded'",
            [tenant.id],
          );
          return Number(r.rows[0]!.n) === ENDPOINTS * EVENTS;
        },
        {
          what: 'every delivery to succeed',
          timeoutMs: 60000,
          describe: () => `received ${rx.received.length}`,
        },
      );

      // Every (endpoint, event) arrived at least once; duplicates only of what was in flight at the kill.
      for (let e = 0; e < ENDPOINTS; e++) {
        const got = rx.at(`/slow/${e}`).map((r) => JSON.parse(r.body).data.transaction_id as string);
        expect(new Set(got)).toEqual(new Set(Array.from({ length: EVENTS }, (_, i) => `tx-${i + 1}`)));
      }
      const ids = rx.received.map((r) => r.headers['webhook-id']);
      const duplicates = ids.length - new Set(ids).size;
      // Duplicates only of what was in flight at the kill: at most one per endpoint.
      expect(duplicates).toBeLessThanOrEqual(ENDPOINTS);
      const rows = await sql.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM webhook_deliveries WHERE tenant_id = $1',
        [tenant.id],
      );
      expect(Number(rows.rows[0]!.n)).toBe(ENDPOINTS * EVENTS);
      expect(new Set(ids).size).toBe(ENDPOINTS * EVENTS);
    } finally {
      for (const c of children)
        if (c.child.exitCode === null && c.child.signalCode === null) c.child.kill('SIGTERM');
      await Promise.all(children.map((c) => c.exited));
      await app.stop();
      rmSync(dataDir, { recursive: true, force: true });
      await rx.stop();
    }
  });
});
