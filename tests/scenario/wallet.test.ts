/**
 * Wallet, earning rules, tiers, levels, reward items, reward configs and leaderboard payouts in
 * both shapes, through the gateways. After every test the ledger invariant is checked: for every
 * user and currency, balance == sum(ledger) and lifetime_earned == sum(credits).
 */
import { ManualClock } from '../../core/clock';
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
import { walletViolations } from '../support/invariants';
import { waitFor } from '../support/wait';

const T0 = Date.parse('2026-11-20T10:00:00Z');

describe.each(SHAPES)('wallet and rewards [%s]', (shape) => {
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
    for (const [id, spendable] of [
      ['coins', true],
      ['xp', false],
    ] as const) {
      expect(
        (
          await admin('POST', '/v1/wallet/currencies', {
            id,
            name: id,
            is_spendable: spendable,
            decimal_places: 0,
          })
        ).status,
      ).toBe(201);
    }
  });
  afterEach(async () => {
    // Invariant 3, checked straight in SQL.
    expect(await walletViolations(app.ctx.adapters.sql, tenant.id, { lifetime: true })).toEqual([]);
  });
  afterAll(() => app.stop());

  const admin = (method: string, path: string, body?: unknown) =>
    call(method, `${app.url.admin}${path}${path.includes('?') ? '&' : '?'}tenant_id=${tenant.id}`, {
      headers: { 'x-api-key': key },
      body,
    });
  const query = (path: string, t = token) =>
    call('GET', `${app.url.query}${path}`, { headers: { authorization: `Bearer ${t}` } });
  const grant = (user: string, amount: number, extra: Record<string, unknown> = {}) =>
    admin('POST', '/v1/wallet/grant', { user_id: user, currency_id: 'coins', amount, ...extra });
  const balance = async (user: string, currency = 'coins') =>
    (await query(`/v1/wallet/balances/${currency}?user_id=${user}`)).body.available as number;
  const send = async (events: unknown[]) => {
    const r = await call('POST', `${app.url.ingest}/v1/events/bulk`, {
      headers: { authorization: `Bearer ${token}` },
      body: { events },
    });
    expect([r.status, r.body.failed]).toEqual([202, 0]);
  };
  const ev = (user: string, at: string | number, type: string, attrs: Record<string, unknown> = {}) => ({
    event_id: `w${shape}-${++seq}`,
    type,
    actor: { user_id: user },
    occurred_at: typeof at === 'number' ? new Date(at).toISOString() : at,
    attrs,
  });

  it('serves currencies under all three admin path forms and validates them', async () => {
    for (const base of [`/v1/tenants/${tenant.id}/wallet`, '/v1/tenants/wallet', '/v1/wallet']) {
      const r = await call(
        'GET',
        `${app.url.admin}${base}/currencies${base.includes(tenant.id) ? '' : `?tenant_id=${tenant.id}`}`,
        {
          headers: { 'x-api-key': key },
        },
      );
      expect([base, r.status]).toEqual([base, 200]);
      expect(r.body.currencies.map((c: { id: string }) => c.id)).toEqual(['coins', 'xp']);
    }
    expect(
      (
        await admin('POST', '/v1/wallet/currencies', {
          id: 'coins',
          name: 'x',
          is_spendable: true,
          decimal_places: 0,
        })
      ).status,
    ).toBe(409);
    const bad = await admin('POST', '/v1/wallet/currencies', {
      id: 'Gold-1',
      name: 'x',
      is_spendable: true,
      decimal_places: 0,
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toMatch(/^body\.id must match pattern/);
    const gems = await admin('POST', '/v1/wallet/currencies', {
      id: 'gems',
      name: 'Gems',
      symbol: 'G',
      is_spendable: true,
      decimal_places: 2,
    });
    expect(gems.body).toMatchObject({ id: 'gems', active: true, decimal_places: 2 });
    expect(
      (await admin('PUT', '/v1/wallet/currencies/gems', { name: 'Gemstones', active: false })).body,
    ).toMatchObject({ name: 'Gemstones', active: false });
    expect((await admin('GET', '/v1/wallet/currencies/nope')).status).toBe(404);
    const inactive = await admin('POST', '/v1/wallet/grant', {
      user_id: 'u',
      currency_id: 'gems',
      amount: 1,
    });
    expect(inactive.status).toBe(400);
    expect(inactive.body.error.message).toMatch(/currency_id: Currency gems is not active/);
  });

  it('grants and deducts with idempotency keys, never below zero, with a ledger and both query forms', async () => {
    const g = await grant('ann', 100, { idempotency_key: `k-${shape}-1`, description: 'welcome' });
    expect(g.status).toBe(200);
    expect(g.body).toMatchObject({ balance_after: 100, was_cached: false });
    const again = await grant('ann', 100, { idempotency_key: `k-${shape}-1`, description: 'welcome' });
    expect(again.body).toEqual({
      transaction_id: g.body.transaction_id,
      balance_after: 100,
      was_cached: true,
    });
    const conflict = await grant('ann', 99, { idempotency_key: `k-${shape}-1` });
    expect(conflict.status).toBe(409);
    const d = await admin('POST', '/v1/wallet/deduct', {
      user_id: 'ann',
      currency_id: 'coins',
      amount: 30,
      idempotency_key: `k-${shape}-2`,
    });
    expect(d.body.balance_after).toBe(70);
    const over = await admin('POST', '/v1/wallet/deduct', {
      user_id: 'ann',
      currency_id: 'coins',
      amount: 71,
    });
    expect(over.status).toBe(402);
    expect(over.body.error).toMatchObject({
      code: 'INSUFFICIENT_BALANCE',
      message: 'Insufficient balance: 70 coins available, 71 needed',
    });
    for (const [body, message] of [
      [{ user_id: 'ann', currency_id: 'coins', amount: 0 }, /body\.amount must be >= 1/],
      [{ user_id: 'ann', currency_id: 'coins', amount: 1.5 }, /body\.amount must be an integer/],
      [{ user_id: 'ann', currency_id: 'nope', amount: 1 }, /Currency nope does not exist/],
      [{ currency_id: 'coins', amount: 1 }, /body\.user_id is required/],
    ] as const) {
      const r = await admin('POST', '/v1/wallet/grant', body);
      expect(r.status).toBe(400);
      expect(r.body.error.message).toMatch(message);
    }
    const view = await query('/v1/wallet/balances?user_id=ann');
    expect(view.body).toMatchObject({ tenant_id: tenant.id, user_id: 'ann' });
    expect(view.body.balances.find((b: { currency_id: string }) => b.currency_id === 'coins')).toEqual({
      currency_id: 'coins',
      currency_name: 'coins',
      currency_symbol: null,
      available: 70,
      lifetime_earned: 100,
    });
    const long = await query(`/v1/wallet/${tenant.id}/transactions?user_id=ann`);
    expect(Array.isArray(long.body)).toBe(true);
    expect(long.body.map((t: { amount: number }) => t.amount)).toEqual([-30, 100]);
    expect(long.body[1]).toMatchObject({
      source_type: 'manual_grant',
      description: 'welcome',
      balance_after: 100,
    });
    const shortForm = await query('/v1/wallet/transactions?user_id=ann&limit=1&currency_id=coins');
    expect(shortForm.body).toMatchObject({
      total: 2,
      transactions: [{ amount: -30, source_type: 'manual_deduct', balance_after: 70 }],
    });
    expect((await query('/v1/wallet/transactions?user_id=ann&limit=101')).status).toBe(400);
    expect((await query(`/v1/wallet/${tenant.id}/transactions?user_id=ann&limit=1000`)).status).toBe(200);
    expect((await query('/v1/wallet/transactions')).body.error.message).toBe('query.user_id is required');
    // An end-user token: own data by default, nobody else's.
    const me = await userToken(tenant, 'ann');
    expect((await query('/v1/wallet/balances/coins', me)).body.available).toBe(70);
    expect((await query('/v1/wallet/balances/coins?user_id=bob', me)).status).toBe(403);
    // Outbox: currency.earned and currency.spent in the SPEC shape.
    const out = await app.ctx.adapters.sql.query<{ payload: Record<string, unknown> }>(
      "SELECT payload FROM outbox WHERE tenant_id = $1 AND event_type LIKE 'currency.%' AND payload->>'user_id' = 'ann' ORDER BY id",
      [tenant.id],
    );
    expect(out.rows.map((r) => r.payload)).toEqual([
      expect.objectContaining({
        event_type: 'currency.earned',
        user_id: 'ann',
        data: expect.objectContaining({
          currency_id: 'coins',
          amount: 100,
          new_balance: 100,
          source_type: 'manual_grant',
          transaction_id: g.body.transaction_id,
        }),
      }),
      expect.objectContaining({
        event_type: 'currency.spent',
        data: expect.objectContaining({ amount: 30, new_balance: 70, source_type: 'manual_deduct' }),
      }),
    ]);
  });

  it('lets exactly 100 of 200 simultaneous spends through against a balance that covers 100', async () => {
    await grant('cat', 100);
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        admin('POST', '/v1/wallet/deduct', {
          user_id: 'cat',
          currency_id: 'coins',
          amount: 1,
          idempotency_key: `spend-${shape}-${i}`,
        }),
      ),
    );
    expect(results.filter((r) => r.status === 200)).toHaveLength(100);
    expect(results.filter((r) => r.status === 402)).toHaveLength(100);
    expect(await balance('cat')).toBe(0);
    const sum = await app.ctx.adapters.sql.query<{ s: number }>(
      "SELECT sum(amount)::bigint AS s FROM ledger WHERE tenant_id = $1 AND user_id = 'cat' AND currency_id = 'coins'",
      [tenant.id],
    );
    expect(Number(sum.rows[0]!.s)).toBe(0);
  });

  it('answers simultaneous spends with one idempotency key once: one ledger row, the first result or 409', async () => {
    await grant('kay', 100);
    await grant('lou', 100);
    const N = 24;
    const deduct = (b: Record<string, unknown>) =>
      admin('POST', '/v1/wallet/deduct', { currency_id: 'coins', source_type: 'manual_deduct', ...b });
    const ledgerRows = async (k: string) =>
      (
        await app.ctx.adapters.sql.query<{ user_id: string; amount: string }>(
          'SELECT user_id, amount FROM ledger WHERE tenant_id = $1 AND idempotency_key = $2',
          [tenant.id, k],
        )
      ).rows.map((r) => [r.user_id, Number(r.amount)]);

    // N identical requests at once: one movement; every answer is the first result.
    const same = `same-${shape}`;
    const a = await Promise.all(
      Array.from({ length: N }, () => deduct({ user_id: 'kay', amount: 7, idempotency_key: same })),
    );
    expect(a.map((r) => r.status)).toEqual(Array(N).fill(200));
    const firsts = a.filter((r) => r.body.was_cached === false);
    expect(firsts).toHaveLength(1);
    for (const r of a) {
      expect(r.body).toEqual({ ...firsts[0]!.body, was_cached: r.body.was_cached });
    }
    expect(firsts[0]!.body.balance_after).toBe(93);
    expect(await ledgerRows(same)).toEqual([['kay', -7]]);
    expect(await balance('kay')).toBe(93);

    // N requests at once with one key and different bodies (amount, user): one movement; each answer
    // is that result when its body is the winner's, else 409.
    const mixed = `mixed-${shape}`;
    const bodies = Array.from({ length: N }, (_, i) => ({
      user_id: i % 3 === 0 ? 'lou' : 'kay',
      amount: i % 2 === 0 ? 5 : 6,
      idempotency_key: mixed,
    }));
    const b = await Promise.all(bodies.map((body) => deduct(body)));
    expect(b.every((r) => r.status === 200 || r.status === 409)).toBe(true);
    const winners = b.map((r, i) => [r, bodies[i]!] as const).filter(([r]) => r.body.was_cached === false);
    expect(winners).toHaveLength(1);
    const [won, wonBody] = winners[0]!;
    b.forEach((r, i) => {
      const sameBody = bodies[i]!.user_id === wonBody.user_id && bodies[i]!.amount === wonBody.amount;
      if (sameBody) expect([i, r.status, r.body.transaction_id]).toEqual([i, 200, won.body.transaction_id]);
      else expect([i, r.status, r.body.error?.code]).toEqual([i, 409, expect.any(String)]);
    });
    expect(await ledgerRows(mixed)).toEqual([[wonBody.user_id, -wonBody.amount]]);
    expect(await balance(wonBody.user_id)).toBe((wonBody.user_id === 'kay' ? 93 : 100) - wonBody.amount);
  });

  it('holds at most 100 earning rules per tenant, also when creates race, and refuses the next with 409', async () => {
    /** A new tenant with a currency, and its admin POST. */
    const withGems = async () => {
      const t = await tenantWithCredentials(app);
      const post = (path: string, body: unknown) =>
        call('POST', `${app.url.admin}/v1/wallet/${path}?tenant_id=${t.tenant.id}`, {
          headers: { 'x-api-key': t.key },
          body,
        });
      const gems = { id: 'gems', name: 'Gems', is_spendable: true, decimal_places: 0 };
      expect((await post('currencies', gems)).status).toBe(201);
      return { ...t, post };
    };
    const rule = (i: number) => ({
      name: `rule ${i}`,
      currency_id: 'gems',
      event_type: 'match',
      calculation: { type: 'fixed', amount: 1 },
    });
    const own = await withGems();
    for (let i = 0; i < 90; i++) expect((await own.post('earning-rules', rule(i))).status).toBe(201);
    // Twenty creates at once for the last ten places: ten succeed, ten are refused.
    const raced = await Promise.all(
      Array.from({ length: 20 }, (_, i) => own.post('earning-rules', rule(90 + i))),
    );
    expect(raced.map((r) => r.status).sort()).toEqual([...Array(10).fill(201), ...Array(10).fill(409)]);
    const refused = raced.find((r) => r.status === 409)!;
    expect(refused.body.error).toMatchObject({
      code: 'CONFLICT',
      message: expect.stringMatching(/at most 100/),
    });
    const list = await call('GET', `${app.url.admin}/v1/wallet/earning-rules?tenant_id=${own.tenant.id}`, {
      headers: { 'x-api-key': own.key },
    });
    expect(list.body.total).toBe(100);
    // Another tenant is not counted against it.
    const other = await withGems();
    expect((await other.post('earning-rules', rule(0))).status).toBe(201);
  });

  it('credits earning rules once per event, by priority, with calculations, filters and caps in the tenant time zone', async () => {
    // Days and weeks in Pacific/Auckland (UTC+13 in November).
    expect(
      (
        await call('PUT', `${app.url.admin}/v1/tenants/${tenant.id}`, {
          headers: { 'x-api-key': app.rootKey },
          body: { timezone: 'Pacific/Auckland' },
        })
      ).status,
    ).toBe(200);
    const rule = async (body: Record<string, unknown>) => {
      const r = await admin('POST', '/v1/wallet/earning-rules', body);
      expect(r.status).toBe(201);
      return r.body;
    };
    await rule({
      name: 'per kill',
      currency_id: 'coins',
      event_type: 'kill',
      calculation: { type: 'per_unit', points: 5, per: 2, field: 'attrs.kills' },
      max_per_day: 30,
      priority: 10,
    });
    await rule({
      name: 'big spender',
      currency_id: 'coins',
      event_type: 'purchase',
      event_filter: { op: 'gte', field: 'amount', value: 100 },
      calculation: { type: 'percentage', rate: 0.1, field: 'amount' },
      max_per_event: 15,
      max_per_week: 25,
    });
    await rule({
      name: 'xp',
      currency_id: 'xp',
      event_type: '*',
      calculation: { type: 'fixed', amount: 3 },
      priority: -1,
    });
    const bad = await admin('POST', '/v1/wallet/earning-rules', {
      name: 'x',
      currency_id: 'coins',
      event_type: 'k',
      event_filter: { op: 'regex', field: 'a', value: 1 },
      calculation: { type: 'fixed', amount: 1 },
    });
    expect(bad.status).toBe(400);
    // Auckland: 2026-11-20 23:30 NZDT = 10:30 UTC; the next Auckland day starts at 11:00 UTC.
    clock.set(Date.parse('2026-11-22T12:00:00Z'));
    const danEvents = [
      ev('dan', '2026-11-20T10:00:00Z', 'kill', { kills: 8 }), // 20
      ev('dan', '2026-11-20T10:30:00Z', 'kill', { kills: 7 }), // 15 -> capped to 10 (day cap 30)
      ev('dan', '2026-11-20T11:05:00Z', 'kill', { kills: 4 }), // next Auckland day: 10
      ev('dan', '2026-11-20T11:06:00Z', 'purchase', { amount: 99 }), // filtered out
      ev('dan', '2026-11-20T11:07:00Z', 'purchase', { amount: 500 }), // 50 -> 15 per event
      ev('dan', '2026-11-20T11:08:00Z', 'purchase', { amount: 400 }), // 40 -> 15 -> week cap 25 leaves 10
      ev('dan', '2026-11-22T11:30:00Z', 'purchase', { amount: 200 }), // Mon 23rd 00:30 in Auckland: new week, 20 -> 15
      ev('dan', '2026-11-20T11:09:00Z', 'nothing', {}), // only xp
    ];
    await send(danEvents);
    await waitFor(async () => (await balance('dan', 'xp')) === 24, {
      what: 'xp from 8 events',
      timeoutMs: 15000,
    });
    expect(await balance('dan')).toBe(20 + 10 + 10 + 15 + 10 + 15);
    const txs = (await query('/v1/wallet/transactions?user_id=dan&currency_id=coins&limit=100')).body
      .transactions;
    expect(
      txs.every(
        (t: { source_type: string; source_ref: string }) =>
          t.source_type === 'earning_rule' && /:w/.test(t.source_ref),
      ),
    ).toBe(true);
    // A retry of the same events changes nothing: the first event again in its own request, and
    // two of them (one twice) in another.
    const before = await balance('dan');
    await send([danEvents[0]!]);
    await send([danEvents[4]!, danEvents[7]!, danEvents[4]!]);
    // A later marker event of the same user (same partition, so applied after the duplicates) earns
    // 3 xp: once it shows, the duplicates have certainly been through the pipeline, and they earned
    // nothing (neither coins nor xp).
    await send([ev('dan', '2026-11-20T11:10:00Z', 'nothing', {})]);
    await waitFor(async () => (await balance('dan', 'xp')) >= 27, {
      what: 'the marker event',
      timeoutMs: 15000,
    });
    expect(await balance('dan', 'xp')).toBe(27);
    expect(await balance('dan')).toBe(before);
    clock.set(T0);
  });

  it('reads, updates and deletes earning rules and tiers under every path form, with errors for bad input', async () => {
    const forms = (suffix: string) => [
      `${app.url.admin}/v1/tenants/${tenant.id}/wallet${suffix}`,
      `${app.url.admin}/v1/tenants/wallet${suffix}?tenant_id=${tenant.id}`,
      `${app.url.admin}/v1/wallet${suffix}?tenant_id=${tenant.id}`,
    ];
    const h = { 'x-api-key': key };
    const rule = (
      await call('POST', forms('/earning-rules')[0]!, {
        headers: h,
        body: {
          name: 'r',
          currency_id: 'coins',
          event_type: 'crud',
          calculation: { type: 'fixed', amount: 2 },
        },
      })
    ).body;
    expect(rule).toMatchObject({ name: 'r', priority: 0, active: true, max_per_day: null });
    for (const url of forms(`/earning-rules/${rule.rule_id}`)) {
      expect((await call('GET', url, { headers: h })).body.rule_id).toBe(rule.rule_id);
    }
    const upd = await call('PUT', forms(`/earning-rules/${rule.rule_id}`)[1]!, {
      headers: h,
      body: { max_per_day: 7, active: false },
    });
    expect(upd.body).toMatchObject({
      max_per_day: 7,
      active: false,
      calculation: { type: 'fixed', amount: 2 },
    });
    for (const [body, message] of [
      [{ priority: 'high' }, /body\.priority must be an integer/],
      [{ calculation: { type: 'per_unit', points: 1, per: 0, field: 'x' } }, /body\.calculation/],
      [{ currency_id: 'nope' }, /currency nope does not exist/],
      [{}, /must NOT have fewer than 1 properties/],
    ] as const) {
      const r = await call('PUT', forms(`/earning-rules/${rule.rule_id}`)[2]!, { headers: h, body });
      expect([r.status, r.body.error.message]).toEqual([400, expect.stringMatching(message)]);
    }
    const list = await call('GET', forms('/earning-rules')[2]!, { headers: h });
    expect(list.body.earning_rules.map((r: { rule_id: string }) => r.rule_id)).toContain(rule.rule_id);
    expect((await call('DELETE', forms(`/earning-rules/${rule.rule_id}`)[0]!, { headers: h })).status).toBe(
      200,
    );
    expect((await call('GET', forms(`/earning-rules/${rule.rule_id}`)[0]!, { headers: h })).status).toBe(404);

    const tier = (
      await call('POST', forms('/tiers')[2]!, {
        headers: h,
        body: { tier_name: 'T', tier_level: 50, min_lifetime_points: 5000, currency_id: 'coins' },
      })
    ).body;
    for (const url of forms(`/tiers/${tier.tier_id}`))
      expect((await call('GET', url, { headers: h })).body.tier_name).toBe('T');
    expect(
      (
        await call('PUT', forms(`/tiers/${tier.tier_id}`)[0]!, {
          headers: h,
          body: { tier_name: 'Titan', benefits: { vip: true } },
        })
      ).body,
    ).toMatchObject({ tier_name: 'Titan', benefits: { vip: true } });
    expect(
      (await call('PUT', forms(`/tiers/${tier.tier_id}`)[0]!, { headers: h, body: { badge_color: 'blue' } }))
        .status,
    ).toBe(400);
    expect((await call('DELETE', forms(`/tiers/${tier.tier_id}`)[1]!, { headers: h })).status).toBe(200);
    expect((await call('GET', forms(`/tiers/${tier.tier_id}`)[1]!, { headers: h })).status).toBe(404);
    expect((await call('DELETE', forms('/currencies/nope')[1]!, { headers: h })).status).toBe(404);
  });

  it('moves loyalty tiers on lifetime earnings and reports the tier view', async () => {
    for (const [name, level, min] of [
      ['Bronze', 1, 10],
      ['Silver', 2, 100],
      ['Gold', 3, 1000],
    ] as const) {
      expect(
        (
          await admin('POST', '/v1/wallet/tiers', {
            tier_name: name,
            tier_level: level,
            min_lifetime_points: min,
            currency_id: 'coins',
            badge_color: '#c0c0c0',
            benefits: { discount: level * 5 },
          })
        ).status,
      ).toBe(201);
    }
    expect(
      (
        await admin('POST', '/v1/wallet/tiers', {
          tier_name: 'dup',
          tier_level: 1,
          min_lifetime_points: 5,
          currency_id: 'coins',
        })
      ).status,
    ).toBe(409);
    expect(
      (
        await admin('POST', '/v1/wallet/tiers', {
          tier_name: 'x',
          tier_level: 9,
          min_lifetime_points: 5,
          currency_id: 'coins',
          badge_color: 'red',
        })
      ).status,
    ).toBe(400);
    const none = await query('/v1/wallet/tier?user_id=eve');
    expect([none.status, none.body]).toEqual([200, null]);
    await grant('eve', 150);
    await admin('POST', '/v1/wallet/deduct', { user_id: 'eve', currency_id: 'coins', amount: 100 });
    const view = await query(`/v1/wallet/${tenant.id}/tier?user_id=eve`);
    expect(view.body).toEqual({
      tier_id: expect.any(String),
      tier_name: 'Silver',
      tier_level: 2,
      lifetime_points: 150,
      next_tier_name: 'Gold',
      next_tier_points: 1000,
      points_to_next: 850,
    });
    const changed = await app.ctx.adapters.sql.query<{ payload: { data: unknown } }>(
      "SELECT payload FROM outbox WHERE tenant_id = $1 AND event_type = 'tier.changed' AND payload->>'user_id' = 'eve'",
      [tenant.id],
    );
    expect(changed.rows.map((r) => r.payload.data)).toEqual([
      {
        currency_id: 'coins',
        previous_tier: null,
        new_tier: { tier_id: expect.any(String), tier_name: 'Silver', tier_level: 2 },
        lifetime_points: 150,
      },
    ]);
  });

  it('manages reward items and reward configs with every validation rule', async () => {
    const item = async (body: Record<string, unknown>, form = '/v1/reward-items') =>
      admin('POST', form, body);
    const coins = await item({
      name: '50 coins',
      reward_type: 'currency',
      payload: { currency_id: 'coins', amount: 50 },
    });
    expect(coins.status).toBe(201);
    const badge = await item(
      { name: 'Champion', reward_type: 'badge', payload: { badge_id: 'champ' } },
      '/v1/rewards',
    );
    expect(badge.status).toBe(201);
    const viaPath = await call('POST', `${app.url.admin}/v1/tenants/${tenant.id}/reward-items`, {
      headers: { 'x-api-key': key },
      body: { name: 'Mug', reward_type: 'physical_item', payload: {} },
    });
    expect(viaPath.status).toBe(201);
    for (const [body, message] of [
      [{ name: '', reward_type: 'x', payload: {} }, /body\.name/],
      [{ name: 'x', reward_type: '', payload: {} }, /body\.reward_type/],
      [{ name: 'x', reward_type: 'x' }, /body\.payload is required/],
      [{ name: 'x', reward_type: 'currency', payload: { amount: 5 } }, /payload\.currency_id is required/],
      [
        { name: 'x', reward_type: 'xp', payload: { amount: -1 } },
        /payload\.amount must be a positive integer/,
      ],
    ] as const) {
      const r = await item(body);
      expect(r.status).toBe(400);
      expect(r.body.error.message).toMatch(message);
    }
    expect(
      (
        await admin('PUT', `/v1/reward-items/${coins.body.item_id}`, {
          name: '60 coins',
          payload: { currency_id: 'coins', amount: 60 },
        })
      ).body.name,
    ).toBe('60 coins');
    expect((await admin('GET', '/v1/reward-items')).body.total).toBeGreaterThanOrEqual(3);
    const tier = (
      condition: Record<string, unknown>,
      extra: Record<string, unknown> = { item_ids: [coins.body.item_id] },
    ) => ({ condition, ...extra });
    const bad: Array<[unknown[], RegExp]> = [
      [[], /body\.tiers must NOT have fewer than 1 items/],
      [[tier({ type: 'rank_range', start: 3, end: 1 })], /start must be <= end/],
      [[tier({ type: 'rank_range', start: 0, end: 1 })], /body\.tiers\[0\]\.condition/],
      [[tier({ type: 'threshold_range', metric: 'score', min: 5, max: 1 })], /min must be <= max/],
      [
        [
          tier(
            { type: 'rank_range', start: 1, end: 3 },
            { item_ids: [coins.body.item_id], rank_items: { '1': [coins.body.item_id] } },
          ),
        ],
        /exactly one of item_ids or rank_items/,
      ],
      [[tier({ type: 'rank_range', start: 1, end: 3 }, {})], /exactly one of item_ids or rank_items/],
      [
        [tier({ type: 'rank_range', start: 1, end: 3 }, { rank_items: { '4': [coins.body.item_id] } })],
        /rank 4 is outside 1\.\.3/,
      ],
      [
        [tier({ type: 'milestone', metric: 'level', value: 2 }, { item_ids: ['ghost'] })],
        /reward item ghost does not exist/,
      ],
    ];
    for (const [tiers, message] of bad) {
      const r = await admin('POST', '/v1/rewards-catalog', { name: 'cfg', tiers });
      expect([r.status, r.body.error?.message]).toEqual([400, expect.stringMatching(message)]);
    }
    // A catalog-shaped body in the same path family is a catalog reward (docs/store.md).
    const catalogShape = await admin('POST', '/v1/rewards-catalog', {
      slug: 'mug',
      name: 'Mug',
      fulfillment: { type: 'manual' },
    });
    expect([catalogShape.status, catalogShape.body.slug]).toEqual([201, 'mug']);
    const ok = await admin('POST', '/v1/rewards-catalog', {
      name: 'Top 3',
      tiers: [
        tier(
          { type: 'rank_range', start: 1, end: 1 },
          { rank_items: { '1': [coins.body.item_id, badge.body.item_id] } },
        ),
        tier({ type: 'rank_range', start: 2, end: 3 }),
        tier({ type: 'threshold_range', metric: 'score', min: 1, max: 10 }),
        tier({ type: 'milestone', metric: 'level', value: 2 }, { item_ids: [badge.body.item_id] }),
        tier({ type: 'custom', rules: { any: 'thing' } }),
      ],
    });
    expect(ok.status).toBe(201);
    expect(ok.body.reward_config_id).toMatch(/^[0-9a-f-]{36}$/);
    expect((await admin('GET', `/v1/rewards-catalog/${ok.body.reward_config_id}`)).body.name).toBe('Top 3');
  });

  it('pays a closed leaderboard window exactly once and shows the reward tiers on its page', async () => {
    const coins = (
      await admin('POST', '/v1/reward-items', {
        name: '10 coins',
        reward_type: 'currency',
        payload: { currency_id: 'coins', amount: 10 },
      })
    ).body;
    const cup = (
      await admin('POST', '/v1/reward-items', {
        name: 'Cup',
        reward_type: 'physical_item',
        payload: { sku: 'cup' },
      })
    ).body;
    const cfg = (
      await admin('POST', '/v1/rewards-catalog', {
        name: 'podium',
        tiers: [
          {
            condition: { type: 'rank_range', start: 1, end: 1 },
            rank_items: { '1': [coins.item_id, cup.item_id] },
          },
          { condition: { type: 'rank_range', start: 2, end: 3 }, item_ids: [coins.item_id] },
        ],
      })
    ).body;
    const board = await admin('POST', '/v1/leaderboards', {
      leaderboard_id: 'paid',
      name: 'Paid',
      reward_config_id: cfg.reward_config_id,
      config: {
        timeframe: { type: 'daily', grace_seconds: 0 },
        scoring: { rules: [{ event_type: 'score', points_expression: 'attrs.p' }], aggregation: 'sum' },
      },
    });
    expect(board.status).toBe(201);
    await send([
      ev('p1', T0, 'score', { p: 9 }),
      ev('p2', T0, 'score', { p: 7 }),
      ev('p3', T0, 'score', { p: 5 }),
      ev('p4', T0, 'score', { p: 1 }),
    ]);
    await waitFor(
      async () => (await query('/v1/leaderboards/paid?window_key=2026-11-20')).body.total_entries === 4,
      { what: 'four entries' },
    );
    const closes = await Promise.all(
      [1, 2, 3].map(() => admin('POST', '/v1/leaderboards/paid/windows/2026-11-20/close')),
    );
    expect(closes.filter((c) => c.body.already_closed === false)).toHaveLength(1);
    const paid = await app.ctx.adapters.sql.query<{ user_id: string; amount: number }>(
      "SELECT user_id, amount FROM ledger WHERE tenant_id = $1 AND source_type = 'leaderboard_reward' ORDER BY user_id",
      [tenant.id],
    );
    expect(paid.rows.map((r) => [r.user_id, Number(r.amount)])).toEqual([
      ['p1', 10],
      ['p2', 10],
      ['p3', 10],
    ]);
    const grants = (await admin('GET', '/v1/reward-grants?user_id=p1')).body.grants;
    expect(
      grants.map((g: { reward_type: string; status: string }) => [g.reward_type, g.status]).sort(),
    ).toEqual([
      ['currency', 'credited'],
      ['physical_item', 'ordered'],
    ]);
    const outbox = await app.ctx.adapters.sql.query<{ payload: { reward_distribution: unknown[] } }>(
      "SELECT payload FROM outbox WHERE tenant_id = $1 AND event_type = 'leaderboard.window_completed' AND payload->>'leaderboard_id' = 'paid'",
      [tenant.id],
    );
    expect(outbox.rows).toHaveLength(1);
    expect(outbox.rows[0]!.payload.reward_distribution).toEqual([
      {
        user_id: 'p1',
        rank: 1,
        score: 9,
        items: [
          expect.objectContaining({ item_id: coins.item_id, name: '10 coins', reward_type: 'currency' }),
          expect.objectContaining({ item_id: cup.item_id, reward_type: 'physical_item' }),
        ],
      },
      { user_id: 'p2', rank: 2, score: 7, items: [expect.objectContaining({ item_id: coins.item_id })] },
      { user_id: 'p3', rank: 3, score: 5, items: [expect.objectContaining({ item_id: coins.item_id })] },
    ]);
    const page = await query('/v1/leaderboards/paid?window_key=2026-11-20');
    expect(page.body.reward_config).toMatchObject({
      reward_config_id: cfg.reward_config_id,
      tiers: [
        { rank_start: 1, rank_end: 1 },
        {
          rank_start: 2,
          rank_end: 3,
          items: [{ item_id: coins.item_id, name: '10 coins', reward_type: 'currency' }],
        },
      ],
    });
    expect((await query('/v1/leaderboards/daily-nope')).status).toBe(404);
    const mine = await query('/v1/grants/user/p1', await userToken(tenant, 'p1'));
    expect(mine.body.total).toBe(2);
  });

  it('levels: views, detail with rewards, progression, and rewards granted on reaching a level', async () => {
    const badge = (
      await admin('POST', '/v1/reward-items', {
        name: 'Lvl 3 badge',
        reward_type: 'badge',
        payload: { badge_id: 'l3' },
      })
    ).body;
    const bonus = (
      await admin('POST', '/v1/reward-items', {
        name: 'Lvl 3 coins',
        reward_type: 'currency',
        payload: { currency_id: 'coins', amount: 7 },
      })
    ).body;
    const cfg = (
      await admin('POST', '/v1/rewards-catalog', {
        name: 'levels',
        tiers: [
          {
            condition: { type: 'milestone', metric: 'level', value: 3 },
            item_ids: [badge.item_id, bonus.item_id],
          },
        ],
      })
    ).body;
    const bad = await admin('POST', '/v1/levels', {
      name: 'x',
      levels: [
        { level: 2, xp_required: 10, name: 'a' },
        { level: 3, xp_required: 5, name: 'b' },
      ],
    });
    expect([bad.status, bad.body.error.message]).toEqual([
      400,
      'body.levels: level 3 must need more than level 2',
    ]);
    const sys = await admin('POST', '/v1/levels', {
      name: 'Main',
      currency_id: 'xp',
      reward_config_id: cfg.reward_config_id,
      levels: [
        { level: 2, xp_required: 100, name: 'Rookie' },
        { level: 3, xp_required: 250, name: 'Pro' },
        { level: 4, xp_required: 500, name: 'Legend' },
      ],
    });
    expect(sys.status).toBe(201);
    expect(sys.body.levels[0]).toEqual({ level: 1, xp_required: 0, name: 'Level 1' });
    await admin('POST', '/v1/wallet/grant', {
      user_id: 'lev',
      currency_id: 'xp',
      amount: 300,
      source_type: 'promotion',
    });
    const view = await query('/v1/levels/user/lev');
    expect(view.body).toEqual({
      tenant_id: tenant.id,
      user_id: 'lev',
      level_system_id: sys.body.level_system_id,
      current_level: 3,
      level_name: 'Pro',
      total_xp: 300,
      xp_for_current_level: 250,
      xp_for_next_level: 500,
      xp_to_next_level: 200,
      progress_percentage: 20,
    });
    expect((await admin('GET', '/v1/levels/level/3')).body).toEqual({
      level: 3,
      name: 'Pro',
      xp_required: 250,
      description: null,
      rewards: [
        { item_id: badge.item_id, name: 'Lvl 3 badge', reward_type: 'badge' },
        { item_id: bonus.item_id, name: 'Lvl 3 coins', reward_type: 'currency' },
      ],
    });
    const prog = await query('/v1/levels/progression?user_id=lev');
    expect(prog.body.levels.map((l: { level: number; achieved: boolean }) => [l.level, l.achieved])).toEqual([
      [1, true],
      [2, true],
      [3, true],
      [4, false],
    ]);
    expect(prog.body.levels[3]).toMatchObject({ xp_progress: 50, progress_percentage: 20 });
    expect(await balance('lev')).toBe(7);
    // More xp does not pay level 3 again.
    await admin('POST', '/v1/wallet/grant', { user_id: 'lev', currency_id: 'xp', amount: 10 });
    expect(await balance('lev')).toBe(7);
    const xpHistory = await query(
      '/v1/wallet/transactions?user_id=lev&currency_id=xp&tenant_id=' + tenant.id,
    );
    expect(xpHistory.body.total).toBe(2);
    expect((await query('/v1/levels/level/99')).status).toBe(404);
  });

  it("records a pipeline credit's webhook event only for a tenant that has a webhook endpoint", async () => {
    // docs/webhooks.md "Which events are recorded": no endpoint, no outbox row from the pipeline.
    const own = await tenantWithCredentials(app);
    const h = { 'x-api-key': own.key };
    const at = `?tenant_id=${own.tenant.id}`;
    const made = await call('POST', `${app.url.admin}/v1/wallet/currencies${at}`, {
      headers: h,
      body: { id: 'gems', name: 'gems', is_spendable: true, decimal_places: 0 },
    });
    expect(made.status).toBe(201);
    const rule = await call('POST', `${app.url.admin}/v1/wallet/earning-rules${at}`, {
      headers: h,
      body: {
        name: 'per login',
        currency_id: 'gems',
        event_type: 'login',
        calculation: { type: 'fixed', amount: 4 },
      },
    });
    expect(rule.status).toBe(201);
    const earn = async (n: number) => {
      const r = await call('POST', `${app.url.ingest}/v1/events/bulk`, {
        headers: { authorization: `Bearer ${own.token}` },
        body: { events: [ev('hal', T0, 'login')] },
      });
      expect(r.status).toBe(202);
      await waitFor(
        async () =>
          (
            await call('GET', `${app.url.query}/v1/wallet/balances/gems?user_id=hal`, {
              headers: { authorization: `Bearer ${own.token}` },
            })
          ).body.available ===
          4 * n,
        { what: `credit ${n}`, timeoutMs: 15000 },
      );
    };
    const recorded = async () =>
      (
        await app.ctx.adapters.sql.query<{ key: string }>(
          "SELECT dedupe_key AS key FROM outbox WHERE tenant_id = $1 AND event_type = 'currency.earned'",
          [own.tenant.id],
        )
      ).rows.length;
    await earn(1);
    expect(await recorded()).toBe(0);
    // An endpoint (even one turned off) makes the next batches record the tenant's events.
    await keepWebhookEvents(app, own.tenant.id);
    await earn(2);
    expect(await recorded()).toBe(1);
    // A credit through the API is recorded whatever the number of endpoints (as before).
    const other = await tenantWithCredentials(app);
    expect(
      (
        await call('POST', `${app.url.admin}/v1/wallet/currencies?tenant_id=${other.tenant.id}`, {
          headers: { 'x-api-key': other.key },
          body: { id: 'gems', name: 'gems', is_spendable: true, decimal_places: 0 },
        })
      ).status,
    ).toBe(201);
    const granted = await call('POST', `${app.url.admin}/v1/wallet/grant?tenant_id=${other.tenant.id}`, {
      headers: { 'x-api-key': other.key },
      body: { user_id: 'hal', currency_id: 'gems', amount: 7 },
    });
    expect(granted.status).toBe(200);
    const viaApi = await app.ctx.adapters.sql.query(
      "SELECT 1 FROM outbox WHERE tenant_id = $1 AND event_type = 'currency.earned'",
      [other.tenant.id],
    );
    expect(viaApi.rows).toHaveLength(1);
  });
});

