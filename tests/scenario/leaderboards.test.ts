/**
 * Leaderboard scenarios in both shapes: events in through the ingestion gateway, standings out
 * through the query gateway, with the clock injected so windows, DST and lateness are exact.
 */
import { ManualClock } from '../../core/clock';
import {
  call,
  SHAPES,
  startTestApp,
  tenantWithCredentials,
  type TenantInfo,
  userToken,
  type TestApp,
} from '../support/app';
import { referenceStandings, type RefBoard, type RefEvent } from '../support/reference';
import { waitFor } from '../support/wait';

const T0 = Date.parse('2026-11-20T10:00:00Z');

describe.each(SHAPES)('leaderboards [%s]', (shape) => {
  let app: TestApp;
  let clock: ManualClock;
  let tenant: TenantInfo;
  let key: string;
  let token: string;
  let seq = 0;

  beforeAll(async () => {
    clock = new ManualClock(T0);
    app = await startTestApp(shape, { clock, roles: 'all', env: { LUDUS_SCHEDULER_INTERVAL_MS: '100' } });
    ({ tenant, key, token } = await tenantWithCredentials(app));
  });
  afterAll(() => app.stop());

  const admin = (method: string, path: string, body?: unknown) =>
    call(method, `${app.url.admin}${path}${path.includes('?') ? '&' : '?'}tenant_id=${tenant.id}`, {
      headers: { 'x-api-key': key },
      body,
    });
  const query = (path: string, t = token) =>
    call('GET', `${app.url.query}${path}`, { headers: { authorization: `Bearer ${t}` } });

  async function board(id: string, config: Record<string, unknown>) {
    const r = await admin('POST', '/v1/leaderboards', { leaderboard_id: id, name: id, config });
    expect(r.status).toBe(201);
    return r.body;
  }

  function ev(
    user: string,
    at: number | string,
    attrs: Record<string, unknown> = {},
    type = 'match',
    id?: string,
  ) {
    return {
      event_id: id ?? `e${++seq}-${shape}`,
      type,
      actor: { user_id: user },
      occurred_at: typeof at === 'string' ? at : new Date(at).toISOString(),
      attrs,
    };
  }

  async function send(events: unknown[]) {
    for (let i = 0; i < events.length; i += 100) {
      const r = await call('POST', `${app.url.ingest}/v1/events/bulk`, {
        headers: { authorization: `Bearer ${token}` },
        body: { events: events.slice(i, i + 100) },
      });
      expect(r.status).toBe(202);
      expect(r.body.failed).toBe(0);
    }
  }

  /** Waits until the page equals `expected` (user, score, rank), or fails with the last page. */
  async function expectStandings(id: string, windowKey: string, expected: Array<[string, number, number]>) {
    let last: unknown;
    await waitFor(
      async () => {
        const r = await query(
          `/v1/leaderboards/${id}?window_key=${encodeURIComponent(windowKey)}&limit=1000`,
        );
        last = r.body;
        if (r.status !== 200) return false;
        const got = (r.body.entries as Array<{ user_id: string; score: number; rank: number }>).map((e) => [
          e.user_id,
          e.score,
          e.rank,
        ]);
        return JSON.stringify(got) === JSON.stringify(expected) && r.body.total_entries === expected.length;
      },
      { timeoutMs: 15000, intervalMs: 50 },
    ).catch(() => {
      throw new Error(
        `standings of ${id} ${windowKey} never matched:\nexpected ${JSON.stringify(expected)}\nlast ${JSON.stringify(last)}`,
      );
    });
  }

  it('scores a daily sum board, with pages, around-user pages, rank and score lookups', async () => {
    await board('daily', {
      timeframe: { type: 'daily', timezone: 'UTC' },
      scoring: {
        rules: [{ event_type: 'match', points_expression: 'attrs.kills * 10 + attrs.assists' }],
        aggregation: 'sum',
      },
    });
    await send([
      ev('alice', T0 - 1000, { kills: 3, assists: 2 }),
      ev('bob', T0 - 900, { kills: 1, assists: 0 }),
      ev('carol', T0 - 800, { kills: 2, assists: 5 }),
      ev('bob', T0 - 700, { kills: 4, assists: 0 }),
      ev('dave', T0 - 600, { assists: 1 }), // kills missing: does not count (SPEC rule 4)
      ev('erin', T0 - 500, { kills: 9 }, 'purchase'), // no matching rule: ignored
    ]);
    await expectStandings('daily', '2026-11-20', [
      ['bob', 50, 1],
      ['alice', 32, 2],
      ['carol', 25, 3],
    ]);
    const around = await query('/v1/leaderboards/daily/user/carol?limit=2');
    expect(around.body).toMatchObject({ window_key: '2026-11-20', found: true, total_entries: 3, offset: 1 });
    expect(around.body.entries.map((e: { user_id: string }) => e.user_id)).toEqual(['alice', 'carol']);
    const nobody = await query('/v1/leaderboards/daily/user/zed?limit=2');
    expect(nobody.body).toMatchObject({ found: false, offset: 0, total_entries: 3 });
    expect(nobody.body.entries.map((e: { user_id: string }) => e.user_id)).toEqual(['bob', 'alice']);
    expect((await query('/v1/leaderboards/daily/rank/alice')).body).toMatchObject({
      found: true,
      rank: 2,
      score: 32,
      window_key: '2026-11-20',
    });
    expect((await query('/v1/leaderboards/daily/score/bob')).body).toMatchObject({ found: true, score: 50 });
    expect((await query('/v1/leaderboards/daily/rank/zed')).body).toMatchObject({
      found: false,
      rank: 0,
      score: 0,
    });
    const page2 = await query('/v1/leaderboards/daily?limit=1&offset=1');
    expect(page2.body).toMatchObject({
      limit: 1,
      offset: 1,
      total_entries: 3,
      entries: [{ user_id: 'alice', score: 32, rank: 2 }],
    });
  });

  it('ignores duplicates and retries of the same event_id, in one request and across requests', async () => {
    await board('dups', {
      timeframe: { type: 'all_time' },
      scoring: { rules: [{ event_type: '*', points_expression: 'attrs.p' }], aggregation: 'sum' },
    });
    const id = `dup-${shape}`;
    const once = ev('u1', T0 - 100, { p: 5 }, 'x', id);
    await send([once, once, ev('u2', T0 - 50, { p: 1 }, 'x')]); // twice in one bulk
    await send([once]); // again in another bulk request
    const single = await call('POST', `${app.url.ingest}/v1/events`, {
      headers: { authorization: `Bearer ${token}` },
      body: once,
    }); // and as a single event
    expect(single.status).toBe(202);
    // A later marker event of the same user: same key, same partition, so applied after every copy.
    // Once it is scored the pipeline has certainly passed the duplicates. Counted once, u1 has
    // 5 + 100 = 105; any duplicate counted would make it 110 or more, never 105.
    await send([ev('u1', T0 - 10, { p: 100 }, 'x')]);
    await expectStandings('dups', 'all_time', [
      ['u1', 105, 1],
      ['u2', 1, 2],
    ]);
    const rows = await app.ctx.adapters.sql.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM processed_events WHERE tenant_id = $1 AND event_id = $2',
      [tenant.id, id],
    );
    expect(Number(rows.rows[0]!.n)).toBe(1);
  });

  it('applies rule conditions, the first matching rule, scope filters and min_score', async () => {
    await board('filtered', {
      timeframe: { type: 'all_time' },
      scoring: {
        rules: [
          {
            event_type: 'match',
            conditions: { 'attrs.mode': { eq: 'ranked' }, 'attrs.kills': { gte: 1 } },
            points_expression: 'attrs.kills * 3',
          },
          {
            event_type: 'match',
            conditions: { 'attrs.mode': { in: ['casual', 'arcade'] } },
            points_expression: 'abs(min(attrs.kills, 2))',
          },
        ],
        aggregation: 'sum',
      },
      scope: {
        filters: [
          { field: 'attrs.region', op: 'ne', value: 'cn' },
          { field: 'subject.type', op: 'eq', value: 'arena' },
        ],
      },
      ranking: { min_score: 2 },
    });
    const withSubject = (e: ReturnType<typeof ev>, region: string) => ({
      ...e,
      subject: { type: 'arena', id: 'a1' },
      attrs: { ...e.attrs, region },
    });
    await send([
      withSubject(ev('fa', T0 - 900, { mode: 'ranked', kills: 4 }), 'eu'), // 12
      withSubject(ev('fb', T0 - 800, { mode: 'casual', kills: 9 }), 'eu'), // min(9,2) = 2
      withSubject(ev('fc', T0 - 700, { mode: 'ranked', kills: 0 }), 'eu'), // no rule matches (kills < 1)
      withSubject(ev('fd', T0 - 600, { mode: 'ranked', kills: 5 }), 'cn'), // outside the scope
      { ...ev('fe', T0 - 500, { mode: 'ranked', kills: 5, region: 'eu' }), subject: { type: 'lobby' } }, // outside the scope
      withSubject(ev('ff', T0 - 400, { mode: 'arcade', kills: 1 }), 'us'), // 1: below min_score, not ranked
    ]);
    await expectStandings('filtered', 'all_time', [
      ['fa', 12, 1],
      ['fb', 2, 2],
    ]);
    expect((await query('/v1/leaderboards/filtered/rank/ff')).body.found).toBe(false);
  });

  it('ranks ties by policy: unique (who got there first), shared and dense', async () => {
    const scoring = { rules: [{ event_type: 'match', points_expression: 'attrs.p' }], aggregation: 'sum' };
    for (const policy of ['unique', 'shared', 'dense']) {
      await board(`ties-${policy}`, {
        timeframe: { type: 'all_time' },
        scoring,
        ranking: { rank_policy: policy },
      });
    }
    await send([
      ev('a', T0 - 5000, { p: 10 }),
      ev('b', T0 - 4000, { p: 7 }),
      ev('c', T0 - 6000, { p: 7 }), // reached 7 before b: ranks above b on unique
      ev('d', T0 - 3000, { p: 3 }),
    ]);
    await expectStandings('ties-unique', 'all_time', [
      ['a', 10, 1],
      ['c', 7, 2],
      ['b', 7, 3],
      ['d', 3, 4],
    ]);
    await expectStandings('ties-shared', 'all_time', [
      ['a', 10, 1],
      ['c', 7, 2],
      ['b', 7, 2],
      ['d', 3, 4],
    ]);
    await expectStandings('ties-dense', 'all_time', [
      ['a', 10, 1],
      ['c', 7, 2],
      ['b', 7, 2],
      ['d', 3, 3],
    ]);
    expect((await query('/v1/leaderboards/ties-shared/rank/b')).body.rank).toBe(2);
    expect((await query('/v1/leaderboards/ties-dense/rank/d')).body.rank).toBe(3);
  });

  it('aggregates sum, count, max, min and avg like the reference model', async () => {
    const events: RefEvent[] = [];
    const users = ['p1', 'p2', 'p3', 'p4'];
    let n = 0;
    for (let i = 0; i < 40; i++) {
      events.push({
        event_id: `agg-${shape}-${n++}`,
        type: 'round',
        user_id: users[(i * 7) % 4]!,
        occurred_at: T0 - 100000 + i * 1000,
        attrs: { v: (i * 13) % 17 },
      });
    }
    for (const aggregation of ['sum', 'count', 'max', 'min', 'avg'] as const) {
      await board(`agg-${aggregation}`, {
        timeframe: { type: 'daily' },
        scoring: {
          rules: [
            { event_type: 'round', ...(aggregation === 'count' ? {} : { points_expression: 'attrs.v' }) },
          ],
          aggregation,
        },
      });
    }
    await send(events.map((e) => ev(e.user_id, e.occurred_at, e.attrs, e.type, e.event_id)));
    for (const aggregation of ['sum', 'count', 'max', 'min', 'avg'] as const) {
      const ref: RefBoard = { event_type: 'round', field: 'v', aggregation, timeframe: 'daily_utc' };
      const expected = referenceStandings(events, ref).get('2026-11-20')!;
      await expectStandings(
        `agg-${aggregation}`,
        '2026-11-20',
        expected.map((e) => [e.user_id, e.score, e.rank]),
      );
    }
  });

  it('keys every timeframe in the board time zone, across a DST change', async () => {
    const tz = 'Europe/Berlin';
    const rules = [{ event_type: 'dst', points_expression: '1' }];
    for (const type of ['hourly', 'daily', 'weekly', 'monthly', 'all_time']) {
      await board(`tf-${type}`, {
        timeframe: { type, timezone: tz, grace_seconds: 3600 * 24 * 300 },
        scoring: { rules, aggregation: 'sum' },
      });
    }
    // Berlin leaves summer time at 2026-10-25 01:00 UTC (03:00 CEST -> 02:00 CET).
    await send([
      ev('x', '2026-10-24T21:59:00Z', {}, 'dst'), // Berlin 2026-10-24 23:59 CEST
      ev('x', '2026-10-24T22:00:00Z', {}, 'dst'), // Berlin 2026-10-25 00:00 CEST
      ev('x', '2026-10-25T22:59:00Z', {}, 'dst'), // Berlin 2026-10-25 23:59 CET: the 25-hour day
      ev('x', '2026-10-25T23:00:00Z', {}, 'dst'), // Berlin 2026-10-26 00:00 CET
    ]);
    await expectStandings('tf-daily', '2026-10-24', [['x', 1, 1]]);
    await expectStandings('tf-daily', '2026-10-25', [['x', 2, 1]]);
    await expectStandings('tf-daily', '2026-10-26', [['x', 1, 1]]);
    await expectStandings('tf-weekly', '2026-W43', [['x', 3, 1]]);
    await expectStandings('tf-weekly', '2026-W44', [['x', 1, 1]]);
    await expectStandings('tf-monthly', '2026-10', [['x', 4, 1]]);
    await expectStandings('tf-all_time', 'all_time', [['x', 4, 1]]);
    await expectStandings('tf-hourly', '2026-10-25T00', [['x', 1, 1]]);
    await expectStandings('tf-hourly', '2026-10-25T23', [['x', 1, 1]]);
  });

  it('lands late events in their window while it is open, ignores them after, and closes windows', async () => {
    await board('late', {
      timeframe: { type: 'daily', timezone: 'UTC', grace_seconds: 600 },
      scoring: { rules: [{ event_type: 'match', points_expression: 'attrs.p' }], aggregation: 'sum' },
    });
    clock.set(Date.parse('2026-11-21T00:05:00Z')); // 5 minutes into the next day: yesterday is in grace
    await send([ev('amy', '2026-11-20T23:50:00Z', { p: 4 }), ev('ben', '2026-11-21T00:01:00Z', { p: 1 })]);
    await expectStandings('late', '2026-11-20', [['amy', 4, 1]]);
    await expectStandings('late', '2026-11-21', [['ben', 1, 1]]);
    clock.set(Date.parse('2026-11-21T00:11:00Z')); // grace over: the scheduler closes 2026-11-20
    await waitFor(async () => (await query('/v1/snapshots/late')).body.snapshots?.length === 1, {
      timeoutMs: 15000,
    });
    const snaps = await query('/v1/snapshots/late');
    expect(snaps.body.snapshots[0]).toMatchObject({ window_key: '2026-11-20', total_entries: 1 });
    await send([ev('amy', '2026-11-20T23:55:00Z', { p: 100 }), ev('ben', '2026-11-21T00:02:00Z', { p: 2 })]);
    await expectStandings('late', '2026-11-21', [['ben', 3, 1]]);
    await expectStandings('late', '2026-11-20', [['amy', 4, 1]]); // the closed window did not move
    const t = snaps.body.snapshots[0].snapshot_time;
    const snap = await query(`/v1/snapshots/late/${t}`);
    expect(snap.body).toMatchObject({
      window_key: '2026-11-20',
      entries: [{ user_id: 'amy', score: 4, rank: 1 }],
    });
    expect((await query(`/v1/snapshots/late/${t}/user/amy`)).body).toMatchObject({
      found: true,
      rank: 1,
      score: 4,
    });
    expect((await query(`/v1/snapshots/late/${t}/user/zed`)).body).toMatchObject({ found: false, rank: 0 });
  });

  it('follows the window rules: omitted, current, a specific key, and 404s', async () => {
    await board('rules', {
      timeframe: { type: 'daily', timezone: 'UTC', grace_seconds: 0 },
      scoring: { rules: [{ event_type: 'match', points_expression: 'attrs.p' }], aggregation: 'sum' },
    });
    clock.set(Date.parse('2026-11-22T12:00:00Z'));
    await send([ev('kim', '2026-11-22T11:00:00Z', { p: 9 })]);
    await expectStandings('rules', '2026-11-22', [['kim', 9, 1]]);
    // Rule 1: omitted -> the live window with data.
    expect((await query('/v1/leaderboards/rules')).body).toMatchObject({
      window_key: '2026-11-22',
      window_status: 'live',
    });
    // Close it by hand, move to the next day: the live window is empty, so the latest completed one is shown.
    const closed = await admin('POST', '/v1/leaderboards/rules/windows/2026-11-22/close');
    expect(closed.status).toBe(200);
    expect(closed.body).toMatchObject({ status: 'closed', entries: 1, already_closed: false });
    expect((await admin('POST', '/v1/leaderboards/rules/windows/2026-11-22/close')).body.already_closed).toBe(
      true,
    );
    clock.set(Date.parse('2026-11-23T08:00:00Z'));
    const omitted = await query('/v1/leaderboards/rules');
    expect(omitted.body).toMatchObject({
      window_key: '2026-11-22',
      window_status: 'completed',
      entries: [{ user_id: 'kim', score: 9, rank: 1 }],
    });
    // Rule 2: current forces the current window even when empty.
    expect((await query('/v1/leaderboards/rules?window_key=current')).body).toMatchObject({
      window_key: '2026-11-23',
      entries: [],
      total_entries: 0,
    });
    // Rule 3: an unknown window is a 404, a malformed one too; a bad limit is INVALID_INPUT.
    expect((await query('/v1/leaderboards/rules?window_key=2020-01-01')).status).toBe(404);
    expect((await query('/v1/leaderboards/rules?window_key=garbage')).status).toBe(404);
    const bad = await query('/v1/leaderboards/rules?limit=0');
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('INVALID_INPUT');
    expect((await query('/v1/leaderboards/nope')).status).toBe(404);
    // Events after a manual close do not reopen the window.
    await send([ev('kim', '2026-11-22T11:30:00Z', { p: 1 })]);
    expect((await query('/v1/leaderboards/rules?window_key=2026-11-22')).body.entries).toEqual([
      { user_id: 'kim', score: 9, rank: 1 },
    ]);
  });

  it('refuses bad definitions with a 400 that says why, and keeps versions on update', async () => {
    const base = {
      timeframe: { type: 'daily' },
      scoring: { rules: [{ event_type: 'm', points_expression: 'attrs.p' }], aggregation: 'sum' },
    };
    const bad: Array<[unknown, RegExp]> = [
      [{ ...base, timeframe: { type: 'daily', timezone: 'Mars/Base' } }, /timezone/],
      [
        {
          ...base,
          scoring: {
            ...base.scoring,
            rules: [{ event_type: 'm', points_expression: 'constructor.constructor("x")()' }],
          },
        },
        /points_expression/,
      ],
      [
        {
          ...base,
          scoring: { ...base.scoring, rules: [{ event_type: 'm', points_expression: 'attrs.__proto__.x' }] },
        },
        /points_expression/,
      ],
      [
        { ...base, scoring: { ...base.scoring, rules: [{ event_type: 'm' }] } },
        /points_expression is required/,
      ],
      [{ ...base, scoring: { ...base.scoring, aggregation: 'median' } }, /aggregation must be one of/],
      [
        {
          ...base,
          scoring: {
            ...base.scoring,
            rules: [
              { event_type: 'm', points_expression: '1', conditions: { 'attrs.mode': { regex: 'x' } } },
            ],
          },
        },
        /conditions/,
      ],
      [{ ...base, timeframe: { type: 'weekly', reset_day: 'funday' } }, /reset_day/],
    ];
    for (const [config, message] of bad) {
      const r = await admin('POST', '/v1/leaderboards', { leaderboard_id: 'bad', name: 'bad', config });
      expect([r.status, r.body.error?.code]).toEqual([400, 'VALIDATION_ERROR']);
      expect(r.body.error.message).toMatch(message);
    }
    expect((await admin('GET', '/v1/leaderboards/bad')).status).toBe(404);
    await board('versioned', base);
    const dup = await admin('POST', '/v1/leaderboards', {
      leaderboard_id: 'versioned',
      name: 'x',
      config: base,
    });
    expect(dup.status).toBe(409);
    const same = await admin('PUT', '/v1/leaderboards/versioned', { name: 'Renamed' });
    expect(same.body).toMatchObject({ name: 'Renamed', version: 1 });
    const changed = await admin('PUT', '/v1/leaderboards/versioned', {
      config: { ...base, scoring: { ...base.scoring, aggregation: 'max' } },
    });
    expect(changed.body).toMatchObject({ version: 2 });
    const list = await admin('GET', '/v1/leaderboards?limit=500');
    expect(list.body.leaderboards.map((b: { leaderboard_id: string }) => b.leaderboard_id)).toContain(
      'versioned',
    );
    const retired = await admin('DELETE', '/v1/leaderboards/versioned');
    expect(retired.body.status).toBe('archived');
    const path = await call('GET', `${app.url.admin}/v1/tenants/${tenant.id}/leaderboards/versioned`, {
      headers: { 'x-api-key': key },
    });
    expect(path.body.status).toBe('archived');
  });

  it('lets an end user read standings but only their own rank, and send events only as themselves', async () => {
    const me = await userToken(tenant, 'alice');
    expect((await query('/v1/leaderboards/daily/rank/alice', me)).status).toBe(200);
    expect((await query('/v1/leaderboards/daily/rank/bob', me)).status).toBe(403);
    const r = await call('POST', `${app.url.ingest}/v1/events`, {
      headers: { authorization: `Bearer ${me}` },
      body: ev('bob', clock.now()),
    });
    expect(r.status).toBe(403);
    const mine = await call('POST', `${app.url.ingest}/v1/events`, {
      headers: { authorization: `Bearer ${me}` },
      body: ev('alice', clock.now()),
    });
    expect(mine.status).toBe(202);
    expect(mine.body).toEqual({ status: 'accepted', event_id: expect.any(String) });
  });
  it('answers identical pages asked at once each as fresh as its own read (shared reads, read-your-writes)', async () => {
    await board('hot', {
      timeframe: { type: 'all_time' },
      scoring: { rules: [{ event_type: 'match', points_expression: 'attrs.kills' }], aggregation: 'sum' },
    });
    await send(['p1', 'p2', 'p3', 'p4'].map((u, i) => ev(u, T0 - 1000 + i, { kills: 10 * (i + 1) })));
    await expectStandings('hot', 'all_time', [
      ['p4', 40, 1],
      ['p3', 30, 2],
      ['p2', 20, 3],
      ['p1', 10, 4],
    ]);
    // Many identical requests at once, and other pages beside them: each gets its own page.
    const [same, two] = await Promise.all([
      Promise.all(Array.from({ length: 20 }, () => query('/v1/leaderboards/hot?limit=3'))),
      Promise.all(Array.from({ length: 5 }, () => query('/v1/leaderboards/hot?limit=2&offset=1'))),
    ]);
    for (const r of same) {
      expect(r.status).toBe(200);
      expect(r.body).toEqual(same[0]!.body);
    }
    expect(same[0]!.body.entries.map((e: { user_id: string }) => e.user_id)).toEqual(['p4', 'p3', 'p2']);
    for (const r of two)
      expect(r.body.entries.map((e: { user_id: string }) => e.user_id)).toEqual(['p3', 'p2']);
    // Pages asked without pause meanwhile; once a rank lookup shows a new score, every page asked
    // after it shows the score too (no request is answered from a read that started before it).
    let stop = false;
    const hammer = Promise.all(
      Array.from({ length: 8 }, async () => {
        while (!stop) expect((await query('/v1/leaderboards/hot?limit=3')).status).toBe(200);
      }),
    );
    let total = 10;
    try {
      for (let round = 1; round <= 3; round++) {
        await send([ev('p1', T0 + round, { kills: 100 * round })]);
        total += 100 * round;
        await waitFor(async () => (await query('/v1/leaderboards/hot/score/p1')).body.score === total, {
          timeoutMs: 15000,
          intervalMs: 10,
        });
        const after = await Promise.all(
          Array.from({ length: 8 }, () => query('/v1/leaderboards/hot?limit=3')),
        );
        for (const r of after) expect(r.body.entries[0]).toEqual({ user_id: 'p1', score: total, rank: 1 });
      }
    } finally {
      stop = true;
      await hammer;
    }
  });
});
