/**
 * Fault test (distributed shape): the scheduler is killed with SIGKILL in the middle of a batch of
 * streak breaks (its sweep transaction open in Postgres), then restarted, while a second scheduler
 * process runs beside the restarted one. Afterwards every streak equals the reference model's, and
 * every break, freeze used and webhook happened exactly once.
 *
 * Layout as tests/fault/payout.fault.test.ts: ingest, api and processors in this process; the
 * scheduler as child processes of the real command line (system clock), so that it can be
 * SIGKILLed. The users' streaks are built from events two and three days old, so that their
 * deadlines have passed when the scheduler starts.
 */
import { childEnv, spawnCli, type Spawned } from '../support/process';
import {
  call,
  createKey,
  createTenant,
  keepWebhookEvents,
  shapeEnv,
  startTestApp,
  tenantToken,
  type TestApp,
} from '../support/app';
import { stack } from '../support/stack';
import { referenceStreaks, type RefConfig, type RefOp } from '../support/streaks-reference';
import { killAndWaitGone, progressMarker, sessionCount } from '../support/sessions';
import { waitFor } from '../support/wait';

const USERS = 6000;
const FROZEN = 300;
const DAY = 86_400_000;
const APP_NAME = `ludus-streak-fault-${process.pid}`;

describe('streak breaks survive a scheduler killed mid-batch [distributed]', () => {
  let app: TestApp;
  let env: Record<string, string>;
  const children: Spawned[] = [];

  beforeAll(async () => {
    env = {
      ...shapeEnv('distributed'),
      LUDUS_RATE_LIMIT_INGEST: 'off',
      LUDUS_RATE_LIMIT_ADMIN: 'off',
      LUDUS_RATE_LIMIT_QUERY: 'off',
    };
    app = await startTestApp('distributed', { roles: 'ingest,api,processors', env });
  });
  afterAll(async () => {
    for (const c of children) if (c.child.exitCode === null) c.child.kill('SIGKILL');
    await app.stop();
  });

  const scheduler = (name = APP_NAME) => {
    const p = spawnCli(
      ['serve', '--roles', 'scheduler'],
      childEnv({
        ...env,
        LUDUS_DATABASE_URL: `${stack.pgUrl}?application_name=${name}`,
        LUDUS_SCHEDULER_INTERVAL_MS: '100',
      }),
    );
    children.push(p);
    return p;
  };

  it('breaks and freezes every due streak exactly once', async () => {
    const mark = progressMarker('streak fault');
    const sql = app.ctx.adapters.sql;
    const t = await createTenant(app);
    const key = (await createKey(app, [t.id])).key;
    const admin = (method: string, path: string, body: unknown) =>
      call(method, `${app.url.admin}${path}?tenant_id=${t.id}`, { headers: { 'x-api-key': key }, body });
    const def = await admin('POST', '/v1/streaks', {
      name: 'daily',
      config: {
        event_types: ['play'],
        window: { type: 'calendar', period: 'daily', timezone: 'UTC', reset_time: '00:00' },
        condition: { type: 'count', min: 1 },
        max_freezes: 3,
      },
    });
    expect(def.status).toBe(201);
    const id = def.body.id as string;
    const token = await tenantToken(t);
    const now = Date.now();
    const day = (n: number) => Math.floor(now / DAY) * DAY - n * DAY + 12 * 3_600_000;
    const ops: RefOp[] = [];
    const user = (i: number) => `u${String(i).padStart(5, '0')}`;
    for (const d of [3, 2]) {
      for (let i = 0; i < USERS; i += 100) {
        const events = Array.from({ length: 100 }, (_, j) => ({
          event_id: `e${d}-${i + j}`,
          type: 'play',
          actor: { user_id: user(i + j) },
          occurred_at: new Date(day(d)).toISOString(),
          attrs: {},
        }));
        for (const e of events)
          ops.push({ kind: 'event', user: e.actor.user_id, id: e.event_id, at: day(d), amount: 1 });
        const r = await call('POST', `${app.url.ingest}/v1/events/bulk`, {
          headers: { authorization: `Bearer ${token}` },
          body: { events },
        });
        expect(r.body.accepted).toBe(100);
      }
    }
    await waitFor(
      async () =>
        (
          await sql.query<{ n: number }>(
            'SELECT count(*)::int AS n FROM streak_progress WHERE tenant_id = $1 AND current_count = 2',
            [t.id],
          )
        ).rows[0]!.n === USERS,
      { what: `${USERS} streaks of 2`, timeoutMs: 120_000 },
    );
    for (let i = 0; i < FROZEN; i++) {
      const r = await admin('POST', `/v1/streaks/${id}/freezes`, {
        user_id: user(i),
        count: 1,
        idempotency_key: `f${i}`,
      });
      expect(r.status).toBe(200);
      ops.push({ kind: 'freeze', user: user(i), key: `f${i}`, count: 1 });
    }
    mark('streaks built, all due');

    const left = async () =>
      (
        await sql.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM streak_progress WHERE tenant_id = $1 AND due_at <= $2',
          [t.id, Date.now()],
        )
      ).rows[0]!.n;

    // 1. Kill the scheduler while a sweep transaction is open.
    const first = scheduler();
    await waitFor(
      async () =>
        // A later batch: some batches committed before the kill. The open transaction is looked
        // for from 5 ms on: with 50 ms, a fast machine's sweep once ended unseen (CI timed out).
        (await sessionCount(sql, APP_NAME, { openLongerThanMs: 5, queryLike: '%streak%' })) > 0 &&
        (await left()) < USERS,
      { what: 'a sweep transaction in progress after a committed batch', timeoutMs: 60_000, intervalMs: 10 },
    );
    await killAndWaitGone(sql, first, APP_NAME);
    const remaining = await left();
    mark(`killed mid-sweep; ${remaining} of ${USERS} streaks still due`);
    expect(remaining).toBeGreaterThan(0);
    expect(remaining).toBeLessThan(USERS);

    // 2. Restart, with a second scheduler process beside it (the lease keeps one active; both sweep safely).
    const second = scheduler();
    const third = scheduler(`${APP_NAME}-b`);
    await waitFor(async () => (await left()) === 0, { what: 'every due streak swept', timeoutMs: 120_000 });
    mark('swept after the restart');
    second.child.kill('SIGTERM');
    third.child.kill('SIGTERM');
    await Promise.all([second.exited, third.exited]);

    const cfg: RefConfig = {
      window: { type: 'calendar', offsetMs: 0 },
      min: 1,
      milestones: [],
      atRiskMs: 0,
      maxFreezes: 3,
    };
    ops.push({ kind: 'clock', to: Date.now() });
    const model = referenceStreaks(cfg, ops);
    const rows = await sql.query<{
      user_id: string;
      current_count: number;
      longest_count: number;
      freezes: number;
    }>('SELECT user_id, current_count, longest_count, freezes FROM streak_progress WHERE tenant_id = $1', [
      t.id,
    ]);
    expect(rows.rows).toHaveLength(USERS);
    const wrong = rows.rows.filter((r) => {
      const m = model.get(r.user_id)!;
      return r.current_count !== m.count || r.longest_count !== m.longest || r.freezes !== m.freezes;
    });
    expect(wrong.slice(0, 5)).toEqual([]);
    const hooks = await sql.query<{ event_type: string; users: number; n: number }>(
      `SELECT event_type, count(DISTINCT payload->>'user_id')::int AS users, count(*)::int AS n FROM outbox
       WHERE tenant_id = $1 AND event_type LIKE 'streak.%' GROUP BY event_type ORDER BY event_type`,
      [t.id],
    );
    const broken = [...model.values()].reduce((a, m) => a + m.broken, 0);
    const frozen = [...model.values()].reduce((a, m) => a + m.frozen, 0);
    expect(broken).toBe(USERS - FROZEN);
    expect(frozen).toBe(FROZEN);
    expect(hooks.rows).toEqual([
      { event_type: 'streak.broken', users: broken, n: broken },
      { event_type: 'streak.freeze_used', users: frozen, n: frozen },
    ]);
    const history = await sql.query<{ outcome: string; n: number }>(
      `SELECT outcome, count(*)::int AS n FROM streak_periods WHERE tenant_id = $1 AND outcome <> 'qualified' GROUP BY outcome ORDER BY outcome`,
      [t.id],
    );
    expect(history.rows).toEqual([
      { outcome: 'broken', n: broken },
      { outcome: 'frozen', n: frozen },
    ]);
  }, 300_000);
});

