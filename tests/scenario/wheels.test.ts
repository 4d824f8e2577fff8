/**
 * Spin wheels and wheel themes in both shapes, through the gateways (docs/wheels.md): every admin
 * and query route, the validation rules, the spin statuses, each frequency type across its reset
 * (an injected clock), the availability range, the cost and currency prizes in the ledger, no-win
 * segments, item prizes through the granting service, themes, templates and resolved themes,
 * the audit fields of the history, and a daily limit under 50 concurrent spins. After every test
 * the wallet invariant is checked: balance == sum(ledger), lifetime_earned == sum(credits).
 */
import { ManualClock } from '../../core/clock';
import { pick } from '../../core/wheels/draw';
import {
  call,
  createKey,
  createTenant,
  SHAPES,
  startTestApp,
  tenantWithCredentials,
  type TenantInfo,
  userToken,
  type TestApp,
} from '../support/app';
import { walletViolations } from '../support/invariants';

const T0 = Date.parse('2026-11-20T10:00:00Z');
const HOUR = 3_600_000;
const TEMPLATE_IDS = [
  '5b0e2c1a-0001-4a00-8000-000000000001',
  '5b0e2c1a-0002-4a00-8000-000000000002',
  '5b0e2c1a-0003-4a00-8000-000000000003',
  '5b0e2c1a-0004-4a00-8000-000000000004',
];

interface Seg {
  reward_id: string | null;
  probability: number;
  label?: string;
}

