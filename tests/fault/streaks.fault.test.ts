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
  shapeEnv,
  startTestApp,
  tenantToken,
  type TestApp,
} from '../support/app';
import { stack } from '../support/stack';
import { referenceStreaks, type RefConfig, type RefOp } from '../support/streaks-reference';
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
    const started = Date.now();
    const mark = (what: string) =>
      process.stderr.write(`[streak fault] ${what} after ${Date.now() - started} ms\n`);
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
      async () => {
        const r = await sql.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity
           WHERE application_name = $1 AND xact_start IS NOT NULL AND now() - xact_start > interval '50 milliseconds'
             AND query ILIKE '%streak%'`,
          [APP_NAME],
        );
        // A later batch: some batches committed before the kill.
        return (r.rows[0]?.n ?? 0) > 0 && (await left()) < USERS;
      },
      { what: 'a sweep transaction in progress after a committed batch', timeoutMs: 60_000, intervalMs: 10 },
    );
    first.child.kill('SIGKILL');
    await first.exited;
    await waitFor(
      async () =>
        (
          await sql.query<{ n: number }>(
            'SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1',
            [APP_NAME],
          )
        ).rows[0]!.n === 0,
      { what: 'the killed sessions gone' },
    );
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
