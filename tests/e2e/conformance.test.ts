/**
 * Conformance items of issue 12, in both shapes, through the gateways:
 * - a completed window's page shows SPEC.md's reward tiers (one tier per ranked key of rank_items);
 * - every error of the signed ingestion variant is `{error, code}` (malformed JSON, bad UTF-8 and
 *   an empty body are 422 VAL_00x, after the signature is checked);
 * - references are checked: unknown reward configs refused (400 naming the field), definitions in
 *   use not deletable (409 naming the users), also under concurrent writes; a close that cannot pay
 *   records `payout_error` (and a metric) instead of paying nothing in silence;
 * - an accumulate-only currency (`is_spendable: false`) cannot be spent, and an admin deduct of it
 *   needs `source_type: manual_adjustment`.
 */
import { signRequest } from '../../http/auth/authenticator';
import { ManualClock } from '../../core/clock';
import { WalletError } from '../../core/wallet/wallet';
import { EVENTS_TOPIC } from '../../schemas/topics';
import {
  call,
  SHAPES,
  startTestApp,
  tenantWithCredentials,
  type TenantInfo,
  type TestApp,
} from '../support/app';
import { waitFor } from '../support/wait';

const T0 = Date.parse('2026-11-20T10:00:00Z');
const DAY = '2026-11-20';

