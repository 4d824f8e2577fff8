/**
 * The operations listener (runtime/ops.ts): a process that runs only background roles serves
 * /health, /ready (the stores its roles use) and /metrics (consumer lag and outcomes, dead
 * letters, the webhook queue read from the store) on LUDUS_OPS_PORT.
 */
import { randomUUID } from 'node:crypto';
import { loadConfig } from '../../runtime/config';
import { PIPELINE_GROUP } from '../../processors/pipeline/pipeline';
import { EVENTS_TOPIC, type EventRecord } from '../../schemas/topics';
import { call, SHAPES, startTestApp, type TestApp } from '../support/app';
import { stack, uniqueName } from '../support/stack';
import { waitFor } from '../support/wait';

describe('LUDUS_OPS_PORT', () => {
  const cfg = (env: Record<string, string>) => loadConfig({ LUDUS_DATA_DIR: '/tmp/x', ...env }).opsPort;
  it('opens 8083 by default only in a process without a gateway; a number opens it anywhere; off closes it', () => {
    expect(
      cfg({
        LUDUS_ROLES: 'processors,scheduler,dispatcher,analytics',
        LUDUS_RANKS: 'redis',
        LUDUS_REDIS_URL: 'redis://x:1',
      }),
    ).toBe(8083);
    expect(cfg({})).toBeNull();
    expect(cfg({ LUDUS_ROLES: 'ingest' })).toBeNull();
    expect(cfg({ LUDUS_OPS_PORT: '9100' })).toBe(9100);
    expect(cfg({ LUDUS_ROLES: 'dispatcher', LUDUS_OPS_PORT: 'off' })).toBeNull();
    expect(() => cfg({ LUDUS_OPS_PORT: '70000' })).toThrow(/^LUDUS_OPS_PORT: /);
  });
});

describe.each(SHAPES)('operations listener of a background-only process [%s]', (shape) => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp(shape, {
      roles: 'processors,scheduler,dispatcher',
      // The memory rank index is fed only where the api runs (runtime/config.ts): a processors-only
      // process of the embedded shape keeps its ranks in Redis.
      env:
        shape === 'embedded'
          ? {
              LUDUS_RANKS: 'redis',
              LUDUS_REDIS_URL: stack.redisUrl,
              LUDUS_REDIS_PREFIX: `${uniqueName('ops')}:`,
            }
          : {},
    });
  });
  afterAll(() => app.stop());

  const metrics = async () => {
    const r = await fetch(`${app.url.ops}/metrics`);
    expect(r.status).toBe(200);
    return r.text();
  };

  it('opens no gateway, and answers /health and /ready with the stores its roles use', async () => {
    expect(Object.keys(app.url)).toEqual(['ops']);
    const health = await call('GET', `${app.url.ops}/health`);
    expect(health).toMatchObject({ status: 200, body: { status: 'healthy', gateway: 'ops' } });
    const ready = await call('GET', `${app.url.ops}/ready`);
    expect(ready.status).toBe(200);
    expect(ready.body).toEqual({
      status: 'ready',
      database: 'ok',
      message_queue: 'ok',
      rank_index: 'ok',
      analytics: 'ok',
    });
    expect(ready.headers.get('x-request-id')).toBeTruthy();
    expect((await call('GET', `${app.url.ops}/v1/leaderboards`)).status).toBe(404);
  });

  it('exports consumer lag and outcomes, dead letters and the webhook queue', async () => {
    const { ctx } = app;
    const tenant = (await ctx.services.tenants.createTenant({ name: uniqueName('ops') })).tenant;
    const record = (eventId: string, user: string): EventRecord => ({
      tenant_id: tenant.id,
      event_id: eventId,
      type: 'ops_probe',
      user_id: user,
      occurred_at: ctx.clock.now(),
      received_at: ctx.clock.now(),
      attrs_json: '{}',
      actor_metadata_json: null,
      subject_json: null,
    });
    // One record the store refuses (NUL in the event id: a dead letter) and one it handles (a
    // skip: the tenant has no board or rule for the type).
    await ctx.adapters.eventLog.append(EVENTS_TOPIC, [
      { key: `${tenant.id}:bad`, value: record('bad\u0000id', 'bad') },
      { key: `${tenant.id}:good`, value: record('good-1', 'good') },
    ]);
    // The webhook queue: one pending delivery (next attempt tomorrow) and one dead, on an endpoint
    // turned off so the dispatcher leaves them as they are.
    const { webhook } = await ctx.services.webhooks.create(tenant.id, {
      url: 'https://example.invalid/hook',
      event_types: ['*'],
      active: false,
    });
    const now = ctx.clock.now();
    for (const [status, next] of [
      ['pending', now + 86400000],
      ['dead', null],
    ] as const) {
      await ctx.adapters.sql.query(
        `INSERT INTO webhook_deliveries (id, tenant_id, webhook_id, event_type, body, status, next_attempt_at, created_at, updated_at)
         VALUES ($1, $2, $3, 'probe', '{}', $4, $5, $6, $6)`,
        [randomUUID(), tenant.id, webhook.id, status, next, now],
      );
    }

    const group = PIPELINE_GROUP.replace('.', '\\.');
    const text = await waitFor(
      async () => {
        const m = await metrics();
        const lagSeen = new RegExp(`ludus_consumer_lag_records\\{group="${group}",[^}]*\\} 0`).test(m);
        return lagSeen && /ludus_dead_letters_stored\{group="ludus\.pipeline"\} 1/.test(m) ? m : null;
      },
      { what: 'lag, outcomes and the stored dead letter on /metrics', timeoutMs: 30000 },
    );
    expect(text).toMatch(
      new RegExp(`ludus_consumer_records_total\\{group="${group}",[^}]*outcome="(ok|skip)"\\} 1`),
    );
    expect(text).toMatch(
      new RegExp(`ludus_consumer_records_total\\{group="${group}",[^}]*outcome="dead_letter"\\} 1`),
    );
    expect(text).toMatch(
      new RegExp(`ludus_dead_letters_total\\{group="${group}",reason_class="sql_22021"\\} 1`),
    );
    expect(text).toMatch(/ludus_webhook_deliveries\{status="pending"\} 1\n/);
    expect(text).toMatch(/ludus_webhook_deliveries\{status="dead"\} 1\n/);
    // The gauge is the store's: a replayed dead delivery leaves the dead count.
    await ctx.adapters.sql.query(
      `UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = $2 WHERE webhook_id = $1 AND status = 'dead'`,
      [webhook.id, now + 86400000],
    );
    // A scrape waits for the store at most 20 ms; a slower read shows from the next scrape on.
    const after = await waitFor(
      async () => {
        const m = await metrics();
        return /ludus_webhook_deliveries\{status="pending"\} 2\n/.test(m) ? m : null;
      },
      { what: 'the replayed delivery counted as pending on /metrics', timeoutMs: 10000 },
    );
    expect(after).toMatch(/ludus_webhook_deliveries\{status="dead"\} 0\n/);
    // The process still serves.
    expect((await call('GET', `${app.url.ops}/ready`)).status).toBe(200);
  });
});
