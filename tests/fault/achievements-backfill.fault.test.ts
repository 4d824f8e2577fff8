/**
 * An achievement backfill survives its scheduler process killed mid-chunk (distributed; issue 15:
 * "a backfill job killed halfway and restarted completes with the same result").
 *
 * A history of 6,000 events of 2,000 users is ingested through the in-process app (ingest, API,
 * processors and the analytics sink: the events land in SQL and in ClickHouse; the app does not run
 * the scheduler role). An achievement with a reward is created with a dry run, then its real
 * backfill is started; the scheduler role runs as a child process (the real command line, chunks of
 * 150 users: more than ten chunks), which is SIGKILLed while a chunk's transaction is open and has
 * written progress (not yet committed), after at least one chunk committed. A new scheduler process
 * finishes the job. Afterwards: the job is done and its users were counted once; every user's
 * progress and completion equals the reference model (tests/support/achievements-reference.ts);
 * each completion once, with one reward ledger row and one `achievement.completed` webhook; the dry
 * run's count equals the real run's completions; no claim or deferred day is left.
 */
import { ANALYTICS_GROUP } from '../../processors/analytics-sink/sink';
import { PIPELINE_GROUP } from '../../processors/pipeline/pipeline';
import { EVENTS_TOPIC } from '../../schemas/topics';
import { referenceAchievements, type RefCriterion, type RefEvent } from '../support/achievements-reference';
import {
  call,
  createKey,
  createTenant,
  shapeEnv,
  startTestApp,
  tenantToken,
  type TestApp,
} from '../support/app';
import { childEnv, spawnCli, type Spawned } from '../support/process';
import { killAndWaitGone, progressMarker, sessionCount } from '../support/sessions';
import { stack } from '../support/stack';
import { waitFor } from '../support/wait';

const USERS = Array.from({ length: 2000 }, (_, i) => `u${String(i).padStart(4, '0')}`);
const EVENTS = 6000;
const CHUNK_USERS = 150;
const DAY = 86_400_000;
const APP_NAME = `ludus-backfill-fault-${process.pid}`;

/** A small deterministic generator (the stream is the same in every run). */
function lcg(seed: number) {
  let s = seed >>> 0;
  return (n: number) => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return (s >>> 8) % n;
  };
}

