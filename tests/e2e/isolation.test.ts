/**
 * Tenant isolation, for every route registered on the admin and query gateways, now and later:
 * the test enumerates the route list the gateways mount (runtime/routes.ts), so a new route is
 * covered without editing it.
 *
 * - Every admin route that acts on a tenant, called with an API key of tenant B for tenant A
 *   (path segment or ?tenant_id), is refused with 403 and changes nothing.
 * - Every operator route refuses a tenant's API key.
 * - Every query route with a {tenant_id} path segment refuses B's token for A (403).
 * - Every query route, called with B's token and A's resource ids, never answers with A's data
 *   (A's data carries a canary string that no request ever sends).
 * - Every route that names a user refuses an end-user token of another user (403).
 */
import { allRoutes } from '../../runtime/routes';
import type { RouteSpec } from '../../http/route';
import { schemas } from '../../http/validate';
import {
  call,
  createKey,
  createTenant,
  startTestApp,
  tenantToken,
  userToken,
  type TestApp,
} from '../support/app';

describe('tenant isolation across every admin and query route', () => {
  let app: TestApp;
  let routes: RouteSpec[];
  let a: Awaited<ReturnType<typeof createTenant>>;
  let b: Awaited<ReturnType<typeof createTenant>>;
  let keyB: string;
  const canary = `canary-${Date.now()}`;

  beforeAll(async () => {
    app = await startTestApp('embedded', {
      env: { LUDUS_RATE_LIMIT_ADMIN: 'off', LUDUS_RATE_LIMIT_QUERY: 'off' },
    });
    routes = allRoutes(app.ctx).filter((r) => r.gateway !== 'ingest');
    a = await createTenant(app, canary);
    b = await createTenant(app);
    keyB = (await createKey(app, [b.id], ['*'])).key;
    await seedTenantA();
  });

  /** Resource ids of tenant A used to fill path parameters; A's stored data carries the canary. */
  const ids: Record<string, string> = { leaderboard_id: 'board-a', user_id: 'alice', window_key: 'all_time' };

  async function seedTenantA() {
    const keyA = (await createKey(app, [a.id], ['*'])).key;
    const lb = await call('POST', `${app.url.admin}/v1/leaderboards?tenant_id=${a.id}`, {
      headers: { 'x-api-key': keyA },
      body: {
        leaderboard_id: 'board-a',
        name: canary,
        config: {
          timeframe: { type: 'all_time' },
          scoring: { rules: [{ event_type: '*', points_expression: 'attrs.p' }], aggregation: 'sum' },
        },
      },
    });
    expect(lb.status).toBe(201);
    const ev = await call('POST', `${app.url.ingest}/v1/events`, {
      headers: { authorization: `Bearer ${await tenantToken(a)}` },
      body: {
        event_id: 'a-1',
        type: canary,
        actor: { user_id: 'alice' },
        occurred_at: new Date().toISOString(),
        attrs: { p: 1 },
      },
    });
    expect(ev.status).toBe(202);
    // Wallet, rewards and levels of A, each carrying the canary.
    const admin = async (path: string, body: unknown) => {
      const r = await call('POST', `${app.url.admin}${path}?tenant_id=${a.id}`, {
        headers: { 'x-api-key': keyA },
        body,
      });
      expect([path, r.status]).toEqual([path, 201]);
      return r.body;
    };
    await admin('/v1/wallet/currencies', {
      id: 'coins',
      name: canary,
      is_spendable: true,
      decimal_places: 0,
    });
    await admin('/v1/wallet/currencies', { id: 'xp', name: canary, is_spendable: false, decimal_places: 0 });
    ids.currency_id = 'coins';
    const grant = await call('POST', `${app.url.admin}/v1/wallet/grant?tenant_id=${a.id}`, {
      headers: { 'x-api-key': keyA },
      body: { user_id: 'alice', currency_id: 'coins', amount: 5, description: canary },
    });
    expect(grant.status).toBe(200);
    ids.rule_id = (
      await admin('/v1/wallet/earning-rules', {
        name: canary,
        currency_id: 'coins',
        event_type: 'x',
        calculation: { type: 'fixed', amount: 1 },
      })
    ).rule_id;
    ids.tier_id = (
      await admin('/v1/wallet/tiers', {
        tier_name: canary,
        tier_level: 1,
        min_lifetime_points: 1,
        currency_id: 'coins',
      })
    ).tier_id;
    const item = await admin('/v1/reward-items', {
      name: canary,
      reward_type: 'badge',
      payload: { badge_id: canary },
    });
    ids.item_id = item.item_id;
    ids.reward_id = (
      await admin('/v1/rewards-catalog', {
        name: canary,
        tiers: [{ condition: { type: 'rank_range', start: 1, end: 1 }, item_ids: [item.item_id] }],
      })
    ).reward_config_id;
    ids.level_id = (
      await admin('/v1/levels', {
        name: canary,
        currency_id: 'xp',
        levels: [{ level: 2, xp_required: 10, name: canary }],
      })
    ).level_system_id;
    ids.level_number = '2';
    // A webhook endpoint of A (no dispatcher runs here, so nothing is sent to it).
    const hook = await admin('/v1/webhooks', {
      url: 'https://hooks.example.com/a',
      event_types: ['*'],
      description: canary,
    });
    ids.webhook_id = hook.id;
    // A coupon definition of A with a shared code, and alice's coupon of it.
    const coupon = await admin('/v1/coupons', {
      name: canary,
      config: {
        reward_item_id: item.item_id,
        code_format: 'custom',
        custom_code: 'CANARYCODE',
        usage_limit: { limit_type: 'unlimited' },
      },
    });
    ids.definition_id = coupon.id;
    ids.code = 'CANARYCODE';
    const gen = await call('POST', `${app.url.admin}/v1/coupons/${coupon.id}/generate?tenant_id=${a.id}`, {
      headers: { 'x-api-key': keyA },
      body: { user_ids: ['alice'] },
    });
    expect(gen.status).toBe(200);
    const mine = await call('GET', `${app.url.query}/v1/coupons/user/alice`, {
      headers: { authorization: `Bearer ${await tenantToken(a)}` },
    });
    ids.coupon_id = mine.body.coupons[0].id;
  }
  afterAll(() => app.stop());

  const fill = (path: string, tenantId: string) =>
    path.replace(/:([A-Za-z_]+)/g, (_m, name: string) =>
      name === 'tenant_id' ? tenantId : (ids[name] ?? 'x'),
    );

  it('has routes to check', () => {
    expect(routes.filter((r) => r.gateway === 'admin').length).toBeGreaterThan(3);
    expect(routes.filter((r) => r.gateway === 'query').length).toBeGreaterThan(0);
  });

  it("refuses tenant B's API key on every admin route acting on tenant A", async () => {
    const checked: string[] = [];
    for (const r of routes.filter(
      (x) => x.gateway === 'admin' && x.auth.kind === 'admin' && x.auth.tenant !== false,
    )) {
      const path = fill(r.path, a.id);
      const url = `${app.url.admin}${path}${r.path.includes(':tenant_id') ? '' : `?tenant_id=${encodeURIComponent(a.id)}`}`;
      const res = await call(r.method, url, {
        headers: { 'x-api-key': keyB },
        body: r.method === 'GET' || r.method === 'DELETE' ? undefined : {},
      });
      expect([r.method, r.path, res.status]).toEqual([r.method, r.path, 403]);
      expect(JSON.stringify(res.body)).not.toContain(canary);
      checked.push(`${r.method} ${r.path}`);
    }
    expect(checked.length).toBeGreaterThan(0);
  });

  it("refuses a tenant's API key on every operator route", async () => {
    for (const r of routes.filter((x) => x.auth.kind === 'root')) {
      const res = await call(r.method, `${app.url.admin}${fill(r.path, a.id)}`, {
        headers: { 'x-api-key': keyB },
        body: r.method === 'GET' || r.method === 'DELETE' ? undefined : { name: 'x' },
      });
      expect([r.method, r.path, res.status]).toEqual([r.method, r.path, 403]);
    }
  });

  it("refuses tenant B's token on every query long form naming tenant A, and never shows A's data", async () => {
    const tokenB = await tenantToken(b);
    for (const r of routes.filter((x) => x.gateway === 'query')) {
      const res = await call(r.method, `${app.url.query}${fill(r.path, a.id)}`, {
        headers: { authorization: `Bearer ${tokenB}` },
        body: r.method === 'GET' || r.method === 'DELETE' ? undefined : {},
      });
      if (r.path.includes(':tenant_id'))
        expect([r.method, r.path, res.status]).toEqual([r.method, r.path, 403]);
      expect([r.method, r.path, JSON.stringify(res.body ?? '')]).toEqual([
        r.method,
        r.path,
        expect.not.stringContaining(canary),
      ]);
      expect([r.method, r.path, JSON.stringify(res.body ?? '')]).toEqual([
        r.method,
        r.path,
        expect.not.stringContaining(a.id),
      ]);
    }
  });

  it('refuses an end-user token of another user on every route that names a user', async () => {
    const mallory = await userToken(a, 'mallory');
    const namesUser = (r: RouteSpec): 'path' | 'query' | 'body' | null => {
      if (r.path.includes(':user_id')) return 'path';
      const props = (id?: string) =>
        ((id ? schemas().all.get(id) : undefined) as { properties?: object } | undefined)?.properties ?? {};
      if (r.query && 'user_id' in props(r.query)) return 'query';
      if (r.body && 'user_id' in props(r.body)) return 'body';
      return null;
    };
    for (const r of routes.filter((x) => x.gateway === 'query' && x.auth.kind === 'tenant')) {
      const where = namesUser(r);
      if (!where) continue;
      const path = fill(r.path, a.id);
      const url = `${app.url.query}${path}${where === 'query' ? '?user_id=alice' : ''}`;
      const res = await call(r.method, url, {
        headers: { authorization: `Bearer ${mallory}` },
        body:
          where === 'body'
            ? { user_id: 'alice' }
            : r.method === 'GET' || r.method === 'DELETE'
              ? undefined
              : {},
      });
      expect([r.method, r.path, res.status]).toEqual([r.method, r.path, 403]);
    }
  });
});
