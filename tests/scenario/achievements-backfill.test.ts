/**
 * Achievement backfill in both shapes (docs/achievements.md "Backfill"): a history of 10,000
 * events, then
 * - a dry run whose count of users who would complete equals the real run's completions and the
 *   reference model's (tests/support/achievements-reference.ts);
 * - an achievement created with a backfill while events keep arriving: afterwards every user's
 *   progress equals the reference model's over the whole stream (no event counted twice or missed
 *   at the seam), cumulative parts from balances included;
 * - a job whose run dies halfway (a chunk's transaction fails and its runner is gone), resumed by
 *   a new runner: the same result.
 * Then every other criteria type, in a tenant whose days are UTC+14: streak parts (both reset
 * rules) over 21 days of logins with gaps, a streak_milestone part over milestones reached and a
 * leaderboard_rank part over windows closed before the achievements existed, and a nested combined
 * of the three: dry runs equal to the model's count and to the real runs' completions; two jobs
 * run while logins of later days arrive (deferred by the pipeline at the seam); afterwards every
 * user's progress and completion equals the model's (milestones and final ranks given to it as
 * facts), with one completion, one reward and one webhook each.
 * The app runs without the scheduler role, so the test is the job runner and decides when it runs
 * (the scheduler's job, scheduler/achievements.ts, runs in tests/scenario/achievements.test.ts).
 */
import { Backfills } from '../../core/achievements/backfill';
import type { AchievementEngine } from '../../core/achievements/progress';
import { ManualClock } from '../../core/clock';
import { ANALYTICS_GROUP } from '../../processors/analytics-sink/sink';
import { PIPELINE_GROUP } from '../../processors/pipeline/pipeline';
import { EVENTS_TOPIC } from '../../schemas/topics';
import {
  nothingYet,
  referenceAchievements,
  type RefCriterion,
  type RefEvent,
} from '../support/achievements-reference';
import {
  call,
  SHAPES,
  startTestApp,
  tenantWithCredentials,
  keepWebhookEvents,
  type TenantInfo,
  type TestApp,
} from '../support/app';
import { waitFor } from '../support/wait';

const T0 = Date.parse('2026-11-20T10:00:00Z');
const DAY = 86_400_000;
const HISTORY = 10_000;
const USERS = Array.from({ length: 200 }, (_, i) => `u${String(i).padStart(3, '0')}`);

/** A small deterministic generator (the stream is the same in every run). */
function lcg(seed: number) {
  let s = seed >>> 0;
  return (n: number) => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return (s >>> 8) % n;
  };
}