describe('achievement backfill survives its scheduler killed mid-chunk [distributed]', () => {
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
    app = await startTestApp('distributed', { roles: 'ingest,api,processors,analytics', env });
  }, 120_000);
  afterAll(async () => {
    for (const c of children) if (c.child.exitCode === null) c.child.kill('SIGKILL');
    await Promise.all(children.map((c) => c.exited));
    await app.stop();
  });

  const scheduler = () => {
    const p = spawnCli(
      ['serve', '--roles', 'scheduler'],
      childEnv({
        ...env,
        LUDUS_DATABASE_URL: `${stack.pgUrl}?application_name=${APP_NAME}`,
        LUDUS_SCHEDULER_INTERVAL_MS: '100',
        LUDUS_ACHIEVEMENT_BACKFILL_CHUNK_USERS: String(CHUNK_USERS),
      }),
    );
    children.push(p);
    return p;
  };

  it('completes the job with the same result after a restart', async () => {
    const mark = progressMarker('backfill fault');
    const sql = app.ctx.adapters.sql;
    const t = await createTenant(app);
    const key = (await createKey(app, [t.id])).key;
    const token = await tenantToken(t);
    const admin = (method: string, path: string, body?: unknown) =>
      call(method, `${app.url.admin}${path}?tenant_id=${t.id}`, { headers: { 'x-api-key': key }, body });

    // The history: plays and other events of 2,000 users over 20 days, some sent twice (retries).
    const next = lcg(23);
    const T0 = Date.now() - DAY;
    const stream: RefEvent[] = [];
    for (let i = 0; i < EVENTS; i++) {
      const r = next(10);
      const e: RefEvent = {
        event_id: `bff-${i}`,
        user_id: USERS[next(USERS.length)]!,
        type: r < 6 ? 'play' : 'other',
        occurred_at: T0 - next(20) * DAY,
        attrs: { mode: r % 2 === 0 ? 'x' : 'y' },
      };
      stream.push(e);
      if (next(50) === 0) stream.push(e);
    }
    for (let i = 0; i < stream.length; i += 100) {
      const r = await call('POST', `${app.url.ingest}/v1/events/bulk`, {
        headers: { authorization: `Bearer ${token}` },
        body: {
          events: stream.slice(i, i + 100).map((e) => ({
            event_id: e.event_id,
            type: e.type,
            actor: { user_id: e.user_id },
            occurred_at: new Date(e.occurred_at).toISOString(),
            attrs: e.attrs,
          })),
        },
      });
      expect([r.status, r.body.failed]).toEqual([202, 0]);
    }
    const offsets = async (group: string) =>
      (
        await sql.query<{ partition: number; next_offset: string }>(
          'SELECT partition, next_offset FROM consumer_offsets WHERE group_id = $1 AND topic = $2',
          [group, app.ctx.adapters.eventLog.physicalName(EVENTS_TOPIC)],
        )
      ).rows;
    const unique = new Set(stream.map((e) => e.event_id)).size;
    await waitFor(
      async () =>
        (
          await sql.query<{ n: number }>(
            'SELECT count(*)::int AS n FROM processed_events WHERE tenant_id = $1',
            [t.id],
          )
        ).rows[0]!.n === unique,
      { what: 'the pipeline has every event', timeoutMs: 120_000, intervalMs: 200 },
    );
    // The analytics sink has stored everything the pipeline processed (the dry run reads ClickHouse).
    const seam = await offsets(PIPELINE_GROUP);
    expect(seam.length).toBeGreaterThan(0);
    await waitFor(
      async () => {
        const sink = new Map(
          (await offsets(ANALYTICS_GROUP)).map((o) => [o.partition, Number(o.next_offset)]),
        );
        return seam.every((o) => (sink.get(o.partition) ?? 0) >= Number(o.next_offset));
      },
      { what: 'the analytics sink past the pipeline', timeoutMs: 120_000, intervalMs: 200 },
    );
    mark(`history of ${stream.length} events (${unique} unique) in SQL and ClickHouse`);

    // The achievement, paying 5 gems, with a dry run on creation.
    expect(
      (
        await admin('POST', '/v1/wallet/currencies', {
          id: 'gems',
          name: 'Gems',
          is_spendable: true,
          decimal_places: 0,
        })
      ).status,
    ).toBe(201);
    const item = (
      await admin('POST', '/v1/reward-items', {
        name: '5 gems',
        reward_type: 'currency',
        payload: { currency_id: 'gems', amount: 5 },
      })
    ).body.item_id as string;
    const cfg = await admin('POST', '/v1/rewards-catalog', {
      name: 'bff-gems',
      tiers: [{ condition: { type: 'milestone', metric: 'achievement', value: 1 }, item_ids: [item] }],
    });
    expect(cfg.status).toBe(201);
    const X: RefCriterion = {
      type: 'event_count',
      event_type: 'play',
      conditions: { mode: { eq: 'x' } },
      threshold: 2,
    };
    const created = await admin('POST', '/v1/achievements', {
      name: 'Player',
      criteria: X,
      reward_config_id: cfg.body.reward_config_id,
      backfill: { dry_run: true },
    });
    expect([created.status, created.body.backfill?.state, created.body.backfill?.dry_run]).toEqual([
      201,
      'done',
      true,
    ]);
    const id = created.body.id as string;
    const model = referenceAchievements([{ id, criteria: X }], stream);
    const would = [...model.values()].filter((o) => o.completed).length;
    const players = new Set(stream.filter((e) => e.type === 'play').map((e) => e.user_id)).size;
    expect(would).toBeGreaterThan(100);
    expect(players).toBeGreaterThan(4 * CHUNK_USERS);
    expect(created.body.backfill.would_complete).toBe(would);
    mark(`dry run: ${would} would complete; ${players} players`);

    // The real run, by a scheduler process killed while a chunk's transaction is open.
    const started = await admin('POST', `/v1/achievements/${id}/backfill`, {});
    expect([started.status, started.body.dry_run, started.body.state]).toEqual([202, false, 'pending']);
    const job = async () =>
      (
        await sql.query<{ state: string; users_done: number; users_total: number | null; completed: number }>(
          `SELECT state, users_done, users_total, completed FROM achievement_backfills
           WHERE tenant_id = $1 AND achievement_id = $2 AND NOT dry_run`,
          [t.id, id],
        )
      ).rows[0]!;
    const progressWriters = async () =>
      (
        await sql.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid
           WHERE a.application_name = $1 AND a.backend_xid IS NOT NULL AND l.locktype = 'relation'
             AND l.relation = to_regclass('achievement_progress') AND l.mode = 'RowExclusiveLock' AND l.granted`,
          [APP_NAME],
        )
      ).rows[0]!.n;
    const first = scheduler();
    const how = await waitFor(
      async () => {
        const j = await job();
        if (j.state === 'done' || j.state === 'failed') return `after the job ended (${j.state})`;
        if (j.state !== 'running' || j.users_done === 0) return null;
        // A chunk's transaction under way that has written progress (it holds its row-exclusive lock
        // on achievement_progress until it ends) but not committed (nor moved its cursor).
        if ((await sessionCount(sql, APP_NAME, { writing: true })) === 0) return null;
        return (await progressWriters()) > 0 ? 'mid-chunk' : null;
      },
      {
        what: 'a backfill chunk in progress after a committed one',
        timeoutMs: 120_000,
        intervalMs: 2,
        describe: async () =>
          `job ${JSON.stringify(await job())}; child stderr: ${first.stderr().slice(-2000)}`,
      },
    );
    await killAndWaitGone(sql, first, APP_NAME);
    const half = await job();
    mark(`scheduler killed ${how}: ${half.users_done} of ${players} users done, ${half.completed} completed`);
    expect(how).toBe('mid-chunk');
    expect(half.state).toBe('running');
    expect(half.users_done).toBeGreaterThan(0);
    expect(half.users_done).toBeLessThan(players);

    // A new scheduler process resumes the job from its last committed chunk.
    const second = scheduler();
    const done = await waitFor(
      async () => {
        const j = await job();
        return j.state === 'done' || j.state === 'failed' ? j : null;
      },
      {
        what: 'the job done after the restart',
        timeoutMs: 120_000,
        intervalMs: 100,
        describe: async () =>
          `job ${JSON.stringify(await job())}; child stderr: ${second.stderr().slice(-2000)}`,
      },
    );
    second.child.kill('SIGTERM');
    await second.exited;
    mark('job done after the restart');
    const view = (await admin('GET', `/v1/achievements/${id}/backfill`)).body;
    expect([view.state, view.users_done, view.users_total, view.completed]).toEqual([
      'done',
      players,
      players,
      would,
    ]);
    expect(done.completed).toBe(would);

    // Every user's progress and completion equals the model's (the query gateway's view).
    const wrong: unknown[] = [];
    for (let i = 0; i < USERS.length; i += 20)
      await Promise.all(
        USERS.slice(i, i + 20).map(async (u) => {
          const r = await call('GET', `${app.url.query}/v1/achievements/user/${u}`, {
            headers: { authorization: `Bearer ${token}` },
          });
          expect(r.status).toBe(200);
          const mine = r.body.achievements.find((a: { achievement_id: string }) => a.achievement_id === id);
          const want = model.get(`${u}\u0000${id}`) ?? { completed: false, progress: { current: 0 } };
          const got = [mine?.completed ?? false, mine?.progress?.current ?? 0];
          if (got[0] !== want.completed || got[1] !== want.progress.current)
            wrong.push({ u, got, want: [want.completed, want.progress.current] });
        }),
      );
    expect(wrong.slice(0, 5)).toEqual([]);
    mark('every user checked against the model');

    // Each completion once, with one reward and one webhook; nothing of the seam left.
    const perUser = async (q: string) =>
      new Map(
        (await sql.query<{ user_id: string; n: number }>(q, [t.id, id])).rows.map((r) => [r.user_id, r.n]),
      );
    const completions = await perUser(
      'SELECT user_id, count(*)::int AS n FROM achievement_completions WHERE tenant_id = $1 AND achievement_id = $2 GROUP BY user_id',
    );
    const rewards = await perUser(
      `SELECT user_id, count(*)::int AS n FROM ledger WHERE tenant_id = $1 AND source_type = 'achievement_completed' AND source_ref = $2 GROUP BY user_id`,
    );
    const hooks = await perUser(
      `SELECT payload->>'user_id' AS user_id, count(*)::int AS n FROM outbox
       WHERE tenant_id = $1 AND event_type = 'achievement.completed' AND payload->>'achievement_id' = $2 GROUP BY 1`,
    );
    const completedUsers = [...model].filter(([, o]) => o.completed).map(([k]) => k.split('\u0000')[0]!);
    const once = new Map(completedUsers.map((u) => [u, 1]));
    expect(completions).toEqual(once);
    expect(rewards).toEqual(once);
    expect(hooks).toEqual(once);
    for (const table of ['achievement_backfill_live', 'achievement_backfill_deferred'])
      expect((await sql.query(`SELECT 1 FROM ${table} WHERE tenant_id = $1`, [t.id])).rowCount).toBe(0);
  }, 400_000);
});
