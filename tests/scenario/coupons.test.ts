/**
 * Coupons in both shapes, through the gateways: definitions (every route, validation rule and
 * status move), generation (random, per-user custom, shared custom; all or nothing), validation
 * with a message per reason, redemption (statuses, grants, webhook), the limits under
 * concurrency, guess limiting, and automatic generation when a leaderboard window closes. After
 * every test: each redemption has exactly one grant, and every balance equals the sum of its ledger.
 */
import { ManualClock } from '../../core/clock';
import { CODE_ALPHABET } from '../../core/coupons/codes';
import {
  call,
  createKey,
  SHAPES,
  startTestApp,
  tenantWithCredentials,
  type TenantInfo,
  userToken,
  type TestApp,
} from '../support/app';
import { walletViolations } from '../support/invariants';
import { waitFor } from '../support/wait';

const T0 = Date.parse('2026-11-20T10:00:00Z');
const DAY = 86_400_000;

interface Setup {
  tenant: TenantInfo;
  key: string;
  token: string;
  /** A reward item of 25 coins. */
  item: string;
}

describe.each(SHAPES)('coupons [%s]', (shape) => {
  let app: TestApp;
  let clock: ManualClock;
  let main: Setup;
  const tenants: string[] = [];
  let seq = 0;

  beforeAll(async () => {
    clock = new ManualClock(T0);
    app = await startTestApp(shape, {
      clock,
      roles: 'all',
      env: {
        LUDUS_SCHEDULER_INTERVAL_MS: '100',
        LUDUS_RATE_LIMIT_ADMIN: 'off',
        LUDUS_RATE_LIMIT_QUERY: 'off',
        LUDUS_COUPON_GUESS_LIMIT_USER: '5/m',
        LUDUS_COUPON_GUESS_LIMIT_TENANT: '400/m',
      },
    });
    main = await setup();
  });
  afterEach(async () => {
    const sql = app.ctx.adapters.sql;
    // Invariant 3: every balance equals the sum of its ledger.
    expect(await walletViolations(sql, tenants)).toEqual([]);
    // Every redemption has exactly one grant (and one ledger row for a currency reward).
    const r = await sql.query<{ redemptions: number; grants: number; credits: number }>(
      `SELECT (SELECT count(*)::int FROM coupon_redemptions WHERE tenant_id = ANY($1::text[])) AS redemptions,
              (SELECT count(*)::int FROM reward_grants WHERE tenant_id = ANY($1::text[]) AND source_type = 'coupon') AS grants,
              (SELECT count(*)::int FROM ledger WHERE tenant_id = ANY($1::text[]) AND source_type = 'coupon') AS credits`,
      [tenants],
    );
    const x = r.rows[0]!;
    expect([x.grants, x.credits]).toEqual([x.redemptions, x.redemptions]);
  });
  afterAll(() => app.stop());

  async function setup(): Promise<Setup> {
    const { tenant, key, token } = await tenantWithCredentials(app);
    tenants.push(tenant.id);
    const adm = (m: string, p: string, b?: unknown) => admin(m, p, b, { tenant, key });
    expect(
      (
        await adm('POST', '/v1/wallet/currencies', {
          id: 'coins',
          name: 'Coins',
          is_spendable: true,
          decimal_places: 0,
        })
      ).status,
    ).toBe(201);
    const item = await adm('POST', '/v1/reward-items', {
      name: '25 coins',
      reward_type: 'currency',
      payload: { currency_id: 'coins', amount: 25 },
    });
    expect(item.status).toBe(201);
    return { tenant, key, token, item: item.body.item_id };
  }

  const admin = (method: string, path: string, body?: unknown, s: Pick<Setup, 'tenant' | 'key'> = main) =>
    call(method, `${app.url.admin}${path}${path.includes('?') ? '&' : '?'}tenant_id=${s.tenant.id}`, {
      headers: { 'x-api-key': s.key },
      body,
    });
  const query = (method: string, path: string, body?: unknown, token = main.token) =>
    call(method, `${app.url.query}${path}`, { headers: { authorization: `Bearer ${token}` }, body });
  const redeem = (code: string, user: string, token = main.token) =>
    query('POST', `/v1/coupons/redeem/${encodeURIComponent(code)}`, { user_id: user }, token);
  const validate = (code: string, user?: string, token = main.token) =>
    query(
      'GET',
      `/v1/coupons/validate/${encodeURIComponent(code)}${user ? `?user_id=${user}` : ''}`,
      undefined,
      token,
    );
  const balance = async (tenantId: string, user: string) => {
    const r = await app.ctx.adapters.sql.query<{ available: string }>(
      "SELECT available FROM balances WHERE tenant_id = $1 AND user_id = $2 AND currency_id = 'coins'",
      [tenantId, user],
    );
    return Number(r.rows[0]?.available ?? 0);
  };
  const user = (p = 'u') => `${p}${shape[0]}${++seq}`;
  /** Moves the clock past every guess-limit window (and back to where it was relative to T0). */
  const resetGuessBudgets = () => clock.advance(61_000);

  const config = (s: Setup, extra: Record<string, unknown> = {}) => ({
    reward_item_id: s.item,
    code_format: 'random',
    usage_limit: { limit_type: 'per_user', max_uses: 1 },
    ...extra,
  });
  const create = async (extra: Record<string, unknown> = {}, s: Setup = main, name = 'Promo') => {
    const r = await admin('POST', '/v1/coupons', { name, config: config(s, extra) }, s);
    expect([r.status, r.body.error?.message]).toEqual([201, undefined]);
    return r.body as { id: string; config: Record<string, unknown>; status: string };
  };
  const generate = async (def: string, users: string[], s: Setup = main, custom_codes?: string[]) => {
    const r = await admin('POST', `/v1/coupons/${def}/generate`, { user_ids: users, custom_codes }, s);
    expect([r.status, r.body.error?.message]).toEqual([200, undefined]);
    return r.body as { generated: number; coupons: Array<{ user_id: string; code: string }> };
  };

  it('creates a definition with defaults, under both path forms, and reads, lists, updates it', async () => {
    const d = await create({ code_prefix: 'WB-' }, main, 'Welcome back');
    expect(d).toMatchObject({
      status: 'active',
      config: { code_length: 8, case_sensitive: false, code_prefix: 'WB-', code_format: 'random' },
    });
    const long = await call('GET', `${app.url.admin}/v1/tenants/${main.tenant.id}/coupons/${d.id}`, {
      headers: { 'x-api-key': main.key },
    });
    expect([long.status, long.body.id]).toEqual([200, d.id]);
    const viaLong = await call('POST', `${app.url.admin}/v1/tenants/${main.tenant.id}/coupons`, {
      headers: { 'x-api-key': main.key },
      body: { name: 'Long form', description: 'made on the long path', config: config(main) },
    });
    expect(viaLong.status).toBe(201);
    const list = await admin('GET', '/v1/coupons');
    expect(list.status).toBe(200);
    expect(list.body.total).toBeGreaterThanOrEqual(2);
    expect(list.body.definitions.map((x: { id: string }) => x.id)).toEqual(
      expect.arrayContaining([d.id, viaLong.body.id]),
    );
    const up = await admin('PUT', `/v1/coupons/${d.id}`, {
      name: 'Welcome back!',
      config: config(main, { code_length: 12, case_sensitive: true }),
    });
    expect(up.status).toBe(200);
    expect(up.body).toMatchObject({
      name: 'Welcome back!',
      config: { code_length: 12, case_sensitive: true },
    });
    expect((await admin('PUT', `/v1/coupons/${d.id}`, { status: 'paused' })).status).toBe(400);
    expect((await admin('PUT', `/v1/coupons/${d.id}`, {})).status).toBe(400);
    expect((await admin('GET', '/v1/coupons/00000000-0000-4000-8000-000000000000')).status).toBe(404);
    expect((await admin('PUT', '/v1/coupons/nope', { name: 'x' })).status).toBe(404);
    // The reward item a definition names cannot be deleted.
    expect((await admin('DELETE', `/v1/reward-items/${main.item}`)).status).toBe(409);
  });

  it('refuses every invalid config with 400 naming the field, and stores nothing', async () => {
    const before = (await admin('GET', '/v1/coupons')).body.total;
    const cases: Array<[string, unknown]> = [
      ['reward_item_id', { ...config(main), reward_item_id: 'no-such-item' }],
      ['reward_item_id', { code_format: 'random', usage_limit: { limit_type: 'unlimited' } }],
      ['code_length', config(main, { code_length: 3 })],
      ['code_length', config(main, { code_length: 33 })],
      ['code_length', config(main, { code_length: '8' })],
      ['custom_code', config(main, { code_format: 'custom', custom_code: 'has space' })],
      ['custom_code', config(main, { code_format: 'custom', custom_code: 'é' })],
      ['custom_code', config(main, { code_format: 'custom', custom_code: 'A'.repeat(256) })],
      ['custom_code', config(main, { custom_code: 'RANDOMHASNONE' })],
      ['code_prefix', config(main, { code_format: 'custom', custom_code: 'X1', code_prefix: 'P' })],
      ['code_format', config(main, { code_format: 'sequential' })],
      ['starts_at', config(main, { starts_at: '2026-12-02T00:00:00Z', expires_at: '2026-12-01T00:00:00Z' })],
      ['starts_at', config(main, { starts_at: '2026-12-01T00:00:00Z', expires_at: '2026-12-01T00:00:00Z' })],
      ['expires_at', config(main, { expires_at: 'tomorrow' })],
      ['max_uses', config(main, { usage_limit: { limit_type: 'per_user' } })],
      ['max_uses', config(main, { usage_limit: { limit_type: 'global' } })],
      ['max_uses', config(main, { usage_limit: { limit_type: 'global', max_uses: 0 } })],
      ['limit_type', config(main, { usage_limit: { limit_type: 'sometimes', max_uses: 1 } })],
      ['trigger', config(main, { auto_generate: { enabled: true } })],
      ['leaderboard_id', config(main, { auto_generate: { enabled: true, trigger: 'leaderboard_rank' } })],
      [
        'rank_threshold',
        config(main, {
          auto_generate: {
            enabled: true,
            trigger: 'leaderboard_rank',
            trigger_config: { leaderboard_id: 'b' },
          },
        }),
      ],
      [
        'milestone_threshold',
        config(main, {
          auto_generate: { enabled: true, trigger: 'streak_milestone', trigger_config: { streak_id: 's' } },
        }),
      ],
      [
        'achievement_id',
        config(main, {
          auto_generate: { enabled: true, trigger: 'achievement_completed', trigger_config: {} },
        }),
      ],
      [
        'leaderboard_id',
        config(main, {
          auto_generate: {
            enabled: true,
            trigger: 'leaderboard_rank',
            trigger_config: { leaderboard_id: 'no-board', rank_threshold: 3 },
          },
        }),
      ],
      [
        'custom_code',
        config(main, {
          code_format: 'custom',
          auto_generate: {
            enabled: true,
            trigger: 'achievement_completed',
            trigger_config: { achievement_id: 'a' },
          },
        }),
      ],
      ['surprise', config(main, { surprise: 1 })],
    ];
    for (const [field, cfg] of cases) {
      const r = await admin('POST', '/v1/coupons', { name: 'Bad', config: cfg });
      expect([field, r.status, r.body.error.code]).toEqual([field, 400, 'VALIDATION_ERROR']);
      expect([field, r.body.error.message]).toEqual([field, expect.stringContaining(field)]);
    }
    for (const body of [
      { config: config(main) },
      { name: '', config: config(main) },
      { name: 'x'.repeat(256), config: config(main) },
      { name: 7, config: config(main) },
      { name: 'x' },
      [],
    ]) {
      const r = await admin('POST', '/v1/coupons', body);
      expect([JSON.stringify(body).slice(0, 40), r.status]).toEqual([JSON.stringify(body).slice(0, 40), 400]);
    }
    expect((await admin('GET', '/v1/coupons')).body.total).toBe(before);
  });

  it('moves status active <-> paused, archives on DELETE (204), and refuses other moves', async () => {
    const d = await create();
    const paused = await admin('PUT', `/v1/coupons/${d.id}/status`, { status: 'paused' });
    expect([paused.status, paused.body.status]).toEqual([200, 'paused']);
    const again = await admin('PUT', `/v1/coupons/${d.id}/status`, { status: 'paused' });
    expect([again.status, again.body.status]).toEqual([200, 'paused']);
    const active = await admin('PUT', `/v1/coupons/${d.id}/status`, { status: 'active' });
    expect([active.status, active.body.status]).toEqual([200, 'active']);
    const arch = await admin('PUT', `/v1/coupons/${d.id}/status`, { status: 'archived' });
    expect([arch.status, arch.body.error.message]).toEqual([400, expect.stringContaining('body.status')]);
    const del = await admin('DELETE', `/v1/coupons/${d.id}`);
    expect([del.status, del.body]).toEqual([204, undefined]);
    expect((await admin('GET', `/v1/coupons/${d.id}`)).body.status).toBe('archived');
    expect((await admin('DELETE', `/v1/coupons/${d.id}`)).status).toBe(204);
    expect((await admin('PUT', `/v1/coupons/${d.id}/status`, { status: 'active' })).status).toBe(409);
    expect((await admin('DELETE', '/v1/coupons/nope')).status).toBe(404);
    expect((await admin('PUT', '/v1/coupons/nope/status', { status: 'active' })).status).toBe(404);
    const archivedList = await admin('GET', '/v1/coupons?status=archived');
    expect(archivedList.body.definitions.map((x: { id: string }) => x.id)).toContain(d.id);
    // The query gateway lists active definitions only.
    const q = await query('GET', '/v1/coupons/definitions');
    expect(q.status).toBe(200);
    expect(q.body.definitions.every((x: { status: string }) => x.status === 'active')).toBe(true);
    expect(q.body.definitions.map((x: { id: string }) => x.id)).not.toContain(d.id);
    // An archived or paused definition generates nothing.
    expect((await admin('POST', `/v1/coupons/${d.id}/generate`, { user_ids: ['a'] })).status).toBe(409);
  });

  it('holds the coupons scopes and lists across tenants for operators and multi-tenant keys', async () => {
    const other = await setup();
    const d2 = await create({}, other, 'Other tenant');
    const readOnly = (await createKey(app, [main.tenant.id], ['coupons:read'])).key;
    const noCoupons = (await createKey(app, [main.tenant.id], ['wallet:*'])).key;
    const as = (k: string) => ({ tenant: main.tenant, key: k });
    expect((await admin('GET', '/v1/coupons', undefined, as(readOnly))).status).toBe(200);
    expect(
      (await admin('POST', '/v1/coupons', { name: 'x', config: config(main) }, as(readOnly))).status,
    ).toBe(403);
    expect((await admin('GET', '/v1/coupons', undefined, as(noCoupons))).status).toBe(403);
    const d = await create();
    expect(
      (await admin('POST', `/v1/coupons/${d.id}/generate`, { user_ids: ['a'] }, as(readOnly))).status,
    ).toBe(403);
    expect((await admin('DELETE', `/v1/coupons/${d.id}`, undefined, as(readOnly))).status).toBe(403);
    // Across tenants: the root key sees both, a key of both tenants sees both, a key of one sees one.
    const ids = async (k: string) => {
      const r = await call('GET', `${app.url.admin}/v1/coupons?limit=1000`, { headers: { 'x-api-key': k } });
      expect(r.status).toBe(200);
      return new Set(r.body.definitions.map((x: { tenant_id: string }) => x.tenant_id));
    };
    const both = (await createKey(app, [main.tenant.id, other.tenant.id], ['coupons:read'])).key;
    expect(await ids(app.rootKey)).toEqual(expect.objectContaining({}));
    expect([...(await ids(app.rootKey))]).toEqual(expect.arrayContaining([main.tenant.id, other.tenant.id]));
    expect([...(await ids(both))].sort()).toEqual([main.tenant.id, other.tenant.id].sort());
    expect([...(await ids(readOnly))]).toEqual([main.tenant.id]);
    // And a tenant's key cannot reach the other tenant's definition.
    expect((await admin('GET', `/v1/coupons/${d2.id}`)).status).toBe(404);
    expect(
      (await admin('GET', `/v1/coupons/${d2.id}`, undefined, { tenant: other.tenant, key: main.key })).status,
    ).toBe(403);
  });

  it('generates random codes over the alphabet with the prefix, unique, for every user in order', async () => {
    const d = await create({ code_prefix: 'WB-', code_length: 6 });
    const users = Array.from({ length: 300 }, () => user('g'));
    const out = await generate(d.id, users);
    expect(out.generated).toBe(300);
    expect(out.coupons.map((c) => c.user_id)).toEqual(users);
    const re = new RegExp(`^WB-[${CODE_ALPHABET}]{6}$`);
    expect(out.coupons.every((c) => re.test(c.code))).toBe(true);
    expect(new Set(out.coupons.map((c) => c.code.toLowerCase())).size).toBe(300);
    const mine = await query('GET', `/v1/coupons/user/${users[0]}`);
    expect(mine.body).toMatchObject({
      total: 1,
      coupons: [
        {
          code: out.coupons[0]!.code,
          status: 'active',
          redemption_count: 0,
          definition_id: d.id,
          definition_name: 'Promo',
          expires_at: null,
          redeemed_at: null,
        },
      ],
    });
    const one = await query('GET', `/v1/coupons/user/${users[0]}/${mine.body.coupons[0].id}`);
    expect([one.status, one.body.code]).toEqual([200, out.coupons[0]!.code]);
    expect((await query('GET', `/v1/coupons/user/${users[1]}/${mine.body.coupons[0].id}`)).status).toBe(404);
    // Hostile generate bodies.
    for (const body of [
      { user_ids: [] },
      { user_ids: [''] },
      { user_ids: 'a' },
      { user_ids: ['a'], extra: 1 },
      { user_ids: ['a'], custom_codes: ['X1'] },
    ]) {
      const r = await admin('POST', `/v1/coupons/${d.id}/generate`, body);
      expect([JSON.stringify(body), r.status]).toEqual([JSON.stringify(body), 400]);
    }
    expect((await admin('POST', '/v1/coupons/nope/generate', { user_ids: ['a'] })).status).toBe(404);
  });

  it('generates custom codes per user all or nothing, and a shared custom code once per user', async () => {
    const d = await create({ code_format: 'custom' });
    const [a, b, c] = [user('c'), user('c'), user('c')];
    const tag = `${shape}${seq}`;
    const out = await generate(d.id, [a, b], main, [`VIP-${tag}-A`, `vip-${tag}-b`]);
    expect(out.coupons).toEqual([
      { user_id: a, code: `VIP-${tag}-A` },
      { user_id: b, code: `vip-${tag}-b` },
    ]);
    // A code taken (in any case) refuses the whole request: c gets nothing.
    const clash = await admin('POST', `/v1/coupons/${d.id}/generate`, {
      user_ids: [c, a],
      custom_codes: [`NEW-${tag}`, `VIP-${tag}-B`],
    });
    expect([clash.status, clash.body.error.message]).toEqual([409, expect.stringContaining(`VIP-${tag}-B`)]);
    expect((await query('GET', `/v1/coupons/user/${c}`)).body.total).toBe(0);
    const mismatch = await admin('POST', `/v1/coupons/${d.id}/generate`, {
      user_ids: [c],
      custom_codes: ['A1', 'B2'],
    });
    expect(mismatch.status).toBe(400);
    const dup = await admin('POST', `/v1/coupons/${d.id}/generate`, {
      user_ids: [c, c],
      custom_codes: [`D-${tag}`, `d-${tag}`],
    });
    expect(dup.status).toBe(409);
    expect((await admin('POST', `/v1/coupons/${d.id}/generate`, { user_ids: [c] })).status).toBe(400);
    // Shared code.
    const shared = await create({ code_format: 'custom', custom_code: `SHARE-${tag}` });
    const s1 = await generate(shared.id, [a, b, a]);
    expect(s1.generated).toBe(2);
    expect(s1.coupons.map((x) => x.code)).toEqual([`SHARE-${tag}`, `SHARE-${tag}`, `SHARE-${tag}`]);
    expect((await generate(shared.id, [a])).generated).toBe(0);
    // The shared code is a code of the tenant: no other definition may take it.
    const taken = await admin('POST', '/v1/coupons', {
      name: 'x',
      config: config(main, { code_format: 'custom', custom_code: `share-${tag}` }),
    });
    expect(taken.status).toBe(409);
    const takenByUser = await admin('POST', `/v1/coupons/${d.id}/generate`, {
      user_ids: [c],
      custom_codes: [`Share-${tag}`],
    });
    expect(takenByUser.status).toBe(409);
  });

  it('validates with a message per reason, and redeems with the statuses SPEC.md gives', async () => {
    const d = await create({ expires_at: new Date(T0 + 30 * DAY).toISOString() });
    const [a, b] = [user('v'), user('v')];
    const { coupons } = await generate(d.id, [a]);
    const code = coupons[0]!.code;
    const ok = await validate(code, a);
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({
      valid: true,
      error: null,
      coupon: { code, user_id: a, status: 'active' },
      definition: { id: d.id },
    });
    // Case-insensitive by default: any case matches.
    expect((await validate(code.toLowerCase(), a)).body.valid).toBe(true);
    const unknown = await validate('NOPE-NOPE', a);
    expect(unknown.body).toEqual({
      valid: false,
      coupon: null,
      definition: null,
      error: 'Coupon code not found',
    });
    expect((await validate(code, b)).body.error).toMatch(/another user/);
    expect((await redeem('NOPE-NOPE', a)).status).toBe(404);
    expect((await redeem(code, b)).status).toBe(400);
    resetGuessBudgets();
    // Redeem: the currency reward credits the wallet, once.
    const before = await balance(main.tenant.id, a);
    const r = await redeem(code.toLowerCase(), a);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      code,
      status: 'redeemed',
      redemption_count: 1,
      user_id: a,
      reward_item: {
        item_id: main.item,
        reward_type: 'currency',
        payload: { currency_id: 'coins', amount: 25 },
      },
    });
    expect(r.body.redeemed_at).toBe(new Date(clock.now()).toISOString());
    expect(await balance(main.tenant.id, a)).toBe(before + 25);
    const again = await redeem(code, a);
    expect([again.status, again.body.error.code, again.body.error.message]).toEqual([
      400,
      'COUPON_ALREADY_REDEEMED',
      'Coupon already redeemed',
    ]);
    expect((await validate(code, a)).body.error).toBe('Coupon already redeemed');
    expect(await balance(main.tenant.id, a)).toBe(before + 25);
    // History and the webhook.
    const hist = await query('GET', `/v1/coupons/user/${a}/redemptions`);
    expect(hist.body).toMatchObject({
      total: 1,
      redemptions: [
        { definition_id: d.id, definition_name: 'Promo', code, reward_item: { item_id: main.item } },
      ],
    });
    const out = await app.ctx.adapters.sql.query<{ payload: Record<string, unknown> }>(
      "SELECT payload FROM outbox WHERE tenant_id = $1 AND event_type = 'coupon.redeemed' AND payload->>'code' = $2",
      [main.tenant.id, code],
    );
    expect(out.rows.map((x) => x.payload)).toEqual([
      expect.objectContaining({
        event_type: 'coupon.redeemed',
        user_id: a,
        code,
        reward_item: expect.objectContaining({ item_id: main.item, name: '25 coins' }),
      }),
    ]);
    resetGuessBudgets();
    // Expired, not started, paused, archived.
    const { coupons: later } = await generate(d.id, [b]);
    clock.advance(31 * DAY);
    expect((await validate(later[0]!.code, b)).body.error).toMatch(/^Coupon expired at /);
    const exp = await redeem(later[0]!.code, b);
    expect([exp.status, exp.body.error.code]).toEqual([400, 'COUPON_EXPIRED']);
    clock.set(T0 + 2 * DAY);
    const future = await create({ starts_at: new Date(T0 + 10 * DAY).toISOString() });
    const { coupons: f } = await generate(future.id, [b]);
    expect((await validate(f[0]!.code, b)).body.error).toMatch(/^Coupon is not valid before /);
    expect((await redeem(f[0]!.code, b)).body.error.code).toBe('COUPON_NOT_STARTED');
    resetGuessBudgets();
    const p = await create();
    const { coupons: pc } = await generate(p.id, [b, a]);
    await admin('PUT', `/v1/coupons/${p.id}/status`, { status: 'paused' });
    expect((await validate(pc[0]!.code, b)).body.error).toMatch(/paused/);
    expect((await redeem(pc[0]!.code, b)).body.error.code).toBe('COUPON_PAUSED');
    await admin('PUT', `/v1/coupons/${p.id}/status`, { status: 'active' });
    expect((await redeem(pc[0]!.code, b)).status).toBe(200);
    await admin('DELETE', `/v1/coupons/${p.id}`);
    expect((await validate(pc[1]!.code, a)).body.error).toMatch(/archived/);
    expect((await redeem(pc[1]!.code, a)).body.error.code).toBe('COUPON_ARCHIVED');
    resetGuessBudgets();
    // Case-sensitive: another case is an unknown code.
    const cs = await create({ code_format: 'custom', case_sensitive: true });
    const tag = `Cs${shape}${seq}`;
    await generate(cs.id, [a], main, [tag]);
    expect((await redeem(tag.toUpperCase(), a)).status).toBe(404);
    expect((await validate(tag.toLowerCase(), a)).body.valid).toBe(false);
    expect((await redeem(tag, a)).status).toBe(200);
    // Validate without a user: the code's coupon; an end-user token validates as itself.
    const { coupons: nc } = await generate(d.id, [b]);
    clock.set(T0 + 3 * DAY);
    expect((await validate(nc[0]!.code)).body).toMatchObject({ valid: true, coupon: { user_id: b } });
    const tokB = await userToken(main.tenant, b);
    expect((await validate(nc[0]!.code, undefined, tokB)).body.valid).toBe(true);
    expect((await validate(nc[0]!.code, a, tokB)).status).toBe(403);
    expect((await redeem(nc[0]!.code, a, tokB)).status).toBe(403);
    expect((await redeem(nc[0]!.code, b, tokB)).status).toBe(200);
    // Hostile redeem bodies.
    for (const body of [{}, { user_id: '' }, { user_id: 5 }, { user_id: 'a', more: 1 }]) {
      const x = await query('POST', `/v1/coupons/redeem/${nc[0]!.code}`, body);
      expect([JSON.stringify(body), x.status]).toEqual([JSON.stringify(body), 400]);
    }
    resetGuessBudgets();
  });

  it('a shared code honours per_user and global limits; the history pages at 20', async () => {
    const tag = `${shape}${seq++}`;
    await create({
      code_format: 'custom',
      custom_code: `THRICE-${tag}`,
      usage_limit: { limit_type: 'per_user', max_uses: 3 },
    });
    const a = user('s');
    for (let i = 1; i <= 3; i++) {
      const r = await redeem(`THRICE-${tag}`, a);
      expect([r.status, r.body.redemption_count, r.body.status]).toEqual([
        200,
        i,
        i === 3 ? 'redeemed' : 'active',
      ]);
    }
    const over = await redeem(`thrice-${tag}`, a);
    expect([over.status]).toEqual([400]);
    // A second user has its own three uses.
    expect((await redeem(`THRICE-${tag}`, user('s'))).status).toBe(200);
    await create({
      code_format: 'custom',
      custom_code: `TWO-${tag}`,
      usage_limit: { limit_type: 'global', max_uses: 2 },
    });
    const [x, y, z] = [user('s'), user('s'), user('s')];
    expect((await redeem(`TWO-${tag}`, x)).status).toBe(200);
    expect((await redeem(`TWO-${tag}`, x)).body.error.code).toBe('COUPON_ALREADY_REDEEMED');
    expect((await redeem(`TWO-${tag}`, y)).status).toBe(200);
    const full = await redeem(`TWO-${tag}`, z);
    expect([full.status, full.body.error.code, full.body.error.message]).toEqual([
      400,
      'COUPON_LIMIT_REACHED',
      expect.stringContaining('2 times in all'),
    ]);
    expect((await validate(`TWO-${tag}`, z)).body.error).toMatch(/Usage limit reached/);
    expect((await validate(`THRICE-${tag}`, a)).body.error).toMatch(/already redeemed|Usage limit/);
    resetGuessBudgets();
    // Unlimited: 25 users, each once, then the history pages.
    await create({
      code_format: 'custom',
      custom_code: `ALL-${tag}`,
      usage_limit: { limit_type: 'unlimited' },
    });
    await create({
      code_format: 'custom',
      custom_code: `MANY-${tag}`,
      usage_limit: { limit_type: 'per_user', max_uses: 25 },
    });
    const h = user('h');
    for (let i = 0; i < 22; i++) expect((await redeem(`MANY-${tag}`, h)).status).toBe(200);
    expect((await redeem(`ALL-${tag}`, h)).status).toBe(200);
    const page = await query('GET', `/v1/coupons/user/${h}/redemptions`);
    expect([page.body.total, page.body.redemptions.length]).toEqual([23, 20]);
    const rest = await query('GET', `/v1/coupons/user/${h}/redemptions?limit=20&offset=20`);
    expect(rest.body.redemptions.length).toBe(3);
    expect((await query('GET', `/v1/coupons/user/${h}/redemptions?limit=0`)).status).toBe(400);
    expect((await query('GET', `/v1/coupons/user/${h}`)).body.total).toBe(2);
  });

  it('a global max_uses of 10 redeemed by 200 users at once gives exactly 10 redemptions and 10 grants', async () => {
    const s = await setup();
    const d = await create({ usage_limit: { limit_type: 'global', max_uses: 10 } }, s);
    const users = Array.from({ length: 200 }, () => user('cg'));
    const { coupons } = await generate(d.id, users, s);
    const results = await Promise.all(coupons.map((c) => redeem(c.code, c.user_id, s.token)));
    const ok = results.filter((r) => r.status === 200);
    expect(ok).toHaveLength(10);
    expect(
      results
        .filter((r) => r.status !== 200)
        .every((r) => r.status === 400 && r.body.error.code === 'COUPON_LIMIT_REACHED'),
    ).toBe(true);
    const sql = app.ctx.adapters.sql;
    const counts = await sql.query<{ r: number; g: number; l: number; total: string }>(
      `SELECT (SELECT count(*)::int FROM coupon_redemptions WHERE tenant_id = $1) AS r,
              (SELECT count(*)::int FROM reward_grants WHERE tenant_id = $1 AND source_type = 'coupon') AS g,
              (SELECT count(*)::int FROM ledger WHERE tenant_id = $1 AND source_type = 'coupon') AS l,
              (SELECT COALESCE(sum(available), 0)::text FROM balances WHERE tenant_id = $1) AS total`,
      [s.tenant.id],
    );
    expect(counts.rows[0]).toEqual({ r: 10, g: 10, l: 10, total: '250' });
    // The same with one shared code: 200 users at once, a global max of 10.
    await create(
      {
        code_format: 'custom',
        custom_code: `TEN-${shape}`,
        usage_limit: { limit_type: 'global', max_uses: 10 },
      },
      s,
    );
    const shared = await Promise.all(users.map((u) => redeem(`ten-${shape}`, u, s.token)));
    expect(shared.filter((r) => r.status === 200)).toHaveLength(10);
    const after = await sql.query<{ r: number; g: number }>(
      `SELECT (SELECT count(*)::int FROM coupon_redemptions WHERE tenant_id = $1) AS r,
              (SELECT count(*)::int FROM reward_grants WHERE tenant_id = $1 AND source_type = 'coupon') AS g`,
      [s.tenant.id],
    );
    expect(after.rows[0]).toEqual({ r: 20, g: 20 });
    // The refused users' shared coupons rolled back with their attempts.
    const held = await sql.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM user_coupons WHERE tenant_id = $1 AND shared',
      [s.tenant.id],
    );
    expect(held.rows[0]!.n).toBe(10);
  });

  it('a per-user limit holds for one user redeeming from 20 connections at once', async () => {
    const s = await setup();
    await create(
      {
        code_format: 'custom',
        custom_code: `RACE-${shape}`,
        usage_limit: { limit_type: 'per_user', max_uses: 3 },
      },
      s,
    );
    const u = user('race');
    const results = await Promise.all(Array.from({ length: 20 }, () => redeem(`RACE-${shape}`, u, s.token)));
    expect(results.filter((r) => r.status === 200)).toHaveLength(3);
    expect(results.filter((r) => r.status !== 200).every((r) => r.status === 400 || r.status === 429)).toBe(
      true,
    );
    expect(await balance(s.tenant.id, u)).toBe(75);
    // The 17 refusals spent the user's guess budget (5 a minute): a minute later it is back.
    resetGuessBudgets();
    // And one random code with a per-user limit of 1, 20 times at once.
    const d2 = await create({}, s);
    const { coupons } = await generate(d2.id, [u], s);
    const r2 = await Promise.all(Array.from({ length: 20 }, () => redeem(coupons[0]!.code, u, s.token)));
    expect(r2.filter((r) => r.status === 200)).toHaveLength(1);
    expect(await balance(s.tenant.id, u)).toBe(100);
  });

  it('redeems nothing when the reward cannot be granted, and redeems once it can', async () => {
    const s = await setup();
    const d = await create({}, s);
    const u = user('rf');
    const { coupons } = await generate(d.id, [u], s);
    expect((await admin('DELETE', '/v1/wallet/currencies/coins', undefined, s)).status).toBe(200);
    const r = await redeem(coupons[0]!.code, u, s.token);
    expect([r.status, r.body.error.message]).toEqual([409, expect.stringContaining('nothing was redeemed')]);
    const mine = await query('GET', `/v1/coupons/user/${u}`, undefined, s.token);
    expect(mine.body.coupons[0]).toMatchObject({ status: 'active', redemption_count: 0 });
    expect((await query('GET', `/v1/coupons/user/${u}/redemptions`, undefined, s.token)).body.total).toBe(0);
    expect((await admin('PUT', '/v1/wallet/currencies/coins', { active: true }, s)).status).toBe(200);
    expect((await redeem(coupons[0]!.code, u, s.token)).status).toBe(200);
    expect(await balance(s.tenant.id, u)).toBe(25);
  });

  it('limits failed attempts per user and per tenant with 429, whatever the code', async () => {
    resetGuessBudgets();
    const s = await setup();
    const d = await create({}, s);
    const [guesser, honest] = [user('gs'), user('gs')];
    const { coupons } = await generate(d.id, [guesser, honest], s);
    for (let i = 0; i < 5; i++) expect((await redeem(`GUESS${i}XYZ`, guesser, s.token)).status).toBe(404);
    // Spent: even the guesser's own valid code answers 429 now, and so does validate.
    const refused = await redeem(coupons[0]!.code, guesser, s.token);
    expect([refused.status, refused.body.error.code]).toEqual([429, 'RATE_LIMITED']);
    expect(refused.headers.get('retry-after')).toBeTruthy();
    expect((await validate('ANYTHING', guesser, s.token)).status).toBe(429);
    // Another user is not affected.
    expect((await redeem(coupons[1]!.code, honest, s.token)).status).toBe(200);
    // The budget comes back after the window.
    resetGuessBudgets();
    expect((await redeem(coupons[0]!.code, guesser, s.token)).status).toBe(200);
    // Per tenant: 400 failures from different users spend the tenant's budget.
    const fails = [];
    for (let k = 0; k < 4; k++)
      fails.push(
        ...(await Promise.all(
          Array.from({ length: 100 }, (_, i) => validate(`T${k}${i}NOPE`, `many-${i}-${seq}`, s.token)),
        )),
      );
    expect(fails.filter((r) => r.status === 200 && r.body.valid === false).length).toBe(400);
    const tenantSpent = await validate('ONE-MORE', user('fresh'), s.token);
    expect([tenantSpent.status, tenantSpent.body.error?.message]).toEqual([
      429,
      expect.stringContaining('in this tenant'),
    ]);
    // Another tenant is not affected.
    expect((await validate('NOPE', user('x'))).status).toBe(200);
    resetGuessBudgets();
  });

  it('generates a coupon for each user finishing a closed window at the rank threshold or better, once', async () => {
    const s = await setup();
    const lb = `lb-${shape}`;
    const board = await admin(
      'POST',
      '/v1/leaderboards',
      {
        leaderboard_id: lb,
        name: 'Coupon board',
        config: {
          timeframe: { type: 'daily', grace_seconds: 0 },
          scoring: { rules: [{ event_type: 'score', points_expression: 'attrs.p' }], aggregation: 'sum' },
        },
      },
      s,
    );
    expect(board.status).toBe(201);
    const auto = {
      enabled: true,
      trigger: 'leaderboard_rank',
      trigger_config: { leaderboard_id: lb, rank_threshold: 2 },
    };
    const d = await create({ auto_generate: auto, code_prefix: 'TOP-' }, s, 'Top two');
    const paused = await create({ auto_generate: auto }, s, 'Paused');
    await admin('PUT', `/v1/coupons/${paused.id}/status`, { status: 'paused' }, s);
    const archived = await create({ auto_generate: auto }, s, 'Archived');
    await admin('DELETE', `/v1/coupons/${archived.id}`, undefined, s);
    const day = new Date(clock.now()).toISOString().slice(0, 10);
    const events = ['p1', 'p2', 'p3'].map((u, i) => ({
      event_id: `cpn-${shape}-${u}`,
      type: 'score',
      actor: { user_id: u },
      occurred_at: new Date(clock.now()).toISOString(),
      attrs: { p: 10 - i },
    }));
    for (let i = 0; i < 2; i++) {
      // Sent twice: the retry is deduplicated.
      const r = await call('POST', `${app.url.ingest}/v1/events/bulk`, {
        headers: { authorization: `Bearer ${s.token}` },
        body: { events },
      });
      expect(r.status).toBe(202);
    }
    await waitFor(
      async () =>
        (
          await call('GET', `${app.url.query}/v1/leaderboards/${lb}?window_key=${day}`, {
            headers: { authorization: `Bearer ${s.token}` },
          })
        ).body.total_entries === 3,
      { what: 'three entries' },
    );
    const closes = await Promise.all(
      [1, 2, 3].map(() => admin('POST', `/v1/leaderboards/${lb}/windows/${day}/close`, undefined, s)),
    );
    expect(closes.every((c) => c.status === 200)).toBe(true);
    const list = async (u: string) => (await query('GET', `/v1/coupons/user/${u}`, undefined, s.token)).body;
    const p1 = await list('p1');
    expect(p1.total).toBe(1);
    expect(p1.coupons[0]).toMatchObject({
      definition_id: d.id,
      definition_name: 'Top two',
      status: 'active',
    });
    expect(p1.coupons[0].code).toMatch(/^TOP-/);
    expect((await list('p2')).total).toBe(1);
    expect((await list('p3')).total).toBe(0);
    const hooks = await app.ctx.adapters.sql.query<{ payload: Record<string, unknown> }>(
      "SELECT payload FROM outbox WHERE tenant_id = $1 AND event_type = 'coupon.generated' ORDER BY id",
      [s.tenant.id],
    );
    expect(hooks.rows.map((x) => [x.payload.user_id, x.payload.trigger, x.payload.definition_id])).toEqual([
      ['p1', 'leaderboard_rank', d.id],
      ['p2', 'leaderboard_rank', d.id],
    ]);
    // The generated coupon redeems like any other.
    expect((await redeem(p1.coupons[0].code, 'p1', s.token)).status).toBe(200);
  });
});