/**
 * The processors killed mid-batch (distributed): streak events for many users over six past days
 * (some days skipped, so that streaks break in the pipeline; some requests sent twice) stream in
 * while the processors run as a child process; it is SIGKILLed while a batch transaction has
 * written, and restarted. Afterwards every streak equals the reference model, every milestone was
 * paid once (its wallet credit and webhook), and every break has one webhook.
 */
describe('streaks survive processors killed mid-batch [distributed]', () => {
  const PUSERS = 400;
  const PNAME = `ludus-streak-proc-${process.pid}`;
  let app: TestApp;
  let env: Record<string, string>;
  const children: Spawned[] = [];

  beforeAll(async () => {
    env = {
      ...shapeEnv('distributed'),
      LUDUS_RATE_LIMITER: 'memory',
      LUDUS_RATE_LIMIT_INGEST: 'off',
      LUDUS_RATE_LIMIT_ADMIN: 'off',
      LUDUS_RATE_LIMIT_QUERY: 'off',
    };
    app = await startTestApp('distributed', { roles: 'ingest,api', env });
  }, 60_000);
  afterAll(async () => {
    for (const c of children) if (c.child.exitCode === null) c.child.kill('SIGKILL');
    await Promise.all(children.map((c) => c.exited));
    await app.stop();
  });

  const processors = async () => {
    const p = spawnCli(
      ['serve', '--roles', 'processors'],
      childEnv({
        ...env,
        LUDUS_DATABASE_URL: `${stack.pgUrl}?application_name=${PNAME}`,
        LUDUS_LOG_LEVEL: 'info',
      }),
    );
    children.push(p);
    await p.waitForLog((l) => l.msg === 'ludus is up', 60_000);
    return p;
  };

  it('pays every milestone and records every break exactly once', async () => {
    const sql = app.ctx.adapters.sql;
    const t = await createTenant(app);
    await keepWebhookEvents(app, t.id);
    const key = (await createKey(app, [t.id])).key;
    const admin = (method: string, path: string, body: unknown) =>
      call(method, `${app.url.admin}${path}?tenant_id=${t.id}`, { headers: { 'x-api-key': key }, body });
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
        name: '1 coin',
        reward_type: 'currency',
        payload: { currency_id: 'coins', amount: 1 },
      })
    ).body.item_id as string;
    const def = await admin('POST', '/v1/streaks', {
      name: 'daily',
      config: {
        event_types: ['play'],
        window: { type: 'calendar', period: 'daily', timezone: 'UTC', reset_time: '00:00' },
        condition: { type: 'count', min: 1 },
        milestones: [
          { threshold: 2, reward_item_id: item, repeatable: false },
          { threshold: 3, reward_item_id: item, repeatable: true },
        ],
      },
    });
    expect(def.status).toBe(201);
    const token = await tenantToken(t);
    const now = Date.now();
    const day = (n: number) => Math.floor(now / DAY) * DAY - n * DAY + 6 * 3_600_000;
    const ops: RefOp[] = [];
    const requests: unknown[][] = [];
    let seed = 7;
    const rand = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    for (let d = 8; d >= 1; d--) {
      const events: Array<Record<string, unknown>> = [];
      for (let i = 0; i < PUSERS; i++) {
        if (rand() < 0.2) continue; // a skipped day: the streak breaks at the next event
        const e = {
          event_id: `p${d}-${i}`,
          type: 'play',
          actor: { user_id: `u${i}` },
          occurred_at: new Date(day(d) + i * 1000).toISOString(),
          attrs: {},
        };
        events.push(e);
        ops.push({ kind: 'event', user: `u${i}`, id: e.event_id, at: day(d) + i * 1000, amount: 1 });
      }
      for (let i = 0; i < events.length; i += 50) requests.push(events.slice(i, i + 50));
    }
    const unique = ops.length;
    let sent = 0;
    const send = async () => {
      for (const [n, events] of requests.entries()) {
        for (let k = 0; k < (n % 7 === 3 ? 2 : 1); k++) {
          // Some requests twice: a client retrying an accepted request.
          const r = await call('POST', `${app.url.ingest}/v1/events/bulk`, {
            headers: { authorization: `Bearer ${token}` },
            body: { events },
          });
          if (r.status !== 202 || r.body.failed !== 0) throw new Error(`bulk answered ${r.status}`);
        }
        sent += events.length;
        await new Promise((r) => setTimeout(r, 15));
      }
    };
    let proc = await processors();
    const sender = send();
    let how = 'after the stream ended';
    await waitFor(
      async () => {
        if (sent < 200) return false;
        if ((await sessionCount(sql, PNAME, { writing: true })) > 0) how = 'mid-batch';
        return how === 'mid-batch' || sent >= unique;
      },
      { timeoutMs: 60_000, intervalMs: 1, what: 'a batch in progress' },
    );
    await killAndWaitGone(sql, proc, PNAME);
    process.stderr.write(`[streak fault] processors killed ${how} (${sent} of ${unique} events sent)\n`);
    proc = await processors();
    await sender;
    await waitFor(
      async () =>
        (
          await sql.query<{ n: number }>(
            'SELECT count(*)::int AS n FROM processed_events WHERE tenant_id = $1',
            [t.id],
          )
        ).rows[0]!.n === unique,
      { what: 'every event processed', timeoutMs: 120_000 },
    );
    proc.child.kill('SIGTERM');
    await proc.exited;

    const cfg: RefConfig = {
      window: { type: 'calendar', offsetMs: 0 },
      min: 1,
      milestones: [
        { threshold: 2, repeatable: false },
        { threshold: 3, repeatable: true },
      ],
      atRiskMs: 0,
      maxFreezes: null,
    };
    const model = referenceStreaks(cfg, ops);
    const rows = await sql.query<{ user_id: string; current_count: number; longest_count: number }>(
      'SELECT user_id, current_count, longest_count FROM streak_progress WHERE tenant_id = $1',
      [t.id],
    );
    const wrong = rows.rows.filter((r) => {
      const m = model.get(r.user_id)!;
      return r.current_count !== m.count || r.longest_count !== m.longest;
    });
    expect(rows.rows).toHaveLength(model.size);
    expect(wrong.slice(0, 5)).toEqual([]);
    const ms = await sql.query<{ user_id: string; n: number }>(
      'SELECT user_id, count(*)::int AS n FROM streak_milestones WHERE tenant_id = $1 GROUP BY user_id',
      [t.id],
    );
    const bal = await sql.query<{ user_id: string; available: number; credits: number }>(
      `SELECT b.user_id, b.available::int AS available,
              (SELECT count(*)::int FROM ledger l WHERE l.tenant_id = b.tenant_id AND l.user_id = b.user_id) AS credits
       FROM balances b WHERE b.tenant_id = $1`,
      [t.id],
    );
    const hooks = await sql.query<{ user_id: string; event_type: string; n: number }>(
      `SELECT payload->>'user_id' AS user_id, event_type, count(*)::int AS n FROM outbox
       WHERE tenant_id = $1 AND event_type IN ('streak.milestone_reached', 'streak.broken') GROUP BY 1, 2`,
      [t.id],
    );
    const hook = (u: string, type: string) =>
      hooks.rows.find((r) => r.user_id === u && r.event_type === type)?.n ?? 0;
    let milestones = 0;
    for (const [u, m] of model) {
      milestones += m.milestones.length;
      expect([u, ms.rows.find((r) => r.user_id === u)?.n ?? 0]).toEqual([u, m.milestones.length]);
      const b = bal.rows.find((r) => r.user_id === u);
      expect([u, b?.available ?? 0, b?.credits ?? 0]).toEqual([u, m.milestones.length, m.milestones.length]);
      expect([u, hook(u, 'streak.milestone_reached'), hook(u, 'streak.broken')]).toEqual([
        u,
        m.milestones.length,
        m.broken,
      ]);
    }
    expect(milestones).toBeGreaterThan(PUSERS);
  }, 300_000);
});
