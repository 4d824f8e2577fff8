/**
 * Streaks in both shapes, through the gateways, with an injected clock: the admin routes and every
 * validation rule, daily and weekly calendar streaks across DST changes with a non-midnight
 * reset_time, rolling windows, count and sum conditions, expression filters, pause and resume, a
 * config change mid-streak, milestones (repeatable and not) with wallet credits and webhooks,
 * freezes used instead of a break, and at-risk and break webhooks fired once, even with a second
 * sweep running beside the scheduler.
 */
import { ManualClock } from '../../core/clock';
import { sweepDue } from '../../core/streaks/sweep';
import {
  call,
  createKey,
  createTenant,
  SHAPES,
  startTestApp,
  tenantWithCredentials,
  keepWebhookEvents,
  type TenantInfo,
  userToken,
  type TestApp,
} from '../support/app';
import { waitFor } from '../support/wait';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const T0 = Date.parse('2026-11-20T10:00:00Z');

describe.each(SHAPES)('streaks [%s]', (shape) => {
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
      env: {
        LUDUS_SCHEDULER_INTERVAL_MS: '50',
        LUDUS_RATE_LIMIT_ADMIN: 'off',
        LUDUS_RATE_LIMIT_QUERY: 'off',
      },
    });
    ({ tenant, key, token } = await tenantWithCredentials(app));
    await keepWebhookEvents(app, tenant.id);
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
  });
  afterAll(() => app.stop());

  const sql = () => app.ctx.adapters.sql;
  const admin = (method: string, path: string, body?: unknown, t = tenant.id, k = key) =>
    call(method, `${app.url.admin}${path}${path.includes('?') ? '&' : '?'}tenant_id=${t}`, {
      headers: { 'x-api-key': k },
      body,
    });
  const query = (path: string, t = token) =>
    call('GET', `${app.url.query}${path}`, { headers: { authorization: `Bearer ${t}` } });
  const create = async (
    name: string,
    config: Record<string, unknown>,
    extra: Record<string, unknown> = {},
  ) => {
    const r = await admin('POST', '/v1/streaks', { name, config, ...extra });
    expect([r.status, r.body?.error]).toEqual([201, undefined]);
    return r.body.id as string;
  };
  const daily = (over: Record<string, unknown> = {}) => ({
    event_types: ['lesson'],
    window: { type: 'calendar', period: 'daily', timezone: 'UTC', reset_time: '00:00' },
    condition: { type: 'count', min: 1 },
    ...over,
  });
  /** Sends events (the clock set to the latest occurred_at) and waits until they are processed. */
  const send = async (
    events: Array<{ user: string; at: number; type?: string; attrs?: Record<string, unknown> }>,
  ) => {
    clock.set(Math.max(...events.map((e) => e.at)));
    const body = events.map((e) => ({
      event_id: `s${shape}-${++seq}`,
      type: e.type ?? 'lesson',
      actor: { user_id: e.user },
      occurred_at: new Date(e.at).toISOString(),
      attrs: e.attrs ?? {},
    }));
    const r = await call('POST', `${app.url.ingest}/v1/events/bulk`, {
      headers: { authorization: `Bearer ${token}` },
      body: { events: body },
    });
    expect([r.status, r.body.failed]).toEqual([202, 0]);
    const ids = body.map((e) => e.event_id);
    await waitFor(
      async () =>
        (
          await sql().query<{ n: number }>(
            'SELECT count(*)::int AS n FROM processed_events WHERE tenant_id = $1 AND event_id = ANY($2::text[])',
            [tenant.id, ids],
          )
        ).rows[0]!.n === ids.length,
      { what: `${ids.length} events processed` },
    );
  };
  /** Moves the clock and waits for the scheduler to sweep every deadline that passed. */
  const moveTo = async (t: number) => {
    clock.set(t);
    await waitFor(
      async () =>
        (
          await sql().query<{ n: number }>(
            'SELECT count(*)::int AS n FROM streak_progress WHERE tenant_id = $1 AND due_at <= $2',
            [tenant.id, t],
          )
        ).rows[0]!.n === 0,
      { what: 'the deadlines swept' },
    );
  };
  const user = async (u: string, id: string) => {
    const r = await query(`/v1/streaks/user/${u}/${id}?limit=100`);
    expect(r.status).toBe(200);
    return r.body;
  };
  /** The outbox events of a type for one user's streak of one definition, in order. */
  const hooks = async (type: string, u: string, streakId: string) =>
    (
      await sql().query<{ payload: Record<string, unknown> }>(
        `SELECT payload FROM outbox WHERE tenant_id = $1 AND event_type = $2 AND payload->>'user_id' = $3
           AND payload->>'streak_id' = $4 ORDER BY id`,
        [tenant.id, type, u, streakId],
      )
    ).rows.map((r) => r.payload);

  it('serves the definition routes under both path forms, with status moves', async () => {
    const before = (await admin('GET', '/v1/streaks')).body.total as number;
    const id = await create('Daily lesson', daily({ at_risk_seconds: 3600 }), { description: 'one a day' });
    const long = await call('GET', `${app.url.admin}/v1/tenants/${tenant.id}/streaks/${id}`, {
      headers: { 'x-api-key': key },
    });
    expect(long.body).toMatchObject({ id, tenant_id: tenant.id, name: 'Daily lesson', status: 'active' });
    expect(long.body.config.window).toEqual({
      type: 'calendar',
      period: 'daily',
      timezone: 'UTC',
      reset_time: '00:00',
    });
    const list = await call('GET', `${app.url.admin}/v1/tenants/${tenant.id}/streaks`, {
      headers: { 'x-api-key': key },
    });
    expect(list.body.total).toBe(before + 1);
    const put = await admin('PUT', `/v1/streaks/${id}`, { description: 'changed' });
    expect(put.body).toMatchObject({ name: 'Daily lesson', description: 'changed' });
    expect((await admin('PUT', `/v1/streaks/${id}/status`, { status: 'paused' })).body.status).toBe('paused');
    expect((await admin('PUT', `/v1/streaks/${id}/status`, { status: 'active' })).body.status).toBe('active');
    const del = await admin('DELETE', `/v1/streaks/${id}`);
    expect([del.status, del.body.status, del.body.id]).toEqual([200, 'archived', id]);
    const back = await admin('PUT', `/v1/streaks/${id}/status`, { status: 'active' });
    expect([back.status, back.body.error.code]).toEqual([409, 'CONFLICT']);
    expect((await admin('GET', `/v1/streaks/${id}`)).body.status).toBe('archived');
    expect((await admin('GET', '/v1/streaks/nope')).status).toBe(404);
    // The archived name may be used again.
    await create('Daily lesson', daily());

    // Across tenants: the operator key lists every tenant; a key of two tenants lists those two.
    const other = await createTenant(app);
    const both = (await createKey(app, [tenant.id, other.id])).key;
    const otherKey = (await createKey(app, [other.id])).key;
    const oid = (await admin('POST', '/v1/streaks', { name: 'Other', config: daily() }, other.id, otherKey))
      .body.id;
    const all = await call('GET', `${app.url.admin}/v1/streaks?limit=1000`, {
      headers: { 'x-api-key': both },
    });
    expect(new Set(all.body.definitions.map((d: { tenant_id: string }) => d.tenant_id))).toEqual(
      new Set([tenant.id, other.id]),
    );
    const mine = await call('GET', `${app.url.admin}/v1/streaks?limit=1000`, {
      headers: { 'x-api-key': otherKey },
    });
    expect(mine.body.definitions.map((d: { id: string }) => d.id)).toEqual([oid]);
    const root = await call('GET', `${app.url.admin}/v1/streaks?limit=1000`, {
      headers: { 'x-api-key': app.rootKey },
    });
    expect(root.body.total).toBeGreaterThanOrEqual(all.body.total);
    // Another tenant's definition is not found through this tenant.
    expect((await admin('GET', `/v1/streaks/${oid}`)).status).toBe(404);
  });

  it('refuses every invalid definition with the field named, and stores nothing', async () => {
    await create('Taken name', daily());
    const before = (await admin('GET', '/v1/streaks?limit=1000')).body.total as number;
    const bad: Array<[unknown, number, RegExp]> = [
      [{ name: 'bad/name', config: daily() }, 400, /body\.name/],
      [{ name: 'x'.repeat(256), config: daily() }, 400, /body\.name/],
      [{ name: 'taken NAME', config: daily() }, 409, /already exists/],
      [{ name: 'n1', config: daily({ event_types: [] }) }, 400, /body\.config\.event_types/],
      [
        {
          name: 'n2',
          config: daily({ window: { type: 'calendar', period: 'daily', timezone: 'Mars/Base' } }),
        },
        400,
        /body\.config\.window\.timezone: unknown time zone/,
      ],
      [
        { name: 'n3', config: daily({ window: { type: 'calendar', period: 'daily' } }) },
        400,
        /body\.config\.window\.timezone is required/,
      ],
      [
        {
          name: 'n4',
          config: daily({
            window: { type: 'calendar', period: 'daily', timezone: 'UTC', reset_time: '25:00' },
          }),
        },
        400,
        /body\.config\.window\.reset_time/,
      ],
      [
        { name: 'n5', config: daily({ window: { type: 'rolling' } }) },
        400,
        /body\.config\.window\.duration_seconds is required/,
      ],
      [
        {
          name: 'n6',
          config: daily({ window: { type: 'rolling', duration_seconds: 3600, timezone: 'UTC' } }),
        },
        400,
        /body\.config\.window\.timezone: not allowed/,
      ],
      [
        { name: 'n7', config: daily({ condition: { type: 'count', min: 0 } }) },
        400,
        /body\.config\.condition\.min/,
      ],
      [
        { name: 'n8', config: daily({ condition: { type: 'count', min: -2 } }) },
        400,
        /body\.config\.condition\.min/,
      ],
      [
        { name: 'n9', config: daily({ condition: { type: 'sum', min: 10 } }) },
        400,
        /body\.config\.condition\.field is required/,
      ],
      [
        { name: 'n10', config: daily({ milestones: [{ threshold: 3 }, { threshold: 3 }] }) },
        400,
        /body\.config\.milestones\[1\]\.threshold: 3 is repeated/,
      ],
      [
        { name: 'n11', config: daily({ milestones: [{ threshold: 0 }] }) },
        400,
        /body\.config\.milestones\/0\/threshold|body\.config\.milestones\[0\]\.threshold|threshold/,
      ],
      [
        { name: 'n12', config: daily({ milestones: [{ threshold: 2, reward_item_id: 'missing' }] }) },
        400,
        /body\.config\.milestones\[0\]\.reward_item_id: reward item missing does not exist/,
      ],
      [
        { name: 'n13', config: daily(), reward_config_id: 'missing' },
        400,
        /body\.reward_config_id: reward config missing does not exist/,
      ],
      [{ name: 'n14', config: daily({ surprise: 1 }) }, 400, /surprise/],
      [
        {
          name: 'n15',
          config: daily({
            expression: { condition: { field: 'attrs.__proto__', operator: 'eq', value: 1 } },
          }),
        },
        400,
        /body\.config\.expression/,
      ],
      [{ name: 'n16', config: daily({ event_types: 'lesson' }) }, 400, /body\.config\.event_types/],
      [
        { name: 'n17', config: daily({ condition: { type: 'count', min: 1, field: 'x' } }) },
        400,
        /body\.config\.condition\.field/,
      ],
      [{ name: 'n18' }, 400, /config/],
    ];
    for (const [body, status, msg] of bad) {
      const r = await admin('POST', '/v1/streaks', body);
      expect([JSON.stringify(body).slice(0, 80), r.status, r.body.error?.code]).toEqual([
        JSON.stringify(body).slice(0, 80),
        status,
        status === 409 ? 'CONFLICT' : 'VALIDATION_ERROR',
      ]);
      expect(r.body.error.message).toMatch(msg);
    }
    expect((await admin('GET', '/v1/streaks?limit=1000')).body.total).toBe(before);
    // Updates are checked the same way, and an invalid one changes nothing.
    const id = await create('Valid one', daily());
    const r = await admin('PUT', `/v1/streaks/${id}`, {
      config: daily({ condition: { type: 'sum', min: 1 } }),
    });
    expect([r.status, r.body.error.message]).toEqual([
      400,
      expect.stringMatching(/condition\.field is required/),
    ]);
    expect((await admin('PUT', `/v1/streaks/${id}`, { name: 'Taken name' })).status).toBe(409);
    expect((await admin('PUT', `/v1/streaks/${id}`, {})).status).toBe(400);
    expect((await admin('PUT', `/v1/streaks/${id}/status`, { status: 'gone' })).status).toBe(400);
    expect((await admin('GET', `/v1/streaks/${id}`)).body.config.condition).toEqual({
      type: 'count',
      min: 1,
    });
  });

  it('counts daily periods across the autumn DST change in the zone with a 04:00 reset', async () => {
    const id = await create(
      'Berlin daily',
      daily({
        window: { type: 'calendar', period: 'daily', timezone: 'Europe/Berlin', reset_time: '04:00' },
      }),
    );
    clock.set(Date.parse('2026-10-23T00:00:00Z'));
    await send([{ user: 'dst', at: Date.parse('2026-10-23T12:00:00Z') }]); // period 10-23
    await send([{ user: 'dst', at: Date.parse('2026-10-24T12:00:00Z') }]); // period 10-24 (25 h long)
    // 03:30 CET on the 25th is before 04:00 local: still the period of the 24th.
    await send([{ user: 'dst', at: Date.parse('2026-10-25T02:30:00Z') }]);
    expect((await user('dst', id)).current_count).toBe(2);
    await send([{ user: 'dst', at: Date.parse('2026-10-25T03:30:00Z') }]); // 04:30 CET: period 10-25
    const v = await user('dst', id);
    expect(v).toMatchObject({
      current_count: 3,
      longest_count: 3,
      qualified_this_period: true,
      status: 'active',
    });
    expect(v.period_ends_at).toBe('2026-10-26T03:00:00.000Z');
    expect(
      v.history.periods.map((p: { period_key: string; period_start: string }) => [
        p.period_key,
        p.period_start,
      ]),
    ).toEqual([
      ['2026-10-25', '2026-10-25T03:00:00.000Z'],
      ['2026-10-24', '2026-10-24T02:00:00.000Z'],
      ['2026-10-23', '2026-10-23T02:00:00.000Z'],
    ]);
    // Nothing on the 26th: the break comes when that period ends, 04:00 CET on the 27th.
    await moveTo(Date.parse('2026-10-27T02:59:00Z'));
    expect((await user('dst', id)).current_count).toBe(3);
    await moveTo(Date.parse('2026-10-27T03:00:00Z'));
    const broken = await user('dst', id);
    expect(broken).toMatchObject({ current_count: 0, longest_count: 3, status: 'broken' });
    expect(broken.history.periods[0]).toMatchObject({ period_key: '2026-10-26', outcome: 'broken' });
    expect(await hooks('streak.broken', 'dst', id)).toEqual([
      expect.objectContaining({
        streak_id: id,
        previous_count: 3,
        longest_count: 3,
        period_ended_at: '2026-10-27T03:00:00.000Z',
      }),
    ]);
  });

  it('counts weekly periods across the spring DST change with a 04:00 Monday reset', async () => {
    const id = await create(
      'Berlin weekly',
      daily({
        window: { type: 'calendar', period: 'weekly', timezone: 'Europe/Berlin', reset_time: '04:00' },
      }),
    );
    clock.set(Date.parse('2026-03-20T00:00:00Z'));
    await send([{ user: 'wk', at: Date.parse('2026-03-20T12:00:00Z') }]); // week from Mon 03-16
    await send([{ user: 'wk', at: Date.parse('2026-03-24T12:00:00Z') }]); // week from Mon 03-23
    // Monday 03-30 03:30 CEST is before 04:00 local: still the week of 03-23 (167 h long).
    await send([{ user: 'wk', at: Date.parse('2026-03-30T01:30:00Z') }]);
    expect((await user('wk', id)).current_count).toBe(2);
    await send([{ user: 'wk', at: Date.parse('2026-03-30T02:30:00Z') }]); // 04:30 CEST: the next week
    const v = await user('wk', id);
    expect(v.current_count).toBe(3);
    expect(v.period_ends_at).toBe('2026-04-06T02:00:00.000Z');
    expect(v.history.periods.map((p: { period_key: string }) => p.period_key)).toEqual([
      '2026-W14',
      '2026-W13',
      '2026-W12',
    ]);
  });

  it('rolling windows start at the first event; late events change nothing', async () => {
    const id = await create('Rolling day', daily({ window: { type: 'rolling', duration_seconds: 86400 } }));
    const t = T0 + 3 * DAY;
    await send([{ user: 'rl', at: t }]);
    await send([{ user: 'rl', at: t + 20 * HOUR }]); // same period
    expect((await user('rl', id)).current_count).toBe(1);
    await send([{ user: 'rl', at: t + 25 * HOUR }]); // second period
    const v = await user('rl', id);
    expect(v.current_count).toBe(2);
    expect(v.period_ends_at).toBe(new Date(t + 2 * DAY).toISOString());
    await send([{ user: 'rl', at: t + 10 * HOUR }]); // late: the first period ended
    expect((await user('rl', id)).current_count).toBe(2);
    await moveTo(t + 3 * DAY);
    expect((await user('rl', id)).current_count).toBe(0);
  });

  it('sum conditions add a field; expressions and event types filter; * matches every type', async () => {
    const sum = await create(
      'Minutes',
      daily({
        condition: { type: 'sum', min: 30, field: 'minutes' },
        expression: { condition: { field: 'attrs.mode', operator: 'ne', value: 'practice' } },
      }),
    );
    const any = await create('Anything', daily({ event_types: ['*'] }));
    const t = T0 + 10 * DAY;
    await send([
      { user: 'sm', at: t, attrs: { minutes: 10, mode: 'lesson' } },
      { user: 'sm', at: t + 1000, attrs: { minutes: 15, mode: 'lesson' } },
      { user: 'sm', at: t + 2000, attrs: { minutes: 'lots', mode: 'lesson' } },
      { user: 'sm', at: t + 3000, attrs: { minutes: 60, mode: 'practice' } },
      { user: 'sm', at: t + 3500, attrs: { minutes: 60 } }, // no mode: the expression's field is missing
      { user: 'sm', at: t + 4000, type: 'other', attrs: { minutes: 60, mode: 'lesson' } },
    ]);
    let v = await user('sm', sum);
    expect([v.current_count, v.period_progress]).toEqual([0, { value: 25, min: 30 }]);
    expect((await user('sm', any)).current_count).toBe(1);
    await send([{ user: 'sm', at: t + 5000, attrs: { minutes: 5, mode: 'lesson' } }]);
    v = await user('sm', sum);
    expect([v.current_count, v.qualified_this_period, v.period_progress]).toEqual([
      1,
      true,
      { value: 30, min: 30 },
    ]);
  });

  it('pause freezes every streak (nothing advances, nothing breaks) until resumed', async () => {
    const id = await create('Pausable', daily());
    const t = Date.parse('2026-09-01T12:00:00Z');
    await send([
      { user: 'pz', at: t },
      { user: 'pz', at: t + DAY },
    ]);
    expect((await user('pz', id)).current_count).toBe(2);
    await admin('PUT', `/v1/streaks/${id}/status`, { status: 'paused' });
    await moveTo(t + 5 * DAY);
    await sweepDue(sql(), app.ctx.services, clock.now());
    expect(await user('pz', id)).toMatchObject({ current_count: 2, status: 'frozen' });
    await send([{ user: 'pz', at: t + 5 * DAY }]); // ignored while paused
    expect((await user('pz', id)).current_count).toBe(2);
    await admin('PUT', `/v1/streaks/${id}/status`, { status: 'active' });
    await moveTo(t + 5 * DAY + HOUR);
    expect(await user('pz', id)).toMatchObject({
      current_count: 2,
      status: 'active',
      qualified_this_period: false,
    });
    await send([{ user: 'pz', at: t + 5 * DAY + 2 * HOUR }]);
    expect((await user('pz', id)).current_count).toBe(3);
    expect(await hooks('streak.broken', 'pz', id)).toEqual([]);
  });

  it('a config change applies to future events; counts are kept', async () => {
    const id = await create('Changing', daily());
    const t = Date.parse('2026-09-10T12:00:00Z');
    await send([
      { user: 'cc', at: t },
      { user: 'cc', at: t + DAY },
    ]);
    const put = await admin('PUT', `/v1/streaks/${id}`, {
      config: daily({ condition: { type: 'count', min: 2 } }),
    });
    expect(put.status).toBe(200);
    expect((await user('cc', id)).current_count).toBe(2);
    await send([{ user: 'cc', at: t + 2 * DAY }]);
    expect((await user('cc', id)).current_count).toBe(2);
    await send([{ user: 'cc', at: t + 2 * DAY + 1000 }]);
    expect((await user('cc', id)).current_count).toBe(3);
  });

  it('milestones pay through the granting service: once ever, or again in a later run when repeatable', async () => {
    const coins5 = (
      await admin('POST', '/v1/reward-items', {
        name: '5 coins',
        reward_type: 'currency',
        payload: { currency_id: 'coins', amount: 5 },
      })
    ).body.item_id;
    const coins7 = (
      await admin('POST', '/v1/reward-items', {
        name: '7 coins',
        reward_type: 'currency',
        payload: { currency_id: 'coins', amount: 7 },
      })
    ).body.item_id;
    const cfg = await admin('POST', '/v1/rewards-catalog', {
      name: 'streak tiers',
      tiers: [{ condition: { type: 'milestone', metric: 'streak_days', value: 2 }, item_ids: [coins7] }],
    });
    expect(cfg.status).toBe(201);
    const id = await create(
      'Milestones',
      daily({
        milestones: [
          { threshold: 2, reward_item_id: coins5, repeatable: false },
          { threshold: 3, reward_item_id: coins5, repeatable: true },
        ],
      }),
      { reward_config_id: cfg.body.reward_config_id },
    );
    const t = Date.parse('2026-09-20T12:00:00Z');
    const balance = async () =>
      (await query('/v1/wallet/balances/coins?user_id=ms')).body.available as number;
    await send([0, 1, 2].map((d) => ({ user: 'ms', at: t + d * DAY })));
    expect(await balance()).toBe(5 + 7 + 5);
    await moveTo(t + 4 * DAY); // broken
    expect((await user('ms', id)).current_count).toBe(0);
    await send([4, 5, 6].map((d) => ({ user: 'ms', at: t + d * DAY })));
    expect(await balance()).toBe(5 + 7 + 5 + 5); // only the repeatable one again
    const reached = await hooks('streak.milestone_reached', 'ms', id);
    expect(
      reached.map((h) => [
        h.streak_days,
        h.threshold,
        (h.items as Array<{ item_id: string }>).map((i) => i.item_id).sort(),
      ]),
    ).toEqual([
      [2, 2, [coins5, coins7].sort()],
      [3, 3, [coins5]],
      [3, 3, [coins5]],
    ]);
    expect(reached[0]).toMatchObject({
      event_type: 'streak.milestone_reached',
      tenant_id: tenant.id,
      streak_id: id,
      user_id: 'ms',
    });
    const v = await user('ms', id);
    expect(
      v.milestones.map((m: { threshold: number; repeatable: boolean }) => [m.threshold, m.repeatable]),
    ).toEqual([
      [2, false],
      [3, true],
      [3, true],
    ]);
  });

  it('a freeze is used instead of a break; freezes come from the admin route and from streak_freeze rewards', async () => {
    const id = await create('Freezable', daily({ max_freezes: 2 }));
    const freezeItem = (
      await admin('POST', '/v1/reward-items', {
        name: 'A freeze',
        reward_type: 'streak_freeze',
        payload: { streak_id: id, count: 1 },
      })
    ).body.item_id;
    expect(
      (await admin('POST', '/v1/reward-items', { name: 'bad', reward_type: 'streak_freeze', payload: {} }))
        .status,
    ).toBe(400);
    await admin('PUT', `/v1/streaks/${id}`, {
      config: daily({
        max_freezes: 2,
        milestones: [{ threshold: 2, reward_item_id: freezeItem, repeatable: false }],
      }),
    });
    const g = await admin('POST', `/v1/streaks/${id}/freezes`, {
      user_id: 'fz',
      count: 1,
      idempotency_key: `f-${shape}`,
    });
    expect(g.body).toMatchObject({ granted: 1, freezes_available: 1, was_cached: false });
    const again = await admin('POST', `/v1/streaks/${id}/freezes`, {
      user_id: 'fz',
      count: 1,
      idempotency_key: `f-${shape}`,
    });
    expect(again.body).toMatchObject({ granted: 1, freezes_available: 1, was_cached: true });
    const reuse = await admin('POST', `/v1/streaks/${id}/freezes`, {
      user_id: 'other',
      count: 1,
      idempotency_key: `f-${shape}`,
    });
    expect(reuse.status).toBe(409);
    const t = Date.parse('2026-08-05T12:00:00Z');
    await send([
      { user: 'fz', at: t },
      { user: 'fz', at: t + DAY },
    ]); // milestone 2 grants a freeze
    expect((await user('fz', id)).freezes_available).toBe(2);
    const capped = await call('POST', `${app.url.admin}/v1/tenants/${tenant.id}/streaks/${id}/freezes`, {
      headers: { 'x-api-key': key },
      body: { user_id: 'fz', count: 5, idempotency_key: `f2-${shape}` },
    });
    expect(capped.body).toMatchObject({ requested: 5, granted: 0, freezes_available: 2 });
    await moveTo(t + 3 * DAY); // day 3 missed: a freeze
    expect(await user('fz', id)).toMatchObject({ current_count: 2, freezes_available: 1 });
    await moveTo(t + 4 * DAY); // day 4 missed: the last freeze
    await moveTo(t + 5 * DAY); // day 5 missed: broken
    const v = await user('fz', id);
    expect(v).toMatchObject({ current_count: 0, longest_count: 2, freezes_available: 0, status: 'broken' });
    expect(v.history.periods.map((p: { outcome: string }) => p.outcome)).toEqual([
      'broken',
      'frozen',
      'frozen',
      'qualified',
      'qualified',
    ]);
    expect((await hooks('streak.freeze_used', 'fz', id)).map((h) => h.freezes_left)).toEqual([1, 0]);
    expect(await hooks('streak.broken', 'fz', id)).toHaveLength(1);
    expect(
      (await admin('POST', `/v1/streaks/nope/freezes`, { user_id: 'fz', count: 1, idempotency_key: 'x' }))
        .status,
    ).toBe(404);
  });

  it('fires at-risk and break webhooks once, with a second sweep racing the scheduler', async () => {
    const id = await create('Risky', daily({ at_risk_seconds: 7200 }));
    const day0 = Date.parse('2026-08-20T00:00:00Z');
    await send([{ user: 'rk', at: day0 + 12 * HOUR }]);
    await moveTo(day0 + DAY + 21 * HOUR);
    expect((await user('rk', id)).status).toBe('active');
    clock.set(day0 + DAY + 22 * HOUR);
    await Promise.all([
      sweepDue(sql(), app.ctx.services, clock.now()),
      sweepDue(sql(), app.ctx.services, clock.now()),
    ]);
    await moveTo(day0 + DAY + 22 * HOUR);
    expect((await user('rk', id)).status).toBe('at_risk');
    clock.set(day0 + 2 * DAY + HOUR);
    await Promise.all([
      sweepDue(sql(), app.ctx.services, clock.now()),
      sweepDue(sql(), app.ctx.services, clock.now()),
    ]);
    await moveTo(day0 + 2 * DAY + HOUR);
    const risk = await hooks('streak.at_risk', 'rk', id);
    expect(risk).toEqual([
      expect.objectContaining({
        streak_id: id,
        current_count: 1,
        period_ends_at: new Date(day0 + 2 * DAY).toISOString(),
        period_progress: { value: 0, min: 1 },
      }),
    ]);
    expect(await hooks('streak.broken', 'rk', id)).toHaveLength(1);
  });

  it('user routes: own user only for end-user tokens, the long form, every active or paused definition', async () => {
    const id = await create('Visible', daily());
    await send([{ user: 'me', at: clock.now() }]);
    const me = await userToken(tenant, 'me');
    const list = await query('/v1/streaks/user/me', me);
    expect(list.status).toBe(200);
    const entry = list.body.streaks.find((s: { streak_id: string }) => s.streak_id === id);
    expect(entry).toMatchObject({ name: 'Visible', current_count: 1, status: 'active' });
    expect(list.body.streaks.every((s: { status: string }) => s.status !== undefined)).toBe(true);
    expect((await query('/v1/streaks/user/someone-else', me)).status).toBe(403);
    expect((await query(`/v1/streaks/user/someone-else/${id}`, me)).status).toBe(403);
    const longForm = await query(`/v1/tenants/${tenant.id}/streaks/user/me/${id}`, me);
    expect([longForm.status, longForm.body.current_count]).toEqual([200, 1]);
    const other = await createTenant(app);
    expect((await query(`/v1/tenants/${other.id}/streaks/user/me`, me)).status).toBe(403);
    expect((await query('/v1/streaks/user/me/nope')).status).toBe(404);
    expect((await query(`/v1/streaks/user/me/${id}?limit=0`)).status).toBe(400);
    const fresh = await query(`/v1/streaks/user/nobody/${id}`);
    expect(fresh.body).toMatchObject({
      status: 'not_started',
      current_count: 0,
      history: { total: 0, periods: [] },
    });
  });
});