describe.each(SHAPES)('spin wheels [%s]', (shape) => {
  let app: TestApp;
  let clock: ManualClock;
  let tenant: TenantInfo;
  let key: string;
  let token: string;
  const items: Record<string, string> = {};
  let n = 0;
  const user = (name: string) => `${name}-${shape}-${++n}`;

  beforeAll(async () => {
    clock = new ManualClock(T0);
    app = await startTestApp(shape, {
      clock,
      env: { LUDUS_RATE_LIMIT_ADMIN: 'off', LUDUS_RATE_LIMIT_QUERY: 'off' },
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
    for (const [name, reward_type, payload] of [
      ['coins50', 'currency', { currency_id: 'coins', amount: 50 }],
      ['shirt', 'physical_item', { sku: 'TS-1' }],
      ['badge', 'badge', { badge_id: 'lucky' }],
    ] as const) {
      const r = await admin('POST', '/v1/reward-items', { name, reward_type, payload });
      expect(r.status).toBe(201);
      items[name] = r.body.item_id;
    }
  });
  afterEach(async () => {
    clock.set(T0);
    expect(await walletViolations(app.ctx.adapters.sql, tenant.id, { lifetime: true })).toEqual([]);
  });
  afterAll(() => app.stop());

  function admin(method: string, path: string, body?: unknown) {
    return call(method, `${app.url.admin}${path}${path.includes('?') ? '&' : '?'}tenant_id=${tenant.id}`, {
      headers: { 'x-api-key': key },
      body,
    });
  }
  const query = (method: string, path: string, body?: unknown, t = token) =>
    call(method, `${app.url.query}${path}`, { headers: { authorization: `Bearer ${t}` }, body });
  const spin = (wheelId: string, userId: string | undefined, t = token) =>
    query('POST', `/v1/wheels/${wheelId}/spin`, userId === undefined ? {} : { user_id: userId }, t);
  const grant = (userId: string, amount: number, currency = 'coins') =>
    admin('POST', '/v1/wallet/grant', { user_id: userId, currency_id: currency, amount });
  const balance = async (userId: string, currency = 'coins') =>
    (await query('GET', `/v1/wallet/balances/${currency}?user_id=${userId}`)).body.available as number;
  const ledger = async (userId: string) =>
    (await query('GET', `/v1/wallet/transactions?user_id=${userId}&limit=100`)).body.transactions as Array<{
      amount: number;
      source_type: string;
      source_ref: string;
      currency_id: string;
    }>;
  const segs = (...rows: Array<[string | null, number]>): Seg[] =>
    rows.map(([r, p], i) => ({ reward_id: r, probability: p, label: `s${i}` }));
  const wheel = async (config: Record<string, unknown>, extra: Record<string, unknown> = {}) => {
    const r = await admin('POST', '/v1/wheels', {
      name: `wheel ${++n}`,
      description: 'test',
      config: { segments: segs([null, 1], [null, 1]), ...config },
      ...extra,
    });
    expect([r.status, r.body?.error]).toEqual([201, undefined]);
    return r.body as { id: string; config: Record<string, unknown>; resolved_theme: any; active: boolean };
  };

  it('creates, lists, reads, updates and deletes wheels under both admin path forms', async () => {
    const w = await wheel({
      segments: segs([items.coins50!, 3], [null, 5], [items.shirt!, 2]),
      frequency: { type: 'daily_limit', value: 2 },
      starts_at: '2026-11-01T00:00:00+01:00',
    });
    expect(w).toMatchObject({
      tenant_id: tenant.id,
      active: true,
      config: {
        segments: [
          { reward_id: items.coins50, probability: 3, label: 's0' },
          { reward_id: null, probability: 5, label: 's1' },
          { reward_id: items.shirt, probability: 2, label: 's2' },
        ],
        frequency: { type: 'daily_limit', value: 2 },
        starts_at: '2026-10-31T23:00:00.000Z',
        ends_at: null,
        theme_id: null,
        theme_overrides: null,
        cost: null,
      },
    });
    // Without a theme: the default template.
    expect(w.resolved_theme.theme_id).toBe(TEMPLATE_IDS[0]);
    expect(w.resolved_theme.per_segment).toHaveLength(3);

    const viaPath = await call('GET', `${app.url.admin}/v1/tenants/${tenant.id}/wheels/${w.id}`, {
      headers: { 'x-api-key': key },
    });
    expect(viaPath.body).toEqual(w);
    const list = await admin('GET', '/v1/wheels');
    expect(list.status).toBe(200);
    expect(list.body.wheels.map((x: { id: string }) => x.id)).toContain(w.id);
    const listPath = await call('GET', `${app.url.admin}/v1/tenants/${tenant.id}/wheels?limit=1000`, {
      headers: { 'x-api-key': key },
    });
    expect(listPath.body.total).toBe(list.body.total);

    // PUT: changed fields; a config field replaces the stored one, the others stay.
    const up = await admin('PUT', `/v1/wheels/${w.id}`, {
      name: 'Renamed',
      config: { frequency: { type: 'cooldown', value: 6 } },
    });
    expect(up.status).toBe(200);
    expect(up.body).toMatchObject({
      name: 'Renamed',
      description: 'test',
      config: { frequency: { type: 'cooldown', value: 6 }, segments: w.config.segments },
    });
    const viaPathPut = await call('PUT', `${app.url.admin}/v1/tenants/${tenant.id}/wheels/${w.id}`, {
      headers: { 'x-api-key': key },
      body: { description: null, config: { starts_at: null } },
    });
    expect(viaPathPut.body).toMatchObject({ description: null, config: { starts_at: null } });

    // DELETE deactivates: the wheel stays readable, spins are refused, PUT active restores it.
    const del = await admin('DELETE', `/v1/wheels/${w.id}`);
    expect([del.status, del.body.active]).toEqual([200, false]);
    const refused = await spin(w.id, user('del'));
    expect([refused.status, refused.body.error.code]).toEqual([400, 'WHEEL_NOT_ACTIVE']);
    expect((await admin('GET', `/v1/wheels?active=false`)).body.wheels.map((x: any) => x.id)).toContain(w.id);
    expect((await admin('PUT', `/v1/wheels/${w.id}`, { active: true })).body.active).toBe(true);
    expect((await spin(w.id, user('del'))).status).toBe(200);

    for (const [method, path] of [
      ['GET', '/v1/wheels/nope'],
      ['PUT', '/v1/wheels/nope'],
      ['DELETE', '/v1/wheels/nope'],
    ] as const) {
      const r = await admin(method, path, method === 'PUT' ? { name: 'x' } : undefined);
      expect([method, r.status]).toEqual([method, 404]);
    }
  });

  it('validates wheels with the envelope naming the field, and stores nothing', async () => {
    const other = await createTenant(app);
    const otherKey = (await createKey(app, [other.id])).key;
    const foreignItem = await call('POST', `${app.url.admin}/v1/reward-items?tenant_id=${other.id}`, {
      headers: { 'x-api-key': otherKey },
      body: { name: 'theirs', reward_type: 'badge', payload: { badge_id: 'x' } },
    });
    const archived = await admin('POST', '/v1/wheel-themes', {
      name: 'old',
      status: 'archived',
      config: (await admin('GET', '/v1/wheel-themes/templates')).body.templates[0].config,
    });
    expect(archived.status).toBe(201);
    const before = (await admin('GET', '/v1/wheels')).body.total;
    const two = segs([null, 1], [null, 1]);
    const cases: Array<[string, Record<string, unknown>, RegExp]> = [
      [
        'one segment',
        { segments: segs([null, 1]) },
        /^body\.config\.segments must NOT have fewer than 2 items/,
      ],
      ['no segments', {}, /^body\.config\.segments is required/],
      [
        'zero weight',
        { segments: segs([null, 0], [null, 1]) },
        /^body\.config\.segments\[0\]\.probability must be > 0/,
      ],
      [
        'negative weight',
        { segments: segs([null, 1], [null, -2]) },
        /^body\.config\.segments\[1\]\.probability/,
      ],
      [
        'string weight',
        { segments: [{ reward_id: null, probability: '3' }, two[1]] },
        /^body\.config\.segments\[0\]\.probability must be a number/,
      ],
      [
        'infinite sum',
        { segments: segs([null, 1.7e308], [null, 1.7e308]) },
        /^body\.config\.segments: the sum of the probabilities must be finite/,
      ],
      [
        'unknown reward',
        { segments: segs([null, 1], ['no-such-item', 1]) },
        /^body\.config\.segments\[1\]\.reward_id: reward item no-such-item does not exist/,
      ],
      [
        "another tenant's reward",
        { segments: segs([foreignItem.body.item_id, 1], [null, 1]) },
        /^body\.config\.segments\[0\]\.reward_id: reward item .* does not exist/,
      ],
      [
        'missing weight',
        { segments: [{ reward_id: null }, two[1]] },
        /^body\.config\.segments\[0\]\.probability is required/,
      ],
      [
        'unknown frequency',
        { segments: two, frequency: { type: 'weekly', value: 1 } },
        /^body\.config\.frequency\.type must be one of/,
      ],
      [
        'daily without value',
        { segments: two, frequency: { type: 'daily_limit' } },
        /^body\.config\.frequency\.value is required for daily_limit/,
      ],
      [
        'total null value',
        { segments: two, frequency: { type: 'total_limit', value: null } },
        /^body\.config\.frequency\.value is required for total_limit/,
      ],
      [
        'zero cooldown',
        { segments: two, frequency: { type: 'cooldown', value: 0 } },
        /^body\.config\.frequency\.value must be >= 1/,
      ],
      [
        'fractional limit',
        { segments: two, frequency: { type: 'daily_limit', value: 1.5 } },
        /^body\.config\.frequency\.value must be/,
      ],
      [
        'start after end',
        { segments: two, starts_at: '2026-12-02T00:00:00Z', ends_at: '2026-12-01T00:00:00Z' },
        /^body\.config\.starts_at must be before body\.config\.ends_at/,
      ],
      [
        'start equal to end',
        { segments: two, starts_at: '2026-12-01T00:00:00Z', ends_at: '2026-12-01T00:00:00Z' },
        /^body\.config\.starts_at must be before/,
      ],
      [
        'bad timestamp',
        { segments: two, ends_at: 'tomorrow' },
        /^body\.config\.ends_at must match format "date-time"/,
      ],
      [
        'unknown theme',
        { segments: two, theme_id: 'nope' },
        /^body\.config\.theme_id: theme nope does not exist/,
      ],
      [
        'archived theme',
        { segments: two, theme_id: archived.body.id },
        /^body\.config\.theme_id: theme .* is archived/,
      ],
      [
        'bad override colour',
        { segments: two, theme_overrides: { wheel: { border_color: 'red' } } },
        /^body\.config\.theme_overrides\.wheel\.border_color must match pattern/,
      ],
      [
        'negative size',
        { segments: two, theme_overrides: { segments: { border_width: -1 } } },
        /^body\.config\.theme_overrides\.segments\.border_width must be >= 0/,
      ],
      [
        'zero font size',
        { segments: two, theme_overrides: { segments: { text_font_size: 0 } } },
        /^body\.config\.theme_overrides\.segments\.text_font_size must be > 0/,
      ],
      [
        'override of a missing segment',
        { segments: two, theme_overrides: { segment_overrides: { '2': { color: '#000' } } } },
        /^body\.config\.theme_overrides\.segment_overrides\[2\]: the wheel has no segment 2/,
      ],
      [
        'override key not an index',
        { segments: two, theme_overrides: { segment_overrides: { first: { color: '#000' } } } },
        /^body\.config\.theme_overrides\.segment_overrides/,
      ],
      [
        'unknown cost currency',
        { segments: two, cost: { currency_id: 'gold', amount: 1 } },
        /^body\.config\.cost\.currency_id: currency gold does not exist/,
      ],
      [
        'accumulate-only cost',
        { segments: two, cost: { currency_id: 'xp', amount: 1 } },
        /^body\.config\.cost\.currency_id: currency xp is accumulate-only/,
      ],
      [
        'zero cost',
        { segments: two, cost: { currency_id: 'coins', amount: 0 } },
        /^body\.config\.cost\.amount must be >= 1/,
      ],
      ['unknown config field', { segments: two, colour: 'red' }, /^body\.config\.colour is not allowed/],
      [
        'unknown segment field',
        { segments: [{ ...two[0], prize: 1 }, two[1]] },
        /^body\.config\.segments\[0\]\.prize is not allowed/,
      ],
    ];
    for (const [name, config, message] of cases) {
      const r = await admin('POST', '/v1/wheels', { name: 'bad', config });
      expect([name, r.status, r.body.error?.code]).toEqual([name, 400, 'VALIDATION_ERROR']);
      expect([name, r.body.error.message]).toEqual([name, expect.stringMatching(message)]);
    }
    for (const [name, body, message] of [
      ['no name', { config: { segments: two } }, /^body\.name is required/],
      [
        'huge name',
        { name: 'x'.repeat(201), config: { segments: two } },
        /^body\.name must NOT have more than 200/,
      ],
      ['unknown field', { name: 'x', config: { segments: two }, colour: 1 }, /^body\.colour is not allowed/],
      ['array body', [1], /^body must be an object/],
    ] as const) {
      const r = await admin('POST', '/v1/wheels', body);
      expect([name, r.status, r.body.error.message]).toEqual([name, 400, expect.stringMatching(message)]);
    }
    expect((await admin('GET', '/v1/wheels')).body.total).toBe(before);

    // An update is checked in full after the merge, and a refused one changes nothing.
    const w = await wheel({ frequency: { type: 'daily_limit', value: 1 } });
    for (const [body, message] of [
      [
        { config: { frequency: { type: 'cooldown' } } },
        /^body\.config\.frequency\.value is required for cooldown/,
      ],
      [{ config: { segments: segs([null, 1]) } }, /^body\.config\.segments must NOT have fewer than 2/],
      [{ config: { ends_at: '2026-01-01T00:00:00Z', starts_at: '2026-02-01T00:00:00Z' } }, /must be before/],
      [{}, /^body must NOT have fewer than 1 properties/],
    ] as const) {
      const r = await admin('PUT', `/v1/wheels/${w.id}`, body);
      expect([r.status, r.body.error.message]).toEqual([400, expect.stringMatching(message)]);
    }
    expect((await admin('GET', `/v1/wheels/${w.id}`)).body.config).toEqual(w.config);

    // An item a wheel can pay cannot be deleted (409), until the wheel no longer names it.
    const mug = await admin('POST', '/v1/reward-items', {
      name: 'mug',
      reward_type: 'badge',
      payload: { badge_id: 'm' },
    });
    const mw = await wheel({ segments: segs([mug.body.item_id, 1], [null, 1]) });
    expect((await admin('DELETE', `/v1/reward-items/${mug.body.item_id}`)).status).toBe(409);
    await admin('PUT', `/v1/wheels/${mw.id}`, { config: { segments: segs([null, 1], [null, 1]) } });
    expect((await admin('DELETE', `/v1/reward-items/${mug.body.item_id}`)).status).toBe(200);
  });

  it('serves themes: create, list with filters, update and archive, templates, resolved themes', async () => {
    const templates = await admin('GET', '/v1/wheel-themes/templates');
    expect(templates.status).toBe(200);
    expect(templates.body.templates.map((t: { id: string }) => t.id)).toEqual(TEMPLATE_IDS);
    for (const t of templates.body.templates) {
      expect(t).toMatchObject({ tenant_id: null, theme_type: 'template', status: 'active' });
      expect(Object.keys(t.config.segment_overrides).length).toBeGreaterThanOrEqual(8);
    }
    // Also without a tenant, and under the path form.
    const bare = await call('GET', `${app.url.admin}/v1/wheel-themes/templates`, {
      headers: { 'x-api-key': key },
    });
    expect(bare.body).toEqual(templates.body);
    const pathForm = await call('GET', `${app.url.admin}/v1/tenants/${tenant.id}/wheel-themes/templates`, {
      headers: { 'x-api-key': key },
    });
    expect(pathForm.body).toEqual(templates.body);

    const config = {
      wheel: {
        background_color: '#102030',
        border_color: '#abc',
        border_width: 4,
        center_color: '#ffffffcc',
        center_radius: 30,
      },
      segments: {
        default_color: '#00aa00',
        text_color: '#fff',
        text_font_size: 14,
        border_color: '#000',
        border_width: 1,
      },
      segment_overrides: { '0': { color: '#ff0000', text_color: '#000000' } },
    };
    const custom = await admin('POST', '/v1/wheel-themes', {
      name: `custom ${shape}`,
      description: 'mine',
      config,
    });
    expect(custom.status).toBe(201);
    expect(custom.body).toMatchObject({
      tenant_id: tenant.id,
      theme_type: 'custom',
      status: 'active',
      config,
    });
    const tpl = await call('POST', `${app.url.admin}/v1/tenants/${tenant.id}/wheel-themes`, {
      headers: { 'x-api-key': key },
      body: {
        name: 'house template',
        theme_type: 'template',
        config: { ...config, segment_overrides: undefined },
      },
    });
    expect([tpl.status, tpl.body.config.segment_overrides]).toEqual([201, {}]);

    for (const [body, message] of [
      [
        { name: 'x', config: { ...config, wheel: { ...config.wheel, background_color: 'blue' } } },
        /^body\.config\.wheel\.background_color must match pattern/,
      ],
      [
        { name: 'x', config: { ...config, wheel: { ...config.wheel, border_width: 101 } } },
        /^body\.config\.wheel\.border_width must be <= 100/,
      ],
      [
        { name: 'x', config: { ...config, wheel: { ...config.wheel, center_radius: '3' } } },
        /^body\.config\.wheel\.center_radius must be a number/,
      ],
      [
        { name: 'x', config: { ...config, segments: { ...config.segments, text_color: undefined } } },
        /^body\.config\.segments\.text_color is required/,
      ],
      [
        { name: 'x', config: { ...config, segment_overrides: { '100': { color: '#000' } } } },
        /^body\.config\.segment_overrides/,
      ],
      [
        { name: 'x', config: { ...config, segment_overrides: { '1': { colour: '#000' } } } },
        /^body\.config\.segment_overrides\[1\]\.colour is not allowed/,
      ],
      [{ name: 'x', theme_type: 'system', config }, /^body\.theme_type must be one of "template", "custom"/],
      [{ name: 'x', status: 'deleted', config }, /^body\.status must be one of "active", "archived"/],
      [{ name: 'x' }, /^body\.config is required/],
    ] as const) {
      const r = await admin('POST', '/v1/wheel-themes', body);
      expect([r.status, r.body.error.message]).toEqual([400, expect.stringMatching(message)]);
    }

    const all = (await admin('GET', '/v1/wheel-themes?limit=1000')).body;
    const ids = (r: { themes: Array<{ id: string }> }) => r.themes.map((t) => t.id);
    expect(ids(all)).toEqual(expect.arrayContaining([custom.body.id, tpl.body.id]));
    expect(ids((await admin('GET', '/v1/wheel-themes?theme_type=template')).body)).toContain(tpl.body.id);
    expect(ids((await admin('GET', '/v1/wheel-themes?theme_type=template')).body)).not.toContain(
      custom.body.id,
    );
    expect(ids((await admin('GET', '/v1/wheel-themes?theme_type=custom&status=active')).body)).toContain(
      custom.body.id,
    );
    expect((await admin('GET', '/v1/wheel-themes?theme_type=system')).status).toBe(400);
    expect((await admin('GET', '/v1/wheel-themes?status=gone')).status).toBe(400);

    // A wheel on the custom theme with overrides: deep-merged, segment overrides by index.
    const w = await wheel({
      segments: segs([null, 1], [null, 1], [null, 1]),
      theme_id: custom.body.id,
      theme_overrides: {
        wheel: { border_width: 12 },
        segments: { text_font_size: 18 },
        segment_overrides: { '0': { text_color: '#111111' }, '2': { color: '#0000ff' } },
      },
    });
    expect(w.resolved_theme).toEqual({
      theme_id: custom.body.id,
      theme_name: `custom ${shape}`,
      wheel: { ...config.wheel, border_width: 12 },
      segments: { ...config.segments, text_font_size: 18 },
      segment_overrides: {
        '0': { color: '#ff0000', text_color: '#111111' },
        '2': { color: '#0000ff' },
      },
      per_segment: [
        { index: 0, color: '#ff0000', text_color: '#111111' },
        { index: 1, color: '#00aa00', text_color: '#fff' },
        { index: 2, color: '#0000ff', text_color: '#fff' },
      ],
    });
    // On a system template.
    const onTemplate = await wheel({ theme_id: TEMPLATE_IDS[3] });
    expect(onTemplate.resolved_theme).toMatchObject({
      theme_id: TEMPLATE_IDS[3],
      theme_name: 'High contrast',
      per_segment: [
        { index: 0, color: '#000000', text_color: '#ffffff' },
        { index: 1, color: '#ffd500', text_color: '#000000' },
      ],
    });

    // Update and archive: listed under the filter; an archived theme takes no new wheels, but the
    // wheels on it keep resolving it.
    const renamed = await admin('PUT', `/v1/wheel-themes/${custom.body.id}`, {
      name: 'renamed',
      config: { ...config, wheel: { ...config.wheel, border_width: 2 } },
    });
    expect(renamed.body).toMatchObject({ name: 'renamed', config: { wheel: { border_width: 2 } } });
    const arch = await admin('PUT', `/v1/wheel-themes/${custom.body.id}`, { status: 'archived' });
    expect(arch.body.status).toBe('archived');
    expect(ids((await admin('GET', '/v1/wheel-themes?status=archived')).body)).toContain(custom.body.id);
    expect(ids((await admin('GET', '/v1/wheel-themes?status=active')).body)).not.toContain(custom.body.id);
    const still = (await admin('GET', `/v1/wheels/${w.id}`)).body.resolved_theme;
    expect([still.theme_name, still.wheel.border_width]).toEqual(['renamed', 12]);
    expect(
      (await admin('PUT', `/v1/wheels/${onTemplate.id}`, { config: { theme_id: custom.body.id } })).status,
    ).toBe(400);
    expect((await admin('PUT', `/v1/wheel-themes/${TEMPLATE_IDS[0]}`, { name: 'mine now' })).status).toBe(
      403,
    );
    expect((await admin('PUT', '/v1/wheel-themes/nope', { name: 'x' })).status).toBe(404);
    expect((await admin('PUT', `/v1/wheel-themes/${tpl.body.id}`, { config: { wheel: {} } })).status).toBe(
      400,
    );
  });

  it('answers spin statuses: 404 unknown, 400 not active, not started, ended; lists only available wheels', async () => {
    expect((await spin('no-such-wheel', 'u1')).status).toBe(404);
    expect((await spin('no-such-wheel', 'u1')).body.error.code).toBe('NOT_FOUND');
    const future = await wheel({ starts_at: new Date(T0 + 48 * HOUR).toISOString() });
    const past = await wheel({ ends_at: new Date(T0 - HOUR).toISOString() });
    const window = await wheel({
      starts_at: new Date(T0 - HOUR).toISOString(),
      ends_at: new Date(T0 + HOUR).toISOString(),
    });
    const off = await wheel({}, { active: false });
    const u = user('status');
    const ns = await spin(future.id, u);
    expect([ns.status, ns.body.error.code, ns.body.error.message]).toEqual([
      400,
      'WHEEL_NOT_STARTED',
      expect.stringMatching(/not started yet \(starts at 2026-11-22T10:00:00\.000Z\)/),
    ]);
    const ended = await spin(past.id, u);
    expect([ended.status, ended.body.error.code]).toEqual([400, 'WHEEL_ENDED']);
    expect((await spin(off.id, u)).body.error.code).toBe('WHEEL_NOT_ACTIVE');

    const listed = async () =>
      ((await query('GET', '/v1/wheels')).body.wheels as Array<{ id: string; resolved_theme: unknown }>).map(
        (w) => w.id,
      );
    let now = await listed();
    expect(now).toContain(window.id);
    expect(now).not.toContain(future.id);
    expect(now).not.toContain(past.id);
    expect(now).not.toContain(off.id);
    expect((await spin(window.id, u)).status).toBe(200);

    // The range moves with the clock: at ends_at the window wheel has ended; at starts_at the future one opens.
    clock.set(T0 + HOUR);
    expect((await spin(window.id, u)).body.error.code).toBe('WHEEL_ENDED');
    clock.set(T0 + 48 * HOUR);
    now = await listed();
    expect(now).toContain(future.id);
    expect(now).not.toContain(window.id);
    expect((await spin(future.id, u)).status).toBe(200);
    clock.set(T0);

    // The query list is the token's tenant's only, and needs a token.
    const other = await tenantWithCredentials(app);
    const theirs = await call('GET', `${app.url.query}/v1/wheels`, {
      headers: { authorization: `Bearer ${other.token}` },
    });
    expect(theirs.body.wheels).toEqual([]);
    expect((await call('GET', `${app.url.query}/v1/wheels`)).status).toBe(401);
    // Another tenant's wheel is unknown to this tenant's token.
    expect(
      (
        await call('POST', `${app.url.query}/v1/wheels/${window.id}/spin`, {
          headers: { authorization: `Bearer ${other.token}` },
          body: { user_id: 'x' },
        })
      ).status,
    ).toBe(404);
  });

  it('daily limit: resets at midnight UTC', async () => {
    clock.set(Date.parse('2026-11-20T22:00:00Z'));
    const w = await wheel({ frequency: { type: 'daily_limit', value: 2 } });
    const u = user('daily');
    expect((await spin(w.id, u)).status).toBe(200);
    expect((await spin(w.id, u)).status).toBe(200);
    const third = await spin(w.id, u);
    expect([third.status, third.body.error.code]).toEqual([400, 'SPIN_LIMIT_REACHED']);
    expect(third.body.error.message).toMatch(
      /Daily limit of 2 spins reached; it resets at midnight UTC \(2026-11-21T00:00:00\.000Z, in 2h\)/,
    );
    expect(third.body.error.details).toEqual({
      next_spin_at: '2026-11-21T00:00:00.000Z',
      retry_after_seconds: 7200,
    });
    // Another user and another wheel count apart.
    expect((await spin(w.id, user('daily'))).status).toBe(200);
    clock.set(Date.parse('2026-11-20T23:59:59.999Z'));
    expect((await spin(w.id, u)).status).toBe(400);
    clock.set(Date.parse('2026-11-21T00:00:00.000Z'));
    expect((await spin(w.id, u)).status).toBe(200);
    expect((await spin(w.id, u)).status).toBe(200);
    expect((await spin(w.id, u)).status).toBe(400);
    clock.set(T0);
  });

  it('total limit: counts every spin ever, across days', async () => {
    const w = await wheel({ frequency: { type: 'total_limit', value: 2 } });
    const u = user('total');
    expect((await spin(w.id, u)).status).toBe(200);
    // (Tokens expire after 30 days of the injected clock: the clock moves less.)
    clock.advance(20 * 24 * HOUR);
    expect((await spin(w.id, u)).status).toBe(200);
    clock.advance(5 * 24 * HOUR);
    const r = await spin(w.id, u);
    expect([r.status, r.body.error.code, r.body.error.message]).toEqual([
      400,
      'SPIN_LIMIT_REACHED',
      expect.stringMatching(/Total limit of 2 spins reached/),
    ]);
    clock.set(T0);
  });

  it('cooldown: hours between spins, with the time left', async () => {
    const w = await wheel({ frequency: { type: 'cooldown', value: 2 } });
    const u = user('cool');
    expect((await spin(w.id, u)).status).toBe(200);
    clock.advance(HOUR + 59 * 60_000);
    const r = await spin(w.id, u);
    expect([r.status, r.body.error.code]).toEqual([400, 'SPIN_COOLDOWN']);
    expect(r.body.error.message).toMatch(
      /^Cooldown of 2 hours: next spin in 1m \(at 2026-11-20T12:00:00\.000Z\)/,
    );
    expect(r.body.error.details).toEqual({
      next_spin_at: '2026-11-20T12:00:00.000Z',
      retry_after_seconds: 60,
    });
    clock.advance(60_000);
    expect((await spin(w.id, u)).status).toBe(200);
    const again = await spin(w.id, u);
    expect(again.body.error.message).toMatch(/next spin in 2h \(at 2026-11-20T14:00:00\.000Z\)/);
    // Unlimited: no limit at all.
    const free = await wheel({ frequency: { type: 'unlimited', value: 5 } });
    expect(free.config.frequency).toEqual({ type: 'unlimited', value: null });
    for (let i = 0; i < 5; i++) expect((await spin(free.id, u)).status).toBe(200);
    clock.set(T0);
  });

  it('debits the cost and credits a currency prize in the ledger; 402 when short, with nothing written', async () => {
    const w = await wheel({
      segments: segs([items.coins50!, 1], [items.coins50!, 2]),
      cost: { currency_id: 'gems', amount: 3 },
      frequency: { type: 'daily_limit', value: 1 },
    });
    expect(w.config.cost).toEqual({ currency_id: 'gems', amount: 3 });
    const u = user('cost');
    const short = await spin(w.id, u);
    expect([short.status, short.body.error.code]).toEqual([402, 'INSUFFICIENT_BALANCE']);
    expect((await query('GET', `/v1/wheels/user/${u}/history`)).body.total).toBe(0);
    await grant(u, 5, 'gems');
    const r = await spin(w.id, u);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      wheel_id: w.id,
      user_id: u,
      reward_item: {
        item_id: items.coins50,
        name: 'coins50',
        reward_type: 'currency',
        payload: { currency_id: 'coins', amount: 50 },
      },
      prize: { status: 'credited' },
      cost: { currency_id: 'gems', amount: 3, balance_after: 2 },
    });
    expect([0, 1]).toContain(r.body.segment_index);
    expect(await balance(u, 'gems')).toBe(2);
    expect(await balance(u, 'coins')).toBe(50);
    const rows = await ledger(u);
    expect(rows).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          currency_id: 'gems',
          amount: -3,
          source_type: 'wheel_spin',
          source_ref: r.body.spin_id,
        }),
        expect.objectContaining({
          currency_id: 'coins',
          amount: 50,
          source_type: 'wheel',
          source_ref: r.body.spin_id,
        }),
      ]),
    );
    // The 402 spent none of the daily limit: the paid spin was the first; now the limit holds.
    expect((await spin(w.id, u)).body.error.code).toBe('SPIN_LIMIT_REACHED');
    expect(await balance(u, 'gems')).toBe(2);
    // A cost in a currency deactivated since: 400 with the reason, nothing spent.
    const w2 = await wheel({ cost: { currency_id: 'gems', amount: 1 } });
    await admin('PUT', '/v1/wallet/currencies/gems', { active: false });
    const off = await spin(w2.id, u);
    expect([off.status, off.body.error.code]).toEqual([400, 'WHEEL_COST_UNAVAILABLE']);
    await admin('PUT', '/v1/wallet/currencies/gems', { active: true });
    expect(await balance(u, 'gems')).toBe(2);
    // A prize that cannot be credited (its currency deactivated since): the spin stands, the
    // grant says failed (an operator re-grants), nothing is credited.
    const w3 = await wheel({ segments: segs([items.coins50!, 1], [items.coins50!, 1]) });
    await admin('PUT', '/v1/wallet/currencies/coins', { active: false });
    const failed = await spin(w3.id, u).finally(() =>
      admin('PUT', '/v1/wallet/currencies/coins', { active: true }),
    );
    expect([failed.status, failed.body.prize]).toEqual([200, { status: 'failed', transaction_id: null }]);
    expect(await balance(u, 'coins')).toBe(50);
    const grants = (await query('GET', `/v1/grants/user/${u}`)).body.grants;
    expect(grants.find((g: { source_ref: string }) => g.source_ref === failed.body.spin_id)).toMatchObject({
      status: 'failed',
      source_type: 'wheel',
    });
  });

  it('no-win segments: no prize, no grant, only the cost', async () => {
    const w = await wheel({ cost: { currency_id: 'coins', amount: 1 } });
    const u = user('nowin');
    await grant(u, 1);
    const r = await spin(w.id, u);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ reward_item: null, prize: null, cost: { amount: 1, balance_after: 0 } });
    expect(r.body.segment).toEqual({ reward_id: null, probability: 1, label: `s${r.body.segment_index}` });
    expect((await query('GET', `/v1/grants/user/${u}`)).body.total).toBe(0);
    expect((await ledger(u)).map((t) => [t.amount, t.source_type])).toEqual([
      [-1, 'wheel_spin'],
      [1, 'manual_grant'],
    ]);
  });

  it('grants item prizes through the granting service with source_type wheel', async () => {
    // The grant, and the order the store's granting service made of the physical item.
    const w = await wheel({ segments: segs([items.shirt!, 1], [items.shirt!, 1]) });
    const u = user('item');
    const r = await spin(w.id, u);
    expect(r.status).toBe(200);
    expect(r.body.reward_item).toMatchObject({ item_id: items.shirt, reward_type: 'physical_item' });
    expect(r.body.prize.transaction_id).toBeNull();
    const grants = (await query('GET', `/v1/grants/user/${u}`)).body;
    expect(grants.total).toBe(1);
    expect(grants.grants[0]).toMatchObject({
      item_id: items.shirt,
      reward_type: 'physical_item',
      source_type: 'wheel',
      source_ref: r.body.spin_id,
      status: r.body.prize.status,
    });
    // The store made the physical prize an order with the grant's source (docs/store.md).
    expect(grants.grants[0].status).toBe('ordered');
    const orders = (await query('GET', `/v1/orders/user/${u}`)).body;
    expect(orders.orders).toEqual([
      expect.objectContaining({
        id: grants.grants[0].order_id,
        source_type: 'wheel',
        reward_id: items.shirt,
      }),
    ]);
    const b = await wheel({ segments: segs([items.badge!, 1], [items.badge!, 1]) });
    const rb = await spin(b.id, u);
    expect(rb.body.prize).toEqual({ status: 'owned', transaction_id: null });
    expect((await query('GET', `/v1/grants/user/${u}`)).body.total).toBe(2);
  });

  it('keeps a history with the audit of each draw; end users spin and read only for themselves', async () => {
    const w1 = await wheel({ segments: segs([items.badge!, 3], [null, 5], [null, 2]) });
    const w2 = await wheel({});
    const u = user('hist');
    const mine = await userToken(tenant, u);
    // An end-user token spins for itself by default, and for no one else.
    const own = await spin(w1.id, undefined, mine);
    expect([own.status, own.body.user_id]).toEqual([200, u]);
    expect((await spin(w1.id, 'someone-else', mine)).status).toBe(403);
    expect((await spin(w1.id, undefined)).body.error.message).toBe('body.user_id is required');
    for (let i = 0; i < 4; i++) expect((await spin(w1.id, u, mine)).status).toBe(200);
    for (let i = 0; i < 2; i++) expect((await spin(w2.id, u)).status).toBe(200);

    const all = await query('GET', `/v1/wheels/user/${u}/history`, undefined, mine);
    expect(all.status).toBe(200);
    expect(all.body.total).toBe(7);
    expect(all.body.spins).toHaveLength(7);
    expect(all.body.spins[0].wheel_id).toBe(w2.id); // newest first
    expect(all.body.spins[6].id).toBe(own.body.spin_id);
    for (const s of all.body.spins) {
      // The audit: the stored weights and number give the stored segment.
      expect(pick(s.draw.weights, s.draw.random)).toBe(s.result_index);
      expect(s.draw.total).toBe(s.draw.weights.reduce((a: number, x: number) => a + x, 0));
      if (s.wheel_id === w1.id) {
        expect(s.draw.weights).toEqual([3, 5, 2]);
        expect(s.reward_item_id).toBe(s.result_index === 0 ? items.badge : null);
      }
    }
    const only = await query(
      'GET',
      `/v1/wheels/user/${u}/history?wheel_id=${w2.id}&limit=1&offset=1`,
      undefined,
      mine,
    );
    expect([only.body.total, only.body.spins.length, only.body.spins[0].wheel_id]).toEqual([2, 1, w2.id]);
    expect((await query('GET', `/v1/wheels/user/other/history`, undefined, mine)).status).toBe(403);
    expect((await query('GET', `/v1/wheels/user/${u}/history?limit=1001`)).status).toBe(400);
    expect((await query('GET', `/v1/wheels/user/${u}/history?limit=1000`)).status).toBe(200);
    expect((await query('GET', `/v1/wheels/user/${u}/history?offset=-1`)).status).toBe(400);
    expect((await query('GET', `/v1/wheels/user/${u}/history?colour=1`)).status).toBe(400);
    // The admin reads the same rows under both forms.
    const viaAdmin = await admin('GET', `/v1/wheels/user/${u}/history`);
    expect(viaAdmin.body).toEqual(all.body);
    const viaPath = await call('GET', `${app.url.admin}/v1/tenants/${tenant.id}/wheels/user/${u}/history`, {
      headers: { 'x-api-key': key },
    });
    expect(viaPath.body).toEqual(all.body);
    // An operator lists a wheel's spins (all users, or one), with the same audit fields.
    const byWheel = await admin('GET', `/v1/wheels/${w1.id}/spins`);
    expect([byWheel.status, byWheel.body.total]).toEqual([200, 5]);
    expect(byWheel.body.spins).toEqual(
      all.body.spins.filter((x: { wheel_id: string }) => x.wheel_id === w1.id),
    );
    const byWheelUser = await call(
      'GET',
      `${app.url.admin}/v1/tenants/${tenant.id}/wheels/${w2.id}/spins?user_id=${u}&limit=1`,
      { headers: { 'x-api-key': key } },
    );
    expect([byWheelUser.body.total, byWheelUser.body.spins.length]).toEqual([2, 1]);
    expect((await admin('GET', `/v1/wheels/${w1.id}/spins?user_id=nobody`)).body).toEqual({
      spins: [],
      total: 0,
    });
    expect((await admin('GET', '/v1/wheels/nope/spins')).status).toBe(404);
    // Default page: 100.
    const many = await wheel({});
    const v = user('page');
    await Promise.all(Array.from({ length: 105 }, () => spin(many.id, v)));
    const page = await query('GET', `/v1/wheels/user/${v}/history`);
    expect([page.body.total, page.body.spins.length]).toEqual([105, 100]);
    // Hostile spin bodies: the envelope names the field.
    for (const [body, message] of [
      [{ user_id: 5 }, /^body\.user_id must be a string/],
      [{ user_id: 'x'.repeat(201) }, /^body\.user_id must NOT have more than 200/],
      [{ user_id: 'a', extra: true }, /^body\.extra is not allowed/],
    ] as const) {
      const r = await query('POST', `/v1/wheels/${many.id}/spin`, body);
      expect([r.status, r.body.error.message]).toEqual([400, expect.stringMatching(message)]);
    }
  });

  it('holds a daily limit of 3 under 50 concurrent spins: exactly 3 results and 3 debits', async () => {
    const w = await wheel({
      segments: segs([items.coins50!, 1], [null, 1]),
      frequency: { type: 'daily_limit', value: 3 },
      cost: { currency_id: 'coins', amount: 10 },
    });
    const u = user('race');
    await grant(u, 1000);
    const results = await Promise.all(Array.from({ length: 50 }, () => spin(w.id, u)));
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(3);
    expect(statuses.filter((s) => s === 400)).toHaveLength(47);
    for (const r of results) if (r.status === 400) expect(r.body.error.code).toBe('SPIN_LIMIT_REACHED');
    const debits = (await ledger(u)).filter((t) => t.source_type === 'wheel_spin');
    expect(debits).toHaveLength(3);
    expect(debits.every((t) => t.amount === -10)).toBe(true);
    const won = results.filter((r) => r.status === 200 && r.body.reward_item).length;
    expect(await balance(u)).toBe(1000 - 30 + 50 * won);
    expect((await query('GET', `/v1/wheels/user/${u}/history`)).body.total).toBe(3);
  });

  it('keeps tenants apart and needs the wheels scopes', async () => {
    const w = await wheel({});
    const other = await tenantWithCredentials(app);
    // Another tenant's key cannot reach this tenant.
    const r = await call('GET', `${app.url.admin}/v1/wheels/${w.id}?tenant_id=${tenant.id}`, {
      headers: { 'x-api-key': other.key },
    });
    expect(r.status).toBe(403);
    // Under its own tenant, the wheel does not exist.
    const r2 = await call('GET', `${app.url.admin}/v1/wheels/${w.id}?tenant_id=${other.tenant.id}`, {
      headers: { 'x-api-key': other.key },
    });
    expect(r2.status).toBe(404);
    const readOnly = (await createKey(app, [tenant.id], ['wheels:read'])).key;
    const head = { 'x-api-key': readOnly };
    expect(
      (await call('GET', `${app.url.admin}/v1/wheels?tenant_id=${tenant.id}`, { headers: head })).status,
    ).toBe(200);
    expect(
      (
        await call('POST', `${app.url.admin}/v1/wheels?tenant_id=${tenant.id}`, {
          headers: head,
          body: { name: 'x', config: {} },
        })
      ).status,
    ).toBe(403);
    const walletOnly = (await createKey(app, [tenant.id], ['wallet:*'])).key;
    expect(
      (
        await call('GET', `${app.url.admin}/v1/wheel-themes/templates`, {
          headers: { 'x-api-key': walletOnly },
        })
      ).status,
    ).toBe(403);
  });
});