describe.each(SHAPES)('achievement backfill [%s]', (shape) => {
  let app: TestApp;
  let tenant: TenantInfo;
  let key: string;
  let token: string;
  const clock = new ManualClock(T0);

  beforeAll(async () => {
    app = await startTestApp(shape, {
      clock,
      roles: 'ingest,api,processors,analytics',
      env: { LUDUS_RATE_LIMIT_ADMIN: 'off', LUDUS_RATE_LIMIT_INGEST: 'off', LUDUS_RATE_LIMIT_QUERY: 'off' },
    });
    ({ tenant, key, token } = await tenantWithCredentials(app));
    await keepWebhookEvents(app, tenant.id);
    const c = await admin('POST', '/v1/wallet/currencies', {
      id: 'coins',
      name: 'Coins',
      is_spendable: true,
      decimal_places: 0,
    });
    expect(c.status).toBe(201);
  }, 120_000);
  afterAll(() => app.stop());

  const admin = (method: string, path: string, body?: unknown) =>
    call(method, `${app.url.admin}${path}${path.includes('?') ? '&' : '?'}tenant_id=${tenant.id}`, {
      headers: { 'x-api-key': key },
      body,
    });
  const stream: RefEvent[] = [];
  const next = lcg(shape === 'embedded' ? 7 : 11);
  let seq = 0;
  /** `n` new events (and a few retries of earlier ones), appended to `stream`, sent in bulk requests. */
  const sendEvents = async (n: number, at: number) => {
    const batch: RefEvent[] = [];
    for (let i = 0; i < n; i++) {
      const user = USERS[next(USERS.length)]!;
      const r = next(10);
      const e: RefEvent = {
        event_id: `bf-${shape}-${++seq}`,
        user_id: user,
        type: r < 6 ? 'play' : 'other',
        occurred_at: at - next(20) * DAY,
        attrs: { mode: r % 2 === 0 ? 'x' : 'y' },
      };
      batch.push(e);
      if (next(50) === 0) batch.push(e); // a client retry of the same event
    }
    stream.push(...batch);
    for (let i = 0; i < batch.length; i += 100) {
      const events = batch.slice(i, i + 100).map((e) => ({
        event_id: e.event_id,
        type: e.type,
        actor: { user_id: e.user_id },
        occurred_at: new Date(e.occurred_at).toISOString(),
        attrs: e.attrs,
      }));
      const r = await call('POST', `${app.url.ingest}/v1/events/bulk`, {
        headers: { authorization: `Bearer ${token}` },
        body: { events },
      });
      expect([r.status, r.body.failed]).toEqual([202, 0]);
    }
  };
  /** Waits until the pipeline has processed every event sent so far. */
  const drained = () =>
    waitFor(
      async () => {
        const r = await app.ctx.adapters.sql.query<{ n: string }>(
          'SELECT count(*) AS n FROM processed_events WHERE tenant_id = $1',
          [tenant.id],
        );
        return Number(r.rows[0]!.n) === new Set(stream.map((e) => e.event_id)).size;
      },
      {
        what: 'the pipeline has every event',
        timeoutMs: 120_000,
        intervalMs: 200,
        describe: async () => {
          const r = await app.ctx.adapters.sql.query<{ n: string }>(
            'SELECT count(*) AS n FROM processed_events WHERE tenant_id = $1',
            [tenant.id],
          );
          return `processed ${r.rows[0]!.n} of ${new Set(stream.map((e) => e.event_id)).size}`;
        },
      },
    );
  const runner = (engine: AchievementEngine = app.ctx.services.achievements, chunkUsers = 40) =>
    new Backfills({
      sql: app.ctx.adapters.sql,
      analytics: app.ctx.adapters.analytics,
      engine,
      random: app.ctx.random,
      offsets: {
        topic: app.ctx.adapters.eventLog.physicalName(EVENTS_TOPIC),
        pipelineGroup: PIPELINE_GROUP,
        sinkGroup: ANALYTICS_GROUP,
      },
      chunkUsers,
    });
  /** Runs backfill jobs until the achievement's latest job is done. */
  const runUntilDone = async (id: string, r = runner()) =>
    waitFor(
      async () => {
        await r.runFor(clock.now(), 500);
        const b = (await admin('GET', `/v1/achievements/${id}/backfill`)).body;
        return b.state === 'done' ? b : null;
      },
      { what: `backfill of ${id}`, timeoutMs: 120_000, intervalMs: 100 },
    );
  /** Every user's views of these achievements, by user. */
  const views = async () => {
    const out = new Map<
      string,
      Map<string, { completed: boolean; progress: { current: number; parts?: Array<{ current: number }> } }>
    >();
    for (const u of USERS) {
      const r = await call('GET', `${app.url.query}/v1/achievements/user/${u}`, {
        headers: { authorization: `Bearer ${token}` },
      });
      expect(r.status).toBe(200);
      out.set(u, new Map(r.body.achievements.map((a: { achievement_id: string }) => [a.achievement_id, a])));
    }
    return out;
  };

  const X: RefCriterion = {
    type: 'event_count',
    event_type: 'play',
    conditions: { mode: { eq: 'x' } },
    threshold: Math.max(2, Math.round((HISTORY * 12) / 10_000)),
  };
  const coinsOf = (u: string) => (Number(u.slice(1)) < 50 ? 100 : 0);

  it('backfills from 10,000 events of history: dry run, real run, live traffic at the seam, a resumed job', async () => {
    await sendEvents(HISTORY, T0);
    await drained();
    for (const u of USERS.filter((x) => coinsOf(x) > 0))
      expect(
        (await admin('POST', '/v1/wallet/grant', { user_id: u, currency_id: 'coins', amount: coinsOf(u) }))
          .status,
      ).toBe(200);

    // The dry run on creation: how many would complete, from history alone.
    const x = await admin('POST', '/v1/achievements', {
      name: 'X',
      criteria: X,
      backfill: { dry_run: true },
    });
    expect([x.status, x.body.backfill.state, x.body.backfill.dry_run]).toEqual([201, 'done', true]);
    const history = [...stream];
    const modelX = referenceAchievements([{ id: 'x', criteria: X }], history);
    const wouldX = [...modelX.values()].filter((o) => o.completed).length;
    expect(wouldX).toBeGreaterThan(0);
    expect(x.body.backfill.would_complete).toBe(wouldX);
    expect(
      await app.ctx.adapters.sql.query('SELECT 1 FROM achievement_progress WHERE tenant_id = $1', [
        tenant.id,
      ]),
    ).toMatchObject({ rowCount: 0 });

    // The real run completes exactly those users.
    const started = await admin('POST', `/v1/achievements/${x.body.id}/backfill`, {});
    expect([started.status, started.body.dry_run]).toEqual([202, false]);
    expect((await admin('POST', `/v1/achievements/${x.body.id}/backfill`, {})).status).toBe(409);
    const doneX = await runUntilDone(x.body.id);
    expect(doneX.completed).toBe(wouldX);

    // Y (events and balances) backfilled while 2,000 more events arrive.
    const yEvents: RefCriterion = { type: 'event_count', event_type: 'other', threshold: 8 };
    const y = await admin('POST', '/v1/achievements', {
      name: 'Y',
      criteria: {
        type: 'combined',
        operator: 'and',
        conditions: [yEvents, { type: 'cumulative', metric: 'coins', threshold: 100 }],
      },
      backfill: true,
    });
    expect([y.status, y.body.backfill.state]).toEqual([201, 'pending']);
    const slow = runner(app.ctx.services.achievements, 10);
    await Promise.all([
      (async () => {
        for (let i = 0; i < 10; i++) await sendEvents(200, T0);
      })(),
      runUntilDone(y.body.id, slow),
    ]);
    await drained();

    // Z: the same criteria as X, backfilled by a runner that dies in its third chunk.
    const z = await admin('POST', '/v1/achievements', { name: 'Z', criteria: X });
    const engine = app.ctx.services.achievements;
    let calls = 0;
    const dying = Object.create(engine) as AchievementEngine;
    dying.advance = async (...args) => {
      if (++calls === 3) throw new Error('killed');
      return engine.advance(...args);
    };
    await admin('POST', `/v1/achievements/${z.body.id}/backfill`, {});
    await expect(
      (async () => {
        const until = Date.now() + 120_000;
        while (Date.now() < until) await runner(dying, 25).runFor(clock.now(), 1_000);
        throw new Error(`the dying runner made ${calls} calls and never died`);
      })(),
    ).rejects.toThrow('killed');
    const half = (await admin('GET', `/v1/achievements/${z.body.id}/backfill`)).body;
    expect(half.state).toBe('running');
    expect(half.users_done).toBeGreaterThan(0);
    expect(half.users_done).toBeLessThan(USERS.length);
    await runUntilDone(z.body.id, runner(engine, 25));

    // Every user's progress equals the model's over the whole stream.
    const model = referenceAchievements(
      [
        { id: x.body.id, criteria: X },
        { id: z.body.id, criteria: X },
        { id: 'y-events', criteria: yEvents },
      ],
      stream,
    );
    const seen = await views();
    let completedX = 0;
    let completedY = 0;
    for (const u of USERS) {
      const mine = seen.get(u)!;
      for (const id of [x.body.id, z.body.id]) {
        const want = model.get(`${u}\u0000${id}`) ?? { completed: false, progress: { current: 0 } };
        expect([u, id, mine.get(id)!.completed, mine.get(id)!.progress.current]).toEqual([
          u,
          id,
          want.completed,
          want.progress.current,
        ]);
      }
      if (mine.get(x.body.id)!.completed) completedX++;
      const ev = model.get(`${u}\u0000y-events`) ?? { completed: false, progress: { current: 0 } };
      const yv = mine.get(y.body.id)!;
      const completed = ev.completed && coinsOf(u) >= 100;
      expect([u, yv.completed]).toEqual([u, completed]);
      if (!completed) expect([u, yv.progress.parts![0]!.current]).toEqual([u, ev.progress.current]);
      if (completed) completedY++;
    }
    expect(completedY).toBeGreaterThan(0);
    const paid = await app.ctx.adapters.sql.query<{ achievement_id: string; n: string }>(
      'SELECT achievement_id, count(*) AS n FROM achievement_completions WHERE tenant_id = $1 GROUP BY achievement_id',
      [tenant.id],
    );
    const n = new Map(paid.rows.map((r) => [r.achievement_id, Number(r.n)]));
    expect([n.get(x.body.id), n.get(z.body.id), n.get(y.body.id)]).toEqual([
      completedX,
      completedX,
      completedY,
    ]);
    const hooks = await app.ctx.adapters.sql.query<{ n: string }>(
      "SELECT count(*) AS n FROM outbox WHERE tenant_id = $1 AND event_type = 'achievement.completed'",
      [tenant.id],
    );
    expect(Number(hooks.rows[0]!.n)).toBe(2 * completedX + completedY);
    expect(
      (
        await app.ctx.adapters.sql.query('SELECT 1 FROM achievement_backfill_live WHERE tenant_id = $1', [
          tenant.id,
        ])
      ).rowCount,
    ).toBe(0);
  }, 600_000);

  it('backfills streak, streak_milestone, leaderboard_rank and combined criteria: dry run, real run, live days at the seam', async () => {
    const K = Array.from({ length: 30 }, (_, i) => `k${String(i).padStart(2, '0')}`);
    const at = (d: number, hour: number) => Date.UTC(2026, 10, 20) + d * DAY + hour * 3_600_000;
    const gen = lcg(shape === 'embedded' ? 3 : 5);
    let kseq = 0;
    const ev = (
      user: string,
      type: string,
      occurred: number,
      attrs: Record<string, unknown> = {},
    ): RefEvent => ({
      event_id: `bk-${shape}-${++kseq}`,
      user_id: user,
      type,
      occurred_at: occurred,
      attrs,
    });
    /** Sends these events (one bulk request each 100, in order) and waits until they are processed. */
    const send = async (events: RefEvent[]) => {
      stream.push(...events);
      for (let i = 0; i < events.length; i += 100) {
        const r = await call('POST', `${app.url.ingest}/v1/events/bulk`, {
          headers: { authorization: `Bearer ${token}` },
          body: {
            events: events.slice(i, i + 100).map((e) => ({
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
    };

    // Tenant-local days from here on: Pacific/Kiritimati, UTC+14 all year (no DST), so a login at
    // 10:00 UTC or later is on the next local day: history and live must cut days the same way.
    const ZONE_OFFSET = 14 * 3_600_000;
    expect(
      (
        await call('PUT', `${app.url.admin}/v1/tenants/${tenant.id}`, {
          headers: { 'x-api-key': app.rootKey },
          body: { timezone: 'Pacific/Kiritimati' },
        })
      ).status,
    ).toBe(200);

    // The reward every achievement here pays, in a currency of its own.
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
    const gems = (
      await admin('POST', '/v1/reward-items', {
        name: '5 gems',
        reward_type: 'currency',
        payload: { currency_id: 'gems', amount: 5 },
      })
    ).body;
    const cfg = (
      await admin('POST', '/v1/rewards-catalog', {
        name: 'bf-gems',
        tiers: [
          { condition: { type: 'milestone', metric: 'achievement', value: 1 }, item_ids: [gems.item_id] },
        ],
      })
    ).body;

    // Before any achievement exists: a streak whose milestones users reach (k_i: i % 6 consecutive
    // days of lessons up to yesterday; milestones at 2 and 4 days), a board whose two daily windows
    // close, and 21 days of logins with gaps (in random order: history is read in day order), at
    // any hour (so local days differ from UTC days).
    const streak = await admin('POST', '/v1/streaks', {
      name: 'BF lessons',
      config: {
        event_types: ['lesson'],
        window: { type: 'calendar', period: 'daily', timezone: 'UTC', reset_time: '00:00' },
        condition: { type: 'count', min: 1 },
        milestones: [{ threshold: 2 }, { threshold: 4 }],
      },
    });
    expect([streak.status, streak.body.error]).toEqual([201, undefined]);
    const streakId = streak.body.id as string;
    const board = await admin('POST', '/v1/leaderboards', {
      leaderboard_id: 'bf-board',
      name: 'BF board',
      config: {
        timeframe: { type: 'daily', timezone: 'UTC', grace_seconds: 3 * 86_400 },
        scoring: { rules: [{ event_type: 'pts', points_expression: 'attrs.p' }], aggregation: 'sum' },
      },
    });
    expect([board.status, board.body.error]).toEqual([201, undefined]);
    const lessonDays = (i: number) => i % 6;
    for (let d = -5; d <= -1; d++)
      await send(K.filter((_, i) => lessonDays(i) >= -d).map((u) => ev(u, 'lesson', at(d, 12))));
    const pts: RefEvent[] = [];
    K.forEach((u, i) => {
      if (i < 20) pts.push(ev(u, 'pts', at(-2, 12), { p: 100 - i })); // 2026-11-18: rank i + 1
      if (i >= 10) pts.push(ev(u, 'pts', at(-1, 12), { p: i + 1 })); // 2026-11-19: rank 30 - i
    });
    await send(pts);
    const logins: RefEvent[] = [];
    for (const u of K)
      for (let d = -30; d <= -10; d++)
        if (gen(100) < 65) {
          logins.push(ev(u, 'login', at(d, 1 + gen(22))));
          if (gen(5) === 0) logins.push(ev(u, 'login', at(d, 23))); // a second login that day
        }
    for (let i = logins.length - 1; i > 0; i--) {
      const j = gen(i + 1);
      [logins[i], logins[j]] = [logins[j]!, logins[i]!];
    }
    await send(logins);
    await drained();
    for (const w of ['2026-11-18', '2026-11-19'])
      expect((await admin('POST', `/v1/leaderboards/bf-board/windows/${w}/close`)).status).toBe(200);
    const milestones = new Map(
      K.map((u, i) => [u, new Map([[streakId, [2, 4].filter((t) => lessonDays(i) >= t)]])]),
    );
    const ranks = new Map(
      K.map((u, i) => [
        u,
        new Map([['bf-board', [...(i < 20 ? [i + 1] : []), ...(i >= 10 ? [30 - i] : [])]]]),
      ]),
    );
    const facts = { milestones, ranks };
    const reached = await app.ctx.adapters.sql.query<{ user_id: string; t: number }>(
      'SELECT user_id, max(threshold) AS t FROM streak_milestones WHERE tenant_id = $1 AND streak_id = $2 GROUP BY user_id',
      [tenant.id, streakId],
    );
    // The streaks feature recorded the milestones the design says (the model's input is honest).
    expect(new Map(reached.rows.map((r) => [r.user_id, Number(r.t)]))).toEqual(
      new Map(K.flatMap((u, i) => (lessonDays(i) >= 2 ? [[u, lessonDays(i) >= 4 ? 4 : 2]] : []))),
    );

    const login = (threshold: number, reset = true): RefCriterion => ({
      type: 'streak',
      event_type: 'login',
      threshold,
      ...(reset ? {} : { reset_on_failure: false }),
    });
    const defs: Record<string, RefCriterion> = {
      S: login(5),
      N: login(12, false),
      M: { type: 'streak_milestone', streak_id: streakId, threshold: 4 },
      R: { type: 'leaderboard_rank', leaderboard_id: 'bf-board', threshold: 5 },
      C: {
        type: 'combined',
        operator: 'and',
        conditions: [
          login(3),
          {
            type: 'combined',
            operator: 'and',
            conditions: [
              { type: 'streak_milestone', streak_id: streakId, threshold: 2 },
              { type: 'leaderboard_rank', leaderboard_id: 'bf-board', threshold: 10 },
            ],
          },
        ],
      },
    };
    const model = (events: RefEvent[]) =>
      referenceAchievements(
        Object.entries(defs).map(([id, criteria]) => ({ id, criteria })),
        events,
        facts,
        ZONE_OFFSET,
      );
    const completedIn = (m: Map<string, { completed: boolean }>, name: string) =>
      K.filter((u) => m.get(`${u}\u0000${name}`)?.completed).length;

    // Dry runs on creation: from history alone, the model's count for every type.
    const before = model([...stream]);
    const ids: Record<string, string> = {};
    const would: Record<string, number> = {};
    for (const [name, criteria] of Object.entries(defs)) {
      const r = await admin('POST', '/v1/achievements', {
        name: `BF ${name}`,
        criteria,
        reward_config_id: cfg.reward_config_id,
        backfill: { dry_run: true },
      });
      expect([name, r.status, r.body.backfill?.state]).toEqual([name, 201, 'done']);
      ids[name] = r.body.id;
      would[name] = r.body.backfill.would_complete;
      expect([name, would[name]]).toEqual([name, completedIn(before, name)]);
      expect([name, would[name]! > 0, would[name]! < K.length]).toEqual([name, true, true]);
    }

    // Real runs of S, M and R over that history alone: exactly the dry runs' users complete.
    for (const name of ['S', 'M', 'R'])
      expect((await admin('POST', `/v1/achievements/${ids[name]}/backfill`, {})).status).toBe(202);
    for (const name of ['S', 'M', 'R'])
      expect([name, (await runUntilDone(ids[name]!)).completed]).toEqual([name, would[name]]);

    // N and C while logins of later days keep arriving: the first day's arrive while the jobs wait
    // for their seam (the pipeline claims and defers them), the others while the jobs run.
    for (const name of ['N', 'C'])
      expect((await admin('POST', `/v1/achievements/${ids[name]}/backfill`, {})).status).toBe(202);
    const day = (d: number) => K.filter(() => gen(10) < 7).map((u) => ev(u, 'login', at(d, 9)));
    await send(day(-9));
    await drained();
    const deferred = await app.ctx.adapters.sql.query<{ n: string }>(
      'SELECT count(*) AS n FROM achievement_backfill_deferred WHERE tenant_id = $1',
      [tenant.id],
    );
    expect(Number(deferred.rows[0]!.n)).toBeGreaterThan(0);
    const slow = runner(app.ctx.services.achievements, 3);
    await Promise.all([
      (async () => {
        for (let d = -8; d <= -3; d++) await send(day(d));
      })(),
      (async () => {
        await runUntilDone(ids.N!, slow);
        await runUntilDone(ids.C!, slow);
      })(),
    ]);
    await drained();
    await send(day(-2)); // after the handover: live processing alone
    await drained();

    // Every user's progress and completion equals the model's over the whole stream (in local
    // days, which here give other streaks than UTC days would).
    const after = model(stream);
    const utc = referenceAchievements(
      Object.entries(defs).map(([id, criteria]) => ({ id, criteria })),
      stream,
      facts,
    );
    expect(
      K.some((u) =>
        ['S', 'N', 'C'].some(
          (x) => JSON.stringify(utc.get(`${u}\u0000${x}`)) !== JSON.stringify(after.get(`${u}\u0000${x}`)),
        ),
      ),
    ).toBe(true);
    const flat = (p: { current: number; parts?: Array<{ current: number; parts?: unknown }> }): number[] => [
      p.current,
      ...(p.parts ?? []).flatMap((x) => flat(x as never)),
    ];
    for (const u of [...K, USERS[0]!]) {
      const r = await call('GET', `${app.url.query}/v1/achievements/user/${u}`, {
        headers: { authorization: `Bearer ${token}` },
      });
      const mine = new Map<string, { completed: boolean; progress: { current: number } }>(
        r.body.achievements.map((a: { achievement_id: string }) => [a.achievement_id, a]),
      );
      for (const [name, criteria] of Object.entries(defs)) {
        const want = after.get(`${u}\u0000${name}`) ?? nothingYet(criteria);
        const got = mine.get(ids[name]!)!;
        expect([u, name, got.completed, flat(got.progress)]).toEqual([
          u,
          name,
          want.completed,
          flat(want.progress),
        ]);
      }
    }
    // Completed once each, the reward paid once, one webhook each; nothing of the seam left.
    for (const [name, id] of Object.entries(ids)) {
      const n = completedIn(after, name);
      const count = async (sql: string) =>
        Number((await app.ctx.adapters.sql.query<{ n: string }>(sql, [tenant.id, id])).rows[0]!.n);
      expect([
        name,
        await count(
          'SELECT count(*) AS n FROM achievement_completions WHERE tenant_id = $1 AND achievement_id = $2',
        ),
        await count(
          `SELECT count(*) AS n FROM ledger WHERE tenant_id = $1 AND source_type = 'achievement_completed' AND source_ref = $2`,
        ),
        await count(
          `SELECT count(*) AS n FROM outbox WHERE tenant_id = $1 AND dedupe_key LIKE 'achievement.completed:' || $2 || ':%'`,
        ),
      ]).toEqual([name, n, n, n]);
    }
    expect(completedIn(after, 'N')).toBeGreaterThan(would.N!);
    for (const t of ['achievement_backfill_live', 'achievement_backfill_deferred'])
      expect(
        (await app.ctx.adapters.sql.query(`SELECT 1 FROM ${t} WHERE tenant_id = $1`, [tenant.id])).rowCount,
      ).toBe(0);

    // No job: 404; no achievement: 404.
    const fresh = await admin('POST', '/v1/achievements', { name: 'No job', criteria: login(2) });
    expect((await admin('GET', `/v1/achievements/${fresh.body.id}/backfill`)).status).toBe(404);
    expect((await admin('POST', '/v1/achievements/nope/backfill', {})).status).toBe(404);
  }, 600_000);
});
