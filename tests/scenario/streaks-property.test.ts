/**
 * Property: over random sequences of events (late ones, duplicates and retries of the same
 * event_id included), clock moves and freeze grants, the pipeline and the deadline sweep end in the
 * reference model's state (tests/support/streaks-reference.ts): every user's current and longest
 * count and freezes, every milestone once per run (or once ever) with its wallet credit, and every
 * break, freeze used and at-risk notice exactly once in the outbox. Each clock move runs two sweeps
 * at once (two schedulers). Both shapes; a calendar (fixed-offset zone with a 05:30 reset) or a
 * rolling window per run.
 */
import fc from 'fast-check';
import { ManualClock } from '../../core/clock';
import { sweepDue } from '../../core/streaks/sweep';
import {
  call,
  SHAPES,
  startTestApp,
  tenantWithCredentials,
  keepWebhookEvents,
  type TestApp,
} from '../support/app';
import { referenceStreaks, type RefConfig, type RefOp } from '../support/streaks-reference';
import { waitFor } from '../support/wait';

const HOUR = 3_600_000;
const T0 = Date.parse('2026-11-02T00:00:00Z');
const USERS = ['ann', 'bob'];

type GenOp =
  | { kind: 'event'; user: number; back: number; dup: number | null }
  | { kind: 'clock'; hours: number }
  | { kind: 'freeze'; user: number; count: number; repeat: boolean }
  | { kind: 'pause' }
  | { kind: 'min'; value: number };

const opArb: fc.Arbitrary<GenOp> = fc.oneof(
  {
    weight: 10,
    arbitrary: fc.record({
      kind: fc.constant('event' as const),
      user: fc.integer({ min: 0, max: 1 }),
      // Mostly recent, sometimes a day or more late.
      back: fc.oneof(
        { weight: 5, arbitrary: fc.integer({ min: 0, max: 4 }) },
        { weight: 1, arbitrary: fc.integer({ min: 5, max: 30 }) },
      ),
      dup: fc.option(fc.nat(), { nil: null, freq: 6 }),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({ kind: fc.constant('clock' as const), hours: fc.integer({ min: 2, max: 26 }) }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('freeze' as const),
      user: fc.integer({ min: 0, max: 1 }),
      count: fc.integer({ min: 1, max: 2 }),
      repeat: fc.boolean(),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('pause' as const) }) },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('min' as const), value: fc.integer({ min: 1, max: 2 }) }),
  },
);

