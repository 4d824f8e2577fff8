/**
 * Achievements in both shapes, through the gateways (docs/achievements.md): definitions and their
 * validation, every criteria type from events and from other features' facts (cumulative from
 * wallet credits, leaderboard_rank from a window's close; streak_milestone has a unit test of its
 * reaction on PGlite, core/achievements/progress.test.ts), nested combined criteria, deactivation,
 * criteria changes, rewards paid once, the webhook, rarity and end-user limits.
 */
import { ManualClock } from '../../core/clock';
import {
  call,
  SHAPES,
  startTestApp,
  tenantWithCredentials,
  keepWebhookEvents,
  type TenantInfo,
  userToken,
  type TestApp,
} from '../support/app';
import { waitFor } from '../support/wait';

const T0 = Date.parse('2026-11-20T10:00:00Z');
const DAY = 86_400_000;

describe.each(SHAPES)('achievements [%s]', (shape) => {
  let app: TestApp;
  let clock: ManualClock;
  let tenant: TenantInfo;
  let key: string;
  let token: string;
  let seq = 0;

  beforeAll(async () => {
    clock = new ManualClock(T0);
    app = await startTestApp(shape, {
      clock,
      roles: 'all',
      env: { LUDUS_SCHEDULER_INTERVAL_MS: '100', LUDUS_RATE_LIMIT_ADMIN: 'off' },
    });
    ({ tenant, key, token } = await tenantWithCredentials(app));
    await keepWebhookEvents(app, tenant.id);
    for (const id of ['coins', 'xp'])
      expect(
        (
          await admin('POST', '/v1/wallet/currencies', {
            id,
            name: id,
            is_spendable: true,
            decimal_places: 0,
          })
        ).status,
      ).toBe(201);
  });
  afterAll(() => app.stop());

  const admin = (method: string, path: string, body?: unknown) =>
    call(method, `${app.url.admin}${path}${path.includes('?') ? '&' : '?'}tenant_id=${tenant.id}`, {
      headers: { 'x-api-key': key },
      body,
    });
  const query = (path: string, t = token) =>
    call('GET', `${app.url.query}${path}`, { headers: { authorization: `Bearer ${t}` } });
  const send = async (events: unknown[]) => {
    const r = await call('POST', `${app.url.ingest}/v1/events/bulk`, {
      headers: { authorization: `Bearer ${token}` },
      body: { events },
    });
    expect([r.status, r.body.failed]).toEqual([202, 0]);
  };
  const ev = (user: string, at: number, type: string, attrs: Record<string, unknown> = {}, id?: string) => ({
    event_id: id ?? `a${shape}-${++seq}`,
    type,
    actor: { user_id: user },
    occurred_at: new Date(at).toISOString(),
    attrs,
  });
  const create = async (body: Record<string, unknown>) => {
    const r = await admin('POST', '/v1/achievements', body);
    expect([r.status, r.body]).toEqual([201, expect.objectContaining({ name: body.name })]);
    return r.body as { id: string; criteria: unknown };
  };
  const mine = async (user: string, id: string) =>
    (await query(`/v1/achievements/user/${user}/${id}`)).body as {
      completed: boolean;
      completed_at: string | null;
      progress: { current: number; target: number; percentage: number; parts?: unknown[] };
      rarity: { completed_users: number; active_users: number; percentage: number };
    };
  const untilCompleted = (user: string, id: string) =>
    waitFor(async () => (await mine(user, id)).completed, { what: `${user} completes ${id}` });
  /** Waits until the pipeline has processed every event sent so far (a marker event per user). */
  const drained = async (user: string) => {
    const id = `mark-${shape}-${++seq}`;
    await send([ev(user, clock.now(), 'marker', {}, id)]);
    await waitFor(
      async () =>
        (
          await app.ctx.adapters.sql.query(
            'SELECT 1 FROM processed_events WHERE tenant_id = $1 AND event_id = $2',
            [tenant.id, id],
          )
        ).rowCount > 0,
      { what: `marker ${id}` },
    );
  };

  it('creates, lists, gets, updates and deactivates under both path forms', async () => {
    const a = await create({
      name: 'First win',
      description: 'Win once',
      badge_url: 'https://cdn.example.com/first.png',
      criteria: { type: 'event_count', event_type: 'win', threshold: 1 },
    });
    expect(a).toMatchObject({ active: true, reward_config_id: null, tenant_id: tenant.id });
    const long = await call('GET', `${app.url.admin}/v1/tenants/${tenant.id}/achievements/${a.id}`, {
      headers: { 'x-api-key': key },
    });
    expect([long.status, long.body.id]).toEqual([200, a.id]);
    const upd = await admin('PUT', `/v1/achievements/${a.id}`, { name: 'First victory' });
    expect([upd.status, upd.body.name, upd.body.criteria]).toEqual([200, 'First victory', a.criteria]);
    const del = await admin('DELETE', `/v1/achievements/${a.id}`);
    expect([del.status, del.body.active]).toEqual([200, false]);
    const inactive = (await admin('GET', '/v1/achievements?active=false')).body;
    expect(inactive.achievements.map((x: { id: string }) => x.id)).toContain(a.id);
    const active = (await admin('GET', '/v1/achievements?active=true')).body;
    expect(active.achievements.map((x: { id: string }) => x.id)).not.toContain(a.id);
    expect((await admin('GET', '/v1/achievements/nope')).status).toBe(404);
    expect((await admin('PUT', '/v1/achievements/nope', { name: 'x' })).status).toBe(404);
  });

  it('refuses invalid criteria with the envelope naming the field path, storing nothing', async () => {
    const before = (await admin('GET', '/v1/achievements')).body.total;
    const cases: Array<[unknown, RegExp]> = [
      [{ type: 'nope' }, /body\.criteria\.type must be one of/],
      [{ type: 'event_count', event_type: 'x' }, /body\.criteria\.threshold is required/],
      [
        { type: 'event_count', event_type: 'x', threshold: 0 },
        /body\.criteria\.threshold must be a positive integer/,
      ],
      [
        { type: 'event_count', event_type: 'x', threshold: 1, extra: 1 },
        /body\.criteria\.extra is not allowed/,
      ],
      [
        {
          type: 'combined',
          operator: 'and',
          conditions: [
            { type: 'event_count', event_type: 'x', threshold: 1 },
            { type: 'event_count', event_type: 'y', threshold: 'ten' },
          ],
        },
        /body\.criteria\.conditions\[1\]\.threshold must be a positive integer/,
      ],
      [
        { type: 'event_count', event_type: 'x', threshold: 1, conditions: { mode: { regex: 'a' } } },
        /body\.criteria\.conditions\.attrs\.mode: unknown operator "regex"/,
      ],
      [{ type: 'combined', operator: 'or', conditions: [] }, /body\.criteria\.operator must be "and"/],
      [
        { type: 'cumulative', metric: 'gold', threshold: 5 },
        /body\.criteria\.metric: currency gold does not exist/,
      ],
      [
        { type: 'leaderboard_rank', leaderboard_id: 'nope', threshold: 3 },
        /body\.criteria\.leaderboard_id: leaderboard nope does not exist/,
      ],
      [
        { type: 'streak_milestone', streak_id: 'nope', threshold: 3 },
        /body\.criteria\.streak_id: streak nope does not exist/,
      ],
      [
        {
          type: 'combined',
          operator: 'and',
          conditions: [
            {
              type: 'combined',
              operator: 'and',
              conditions: [{ type: 'streak', event_type: 'x', threshold: 2, reset_on_failure: 'yes' }],
            },
          ],
        },
        /body\.criteria\.conditions\[0\]\.conditions\[0\]\.reset_on_failure must be a boolean/,
      ],
      ['x'.repeat(100), /body\.criteria must be an object/],
    ];
    for (const [criteria, message] of cases) {
      const r = await admin('POST', '/v1/achievements', { name: 'bad', criteria });
      expect([r.status, r.body.error.code]).toEqual([400, 'VALIDATION_ERROR']);
      expect(r.body.error.message).toMatch(message);
    }
    const deep = { type: 'event_count', event_type: 'x', threshold: 1 } as Record<string, unknown>;
    let c: Record<string, unknown> = deep;
    for (let i = 0; i < 6; i++) c = { type: 'combined', operator: 'and', conditions: [c] };
    const tooDeep = await admin('POST', '/v1/achievements', { name: 'deep', criteria: c });
    expect([tooDeep.status, tooDeep.body.error.message]).toEqual([
      400,
      expect.stringMatching(/nest at most 5/),
    ]);
    const unknownField = await admin('POST', '/v1/achievements', {
      name: 'x',
      criteria: { type: 'event_count', event_type: 'x', threshold: 1 },
      colour: 'red',
    });
    expect([unknownField.status, unknownField.body.error.message]).toEqual([
      400,
      'body.colour is not allowed',
    ]);
    const hugeName = await admin('POST', '/v1/achievements', {
      name: 'n'.repeat(5000),
      criteria: { type: 'event_count', event_type: 'x', threshold: 1 },
    });
    expect(hugeName.status).toBe(400);
    const badConfig = await admin('POST', '/v1/achievements', {
      name: 'x',
      criteria: { type: 'event_count', event_type: 'x', threshold: 1 },
      reward_config_id: 'nope',
    });
    expect([badConfig.status, badConfig.body.error.message]).toEqual([
      400,
      'body.reward_config_id: reward config nope does not exist',
    ]);
    const a = await create({ name: 'ok', criteria: { type: 'event_count', event_type: 'x', threshold: 1 } });
    const badPut = await admin('PUT', `/v1/achievements/${a.id}`, {
      criteria: { type: 'event_count', event_type: 'x', threshold: -1 },
    });
    expect([badPut.status, badPut.body.error.message]).toEqual([
      400,
      expect.stringMatching(/^body\.criteria\.threshold/),
    ]);
    expect((await admin('GET', `/v1/achievements/${a.id}`)).body.criteria.threshold).toBe(1);
    expect((await admin('GET', '/v1/achievements')).body.total).toBe(before + 1);
  });

  it('counts events with conditions, completes once, pays the reward once and sends the webhook', async () => {
    const coins = (
      await admin('POST', '/v1/reward-items', {
        name: '50 coins',
        reward_type: 'currency',
        payload: { currency_id: 'coins', amount: 50 },
      })
    ).body;
    const badge = (
      await admin('POST', '/v1/reward-items', {
        name: 'Ranked badge',
        reward_type: 'badge',
        payload: { badge_id: 'rk' },
      })
    ).body;
    const cfg = (
      await admin('POST', '/v1/rewards-catalog', {
        name: 'ranked-3',
        tiers: [
          {
            condition: { type: 'milestone', metric: 'achievement', value: 1 },
            item_ids: [coins.item_id, badge.item_id],
          },
        ],
      })
    ).body;
    const a = await create({
      name: 'Ranked x3',
      criteria: {
        type: 'event_count',
        event_type: 'match',
        conditions: { mode: { eq: 'ranked' } },
        threshold: 3,
      },
      reward_config_id: cfg.reward_config_id,
    });
    const dup = ev('rk1', T0, 'match', { mode: 'ranked' });
    await send([
      dup,
      dup,
      ev('rk1', T0, 'match', { mode: 'casual' }),
      ev('rk1', T0, 'match', { mode: 'ranked' }),
    ]);
    await send([dup]); // a retry of the same event_id
    await drained('rk1');
    const half = await mine('rk1', a.id);
    expect([half.completed, half.progress]).toEqual([
      false,
      { type: 'event_count', current: 2, target: 3, percentage: 66.66, met: false },
    ]);
    await send([ev('rk1', T0, 'match', { mode: 'ranked' }), ev('rk1', T0, 'match', { mode: 'ranked' })]);
    await untilCompleted('rk1', a.id);
    await drained('rk1');
    const paid = await app.ctx.adapters.sql.query<{ amount: string }>(
      "SELECT amount FROM ledger WHERE tenant_id = $1 AND user_id = 'rk1' AND source_type = 'achievement_completed'",
      [tenant.id],
    );
    expect(paid.rows.map((r) => Number(r.amount))).toEqual([50]);
    const grants = (await admin('GET', '/v1/reward-grants?user_id=rk1')).body.grants;
    expect(
      grants.map((g: { reward_type: string; status: string }) => [g.reward_type, g.status]).sort(),
    ).toEqual([
      ['badge', 'owned'],
      ['currency', 'credited'],
    ]);
    const hooks = await app.ctx.adapters.sql.query<{ payload: Record<string, unknown> }>(
      "SELECT payload FROM outbox WHERE tenant_id = $1 AND event_type = 'achievement.completed' AND payload->>'user_id' = 'rk1'",
      [tenant.id],
    );
    expect(hooks.rows).toHaveLength(1);
    expect(hooks.rows[0]!.payload).toMatchObject({
      event_type: 'achievement.completed',
      tenant_id: tenant.id,
      user_id: 'rk1',
      achievement_id: a.id,
      achievement_name: 'Ranked x3',
      completed_at: expect.any(String),
      items: [
        {
          item_id: coins.item_id,
          name: '50 coins',
          reward_type: 'currency',
          payload: { currency_id: 'coins', amount: 50 },
        },
        { item_id: badge.item_id, name: 'Ranked badge', reward_type: 'badge', payload: { badge_id: 'rk' } },
      ],
    });
    const done = await mine('rk1', a.id);
    expect(done.progress).toEqual({ type: 'event_count', current: 3, target: 3, percentage: 100, met: true });
  });

  it('keeps streaks of consecutive tenant-local days, resetting after a gap', async () => {
    const a = await create({
      name: 'Three days',
      criteria: { type: 'streak', event_type: 'login', threshold: 3 },
    });
    const b = await create({
      name: 'Three days, gaps allowed',
      criteria: { type: 'streak', event_type: 'login', threshold: 3, reset_on_failure: false },
    });
    const S = T0 - 6 * DAY; // occurred_at may not be in the future
    await send([
      ev('st1', S, 'login'),
      ev('st1', S + 1000, 'login'),
      ev('st1', S + DAY, 'login'),
      ev('st1', S + 3 * DAY, 'login'),
    ]);
    await drained('st1');
    const p = await mine('st1', a.id);
    expect([p.completed, p.progress]).toEqual([
      false,
      { type: 'streak', current: 2, target: 3, percentage: 66.66, met: false, current_run: 1 },
    ]);
    await untilCompleted('st1', b.id);
    await send([ev('st1', S + 4 * DAY, 'login'), ev('st1', S + 5 * DAY, 'login')]);
    await untilCompleted('st1', a.id);
  });

  it('completes cumulative criteria from wallet credits (grants and earning rules)', async () => {
    const a = await create({
      name: 'xp 100',
      criteria: { type: 'cumulative', metric: 'xp', threshold: 100 },
    });
    expect(
      (await admin('POST', '/v1/wallet/grant', { user_id: 'cu1', currency_id: 'xp', amount: 60 })).status,
    ).toBe(200);
    expect((await mine('cu1', a.id)).progress).toMatchObject({ current: 60, target: 100, percentage: 60 });
    expect(
      (
        await admin('POST', '/v1/wallet/earning-rules', {
          name: 'xp per quest',
          currency_id: 'xp',
          event_type: 'quest',
          calculation: { type: 'fixed', amount: 50 },
        })
      ).status,
    ).toBe(201);
    await send([ev('cu1', T0, 'quest')]);
    await untilCompleted('cu1', a.id);
    // Spending never takes lifetime earnings back.
    await admin('POST', '/v1/wallet/deduct', { user_id: 'cu1', currency_id: 'xp', amount: 100 });
    expect((await mine('cu1', a.id)).completed).toBe(true);
  });

  it('completes leaderboard_rank criteria when a window closes, and nested combined criteria', async () => {
    expect(
      (
        await admin('POST', '/v1/leaderboards', {
          leaderboard_id: 'ach-board',
          name: 'Board',
          config: {
            timeframe: { type: 'daily', grace_seconds: 0 },
            scoring: { rules: [{ event_type: 'pts', points_expression: 'attrs.p' }], aggregation: 'sum' },
          },
        })
      ).status,
    ).toBe(201);
    const top2 = await create({
      name: 'Podium',
      criteria: { type: 'leaderboard_rank', leaderboard_id: 'ach-board', threshold: 2 },
    });
    const combo = await create({
      name: 'Combo',
      criteria: {
        type: 'combined',
        operator: 'and',
        conditions: [
          { type: 'event_count', event_type: 'pts', threshold: 1 },
          {
            type: 'combined',
            operator: 'and',
            conditions: [
              { type: 'leaderboard_rank', leaderboard_id: 'ach-board', threshold: 1 },
              { type: 'cumulative', metric: 'coins', threshold: 10 },
            ],
          },
        ],
      },
    });
    await send([
      ev('lb1', T0, 'pts', { p: 9 }),
      ev('lb2', T0, 'pts', { p: 5 }),
      ev('lb3', T0, 'pts', { p: 1 }),
    ]);
    await waitFor(
      async () => (await query('/v1/leaderboards/ach-board?window_key=2026-11-20')).body.total_entries === 3,
      { what: 'three entries' },
    );
    const partial = await mine('lb1', combo.id);
    expect(partial.progress).toMatchObject({ type: 'combined', current: 1, target: 2, percentage: 50 });
    expect(partial.progress.parts).toEqual([
      { type: 'event_count', current: 1, target: 1, percentage: 100, met: true },
      {
        type: 'combined',
        current: 0,
        target: 2,
        percentage: 0,
        met: false,
        parts: [
          { type: 'leaderboard_rank', current: 0, target: 1, percentage: 0, met: false, best_rank: null },
          { type: 'cumulative', current: 0, target: 10, percentage: 0, met: false },
        ],
      },
    ]);
    expect((await admin('POST', '/v1/leaderboards/ach-board/windows/2026-11-20/close')).status).toBe(200);
    await untilCompleted('lb1', top2.id);
    await untilCompleted('lb2', top2.id);
    expect((await mine('lb3', top2.id)).completed).toBe(false);
    expect((await mine('lb1', combo.id)).completed).toBe(false);
    await admin('POST', '/v1/wallet/grant', { user_id: 'lb1', currency_id: 'coins', amount: 10 });
    await admin('POST', '/v1/wallet/grant', { user_id: 'lb2', currency_id: 'coins', amount: 10 });
    expect((await mine('lb1', combo.id)).completed).toBe(true);
    expect((await mine('lb2', combo.id)).completed).toBe(false); // rank 2 is not rank 1
  });

  it('stops progressing when deactivated and never un-completes on a criteria change', async () => {
    const a = await create({
      name: 'Clicks',
      criteria: { type: 'event_count', event_type: 'click', threshold: 2 },
    });
    await send([ev('dc1', T0, 'click'), ev('dc1', T0, 'click'), ev('dc2', T0, 'click')]);
    await untilCompleted('dc1', a.id);
    await drained('dc2');
    expect((await mine('dc2', a.id)).progress.current).toBe(1);
    await admin('DELETE', `/v1/achievements/${a.id}`);
    await send([ev('dc2', T0, 'click'), ev('dc2', T0, 'click')]);
    await drained('dc2');
    expect((await mine('dc2', a.id)).progress.current).toBe(1);
    const listed = (await query('/v1/achievements/user/dc2')).body.achievements.map(
      (x: { achievement_id: string }) => x.achievement_id,
    );
    expect(listed).not.toContain(a.id);
    // Back on, with a higher threshold: dc1 stays completed, dc2 keeps its 1 and counts on.
    await admin('PUT', `/v1/achievements/${a.id}`, {
      active: true,
      criteria: { type: 'event_count', event_type: 'click', threshold: 3 },
    });
    expect((await mine('dc1', a.id)).completed).toBe(true);
    await send([ev('dc2', T0, 'click')]);
    await drained('dc2');
    expect((await mine('dc2', a.id)).progress).toMatchObject({ current: 2, target: 3 });
    // Counting another event type starts that part afresh.
    await admin('PUT', `/v1/achievements/${a.id}`, {
      criteria: { type: 'event_count', event_type: 'tap', threshold: 1 },
    });
    expect((await mine('dc2', a.id)).progress).toMatchObject({ current: 0, target: 1 });
    expect((await mine('dc1', a.id)).completed).toBe(true);
    await send([ev('dc2', T0, 'tap')]);
    await untilCompleted('dc2', a.id);
  });

  it("lists a user's achievements with the completed filter and rarity; end users reach only themselves", async () => {
    const a = await create({
      name: 'Rare',
      criteria: { type: 'event_count', event_type: 'rare', threshold: 1 },
    });
    await send([
      ev('ra1', clock.now(), 'rare'),
      ev('ra2', clock.now(), 'other'),
      ev('ra3', clock.now(), 'other'),
    ]);
    await untilCompleted('ra1', a.id);
    await drained('ra2');
    await drained('ra3');
    const all = (await query('/v1/achievements/user/ra1')).body;
    const row = all.achievements.find((x: { achievement_id: string }) => x.achievement_id === a.id);
    const active = row.rarity.active_users;
    expect(active).toBeGreaterThanOrEqual(3);
    expect(row.rarity).toEqual({
      completed_users: 1,
      active_users: active,
      percentage: Math.round((1 / active) * 10000) / 100,
    });
    const done = (await query('/v1/achievements/user/ra1?completed=true')).body.achievements;
    expect(done.every((x: { completed: boolean }) => x.completed)).toBe(true);
    expect(done.map((x: { achievement_id: string }) => x.achievement_id)).toContain(a.id);
    const open = (await query('/v1/achievements/user/ra1?completed=false')).body.achievements;
    expect(open.map((x: { achievement_id: string }) => x.achievement_id)).not.toContain(a.id);
    const longForm = await call(
      'GET',
      `${app.url.query}/v1/tenants/${tenant.id}/achievements/user/ra1/${a.id}`,
      {
        headers: { authorization: `Bearer ${token}` },
      },
    );
    expect([longForm.status, longForm.body.completed]).toEqual([200, true]);
    const own = await userToken(tenant, 'ra1');
    expect((await query(`/v1/achievements/user/ra1/${a.id}`, own)).status).toBe(200);
    expect((await query(`/v1/achievements/user/ra2/${a.id}`, own)).status).toBe(403);
    expect((await query('/v1/achievements/user/ra2', own)).status).toBe(403);
    expect((await query(`/v1/achievements/user/ra1/nope`)).status).toBe(404);
    expect((await query('/v1/achievements/user/ra1?completed=maybe')).status).toBe(400);
  });

  it('backfills a new achievement from history with the scheduler role running the job', async () => {
    await send([ev('bf1', T0, 'hist'), ev('bf1', T0, 'hist'), ev('bf2', T0, 'hist')]);
    await drained('bf1');
    await drained('bf2');
    const dry = await admin('POST', '/v1/achievements', {
      name: 'History (dry)',
      criteria: { type: 'event_count', event_type: 'hist', threshold: 2 },
      backfill: { dry_run: true },
    });
    expect([dry.status, dry.body.backfill.would_complete]).toEqual([201, 1]);
    const r = await admin('POST', '/v1/achievements', {
      name: 'History',
      criteria: { type: 'event_count', event_type: 'hist', threshold: 2 },
      backfill: true,
    });
    expect([r.status, r.body.backfill.state]).toEqual([201, 'pending']);
    await waitFor(
      async () => (await admin('GET', `/v1/achievements/${r.body.id}/backfill`)).body.state === 'done',
      {
        what: 'the backfill job',
      },
    );
    const job = (await admin('GET', `/v1/achievements/${r.body.id}/backfill`)).body;
    expect(job).toMatchObject({ completed: 1, users_done: 2, users_total: 2, events_read: 3 });
    expect((await mine('bf1', r.body.id)).completed).toBe(true);
    expect((await mine('bf2', r.body.id)).progress.current).toBe(1);
    // Counted once: a live event after the backfill adds one.
    await send([ev('bf2', T0, 'hist')]);
    await untilCompleted('bf2', r.body.id);
  });
});