describe.each(SHAPES)('conformance [%s]', (shape) => {
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
      env: { LUDUS_RATE_LIMIT_ADMIN: 'off', LUDUS_RATE_LIMIT_INGEST: 'off' },
    });
    ({ tenant, key, token } = await tenantWithCredentials(app));
    for (const [id, spendable] of [
      ['coins', true],
      ['xp', false],
    ] as const) {
      const r = await admin('POST', '/v1/wallet/currencies', {
        id,
        name: id,
        is_spendable: spendable,
        decimal_places: 0,
      });
      expect(r.status).toBe(201);
    }
  });
  afterAll(() => app?.stop());

  const admin = (method: string, path: string, body?: unknown) =>
    call(method, `${app.url.admin}${path}${path.includes('?') ? '&' : '?'}tenant_id=${tenant.id}`, {
      headers: { 'x-api-key': key },
      body,
    });
  const query = (path: string) =>
    call('GET', `${app.url.query}${path}`, { headers: { authorization: `Bearer ${token}` } });

  async function item(name: string, reward_type = 'currency', payload: Record<string, unknown> = {}) {
    const r = await admin('POST', '/v1/reward-items', {
      name,
      reward_type,
      payload: reward_type === 'currency' ? { currency_id: 'coins', amount: 5, ...payload } : payload,
    });
    expect(r.status).toBe(201);
    return r.body as { item_id: string; name: string; reward_type: string; payload: Record<string, unknown> };
  }

  async function config(tiers: unknown[]) {
    const r = await admin('POST', '/v1/rewards-catalog', { name: `cfg${++seq}`, tiers });
    expect(r.status).toBe(201);
    return r.body.reward_config_id as string;
  }

  const boardBody = (id: string, reward_config_id?: string | null) => ({
    leaderboard_id: id,
    name: id,
    ...(reward_config_id !== undefined ? { reward_config_id } : {}),
    config: {
      timeframe: { type: 'daily', grace_seconds: 0 },
      scoring: { rules: [{ event_type: `score-${id}`, points_expression: 'attrs.p' }], aggregation: 'sum' },
    },
  });

  /** Scores users on a board through the ingestion gateway and waits until the page shows them. */
  async function score(board: string, scores: Array<[string, number]>) {
    const r = await call('POST', `${app.url.ingest}/v1/events/bulk`, {
      headers: { authorization: `Bearer ${token}` },
      body: {
        events: scores.map(([user, p]) => ({
          event_id: `ev-${++seq}`,
          type: `score-${board}`,
          actor: { user_id: user },
          occurred_at: new Date(T0).toISOString(),
          attrs: { p },
        })),
      },
    });
    expect(r.status).toBe(202);
    await waitFor(
      async () =>
        (await query(`/v1/leaderboards/${board}?window_key=${DAY}`)).body.total_entries === scores.length,
      { what: `${scores.length} entries on ${board}` },
    );
  }

  const close = (board: string) => admin('POST', `/v1/leaderboards/${board}/windows/${DAY}/close`);

  const brief = (i: { item_id: string; name: string; reward_type: string; payload: unknown }) => ({
    item_id: i.item_id,
    name: i.name,
    reward_type: i.reward_type,
    payload: i.payload,
  });

  it("renders a completed window's reward tiers in SPEC.md's shape: one tier per ranked key, with its items", async () => {
    const gold = await item('gold', 'currency', { amount: 50 });
    const cup = await item('cup', 'physical_item', { sku: 'cup' });
    const silver = await item('silver', 'currency', { amount: 20 });
    const token5 = await item('token', 'currency', { amount: 5 });
    const cfg = await config([
      { condition: { type: 'rank_range', start: 4, end: 10 }, item_ids: [token5.item_id] },
      {
        condition: { type: 'rank_range', start: 1, end: 3 },
        // Rank 3 has no key: it wins nothing and has no tier.
        rank_items: { '2': [silver.item_id], '1': [gold.item_id, cup.item_id] },
      },
    ]);
    expect((await admin('POST', '/v1/leaderboards', boardBody('podium', cfg))).status).toBe(201);
    await score('podium', [
      ['a', 9],
      ['b', 7],
      ['c', 5],
      ['d', 1],
    ]);
    // While the window is live there is no reward_config on the page.
    expect((await query(`/v1/leaderboards/podium?window_key=${DAY}`)).body.reward_config).toBeUndefined();
    const closed = await close('podium');
    expect(closed.status).toBe(200);
    expect(closed.body.payout_error).toBeNull();

    const page = await query(`/v1/leaderboards/podium?window_key=${DAY}`);
    expect(page.status).toBe(200);
    expect(page.body.window_status).toBe('completed');
    expect(page.body.reward_config).toEqual({
      reward_config_id: cfg,
      tiers: [
        { rank_start: 1, rank_end: 1, items: [brief(gold), brief(cup)] },
        { rank_start: 2, rank_end: 2, items: [brief(silver)] },
        { rank_start: 4, rank_end: 10, items: [brief(token5)] },
      ],
    });
    // The page says what was paid: a won 50 coins, b 20, c nothing, d 5.
    const balances = await app.ctx.adapters.sql.query<{ user_id: string; available: string }>(
      "SELECT user_id, available FROM balances WHERE tenant_id = $1 AND currency_id = 'coins' AND user_id = ANY($2::text[]) ORDER BY user_id",
      [tenant.id, ['a', 'b', 'c', 'd']],
    );
    expect(balances.rows.map((r) => [r.user_id, Number(r.available)])).toEqual([
      ['a', 50],
      ['b', 20],
      ['d', 5],
    ]);
  });

  describe('signed ingestion variant', () => {
    const signedPost = (path: string, raw: string | Buffer, opts: { badSignature?: boolean } = {}) => {
      const ts = String(Math.floor(clock.now() / 1000));
      const sig = signRequest(tenant.hmac_secret, 'POST', path, ts, raw);
      return call('POST', `${app.url.ingest}${path}`, {
        headers: {
          'x-tenant-id': tenant.id,
          'x-timestamp': ts,
          'x-signature': `hmac-sha256=${opts.badSignature ? sig.replace(/^./, sig[0] === 'a' ? 'b' : 'a') : sig}`,
        },
        raw,
      });
    };
    const logEnd = async () =>
      [...(await app.ctx.adapters.eventLog.endOffsets(EVENTS_TOPIC)).values()].reduce((a, b) => a + b, 0);
    const flat = () =>
      JSON.stringify({
        event_id: `sv-${++seq}`,
        event_type: 'match',
        user_id: 'sv-user',
        timestamp: new Date(T0).toISOString(),
        attributes: { p: 1 },
      });

    it('answers malformed JSON, bad UTF-8 and an empty body with 422 {error, code}, after the signature check', async () => {
      const before = await logEnd();
      const valid = Buffer.from(flat());
      const at = valid.indexOf('sv-user');
      const badUtf8 = Buffer.concat([valid.subarray(0, at), Buffer.from([0xc3, 0x28]), valid.subarray(at)]);
      const cases: Array<[string | Buffer, string, RegExp]> = [
        ['{"event_id": "x",', 'VAL_002', /^Malformed JSON/],
        [badUtf8, 'VAL_002', /^Request body is not valid UTF-8$/],
        ['', 'VAL_001', /required/],
      ];
      for (const path of ['/v1/events', '/v1/events/bulk']) {
        for (const [raw, code, message] of cases) {
          const r = await signedPost(path, raw);
          expect([path, r.status, r.body.code]).toEqual([path, 422, code]);
          expect(Object.keys(r.body).sort()).toEqual(['code', 'error']);
          expect(r.body.error).toMatch(message);
          // The signature is checked first: a forged request learns nothing about its body.
          const forged = await signedPost(path, raw, { badSignature: true });
          expect([forged.status, forged.body]).toEqual([
            401,
            { error: 'Invalid signature', code: 'AUTH_001' },
          ]);
        }
      }
      // A JWT request keeps the standard envelope.
      const jwt = await call('POST', `${app.url.ingest}/v1/events`, {
        headers: { authorization: `Bearer ${token}` },
        raw: '{"event_id": "x",',
      });
      expect(jwt.status).toBe(400);
      expect(jwt.body.error).toMatchObject({ code: 'VALIDATION_ERROR', status: 400 });
      // Nothing reached the log, and the variant still serves.
      expect(await logEnd()).toBe(before);
      const ok = await signedPost('/v1/events', flat());
      expect([ok.status, ok.body.status]).toEqual([200, 'accepted']);
      await waitFor(async () => (await logEnd()) === before + 1, { what: 'the valid event in the log' });
    });
  });

  describe('references', () => {
    it('refuses an unknown reward_config_id on leaderboards and level systems (400 naming the field)', async () => {
      const create = await admin('POST', '/v1/leaderboards', boardBody('ref-bad', 'rc-nope'));
      expect(create.status).toBe(400);
      expect(create.body.error).toMatchObject({ code: 'VALIDATION_ERROR' });
      expect(create.body.error.message).toBe('body.reward_config_id: reward config rc-nope does not exist');
      expect((await admin('GET', '/v1/leaderboards/ref-bad')).status).toBe(404);

      expect((await admin('POST', '/v1/leaderboards', boardBody('ref-ok'))).status).toBe(201);
      const update = await admin('PUT', '/v1/leaderboards/ref-ok', { reward_config_id: 'rc-nope' });
      expect(update.status).toBe(400);
      expect(update.body.error.message).toMatch(/^body\.reward_config_id: reward config rc-nope/);
      expect((await admin('GET', '/v1/leaderboards/ref-ok')).body.reward_config_id).toBeNull();

      const level = await admin('POST', '/v1/levels', {
        name: 'lv',
        reward_config_id: 'rc-nope',
        levels: [{ level: 1, name: 'one', xp_required: 0 }],
      });
      expect(level.status).toBe(400);
      expect(level.body.error.message).toMatch(/^body\.reward_config_id: reward config rc-nope/);

      const tiers = await admin('POST', '/v1/rewards-catalog', {
        name: 'missing item',
        tiers: [{ condition: { type: 'rank_range', start: 1, end: 1 }, item_ids: ['item-nope'] }],
      });
      expect(tiers.status).toBe(400);
      expect(tiers.body.error.message).toBe('body.tiers: reward item item-nope does not exist');
    });

    it('refuses to delete a reward config or item in use (409 naming its users), and deletes once detached', async () => {
      const prize = await item('prize');
      const cfg = await config([
        { condition: { type: 'rank_range', start: 1, end: 1 }, item_ids: [prize.item_id] },
      ]);
      const cfg2 = await config([
        { condition: { type: 'rank_range', start: 1, end: 2 }, rank_items: { '2': [prize.item_id] } },
      ]);
      for (const id of ['use-b', 'use-a'])
        expect((await admin('POST', '/v1/leaderboards', boardBody(id, cfg))).status).toBe(201);
      const level = await admin('POST', '/v1/levels', {
        name: 'lv',
        reward_config_id: cfg,
        levels: [{ level: 1, name: 'one', xp_required: 0 }],
      });
      expect(level.status).toBe(201);
      const ls = level.body.level_system_id as string;

      const del = await admin('DELETE', `/v1/rewards-catalog/${cfg}`);
      expect(del.status).toBe(409);
      expect(del.body.error).toMatchObject({ code: 'CONFLICT', status: 409 });
      expect(del.body.error.message).toBe(
        `reward config ${cfg} is used by leaderboards use-a, use-b; level systems ${ls}; detach it first`,
      );
      expect((await admin('GET', `/v1/rewards-catalog/${cfg}`)).status).toBe(200);

      const delItem = await admin('DELETE', `/v1/reward-items/${prize.item_id}`);
      expect(delItem.status).toBe(409);
      expect(delItem.body.error.message).toBe(
        `reward item ${prize.item_id} is used by reward configs ${[cfg, cfg2].sort().join(', ')}; detach it first`,
      );
      expect((await admin('GET', `/v1/reward-items/${prize.item_id}`)).status).toBe(200);

      // Detached, they go.
      for (const id of ['use-a', 'use-b'])
        expect((await admin('PUT', `/v1/leaderboards/${id}`, { reward_config_id: null })).status).toBe(200);
      expect((await admin('PUT', `/v1/levels/${ls}`, { reward_config_id: null })).status).toBe(200);
      expect((await admin('DELETE', `/v1/rewards-catalog/${cfg}`)).status).toBe(200);
      const other = await item('other');
      expect(
        (
          await admin('PUT', `/v1/rewards-catalog/${cfg2}`, {
            tiers: [{ condition: { type: 'rank_range', start: 1, end: 1 }, item_ids: [other.item_id] }],
          })
        ).status,
      ).toBe(200);
      expect((await admin('DELETE', `/v1/reward-items/${prize.item_id}`)).status).toBe(200);
      expect((await admin('DELETE', `/v1/reward-items/${other.item_id}`)).status).toBe(409);
    });

    it('keeps references whole under concurrent attach and delete', async () => {
      const prize = await item('race prize');
      for (let i = 0; i < 8; i++) {
        const cfg = await config([
          { condition: { type: 'rank_range', start: 1, end: 1 }, item_ids: [prize.item_id] },
        ]);
        const [created, deleted] = await Promise.all([
          admin('POST', '/v1/leaderboards', boardBody(`race-${i}`, cfg)),
          admin('DELETE', `/v1/rewards-catalog/${cfg}`),
        ]);
        // Exactly one wins: the board holds the config, or the config is gone and the board refused.
        expect([created.status, deleted.status].sort()).toEqual(
          created.status === 201 ? [201, 409] : [200, 400],
        );
      }
      const dangling = await app.ctx.adapters.sql.query(
        `SELECT b.id FROM leaderboards b LEFT JOIN reward_configs c ON c.tenant_id = b.tenant_id AND c.id = b.reward_config_id
         WHERE b.tenant_id = $1 AND b.reward_config_id IS NOT NULL AND c.id IS NULL`,
        [tenant.id],
      );
      expect(dangling.rows).toEqual([]);
    });

    it('records a close that cannot pay as payout_error (with a metric) and still closes the window', async () => {
      const metric = async () => {
        const m = app.ctx.metrics.registry.getSingleMetric('ludus_leaderboard_payout_errors_total');
        return m ? ((await m.get()).values[0]?.value ?? 0) : 0;
      };
      const before = await metric();
      // A reference dangling from before the foreign keys: deleted with the store's checks off.
      const cfg = await config([
        { condition: { type: 'rank_range', start: 1, end: 1 }, item_ids: [(await item('lost')).item_id] },
      ]);
      expect((await admin('POST', '/v1/leaderboards', boardBody('unpaid', cfg))).status).toBe(201);
      await app.ctx.adapters.sql.tx(async (q) => {
        await q.query('SET LOCAL session_replication_role = replica');
        await q.query('DELETE FROM reward_configs WHERE tenant_id = $1 AND id = $2', [tenant.id, cfg]);
      });
      await score('unpaid', [['w1', 3]]);
      const r = await close('unpaid');
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ status: 'closed', already_closed: false, entries: 1 });
      expect(r.body.payout_error).toBe(`reward config ${cfg} does not exist; nothing was paid`);
      // The state stays visible on the window.
      expect((await close('unpaid')).body).toMatchObject({
        already_closed: true,
        payout_error: r.body.payout_error,
      });
      expect(await metric()).toBe(before + 1);

      // A grant that fails (the item's currency does not exist) is reported too; the rest is paid.
      const bad = await item('bad coin', 'currency', { currency_id: 'nope_currency' });
      const good = await item('good coin', 'currency', { amount: 3 });
      const cfg2 = await config([
        { condition: { type: 'rank_range', start: 1, end: 1 }, item_ids: [bad.item_id, good.item_id] },
      ]);
      expect((await admin('POST', '/v1/leaderboards', boardBody('halfpaid', cfg2))).status).toBe(201);
      await score('halfpaid', [['h1', 4]]);
      const r2 = await close('halfpaid');
      expect(r2.status).toBe(200);
      expect(r2.body.payout_error).toBe(
        `grants failed (recorded as failed in reward_grants) for h1 (${bad.item_id})`,
      );
      const grants = (await admin('GET', '/v1/reward-grants?user_id=h1')).body.grants as Array<{
        item_id: string;
        status: string;
      }>;
      expect(grants.map((g) => [g.item_id, g.status]).sort()).toEqual(
        [
          [bad.item_id, 'failed'],
          [good.item_id, 'credited'],
        ].sort(),
      );
      expect(await metric()).toBe(before + 2);
      expect((await query(`/v1/leaderboards/halfpaid?window_key=${DAY}`)).status).toBe(200);
    });
  });

  describe('accumulate-only currencies', () => {
    const balance = async (user: string, currency: string) =>
      Number(
        (
          await app.ctx.adapters.sql.query<{ available: string }>(
            'SELECT available FROM balances WHERE tenant_id = $1 AND user_id = $2 AND currency_id = $3',
            [tenant.id, user, currency],
          )
        ).rows[0]?.available ?? 0,
      );
    const ledgerRows = async (user: string) =>
      Number(
        (
          await app.ctx.adapters.sql.query<{ n: number }>(
            'SELECT count(*)::int AS n FROM ledger WHERE tenant_id = $1 AND user_id = $2',
            [tenant.id, user],
          )
        ).rows[0]!.n,
      );

    it('refuses an admin deduct of xp unless it is a manual_adjustment; coins deduct as before', async () => {
      for (const currency_id of ['xp', 'coins'])
        expect(
          (await admin('POST', '/v1/wallet/grant', { user_id: 'acc', currency_id, amount: 50 })).status,
        ).toBe(200);
      const rows = await ledgerRows('acc');
      for (const source_type of [undefined, 'manual_deduct', 'purchase']) {
        const r = await admin('POST', '/v1/wallet/deduct', {
          user_id: 'acc',
          currency_id: 'xp',
          amount: 10,
          ...(source_type ? { source_type } : {}),
        });
        expect(r.status).toBe(400);
        expect(r.body.error).toMatchObject({ code: 'VALIDATION_ERROR' });
        expect(r.body.error.message).toBe(
          'body.currency_id: Currency xp is accumulate-only (is_spendable: false); an admin correction of it needs source_type "manual_adjustment"',
        );
      }
      expect(await balance('acc', 'xp')).toBe(50);
      expect(await ledgerRows('acc')).toBe(rows);

      const fix = await admin('POST', '/v1/wallet/deduct', {
        user_id: 'acc',
        currency_id: 'xp',
        amount: 10,
        source_type: 'manual_adjustment',
        description: 'xp granted by mistake',
      });
      expect([fix.status, fix.body.balance_after]).toEqual([200, 40]);
      const coins = await admin('POST', '/v1/wallet/deduct', {
        user_id: 'acc',
        currency_id: 'coins',
        amount: 10,
      });
      expect([coins.status, coins.body.balance_after]).toEqual([200, 40]);
      expect(await ledgerRows('acc')).toBe(rows + 2);
    });

    it('refuses every spend of an accumulate-only currency in core/wallet (purchases, spin costs)', async () => {
      const wallet = app.ctx.services.wallet;
      const sql = app.ctx.adapters.sql;
      await admin('POST', '/v1/wallet/grant', { user_id: 'spender', currency_id: 'xp', amount: 20 });
      await admin('POST', '/v1/wallet/grant', { user_id: 'spender', currency_id: 'coins', amount: 20 });
      const spend = (currency_id: string, source_type: string) =>
        sql.tx((q) =>
          wallet.debit(q, {
            tenant_id: tenant.id,
            user_id: 'spender',
            currency_id,
            amount: 5,
            source_type,
            now: clock.now(),
            purpose: 'spend',
          }),
        );
      for (const source_type of ['purchase', 'wheel_spin', 'manual_adjustment']) {
        const err = await spend('xp', source_type).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(WalletError);
        expect((err as WalletError).code).toBe('not_spendable');
        expect((err as WalletError).message).toBe(
          'Currency xp is accumulate-only (is_spendable: false) and cannot be spent',
        );
      }
      expect(await balance('spender', 'xp')).toBe(20);
      expect((await spend('coins', 'purchase')).balance_after).toBe(15);
    });
  });
});