describe.each(SHAPES)('streaks against the reference model [%s]', (shape) => {
  let app: TestApp;
  let clock: ManualClock;
  let run = 0;

  beforeAll(async () => {
    clock = new ManualClock(T0);
    // No scheduler role: the test runs the sweeps itself, two at a time, at each clock move.
    app = await startTestApp(shape, {
      clock,
      roles: 'ingest,api,processors',
      env: { LUDUS_RATE_LIMIT_ADMIN: 'off' },
    });
  });
  afterAll(() => app.stop());

  it('the pipeline and the sweep end in the model state', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.boolean(),
        fc.integer({ min: 1, max: 2 }),
        fc.array(opArb, { minLength: 30, maxLength: 80 }),
        async (rolling, min, gen) => {
          run += 1;
          clock.set(T0);
          const { tenant, key, token } = await tenantWithCredentials(app);
          await keepWebhookEvents(app, tenant.id);
          const admin = (method: string, path: string, body?: unknown) =>
            call(method, `${app.url.admin}${path}?tenant_id=${tenant.id}`, {
              headers: { 'x-api-key': key },
              body,
            });
          expect(
            (
              await admin('POST', '/v1/wallet/currencies', {
                id: 'coins',
                name: 'c',
                is_spendable: true,
                decimal_places: 0,
              })
            ).status,
          ).toBe(201);
          const item = (
            await admin('POST', '/v1/reward-items', {
              name: 'c',
              reward_type: 'currency',
              payload: { currency_id: 'coins', amount: 1 },
            })
          ).body.item_id as string;
          const cfg: RefConfig = {
            window: rolling
              ? { type: 'rolling', durationMs: 20 * HOUR }
              : { type: 'calendar', offsetMs: 2.5 * HOUR },
            min,
            milestones: [
              { threshold: 2, repeatable: false },
              { threshold: 3, repeatable: true },
            ],
            atRiskMs: 6 * HOUR,
            maxFreezes: 2,
          };
          const configOf = (m: number) => ({
            event_types: ['play'],
            window: rolling
              ? { type: 'rolling', duration_seconds: 20 * 3600 }
              : { type: 'calendar', period: 'daily', timezone: 'Etc/GMT-3', reset_time: '05:30' },
            condition: { type: 'count', min: m },
            milestones: cfg.milestones.map((m) => ({ ...m, reward_item_id: item })),
            at_risk_seconds: 6 * 3600,
            max_freezes: 2,
          });
          const created = await admin('POST', '/v1/streaks', { name: `prop ${run}`, config: configOf(min) });
          expect(created.status).toBe(201);
          const id = created.body.id as string;

          const ops: RefOp[] = [];
          const sent: Array<Extract<RefOp, { kind: 'event' }>> = [];
          let n = 0;
          let paused = false;
          let pending: Array<Extract<RefOp, { kind: 'event' }>> = [];
          const flush = async () => {
            if (pending.length === 0) return;
            const batch = pending;
            pending = [];
            const r = await call('POST', `${app.url.ingest}/v1/events/bulk`, {
              headers: { authorization: `Bearer ${token}` },
              body: {
                events: batch.map((e) => ({
                  event_id: e.id,
                  type: 'play',
                  actor: { user_id: e.user },
                  occurred_at: new Date(e.at).toISOString(),
                  attrs: {},
                })),
              },
            });
            expect([r.status, r.body.failed]).toEqual([202, 0]);
            const ids = [...new Set(batch.map((e) => e.id))];
            await waitFor(
              async () =>
                (
                  await app.ctx.adapters.sql.query<{ n: number }>(
                    'SELECT count(*)::int AS n FROM processed_events WHERE tenant_id = $1 AND event_id = ANY($2::text[])',
                    [tenant.id, ids],
                  )
                ).rows[0]!.n === ids.length,
              { what: 'events processed' },
            );
          };
          for (const g of gen) {
            if (g.kind === 'event') {
              const e =
                g.dup !== null && sent.length > 0
                  ? sent[g.dup % sent.length]!
                  : {
                      kind: 'event' as const,
                      user: USERS[g.user]!,
                      id: `${tenant.id}-${++n}`,
                      at: clock.now() - g.back * HOUR,
                      amount: 1,
                    };
              sent.push(e);
              ops.push(e);
              pending.push(e);
            } else if (g.kind === 'pause') {
              await flush();
              paused = !paused;
              const r = await call('PUT', `${app.url.admin}/v1/streaks/${id}/status?tenant_id=${tenant.id}`, {
                headers: { 'x-api-key': key },
                body: { status: paused ? 'paused' : 'active' },
              });
              expect(r.status).toBe(200);
              ops.push(paused ? { kind: 'pause', at: clock.now() } : { kind: 'resume', at: clock.now() });
            } else if (g.kind === 'min') {
              await flush();
              const r = await call('PUT', `${app.url.admin}/v1/streaks/${id}?tenant_id=${tenant.id}`, {
                headers: { 'x-api-key': key },
                body: { config: configOf(g.value) },
              });
              expect(r.status).toBe(200);
              ops.push({ kind: 'min', value: g.value });
            } else if (g.kind === 'clock') {
              await flush();
              clock.advance(g.hours * HOUR);
              ops.push({ kind: 'clock', to: clock.now() });
              await Promise.all([
                sweepDue(app.ctx.adapters.sql, app.ctx.services, clock.now(), { batch: 2 }),
                sweepDue(app.ctx.adapters.sql, app.ctx.services, clock.now(), { batch: 3 }),
              ]);
              await sweepDue(app.ctx.adapters.sql, app.ctx.services, clock.now());
            } else {
              await flush();
              const k = `${tenant.id}-f${g.repeat ? 0 : ++n}-${g.user}-${g.count}`;
              const r = await admin('POST', `/v1/streaks/${id}/freezes`, {
                user_id: USERS[g.user],
                count: g.count,
                idempotency_key: k,
              });
              expect(r.status).toBe(200);
              ops.push({ kind: 'freeze', user: USERS[g.user]!, key: k, count: g.count });
            }
          }
          await flush();

          const model = referenceStreaks(cfg, ops);
          const sql = app.ctx.adapters.sql;
          const rows = await sql.query<{
            user_id: string;
            current_count: number;
            longest_count: number;
            freezes: number;
          }>(
            'SELECT user_id, current_count, longest_count, freezes FROM streak_progress WHERE tenant_id = $1 AND streak_id = $2 ORDER BY user_id',
            [tenant.id, id],
          );
          const got = Object.fromEntries(
            rows.rows.map((r) => [r.user_id, [r.current_count, r.longest_count, r.freezes]]),
          );
          const want = Object.fromEntries([...model].map(([u, m]) => [u, [m.count, m.longest, m.freezes]]));
          expect(got).toEqual(want);
          const ms = await sql.query<{ user_id: string; threshold: number; run: number }>(
            'SELECT user_id, threshold, run FROM streak_milestones WHERE tenant_id = $1 ORDER BY user_id, threshold, run',
            [tenant.id],
          );
          expect(ms.rows.map((r) => `${r.user_id}:${r.threshold}:${r.run}`)).toEqual(
            [...model].flatMap(([u, m]) => m.milestones.map((x) => `${u}:${x.threshold}:${x.run}`)).sort(),
          );
          const outbox = await sql.query<{ user_id: string; event_type: string; n: number }>(
            `SELECT payload->>'user_id' AS user_id, event_type, count(*)::int AS n FROM outbox
           WHERE tenant_id = $1 AND event_type LIKE 'streak.%' GROUP BY 1, 2`,
            [tenant.id],
          );
          const count = (u: string, t: string) =>
            outbox.rows.find((r) => r.user_id === u && r.event_type === t)?.n ?? 0;
          const bal = await sql.query<{ user_id: string; available: number }>(
            "SELECT user_id, available FROM balances WHERE tenant_id = $1 AND currency_id = 'coins'",
            [tenant.id],
          );
          for (const [u, m] of model) {
            expect([
              u,
              count(u, 'streak.broken'),
              count(u, 'streak.freeze_used'),
              count(u, 'streak.at_risk'),
              count(u, 'streak.milestone_reached'),
            ]).toEqual([u, m.broken, m.frozen, m.atRisk, m.milestones.length]);
            expect([u, Number(bal.rows.find((r) => r.user_id === u)?.available ?? 0)]).toEqual([
              u,
              m.milestones.length,
            ]);
          }
        },
      ),
      { numRuns: shape === 'embedded' ? 15 : 5, endOnFailure: true },
    );
  }, 600_000);
});
