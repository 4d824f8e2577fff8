/**
 * The rewards catalog, the store, purchases, grants, claims and the order lifecycle (issue 17,
 * docs/store.md) in both shapes, through the gateways. After every test the invariants are checked
 * straight in SQL: balance == sum(ledger) per user and currency; remaining stock + orders holding
 * stock == the initial stock, per reward and variant; one debit per purchase order and one credit
 * per refunded order (and none for others).
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ManualClock } from '../../core/clock';
import { verifySignature } from '../../core/webhooks/signing';
import {
  call,
  createTenant,
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

/** A local fulfilment endpoint: answers by a script, records every call. */
interface Endpoint {
  url: string;
  calls: Array<{ headers: IncomingMessage['headers']; body: string }>;
  close(): Promise<void>;
}

async function endpoint(answer: (n: number) => { status: number; body?: unknown }): Promise<Endpoint> {
  const calls: Endpoint['calls'] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      calls.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      const a = answer(calls.length);
      res.writeHead(a.status, { 'content-type': 'application/json' });
      res.end(a.body === undefined ? '' : JSON.stringify(a.body));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/fulfil`,
    calls,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

describe.each(SHAPES)('store [%s]', (shape) => {
  let app: TestApp;
  let clock: ManualClock;
  let tenant: TenantInfo;
  let key: string;
  let token: string;
  let seq = 0;
  /** Initial stock per `<reward_id>:<variant_id>` (the stock invariant). */
  const initial = new Map<string, number>();

  beforeAll(async () => {
    clock = new ManualClock(T0);
    app = await startTestApp(shape, {
      clock,
      roles: 'all',
      env: {
        LUDUS_SCHEDULER_INTERVAL_MS: '100',
        LUDUS_RATE_LIMIT_ADMIN: 'off',
        LUDUS_RATE_LIMIT_QUERY: 'off',
        LUDUS_WEBHOOK_ALLOW_PRIVATE: 'true',
        LUDUS_WEBHOOK_POLL_MS: '50',
        LUDUS_WEBHOOK_TIMEOUT_MS: '1000',
      },
    });
    ({ tenant, key, token } = await tenantWithCredentials(app));
    for (const [id, spendable] of [
      ['coins', true],
      ['gems', true],
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
  }, 120_000);

  afterEach(async () => {
    const sql = app.ctx.adapters.sql;
    // Invariant 3: every balance is the sum of its ledger.
    expect(await walletViolations(sql, tenant.id)).toEqual([]);
    // Stock: remaining + orders holding a unit == initial.
    const stock = await sql.query<{ reward_id: string; variant_id: string; remaining: number; held: number }>(
      `SELECT s.reward_id, s.variant_id, s.remaining,
              (SELECT count(*)::int FROM reward_orders o WHERE o.tenant_id = s.tenant_id AND o.reward_id = s.reward_id
                 AND o.variant_id = s.variant_id AND o.stock_held) AS held
       FROM catalog_stock s WHERE s.tenant_id = $1`,
      [tenant.id],
    );
    for (const s of stock.rows) {
      const k = `${s.reward_id}:${s.variant_id}`;
      if (initial.has(k)) expect([k, s.remaining + s.held]).toEqual([k, initial.get(k)]);
    }
    // One debit per purchase order, one credit per refund, nothing else of either.
    const money = await sql.query<{
      id: string;
      state: string;
      source_type: string;
      debits: number;
      refunds: number;
    }>(
      `SELECT o.id, o.state, o.source_type,
              (SELECT count(*)::int FROM ledger l WHERE l.tenant_id = o.tenant_id AND l.source_type = 'purchase' AND l.source_ref = o.id AND l.amount < 0) AS debits,
              (SELECT count(*)::int FROM ledger l WHERE l.tenant_id = o.tenant_id AND l.source_type = 'refund' AND l.source_ref = o.id AND l.amount > 0) AS refunds
       FROM reward_orders o WHERE o.tenant_id = $1`,
      [tenant.id],
    );
    for (const o of money.rows) {
      expect([o.id, o.debits]).toEqual([o.id, o.source_type === 'purchase' ? 1 : 0]);
      expect([o.id, o.refunds]).toEqual([o.id, o.state === 'refunded' ? 1 : 0]);
    }
    const stray = await sql.query(
      `SELECT l.id FROM ledger l WHERE l.tenant_id = $1 AND l.source_type IN ('purchase', 'refund')
         AND NOT EXISTS (SELECT 1 FROM reward_orders o WHERE o.tenant_id = l.tenant_id AND o.id = l.source_ref)`,
      [tenant.id],
    );
    expect(stray.rows).toEqual([]);
  });
  afterAll(() => app?.stop());

  function admin(method: string, path: string, body?: unknown) {
    return call(method, `${app.url.admin}${path}${path.includes('?') ? '&' : '?'}tenant_id=${tenant.id}`, {
      headers: { 'x-api-key': key },
      body,
    });
  }
  const adminT = (method: string, path: string, body?: unknown) =>
    call(method, `${app.url.admin}/v1/tenants/${tenant.id}${path}`, { headers: { 'x-api-key': key }, body });
  const query = (method: string, path: string, body?: unknown, t = token) =>
    call(method, `${app.url.query}${path}`, { headers: { authorization: `Bearer ${t}` }, body });
  const fund = async (user: string, amount: number, currency = 'coins') =>
    expect(
      (await admin('POST', '/v1/wallet/grant', { user_id: user, currency_id: currency, amount })).status,
    ).toBe(200);
  const balance = async (user: string, currency = 'coins') =>
    (await query('GET', `/v1/wallet/balances/${currency}?user_id=${user}`)).body.available as number;
  const slug = (p: string) => `${p}-${++seq}`;

  /** Creates a catalog reward (tenant path form) and records its initial stock. */
  async function reward(extra: Record<string, unknown> = {}) {
    const r = await adminT('POST', '/rewards-catalog', {
      slug: slug('r'),
      name: 'Mug',
      fulfillment: { type: 'manual' },
      purchase: { prices: [{ currency: 'coins', amount: 100 }] },
      ...extra,
    });
    expect([r.status, r.body.error]).toEqual([201, undefined]);
    track(r.body);
    return r.body as {
      id: string;
      slug: string;
      stock: number | null;
      variants: Array<{ variant_id: string; stock: number | null }>;
    };
  }
  function track(r: {
    id: string;
    stock: number | null;
    variants: Array<{ variant_id: string; stock: number | null }>;
  }) {
    if (r.stock !== null) initial.set(`${r.id}:default`, r.stock);
    for (const v of r.variants) if (v.stock !== null) initial.set(`${r.id}:${v.variant_id}`, v.stock);
  }
  const buy = (s: string, user: string, extra: Record<string, unknown> = {}) =>
    query('POST', `/v1/rewards/purchase/${s}`, {
      user_id: user,
      idempotency_key: `k-${++seq}`,
      currency: 'coins',
      ...extra,
    });
  const events = async (orderId: string) =>
    (
      await app.ctx.adapters.sql.query<{ event_type: string; payload: any }>(
        `SELECT event_type, payload FROM outbox WHERE tenant_id = $1 AND payload->'data'->>'order_id' = $2 ORDER BY id`,
        [tenant.id, orderId],
      )
    ).rows;
  const order = async (id: string) => (await admin('GET', `/v1/reward-orders/${id}`)).body;

  it('creates, lists, reads, updates and deactivates catalog rewards in both path forms, beside reward configs', async () => {
    const item = await admin('POST', '/v1/reward-items', {
      name: '5 coins',
      reward_type: 'currency',
      payload: { currency_id: 'coins', amount: 5 },
    });
    const full = {
      slug: slug('hoodie'),
      name: 'Hoodie',
      description: 'Warm',
      image_url: 'https://cdn.example.com/h.png',
      fields: [
        {
          name: 'size',
          label: 'Size',
          type: 'select',
          required: true,
          options: [
            { value: 'm', label: 'M' },
            { value: 'l', label: 'L' },
          ],
        },
        { name: 'zip', label: 'Postcode', required: true, pattern: '^[0-9]{5}$', max_length: 5 },
        { name: 'note', label: 'Note', multiline: true, max_length: 200, placeholder: '...' },
      ],
      fulfillment: { type: 'manual', notes: 'ship it' },
      requires_claim: false,
      purchase: {
        prices: [
          { currency: 'coins', amount: 300 },
          { currency: 'gems', amount: 3 },
        ],
      },
      stock: 5,
      config: { warehouse: 'north' },
      variants: [
        {
          variant_id: 'red',
          label: 'Red',
          purchase: { prices: [{ currency: 'coins', amount: 350 }] },
          stock: 2,
        },
      ],
    };
    // The ?tenant_id form: a catalog-shaped body is a catalog reward.
    const viaQuery = await admin('POST', '/v1/rewards-catalog', full);
    expect(viaQuery.status).toBe(201);
    track(viaQuery.body);
    expect(viaQuery.body).toMatchObject({
      ...full,
      tenant_id: tenant.id,
      active: true,
      id: expect.any(String),
    });
    const id = viaQuery.body.id;
    // Reward configs keep working in the same family.
    const cfg = await admin('POST', '/v1/rewards-catalog', {
      name: 'cfg',
      tiers: [{ condition: { type: 'rank_range', start: 1, end: 1 }, item_ids: [item.body.item_id] }],
    });
    expect([cfg.status, typeof cfg.body.reward_config_id]).toEqual([201, 'string']);
    expect((await admin('GET', `/v1/rewards-catalog/${cfg.body.reward_config_id}`)).body.name).toBe('cfg');
    expect((await admin('GET', `/v1/rewards-catalog/${id}`)).body.slug).toBe(full.slug);
    expect((await adminT('GET', `/rewards-catalog/${id}`)).body.slug).toBe(full.slug);
    const configs = await admin('GET', '/v1/rewards-catalog');
    expect(configs.body.reward_configs.map((c: any) => c.reward_config_id)).toContain(
      cfg.body.reward_config_id,
    );
    const listed = await admin('GET', '/v1/rewards-catalog?kind=catalog_reward');
    expect(listed.body.rewards.map((r: any) => r.id)).toContain(id);
    expect(listed.body.limit).toBe(50);

    // PUT in both forms: changed fields only; stock replaced.
    const put = await adminT('PUT', `/rewards-catalog/${id}`, { name: 'Hoodie 2', stock: 7 });
    expect([put.status, put.body.name, put.body.stock, put.body.description]).toEqual([
      200,
      'Hoodie 2',
      7,
      'Warm',
    ]);
    initial.set(`${id}:default`, 7);
    const put2 = await admin('PUT', `/v1/rewards-catalog/${id}`, { description: null });
    expect([put2.status, put2.body.description]).toEqual([200, null]);
    expect(
      (await admin('PUT', `/v1/rewards-catalog/${cfg.body.reward_config_id}`, { name: 'cfg2' })).body.name,
    ).toBe('cfg2');

    // The slug is unique per tenant.
    const dup = await adminT('POST', '/rewards-catalog', { ...full, variants: [] });
    expect([dup.status, dup.body.error.code, dup.body.error.message]).toEqual([
      409,
      'CONFLICT',
      expect.stringMatching(/body.slug/),
    ]);

    // DELETE deactivates: out of the default list, in the inactive one, out of the store.
    const del = await adminT('DELETE', `/rewards-catalog/${id}`);
    expect([del.status, del.body.active]).toEqual([200, false]);
    const active = await adminT('GET', '/rewards-catalog');
    expect(active.body.rewards.map((r: any) => r.id)).not.toContain(id);
    const inactive = await adminT('GET', '/rewards-catalog?active=false&limit=5');
    expect(inactive.body.rewards.map((r: any) => r.id)).toContain(id);
    expect(inactive.body.limit).toBe(5);
    expect((await query('GET', `/v1/rewards/catalog/${full.slug}`)).status).toBe(404);
    // The ?tenant_id DELETE of a config deletes it; of a catalog reward deactivates it.
    expect((await admin('DELETE', `/v1/rewards-catalog/${cfg.body.reward_config_id}`)).status).toBe(200);
    expect((await admin('GET', `/v1/rewards-catalog/${cfg.body.reward_config_id}`)).status).toBe(404);
    const r2 = await reward();
    expect((await admin('DELETE', `/v1/rewards-catalog/${r2.id}`)).body.active).toBe(false);
    expect((await adminT('GET', '/rewards-catalog/00000000-0000-4000-8000-000000000000')).status).toBe(404);
  });

  it('refuses every invalid catalog field with the envelope naming it, and stores nothing', async () => {
    const ok = { slug: slug('v'), name: 'V', fulfillment: { type: 'manual' } };
    const field = (f: Record<string, unknown>) => ({ ...ok, fields: [{ name: 'f', label: 'F', ...f }] });
    const cases: Array<[unknown, RegExp]> = [
      [{ name: 'V', fulfillment: { type: 'manual' } }, /body.slug is required/],
      [{ ...ok, slug: 'Bad Slug' }, /body.slug/],
      [{ ...ok, name: '' }, /body.name/],
      [{ ...ok, name: 'x'.repeat(201) }, /body.name/],
      [{ ...ok, surprise: 1 }, /body.surprise is not allowed/],
      [{ ...ok, image_url: 'javascript:alert(1)' }, /body.image_url/],
      [{ ...ok, stock: -1 }, /body.stock/],
      [{ ...ok, stock: 1.5 }, /body.stock/],
      [{ ...ok, fulfillment: { type: 'mail' } }, /body.fulfillment.type/],
      [{ ...ok, fulfillment: { type: 'wallet' } }, /body.fulfillment.item_type is required/],
      [{ ...ok, fulfillment: { type: 'wallet', item_type: 'xp' } }, /body.fulfillment.amount is required/],
      [
        { ...ok, fulfillment: { type: 'wallet', item_type: 'badge' } },
        /body.fulfillment.item_id is required/,
      ],
      [
        { ...ok, fulfillment: { type: 'manual', retry: { max_attempts: 2 } } },
        /body.fulfillment.retry is not a field of manual/,
      ],
      [{ ...ok, fulfillment: { type: 'api' } }, /body.config.url is required/],
      [
        { ...ok, fulfillment: { type: 'api' }, config: { url: 'ftp://example.com/x' } },
        /body.config.url: url must use http or https/,
      ],
      [
        { ...ok, fulfillment: { type: 'api' }, config: { url: 'http://u:p@example.com/x' } },
        /body.config.url: url must not contain credentials/,
      ],
      [
        {
          ...ok,
          fulfillment: { type: 'api', retry: { max_attempts: 0 } },
          config: { url: 'https://example.com' },
        },
        /body.fulfillment.retry.max_attempts/,
      ],
      [{ ...ok, purchase: { prices: [] } }, /body.purchase.prices/],
      [
        { ...ok, purchase: { prices: [{ currency: 'ghost', amount: 1 }] } },
        /body.purchase.prices\[0\].currency: currency ghost does not exist/,
      ],
      [
        { ...ok, purchase: { prices: [{ currency: 'xp', amount: 1 }] } },
        /body.purchase.prices\[0\].currency: currency xp is accumulate-only/,
      ],
      [
        { ...ok, purchase: { prices: [{ currency: 'coins', amount: 0 }] } },
        /body.purchase.prices\[0\].amount/,
      ],
      [
        {
          ...ok,
          purchase: {
            prices: [
              { currency: 'coins', amount: 1 },
              { currency: 'coins', amount: 2 },
            ],
          },
        },
        /listed twice/,
      ],
      [{ ...ok, variants: [{ variant_id: 'default', label: 'x' }] }, /body.variants\[0\].variant_id/],
      [
        {
          ...ok,
          variants: [
            { variant_id: 'a', label: 'A' },
            { variant_id: 'a', label: 'B' },
          ],
        },
        /body.variants\[1\].variant_id: a is defined twice/,
      ],
      [{ ...ok, variants: [{ variant_id: 'a', label: 'A', stock: -2 }] }, /body.variants\[0\].stock/],
      [field({ type: 'select' }), /body.fields\[0\].options: a select field needs at least one option/],
      [
        field({ type: 'select', options: [{ value: 'a', label: 'A' }], pattern: 'a' }),
        /body.fields\[0\].pattern is only for text/,
      ],
      [field({ options: [{ value: 'a', label: 'A' }] }), /body.fields\[0\].options is only for select/],
      [field({ min_length: 5, max_length: 2 }), /body.fields\[0\].min_length must not be greater/],
      [field({ name: 'bad name' }), /body.fields\[0\].name/],
      [
        {
          ...ok,
          fields: [
            { name: 'a', label: 'A' },
            { name: 'a', label: 'B' },
          ],
        },
        /body.fields\[1\].name: a is defined twice/,
      ],
      [field({ pattern: '(' }), /body.fields\[0\].pattern is not a valid regular expression/],
      [field({ pattern: '^(a+)+$' }), /body.fields\[0\].pattern nests a quantifier/],
      [field({ pattern: '^(a|aa)*$' }), /body.fields\[0\].pattern repeats a group with an alternation/],
      [field({ pattern: '^(\\w+\\s?)*$' }), /body.fields\[0\].pattern nests a quantifier/],
      [field({ pattern: '(a)\\1' }), /body.fields\[0\].pattern must not use backreferences/],
      [field({ pattern: 'a*b*c*d*e' }), /body.fields\[0\].pattern has more than 3 unbounded/],
      [field({ pattern: 'x'.repeat(201) }), /body.fields\[0\].pattern/],
      [field({ pattern: '^[0-9]+$', max_length: 1000 }), /body.fields\[0\].max_length must be at most 256/],
    ];
    const before = (await adminT('GET', '/rewards-catalog?limit=1000')).body.total;
    for (const [body, message] of cases) {
      const r = await adminT('POST', '/rewards-catalog', body);
      expect([
        JSON.stringify(body).slice(0, 120),
        r.status,
        r.body.error?.code,
        r.body.error?.message,
      ]).toEqual([
        JSON.stringify(body).slice(0, 120),
        400,
        'VALIDATION_ERROR',
        expect.stringMatching(message),
      ]);
    }
    expect((await adminT('GET', '/rewards-catalog?limit=1000')).body.total).toBe(before);
    // A safe pattern is accepted; an update that would break a rule is refused and changes nothing.
    const r = await reward({ fields: [{ name: 'code', label: 'Code', pattern: '^[A-Z]{2}-\\d{3,5}$' }] });
    const bad = await adminT('PUT', `/rewards-catalog/${r.id}`, { fulfillment: { type: 'api' } });
    expect([bad.status, bad.body.error.message]).toEqual([
      400,
      expect.stringMatching(/body.config.url is required/),
    ]);
    expect((await adminT('PUT', `/rewards-catalog/${r.id}`, {})).status).toBe(400);
    expect((await adminT('GET', `/rewards-catalog/${r.id}`)).body.fulfillment).toEqual({ type: 'manual' });
    // The ?tenant_id family: a catalog body there is checked the same way.
    const viaQuery = await admin('POST', '/v1/rewards-catalog', {
      slug: 'x',
      fulfillment: { type: 'manual' },
    });
    expect([viaQuery.status, viaQuery.body.error.message]).toEqual([400, 'body.name is required']);
  });

  it('serves the store in its three path forms, with affordable, points_needed and purchasable', async () => {
    const cheap = await reward({ purchase: { prices: [{ currency: 'coins', amount: 50 }] } });
    const dear = await reward({
      purchase: {
        prices: [
          { currency: 'coins', amount: 500 },
          { currency: 'gems', amount: 9 },
        ],
      },
    });
    const grantOnly = await reward({ purchase: null });
    const soldOut = await reward({ stock: 0 });
    const forms = ['/v1/rewards/catalog', `/v1/rewards/${tenant.id}/catalog`, '/v1/rewards-store'];
    for (const f of forms) {
      const r = await query('GET', `${f}?balance=100`);
      expect([f, r.status]).toEqual([f, 200]);
      const by = new Map(r.body.rewards.map((x: any) => [x.slug, x]));
      expect(by.get(cheap.slug)).toMatchObject({
        affordable: true,
        points_needed: 0,
        in_stock: true,
        fulfillment: { type: 'manual' },
      });
      expect(by.get(cheap.slug)).not.toHaveProperty('config');
      expect(by.get(dear.slug)).toMatchObject({ affordable: false, points_needed: 400 });
      expect(by.get(grantOnly.slug)).toMatchObject({ affordable: false, points_needed: null });
      expect(by.get(soldOut.slug)).toMatchObject({ in_stock: false, stock: 0 });
      const purchasable = (await query('GET', `${f}?purchasable=true`)).body.rewards.map((x: any) => x.slug);
      expect(purchasable).toEqual(expect.arrayContaining([cheap.slug, dear.slug]));
      expect(purchasable).not.toContain(grantOnly.slug);
      expect(purchasable).not.toContain(soldOut.slug);
      const not = (await query('GET', `${f}?purchasable=false`)).body.rewards.map((x: any) => x.slug);
      expect(not).toEqual(expect.arrayContaining([grantOnly.slug, soldOut.slug]));
      expect((await query('GET', `${f}`)).body.rewards[0]).not.toHaveProperty('affordable');
    }
    expect((await query('GET', '/v1/rewards/catalog?balance=-1')).status).toBe(400);
    expect((await query('GET', '/v1/rewards/catalog?purchasable=maybe')).status).toBe(400);
    for (const f of [
      `/v1/rewards/catalog/${cheap.slug}`,
      `/v1/rewards/${tenant.id}/catalog/${cheap.slug}`,
      `/v1/rewards-store/${cheap.slug}`,
    ]) {
      const r = await query('GET', f);
      expect([f, r.status, r.body.id]).toEqual([f, 200, cheap.id]);
    }
    expect((await query('GET', '/v1/rewards/catalog/nope')).status).toBe(404);
    // Another tenant's long form: refused.
    const other = await createTenant(app);
    expect((await query('GET', `/v1/rewards/${other.id}/catalog`)).status).toBe(403);
  });

  it('purchases in one transaction: 201, idempotent replays, 400/402/404/409, and the webhooks', async () => {
    const r = await reward({
      stock: 3,
      purchase: {
        prices: [
          { currency: 'coins', amount: 100 },
          { currency: 'gems', amount: 2 },
        ],
      },
    });
    await fund('buyer', 250);
    const body = { user_id: 'buyer', idempotency_key: `p-${++seq}`, currency: 'coins' };
    const first = await query('POST', `/v1/rewards/purchase/${r.slug}`, body);
    expect([first.status, first.body.was_cached, first.body.order.status.state]).toEqual([
      201,
      false,
      'fulfilling',
    ]);
    expect(first.body.order).toMatchObject({
      user_id: 'buyer',
      reward_id: r.id,
      variant_id: 'default',
      source_type: 'purchase',
      price: { currency: 'coins', amount: 100 },
      fulfillment: { type: 'manual' },
    });
    expect(await balance('buyer')).toBe(150);
    // The same key and body, in each form: the first order, was_cached, nothing moved.
    for (const f of [
      `/v1/rewards/purchase/${r.slug}`,
      `/v1/rewards/${tenant.id}/purchase/${r.slug}`,
      `/v1/rewards-store/${r.slug}/purchase`,
    ]) {
      const again = await query('POST', f, body);
      expect([f, again.status, again.body.was_cached, again.body.order.id]).toEqual([
        f,
        200,
        true,
        first.body.order.id,
      ]);
    }
    expect(await balance('buyer')).toBe(150);
    // The same key with another body: 409.
    const conflict = await query('POST', `/v1/rewards/purchase/${r.slug}`, { ...body, currency: 'gems' });
    expect([conflict.status, conflict.body.error.code]).toEqual([409, 'IDEMPOTENCY_CONFLICT']);
    // 400: a currency that is not among the prices; missing fields; a variant the reward lacks.
    const wrongCurrency = await buy(r.slug, 'buyer', { currency: 'rubies' });
    expect([wrongCurrency.status, wrongCurrency.body.error.message]).toEqual([
      400,
      expect.stringMatching(/body.currency: rubies is not among/),
    ]);
    expect(
      (await query('POST', `/v1/rewards/purchase/${r.slug}`, { user_id: 'buyer', currency: 'coins' })).body
        .error.message,
    ).toBe('body.idempotency_key is required');
    expect((await buy(r.slug, 'buyer', { variant_id: 'nope' })).body.error.message).toMatch(
      /body.variant_id/,
    );
    expect((await buy(r.slug, 'buyer', { extra: 1 })).status).toBe(400);
    // 404: no such reward.
    expect((await buy('no-such-reward', 'buyer')).status).toBe(404);
    // 402: not enough, nothing written (balance and stock as they were).
    const poor = await buy(r.slug, 'poor');
    expect([poor.status, poor.body.error.code]).toEqual([402, 'INSUFFICIENT_BALANCE']);
    expect((await adminT('GET', `/rewards-catalog/${r.id}`)).body.stock).toBe(2);
    // Buy the rest, then 409 out of stock.
    expect((await buy(r.slug, 'buyer')).status).toBe(201);
    await fund('buyer', 100);
    expect((await buy(r.slug, 'buyer')).status).toBe(201);
    await fund('buyer', 100);
    const out = await buy(r.slug, 'buyer');
    expect([out.status, out.body.error.code]).toEqual([409, 'OUT_OF_STOCK']);
    expect(await balance('buyer')).toBe(150);
    // Webhooks: order.created then order.fulfilling, with SPEC.md's fields; and currency.spent.
    const ev = await events(first.body.order.id);
    expect(ev.map((e) => e.event_type)).toEqual(['order.created', 'order.fulfilling']);
    expect(ev[0]!.payload).toMatchObject({
      event_type: 'order.created',
      tenant_id: tenant.id,
      timestamp: expect.any(String),
      data: {
        order_id: first.body.order.id,
        user_id: 'buyer',
        reward_id: r.id,
        reward_slug: r.slug,
        fulfillment_type: 'manual',
        fulfillment_data: expect.any(Object),
      },
    });
    const spent = await app.ctx.adapters.sql.query(
      "SELECT 1 FROM outbox o JOIN ledger l ON o.payload->'data'->>'transaction_id' = l.id WHERE o.event_type = 'currency.spent' AND l.source_ref = $1",
      [first.body.order.id],
    );
    expect(spent.rows).toHaveLength(1);
  });

  it('lets an end-user token buy, list and claim only for its own user', async () => {
    const r = await reward();
    await fund('alice', 300);
    const alice = await userToken(tenant, 'alice');
    const own = await query(
      'POST',
      `/v1/rewards-store/${r.slug}/purchase`,
      { user_id: 'alice', idempotency_key: 'a1', currency: 'coins' },
      alice,
    );
    expect(own.status).toBe(201);
    const forOther = await query(
      'POST',
      `/v1/rewards-store/${r.slug}/purchase`,
      { user_id: 'bob', idempotency_key: 'a2', currency: 'coins' },
      alice,
    );
    expect(forOther.status).toBe(403);
    expect((await query('GET', '/v1/orders/user/bob', undefined, alice)).status).toBe(403);
    expect((await query('GET', '/v1/orders/user/alice', undefined, alice)).body.total).toBe(1);
    expect((await query('GET', `/v1/rewards/orders/bob/${own.body.order.id}`, undefined, alice)).status).toBe(
      403,
    );
    // Another user's order id under one's own user: 404.
    expect((await query('GET', `/v1/rewards/orders/carol/${own.body.order.id}`)).status).toBe(404);
    expect(
      (await query('GET', `/v1/rewards/orders/alice/${own.body.order.id}`, undefined, alice)).body.id,
    ).toBe(own.body.order.id);
  });

  it('sells variants with their own prices and stock', async () => {
    const r = await reward({
      stock: 1,
      variants: [
        {
          variant_id: 'red',
          label: 'Red',
          purchase: { prices: [{ currency: 'coins', amount: 70 }] },
          stock: 1,
        },
        { variant_id: 'blue', label: 'Blue', stock: null },
      ],
    });
    await fund('vee', 1000);
    const red = await buy(r.slug, 'vee', { variant_id: 'red' });
    expect([red.status, red.body.order.variant_id, red.body.order.price]).toEqual([
      201,
      'red',
      { currency: 'coins', amount: 70 },
    ]);
    expect((await buy(r.slug, 'vee', { variant_id: 'red' })).body.error.code).toBe('OUT_OF_STOCK');
    // The reward's own stock is apart from the variant's.
    expect((await buy(r.slug, 'vee')).status).toBe(201);
    expect((await buy(r.slug, 'vee')).status).toBe(409);
    // A variant without prices takes the reward's; without stock it is unlimited.
    for (let i = 0; i < 3; i++) {
      const blue = await buy(r.slug, 'vee', { variant_id: 'blue' });
      expect([blue.status, blue.body.order.price.amount]).toEqual([201, 100]);
    }
    const detail = (await query('GET', `/v1/rewards-store/${r.slug}`)).body;
    expect(detail.variants).toEqual([
      expect.objectContaining({ variant_id: 'red', stock: 0 }),
      expect.objectContaining({ variant_id: 'blue', stock: null }),
    ]);
    expect(await balance('vee')).toBe(1000 - 70 - 100 - 300);
  });

  it('grants without payment, waits for the claim, checks every field, and refuses a second claim', async () => {
    const r = await reward({
      requires_claim: true,
      stock: 4,
      purchase: null,
      fields: [
        { name: 'zip', label: 'Postcode', required: true, pattern: '^[0-9]{5}$' },
        {
          name: 'size',
          label: 'Size',
          type: 'select',
          required: true,
          options: [{ value: 'm', label: 'M' }],
        },
        { name: 'note', label: 'Note', min_length: 3, max_length: 10 },
      ],
    });
    const expires = new Date(T0 + 86_400_000).toISOString();
    const g = await admin('POST', '/v1/grants', {
      user_id: 'gina',
      reward_id: r.id,
      source_type: 'admin',
      source_ref: 'promo',
      expires_at: expires,
    });
    expect([g.status, g.body.order.status.state, g.body.order.expires_at, g.body.order.price]).toEqual([
      201,
      'pending_claim',
      expires,
      null,
    ]);
    expect(g.body.order).toMatchObject({ source_type: 'admin', source_ref: 'promo', requires_claim: true });
    const g2 = await adminT('POST', '/grants', {
      user_id: 'gina',
      reward_id: r.id,
      source_type: 'leaderboard',
    });
    expect([g2.status, g2.body.order.status.state]).toEqual([201, 'pending_claim']);
    // Grant refusals.
    expect(
      (await admin('POST', '/v1/grants', { user_id: 'gina', reward_id: 'nope', source_type: 'admin' }))
        .status,
    ).toBe(404);
    expect(
      (await admin('POST', '/v1/grants', { user_id: 'gina', reward_id: r.id, source_type: 'purchase' }))
        .status,
    ).toBe(400);
    expect((await admin('POST', '/v1/grants', { user_id: 'gina', reward_id: r.id })).body.error.message).toBe(
      'body.source_type is required',
    );
    const past = await admin('POST', '/v1/grants', {
      user_id: 'gina',
      reward_id: r.id,
      source_type: 'admin',
      expires_at: new Date(T0 - 1000).toISOString(),
    });
    expect([past.status, past.body.error.message]).toEqual([400, 'body.expires_at must be in the future']);
    const id = g.body.order.id;
    // In the user's order history.
    const list = await query('GET', '/v1/rewards/orders/gina?status=pending_claim');
    expect(list.body.orders.map((o: any) => o.id)).toEqual(expect.arrayContaining([id, g2.body.order.id]));
    expect(list.body.limit).toBe(20);
    // A claim with bad fields: 400 with one message per field, nothing changed.
    const bad = await query('POST', `/v1/rewards/orders/${id}/claim`, {
      user_id: 'gina',
      fields: { zip: 'abc', note: 'x', other: 'y' },
    });
    expect([bad.status, bad.body.error.code]).toEqual([400, 'VALIDATION_ERROR']);
    expect(bad.body.error.details.fields).toEqual({
      zip: 'Postcode does not match the expected format',
      size: 'Size is required',
      note: 'Note must be at least 3 characters',
      other: 'other is not a field of this reward',
    });
    expect(
      (
        await query('POST', `/v1/rewards/orders/${id}/claim`, {
          user_id: 'gina',
          fields: { zip: '12345', size: 'xl' },
        })
      ).body.error.details.fields,
    ).toEqual({
      size: 'Size must be one of m',
    });
    // Someone else's claim: 404.
    expect(
      (await query('POST', `/v1/rewards/orders/${id}/claim`, { user_id: 'mallory', fields: {} })).status,
    ).toBe(404);
    const ok = await query('POST', `/v1/orders/${id}/claim`, {
      user_id: 'gina',
      fields: { zip: '12345', size: 'm' },
    });
    expect([ok.status, ok.body.order.id, ok.body.order.status.state]).toEqual([200, id, 'fulfilling']);
    expect(ok.body.order.status.started_at).toBe(new Date(T0).toISOString());
    // A second claim (and a claim of a completed order) is refused by the state machine.
    const again = await query('POST', `/v1/rewards/${tenant.id}/orders/${id}/claim`, {
      user_id: 'gina',
      fields: { zip: '12345', size: 'm' },
    });
    expect([again.status, again.body.error.code, again.body.error.message]).toEqual([
      409,
      'INVALID_STATE',
      expect.stringMatching(/claim an order in state fulfilling/),
    ]);
    expect((await adminT('PUT', `/reward-orders/${id}`, { status: { state: 'completed' } })).status).toBe(
      200,
    );
    expect(
      (
        await query('POST', `/v1/rewards/orders/${id}/claim`, {
          user_id: 'gina',
          fields: { zip: '12345', size: 'm' },
        })
      ).body.error.code,
    ).toBe('INVALID_STATE');
    const full = await query('GET', `/v1/rewards/orders/gina/${id}`);
    expect(full.body.fields).toEqual({ zip: '12345', size: 'm' });
    expect((await events(id)).map((e) => e.event_type)).toEqual([
      'order.created',
      'order.claimed',
      'order.completed',
    ]);
    // recent-fields in both forms.
    for (const f of [
      '/v1/rewards/recent-fields?user_id=gina',
      `/v1/rewards/${tenant.id}/recent-fields?user_id=gina`,
    ])
      expect((await query('GET', f)).body.fields).toEqual({ zip: '12345', size: 'm' });
    expect((await query('GET', '/v1/rewards/recent-fields')).status).toBe(400);
    const ginaToken = await userToken(tenant, 'gina');
    expect((await query('GET', '/v1/rewards/recent-fields', undefined, ginaToken)).body.fields.zip).toBe(
      '12345',
    );
  });

  it('expires unclaimed orders past expires_at once, returning their stock', async () => {
    const r = await reward({ requires_claim: true, stock: 2, purchase: null });
    const expires = new Date(clock.now() + 3_600_000).toISOString();
    const g = await admin('POST', '/v1/grants', {
      user_id: 'eve',
      reward_id: r.id,
      source_type: 'admin',
      expires_at: expires,
    });
    const keep = await admin('POST', '/v1/grants', { user_id: 'eve', reward_id: r.id, source_type: 'admin' });
    expect((await adminT('GET', `/rewards-catalog/${r.id}`)).body.stock).toBe(0);
    clock.advance(2 * 3_600_000);
    await waitFor(async () => (await order(g.body.order.id)).status.state === 'expired', {
      what: 'the order to expire',
    });
    expect((await order(keep.body.order.id)).status.state).toBe('pending_claim');
    expect((await adminT('GET', `/rewards-catalog/${r.id}`)).body.stock).toBe(1);
    const claim = await query('POST', `/v1/rewards/orders/${g.body.order.id}/claim`, {
      user_id: 'eve',
      fields: {},
    });
    expect([claim.status, claim.body.error.code]).toEqual([409, 'INVALID_STATE']);
    // Several scheduler ticks later: still one order.expired.
    await new Promise((res) => setTimeout(res, 400));
    expect((await events(g.body.order.id)).map((e) => e.event_type)).toEqual([
      'order.created',
      'order.expired',
    ]);
  });

  it('fulfils wallet rewards through the granting service (xp credited, badge recorded) at once', async () => {
    const xp = await reward({ fulfillment: { type: 'wallet', item_type: 'xp', amount: 40 } });
    const badge = await reward({ fulfillment: { type: 'wallet', item_type: 'badge', item_id: 'gold' } });
    await fund('wally', 500);
    const a = await buy(xp.slug, 'wally');
    expect([a.status, a.body.order.status.state, a.body.order.status.data.type]).toEqual([
      201,
      'completed',
      'wallet',
    ]);
    expect(await balance('wally', 'xp')).toBe(40);
    const b = await buy(badge.slug, 'wally');
    expect(b.body.order.status.state).toBe('completed');
    const grants = await query('GET', '/v1/grants/user/wally');
    expect(grants.body.grants.map((x: any) => [x.reward_type, x.status])).toEqual(
      expect.arrayContaining([
        ['xp', 'credited'],
        ['badge', 'owned'],
      ]),
    );
    expect((await events(a.body.order.id)).map((e) => e.event_type)).toEqual([
      'order.created',
      'order.fulfilling',
      'order.completed',
    ]);
    // A granted wallet reward is fulfilled at once too.
    const g = await admin('POST', '/v1/grants', { user_id: 'wally', reward_id: xp.id, source_type: 'admin' });
    expect(g.body.order.status.state).toBe('completed');
    expect(await balance('wally', 'xp')).toBe(80);
  });

  it('completes and fails manual orders by the admin, and refuses moves the state machine does not list', async () => {
    const r = await reward({ stock: 5 });
    await fund('manny', 1000);
    const a = (await buy(r.slug, 'manny')).body.order;
    const b = (await buy(r.slug, 'manny')).body.order;
    const done = await admin('PUT', `/v1/reward-orders/${a.id}`, {
      status: {
        state: 'completed',
        tracking_number: 'TRK1',
        shipped_at: '2026-11-21T08:00:00Z',
        notes: 'left at door',
      },
    });
    expect([done.status, done.body.status]).toEqual([
      200,
      expect.objectContaining({
        state: 'completed',
        tracking_number: 'TRK1',
        shipped_at: '2026-11-21T08:00:00.000Z',
        notes: 'left at door',
      }),
    ]);
    expect(
      (await adminT('PUT', `/reward-orders/${a.id}`, { status: { state: 'failed', reason: 'x' } })).body.error
        .code,
    ).toBe('INVALID_STATE');
    expect(
      (await adminT('PUT', `/reward-orders/${b.id}`, { status: { state: 'failed' } })).body.error.message,
    ).toBe('body.status.reason is required when state is failed');
    expect((await adminT('PUT', `/reward-orders/${b.id}`, { status: { state: 'shipped' } })).status).toBe(
      400,
    );
    expect(
      (await adminT('PUT', `/reward-orders/${b.id}`, { status: { state: 'completed', reason: 'x' } })).status,
    ).toBe(400);
    const failed = await adminT('PUT', `/reward-orders/${b.id}`, {
      status: { state: 'failed', reason: 'lost in the post' },
    });
    expect(failed.body.status).toMatchObject({ state: 'failed', reason: 'lost in the post' });
    // Retry of a failed manual order: back to fulfilling; retry of a fulfilling one: 409.
    const retried = await adminT('POST', `/reward-orders/${b.id}/retry`);
    expect([retried.status, retried.body.status.state]).toEqual([200, 'fulfilling']);
    expect(retried.body.status.reason).toBeUndefined();
    expect((await admin('POST', `/v1/reward-orders/${b.id}/retry`)).body.error.code).toBe('INVALID_STATE');
    expect(
      (
        await admin('PUT', '/v1/reward-orders/00000000-0000-4000-8000-000000000000', {
          status: { state: 'completed' },
        })
      ).status,
    ).toBe(404);
    // The admin does not set the status of an automatic order.
    const w = await reward({ fulfillment: { type: 'wallet', item_type: 'badge', item_id: 'b' } });
    const wo = (await buy(w.slug, 'manny')).body.order;
    expect(
      (await admin('PUT', `/v1/reward-orders/${wo.id}`, { status: { state: 'failed', reason: 'x' } })).body
        .error.code,
    ).toBe('INVALID_STATE');
    expect((await events(a.id)).map((e) => e.event_type)).toEqual([
      'order.created',
      'order.fulfilling',
      'order.completed',
    ]);
    expect((await events(b.id)).map((e) => e.event_type)).toEqual([
      'order.created',
      'order.fulfilling',
      'order.failed',
      'order.fulfilling',
    ]);
    // The admin list with filters.
    const byUser = await admin('GET', `/v1/reward-orders?user_id=manny&reward_id=${r.id}`);
    expect(byUser.body.orders.map((o: any) => o.id).sort()).toEqual([a.id, b.id].sort());
    const completed = await adminT('GET', `/reward-orders?user_id=manny&status=completed`);
    expect(completed.body.orders.map((o: any) => o.id)).toEqual(expect.arrayContaining([a.id, wo.id]));
    expect(completed.body.orders.map((o: any) => o.id)).not.toContain(b.id);
    expect((await admin('GET', '/v1/reward-orders?status=nope')).status).toBe(400);
  });

  it('refunds a purchase once: the price back as a ledger row, the stock returned, state refunded', async () => {
    const r = await reward({ stock: 2 });
    await fund('rita', 100);
    const o = (await buy(r.slug, 'rita')).body.order;
    expect(await balance('rita')).toBe(0);
    expect((await admin('POST', `/v1/reward-orders/${o.id}/refund`, {})).body.error.message).toBe(
      'body.reason is required',
    );
    const [x, y] = await Promise.all([
      adminT('POST', `/reward-orders/${o.id}/refund`, { reason: 'damaged' }),
      admin('POST', `/v1/reward-orders/${o.id}/refund`, { reason: 'damaged' }),
    ]);
    expect([x.status, y.status].sort()).toEqual([200, 409]);
    const ok = x.status === 200 ? x : y;
    expect(ok.body.status).toMatchObject({
      state: 'refunded',
      reason: 'damaged',
      refunded_at: expect.any(String),
    });
    expect(await balance('rita')).toBe(100);
    expect((await adminT('GET', `/rewards-catalog/${r.id}`)).body.stock).toBe(2);
    const tx = await query('GET', '/v1/wallet/transactions?user_id=rita');
    expect(tx.body.transactions.slice(0, 2).map((t: any) => [t.source_type, t.amount])).toEqual([
      ['refund', 100],
      ['purchase', -100],
    ]);
    expect((await events(o.id)).map((e) => e.event_type)).toEqual([
      'order.created',
      'order.fulfilling',
      'order.refunded',
    ]);
    // A granted order is not refundable.
    const g = await admin('POST', '/v1/grants', { user_id: 'rita', reward_id: r.id, source_type: 'admin' });
    const no = await admin('POST', `/v1/reward-orders/${g.body.order.id}/refund`, { reason: 'x' });
    expect([no.status, no.body.error.code]).toEqual([409, 'INVALID_STATE']);
  });

  it('calls the api endpoint from the dispatcher: retries per the reward, completes with the answer, or fails', async () => {
    const flaky = await endpoint((n) =>
      n <= 2
        ? { status: 500, body: { error: 'busy' } }
        : { status: 200, body: { type: 'voucher', external_id: 'EXT-9' } },
    );
    const dead = await endpoint(() => ({ status: 503 }));
    try {
      const good = await reward({
        fulfillment: { type: 'api', retry: { max_attempts: 3, backoff_seconds: [1, 2] } },
        config: { url: flaky.url, sku: 'V-1' },
        fields: [{ name: 'email', label: 'Email', required: true }],
      });
      const bad = await reward({
        stock: 3,
        fulfillment: { type: 'api', retry: { max_attempts: 2, backoff_seconds: [1] } },
        config: { url: dead.url },
      });
      await fund('api', 1000);
      const o = (await buy(good.slug, 'api', { fields: { email: 'a@b.c' } })).body.order;
      expect(o.status.state).toBe('fulfilling');
      await waitFor(() => flaky.calls.length >= 1, { what: 'the first call' });
      await waitFor(async () => (await order(o.id)).status.attempts === 1, {
        what: 'the first attempt recorded',
      });
      expect((await order(o.id)).status).toMatchObject({
        state: 'fulfilling',
        last_error: expect.stringMatching(/500/),
      });
      clock.advance(1000);
      await waitFor(() => flaky.calls.length >= 2, { what: 'the second call' });
      await waitFor(async () => (await order(o.id)).status.attempts === 2, {
        what: 'the second attempt recorded',
      });
      clock.advance(2000);
      const done = await waitFor(
        async () => {
          const x = await order(o.id);
          return x.status.state === 'completed' ? x : null;
        },
        { what: 'the order to complete' },
      );
      expect(done.status.data).toEqual({ type: 'voucher', external_id: 'EXT-9' });
      expect(flaky.calls).toHaveLength(3);
      // Every call: the same Idempotency-Key, signed like a webhook with the tenant's hmac_secret.
      for (const c of flaky.calls) {
        expect(c.headers['idempotency-key']).toBe(o.id);
        const v = verifySignature(
          tenant.hmac_secret,
          {
            timestamp: c.headers['x-webhook-timestamp'] as string,
            signature: c.headers['x-webhook-signature'] as string,
          },
          c.body,
          Number(c.headers['x-webhook-timestamp']),
        );
        expect(v).toEqual({ ok: true });
        expect(JSON.parse(c.body)).toMatchObject({
          order_id: o.id,
          user_id: 'api',
          fields: { email: 'a@b.c' },
          config: { sku: 'V-1' },
        });
        expect(JSON.parse(c.body).config).not.toHaveProperty('url');
      }
      expect((await events(o.id)).map((e) => e.event_type)).toEqual([
        'order.created',
        'order.fulfilling',
        'order.completed',
      ]);
      expect((await events(o.id))[2]!.payload.data.fulfillment_data.data).toEqual({
        type: 'voucher',
        external_id: 'EXT-9',
      });

      // The endpoint that never succeeds: failed after max_attempts, with the reason.
      const f = (await buy(bad.slug, 'api')).body.order;
      await waitFor(async () => (await order(f.id)).status.attempts === 1, { what: 'first failure' });
      clock.advance(1000);
      const failed = await waitFor(
        async () => {
          const x = await order(f.id);
          return x.status.state === 'failed' ? x : null;
        },
        { what: 'the order to fail' },
      );
      expect(failed.status.reason).toMatch(/api fulfilment failed after 2 attempts/);
      expect(dead.calls).toHaveLength(2);
      // Retry: the attempts start again; it fails again; then a refund returns the money.
      expect((await admin('POST', `/v1/reward-orders/${f.id}/retry`)).body.status.state).toBe('fulfilling');
      await waitFor(() => dead.calls.length >= 3, { what: 'the retried call' });
      await waitFor(async () => (await order(f.id)).status.attempts === 1, {
        what: 'the retried attempt recorded',
      });
      clock.advance(1000);
      await waitFor(async () => (await order(f.id)).status.state === 'failed', {
        what: 'the retried order to fail',
      });
      expect(dead.calls).toHaveLength(4);
      const before = await balance('api');
      expect(
        (await admin('POST', `/v1/reward-orders/${f.id}/refund`, { reason: 'undeliverable' })).body.status
          .state,
      ).toBe('refunded');
      expect(await balance('api')).toBe(before + 100);
      expect((await events(f.id)).map((e) => e.event_type)).toEqual([
        'order.created',
        'order.fulfilling',
        'order.failed',
        'order.fulfilling',
        'order.failed',
        'order.refunded',
      ]);
    } finally {
      await flaky.close();
      await dead.close();
    }
  });

  it('makes a granted physical reward item an order in the grant, once, for any source (heldAs)', async () => {
    const r = await reward({
      requires_claim: true,
      purchase: null,
      fields: [{ name: 'addr', label: 'Address', required: true }],
    });
    const named = {
      item_id: 'it-1',
      tenant_id: tenant.id,
      name: 'Prize mug',
      description: null,
      reward_type: 'physical_item',
      payload: { catalog_reward_id: r.id },
      created_at: '',
      updated_at: '',
    };
    const implicit = {
      ...named,
      item_id: 'it-2',
      name: 'Hat',
      reward_type: 'custom',
      payload: { colour: 'red' },
    };
    const grant = () =>
      app.ctx.adapters.sql.tx((q) =>
        app.ctx.services.granter.grant(q, {
          tenant_id: tenant.id,
          user_id: 'winner',
          items: [named, implicit],
          source_type: 'wheel',
          source_ref: 'spin-1',
          grant_key: `wheel:spin-1`,
          now: clock.now(),
        }),
      );
    const first = await grant();
    expect(first.map((g) => [g.item_id, g.status])).toEqual([
      ['it-1', 'ordered'],
      ['it-2', 'ordered'],
    ]);
    const again = await grant();
    expect(again.map((g) => g.order_id)).toEqual(first.map((g) => g.order_id));
    const a = await order(first[0]!.order_id!);
    expect(a).toMatchObject({
      reward_id: r.id,
      source_type: 'wheel',
      source_ref: 'spin-1',
      status: { state: 'pending_claim' },
      user_id: 'winner',
    });
    const b = await order(first[1]!.order_id!);
    expect(b).toMatchObject({
      reward_id: 'it-2',
      reward_slug: null,
      reward_name: 'Hat',
      source_type: 'wheel',
      status: { state: 'fulfilling' },
      fulfillment: { type: 'manual' },
    });
    const grants = await query('GET', '/v1/grants/user/winner');
    expect(grants.body.grants.map((g: any) => [g.status, g.order_id]).sort()).toEqual(
      [
        ['ordered', a.id],
        ['ordered', b.id],
      ].sort(),
    );
    const list = await admin('GET', '/v1/reward-orders?user_id=winner&source_type=wheel');
    expect(list.body.total).toBe(2);
    // The user claims the prize like any granted order.
    const c = await query('POST', `/v1/rewards/orders/${a.id}/claim`, {
      user_id: 'winner',
      fields: { addr: 'Here' },
    });
    expect(c.body.order.status.state).toBe('fulfilling');
  });

  it('sells exactly the stock to 200 concurrent buyers, and one order to one key from 20 connections', async () => {
    const r = await reward({ stock: 10 });
    const users = Array.from({ length: 200 }, (_, i) => `crowd-${seq}-${i}`);
    for (let i = 0; i < users.length; i += 50)
      await Promise.all(users.slice(i, i + 50).map((u) => fund(u, 100)));
    const answers = await Promise.all(
      users.map((u) =>
        query('POST', `/v1/rewards/purchase/${r.slug}`, {
          user_id: u,
          idempotency_key: 'once',
          currency: 'coins',
        }),
      ),
    );
    const by = (s: number) => answers.filter((a) => a.status === s);
    const statuses: Record<string, number> = {};
    for (const a of answers)
      statuses[`${a.status} ${a.body?.error?.code ?? ''}`.trim()] =
        (statuses[`${a.status} ${a.body?.error?.code ?? ''}`.trim()] ?? 0) + 1;
    expect(statuses).toEqual({ '201': 10, '409 OUT_OF_STOCK': 190 });
    expect([by(201).length, by(409).length]).toEqual([10, 190]);
    expect(new Set(by(409).map((a) => a.body.error.code))).toEqual(new Set(['OUT_OF_STOCK']));
    const debits = await app.ctx.adapters.sql.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM ledger l JOIN reward_orders o ON o.tenant_id = l.tenant_id AND o.id = l.source_ref
       WHERE l.tenant_id = $1 AND o.reward_id = $2 AND l.source_type = 'purchase'`,
      [tenant.id, r.id],
    );
    expect(debits.rows[0]!.n).toBe(10);
    expect((await adminT('GET', `/rewards-catalog/${r.id}`)).body.stock).toBe(0);

    const unlimited = await reward();
    await fund('solo', 100);
    const body = { user_id: 'solo', idempotency_key: 'same', currency: 'coins' };
    const twenty = await Promise.all(
      Array.from({ length: 20 }, () => query('POST', `/v1/rewards/purchase/${unlimited.slug}`, body)),
    );
    expect(twenty.filter((a) => a.status === 201)).toHaveLength(1);
    expect(twenty.filter((a) => a.status === 200 && a.body.was_cached)).toHaveLength(19);
    expect(new Set(twenty.map((a) => a.body.order.id)).size).toBe(1);
    expect(await balance('solo')).toBe(0);
  }, 120_000);
});