describe('ledger history in the analytics store [distributed]', () => {
  it('copies every ledger row to ClickHouse, once, for operators', async () => {
    const app = await startTestApp('distributed', { roles: 'ingest,api,processors,analytics' });
    try {
      const t = await createTenant(app);
      const key = (await createKey(app, [t.id])).key;
      const admin = (path: string, body: unknown) =>
        call('POST', `${app.url.admin}${path}?tenant_id=${t.id}`, { headers: { 'x-api-key': key }, body });
      await admin('/v1/wallet/currencies', {
        id: 'gold',
        name: 'Gold',
        is_spendable: true,
        decimal_places: 0,
      });
      for (let i = 0; i < 5; i++)
        await admin('/v1/wallet/grant', { user_id: `u${i % 2}`, currency_id: 'gold', amount: 10 + i });
      await admin('/v1/wallet/deduct', { user_id: 'u0', currency_id: 'gold', amount: 3 });
      expect(app.ctx.adapters.analytics.kind).toBe('clickhouse');
      await waitFor(
        async () => {
          const totals = await app.ctx.adapters.analytics.transactionTotals(t.id, 'gold');
          return totals.get('u0') === 10 + 12 + 14 - 3 && totals.get('u1') === 11 + 13;
        },
        { what: 'ledger totals in ClickHouse', timeoutMs: 15000 },
      );
    } finally {
      await app.stop();
    }
  });
});
