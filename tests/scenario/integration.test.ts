/**
 * The merged features together, in both shapes, through the gateways with an injected clock: real
 * events on two consecutive days reach a streak milestone (paying an item), which completes an
 * achievement with a streak_milestone criterion (paying a reward config), which generates a coupon
 * (trigger achievement_completed), while the milestone generates another (trigger
 * streak_milestone). Events are sent twice (same event_id): everything happens exactly once. Then
 * the coupons are redeemed: a physical item becomes an order (source_type coupon) in the user's
 * order list, a streak_freeze item reaches the user's streak freezes, as does a wheel's freeze
 * prize. Deleting a reward item or config in use names every user.
 */
import { ManualClock } from '../../core/clock';
import {
  call,
  SHAPES,
  startTestApp,
  tenantWithCredentials,
  keepWebhookEvents,
  type TenantInfo,
  type TestApp,
} from '../support/app';
import { walletViolations } from '../support/invariants';
import { waitFor } from '../support/wait';

const DAY = 86_400_000;
const T0 = Date.parse('2026-11-20T10:00:00Z');

describe.each(SHAPES)('features together [%s]', (shape) => {
  let app: TestApp;
  let clock: ManualClock;
  let tenant: TenantInfo;
  let key: string;
  let token: string;

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
  });
  afterAll(() => app.stop());

  const sql = () => app.ctx.adapters.sql;
  const admin = async (method: string, path: string, body?: unknown, expected?: number) => {
    const r = await call(
      method,
      `${app.url.admin}${path}${path.includes('?') ? '&' : '?'}tenant_id=${tenant.id}`,
      {
        headers: { 'x-api-key': key },
        body,
      },
    );
    if (expected !== undefined) expect([r.status, r.body?.error]).toEqual([expected, undefined]);
    return r;
  };
  const query = (method: string, path: string, body?: unknown) =>
    call(method, `${app.url.query}${path}`, { headers: { authorization: `Bearer ${token}` }, body });
  const item = async (name: string, reward_type: string, payload: Record<string, unknown>) =>
    (await admin('POST', '/v1/reward-items', { name, reward_type, payload }, 201)).body.item_id as string;
  /** Sends the events twice (a retry: same event_ids) and waits until they are processed. */
  const sendTwice = async (events: Array<{ id: string; user: string; at: number }>, type = 'lesson') => {
    clock.set(Math.max(...events.map((e) => e.at)));
    const body = events.map((e) => ({
      event_id: e.id,
      type,
      actor: { user_id: e.user },
      occurred_at: new Date(e.at).toISOString(),
      attrs: {},
    }));
    for (let i = 0; i < 2; i++) {
      const r = await call('POST', `${app.url.ingest}/v1/events/bulk`, {
        headers: { authorization: `Bearer ${token}` },
        body: { events: body },
      });
      expect(r.status).toBe(202);
    }
    const ids = [...new Set(body.map((e) => e.event_id))];
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
  const hooks = async (type: string, user: string) =>
    (
      await sql().query<{ payload: Record<string, unknown> }>(
        `SELECT payload FROM outbox WHERE tenant_id = $1 AND event_type = $2 AND payload->>'user_id' = $3 ORDER BY id`,
        [tenant.id, type, user],
      )
    ).rows.map((r) => r.payload);
  const walletInvariant = async () => expect(await walletViolations(sql(), tenant.id)).toEqual([]);

  it('event → streak milestone → achievement → coupons, each once; redeemed coupons become an order and a freeze', async () => {
    await admin(
      'POST',
      '/v1/wallet/currencies',
      { id: 'coins', name: 'Coins', is_spendable: true, decimal_places: 0 },
      201,
    );
    const milestoneItem = await item('10 coins', 'currency', { currency_id: 'coins', amount: 10 });
    const achievementItem = await item('100 coins', 'currency', { currency_id: 'coins', amount: 100 });
    const streak = (
      await admin(
        'POST',
        '/v1/streaks',
        {
          name: 'Daily lesson',
          config: {
            event_types: ['lesson'],
            window: { type: 'calendar', period: 'daily', timezone: 'UTC', reset_time: '00:00' },
            condition: { type: 'count', min: 1 },
            milestones: [{ threshold: 2, reward_item_id: milestoneItem, repeatable: false }],
            max_freezes: 3,
          },
        },
        201,
      )
    ).body.id as string;
    const shirt = await item('T-shirt', 'physical_item', { sku: 'TS-1' });
    const mug = await item('Mug', 'physical_item', { sku: 'MUG-1' });
    const freeze = await item('A freeze', 'streak_freeze', { streak_id: streak, count: 1 });
    const cfg = (
      await admin(
        'POST',
        '/v1/rewards-catalog',
        {
          name: 'two-day-reward',
          tiers: [
            {
              condition: { type: 'milestone', metric: 'achievement', value: 1 },
              item_ids: [achievementItem, mug],
            },
          ],
        },
        201,
      )
    ).body.reward_config_id as string;
    const achievement = (
      await admin(
        'POST',
        '/v1/achievements',
        {
          name: 'Two days',
          criteria: { type: 'streak_milestone', streak_id: streak, threshold: 2 },
          reward_config_id: cfg,
        },
        201,
      )
    ).body.id as string;
    const coupon = (name: string, reward_item_id: string, auto: Record<string, unknown>) =>
      admin(
        'POST',
        '/v1/coupons',
        {
          name,
          config: {
            reward_item_id,
            code_format: 'random',
            usage_limit: { limit_type: 'per_user', max_uses: 1 },
            auto_generate: { enabled: true, ...auto },
          },
        },
        201,
      ).then((r) => r.body.id as string);
    // The trigger's achievement and streak must exist in the tenant.
    for (const [auto, field] of [
      [{ trigger: 'achievement_completed', trigger_config: { achievement_id: 'nope' } }, 'achievement_id'],
      [
        { trigger: 'streak_milestone', trigger_config: { streak_id: 'nope', milestone_threshold: 2 } },
        'streak_id',
      ],
    ] as const) {
      const r = await admin('POST', '/v1/coupons', {
        name: 'Dangling',
        config: {
          reward_item_id: shirt,
          code_format: 'random',
          usage_limit: { limit_type: 'per_user', max_uses: 1 },
          auto_generate: { enabled: true, ...auto },
        },
      });
      expect([r.status, r.body.error.message]).toEqual([
        400,
        `body.config.auto_generate.trigger_config.${field}: ${field === 'streak_id' ? 'streak' : 'achievement'} nope does not exist`,
      ]);
    }
    const byAchievement = await coupon('For two days', shirt, {
      trigger: 'achievement_completed',
      trigger_config: { achievement_id: achievement },
    });
    const byMilestone = await coupon('Two-day milestone', freeze, {
      trigger: 'streak_milestone',
      trigger_config: { streak_id: streak, milestone_threshold: 2 },
    });

    const u = `chain-${shape}`;
    // Day 1: two events (one of another user), each sent twice.
    await sendTwice([
      { id: `${u}-1`, user: u, at: T0 },
      { id: `${u}-2`, user: u, at: T0 + 1000 },
    ]);
    await moveTo(T0 + DAY - 3_600_000);
    // Day 2: the second qualified day reaches the milestone.
    await sendTwice([{ id: `${u}-3`, user: u, at: T0 + DAY }]);
    await sendTwice([{ id: `${u}-3`, user: u, at: T0 + DAY + 1000 }]); // a late retry
    await moveTo(T0 + DAY + 2 * 3_600_000);

    const mine = (await query('GET', `/v1/streaks/user/${u}/${streak}`)).body;
    expect(mine).toMatchObject({ current_count: 2, milestones: [expect.objectContaining({ threshold: 2 })] });
    expect(mine.milestones).toHaveLength(1);

    const ledger = await sql().query<{ source_type: string; amount: string }>(
      'SELECT source_type, amount FROM ledger WHERE tenant_id = $1 AND user_id = $2 ORDER BY source_type',
      [tenant.id, u],
    );
    expect(ledger.rows.map((r) => [r.source_type, Number(r.amount)])).toEqual([
      ['achievement_completed', 100],
      [expect.stringMatching(/streak/), 10],
    ]);
    const done = (await query('GET', `/v1/achievements/user/${u}/${achievement}`)).body;
    expect(done.completed).toBe(true);

    const coupons = (await query('GET', `/v1/coupons/user/${u}`)).body;
    expect(coupons.total).toBe(2);
    expect(coupons.coupons.map((c: { definition_id: string }) => c.definition_id).sort()).toEqual(
      [byAchievement, byMilestone].sort(),
    );

    expect(await hooks('streak.milestone_reached', u)).toHaveLength(1);
    expect(await hooks('achievement.completed', u)).toHaveLength(1);
    const generated = await hooks('coupon.generated', u);
    expect(generated.map((p) => p.definition_id).sort()).toEqual([byAchievement, byMilestone].sort());
    await walletInvariant();

    // The achievement's physical item is an order already (one, however often the events came).
    const early = (await query('GET', `/v1/orders/user/${u}`)).body;
    expect(
      early.orders.map((o: { source_type: string; reward_id: string }) => [o.source_type, o.reward_id]),
    ).toEqual([['achievement_completed', mug]]);

    // Redeem the physical item's coupon: an order of the coupon, in the user's order list.
    const codeOf = (def: string) =>
      coupons.coupons.find((c: { definition_id: string }) => c.definition_id === def).code as string;
    const r1 = await query('POST', `/v1/coupons/redeem/${encodeURIComponent(codeOf(byAchievement))}`, {
      user_id: u,
    });
    expect([r1.status, r1.body.error]).toEqual([200, undefined]);
    const orders = (await query('GET', `/v1/orders/user/${u}`)).body;
    expect(orders.total).toBe(2);
    expect(
      orders.orders
        .map((o: { source_type: string; reward_id: string }) => [o.source_type, o.reward_id])
        .sort(),
    ).toEqual(
      [
        ['achievement_completed', mug],
        ['coupon', shirt],
      ].sort(),
    );

    // Redeem the freeze's coupon: the user's streak holds one freeze.
    const before = (await query('GET', `/v1/streaks/user/${u}`)).body.streaks.find(
      (s: { streak_id: string }) => s.streak_id === streak,
    );
    expect(before.freezes_available).toBe(0);
    const r2 = await query('POST', `/v1/coupons/redeem/${encodeURIComponent(codeOf(byMilestone))}`, {
      user_id: u,
    });
    expect([r2.status, r2.body.error]).toEqual([200, undefined]);
    const after = (await query('GET', `/v1/streaks/user/${u}`)).body.streaks.find(
      (s: { streak_id: string }) => s.streak_id === streak,
    );
    expect(after.freezes_available).toBe(1);

    // A wheel whose every prize is a freeze: a spin reaches the user's streak freezes too.
    const wheel = (
      await admin(
        'POST',
        '/v1/wheels',
        {
          name: 'Freezes',
          config: {
            segments: [
              { reward_id: freeze, probability: 1, label: 'a' },
              { reward_id: freeze, probability: 1, label: 'b' },
            ],
          },
        },
        201,
      )
    ).body.id as string;
    const spun = await query('POST', `/v1/wheels/${wheel}/spin`, { user_id: u });
    expect([spun.status, spun.body.error]).toEqual([200, undefined]);
    const spunState = (await query('GET', `/v1/streaks/user/${u}`)).body.streaks.find(
      (s: { streak_id: string }) => s.streak_id === streak,
    );
    expect(spunState.freezes_available).toBe(2);
    await walletInvariant();
  });

  it("a streak milestone's physical item becomes one order, however often its events come", async () => {
    const medal = await item('Medal', 'physical_item', { sku: 'MEDAL-1' });
    const streak = (
      await admin(
        'POST',
        '/v1/streaks',
        {
          name: 'Daily run',
          config: {
            event_types: ['run'],
            window: { type: 'calendar', period: 'daily', timezone: 'UTC', reset_time: '00:00' },
            condition: { type: 'count', min: 2 },
            milestones: [{ threshold: 1, reward_item_id: medal, repeatable: false }],
          },
        },
        201,
      )
    ).body.id as string;
    const u = `runner-${shape}`;
    const at = clock.now();
    // One event is not enough (min 2 a day); the second qualifies the day and reaches the milestone.
    await sendTwice([{ id: `${u}-1`, user: u, at }], 'run');
    expect((await query('GET', `/v1/orders/user/${u}`)).body.total).toBe(0);
    await sendTwice(
      [
        { id: `${u}-1`, user: u, at },
        { id: `${u}-2`, user: u, at: at + 1000 },
      ],
      'run',
    );
    await sendTwice([{ id: `${u}-2`, user: u, at: at + 2000 }], 'run'); // a late retry
    const mine = (await query('GET', `/v1/streaks/user/${u}/${streak}`)).body;
    expect(mine).toMatchObject({ current_count: 1, milestones: [expect.objectContaining({ threshold: 1 })] });
    const orders = (await query('GET', `/v1/orders/user/${u}`)).body;
    expect(orders.total).toBe(1);
    expect(
      orders.orders.map((o: { source_type: string; reward_id: string }) => [o.source_type, o.reward_id]),
    ).toEqual([[expect.stringMatching(/streak/), medal]]);
    expect(await hooks('streak.milestone_reached', u)).toHaveLength(1);
    // No ledger row: a physical item is an order, not a balance.
    const ledger = await sql().query('SELECT 1 FROM ledger WHERE tenant_id = $1 AND user_id = $2', [
      tenant.id,
      u,
    ]);
    expect(ledger.rows).toEqual([]);
  });

  it('names every user of a reward item or config when refusing its deletion', async () => {
    const prize = await item('Prize', 'custom', { what: 'a mug' });
    const unused = await item('Unused', 'custom', { what: 'nothing' });
    const cfg = (
      await admin(
        'POST',
        '/v1/rewards-catalog',
        {
          name: 'in-use',
          tiers: [{ condition: { type: 'milestone', metric: 'achievement', value: 1 }, item_ids: [prize] }],
        },
        201,
      )
    ).body.reward_config_id as string;
    const streak = (
      await admin(
        'POST',
        '/v1/streaks',
        {
          name: 'Uses the config',
          reward_config_id: cfg,
          config: {
            event_types: ['other'],
            window: { type: 'calendar', period: 'daily', timezone: 'UTC', reset_time: '00:00' },
            condition: { type: 'count', min: 1 },
          },
        },
        201,
      )
    ).body.id as string;
    const achievement = (
      await admin(
        'POST',
        '/v1/achievements',
        {
          name: 'Uses the config',
          criteria: { type: 'event_count', event_type: 'other', threshold: 1 },
          reward_config_id: cfg,
        },
        201,
      )
    ).body.id as string;
    const coupon = (
      await admin(
        'POST',
        '/v1/coupons',
        {
          name: 'Uses the item',
          config: {
            reward_item_id: prize,
            code_format: 'random',
            usage_limit: { limit_type: 'per_user', max_uses: 1 },
          },
        },
        201,
      )
    ).body.id as string;
    const wheel = (
      await admin(
        'POST',
        '/v1/wheels',
        {
          name: 'Uses the item',
          config: {
            segments: [
              { reward_id: prize, probability: 1, label: 'mug' },
              { reward_id: null, probability: 1, label: 'nothing' },
            ],
          },
        },
        201,
      )
    ).body.id as string;

    const delItem = await admin('DELETE', `/v1/reward-items/${prize}`);
    expect([delItem.status, delItem.body.error.message]).toEqual([
      409,
      `reward item ${prize} is used by reward configs ${cfg}; coupon definitions ${coupon}; wheels ${wheel}; detach it first`,
    ]);
    const delCfg = await admin('DELETE', `/v1/rewards-catalog/${cfg}`);
    const [first, second] = [streak, achievement];
    expect([delCfg.status, delCfg.body.error.message]).toEqual([
      409,
      `reward config ${cfg} is used by streak definitions ${first}; achievements ${second}; detach it first`,
    ]);
    expect((await admin('DELETE', `/v1/reward-items/${unused}`)).status).toBe(200);
  });
});
