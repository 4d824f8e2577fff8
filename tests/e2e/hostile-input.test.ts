/**
 * Hostile but well-typed input (issue 11, items 2 and 7), in both shapes: NUL characters, lone
 * surrogates, values nested thousands of levels deep and `%00` in path parameters, sent to every
 * route of every gateway (enumerated from runtime/routes.ts, as the isolation test does), and
 * identifiers over their byte limit. Each is refused with 400 VALIDATION_ERROR naming the field
 * (422 on the signed-request variant; per event in a bulk request); afterwards every table and the
 * event log are unchanged and the service still serves: a grant succeeds and the partition keeps
 * scoring.
 */
import { signRequest } from '../../http/auth/authenticator';
import type { RouteSpec } from '../../http/route';
import { MAX_NESTING } from '../../http/input';
import { allRoutes } from '../../runtime/routes';
import { EVENTS_TOPIC } from '../../schemas/topics';
import {
  call,
  createTenant,
  SHAPES,
  startTestApp,
  tenantWithCredentials,
  type TestApp,
} from '../support/app';
import { waitFor } from '../support/wait';

type Tenant = Awaited<ReturnType<typeof createTenant>>;

/** `{"a":{"a":...1...}}`, `levels` objects deep, as raw JSON text. */
const deepJson = (levels: number) => '{"a":'.repeat(levels) + '1' + '}'.repeat(levels);
const CJK_600_BYTES = '界'.repeat(200);

describe.each(SHAPES)('hostile input [%s]', (shape) => {
  let app: TestApp;
  let tenant: Tenant;
  let key: string;
  let token: string;
  let routes: RouteSpec[];
  let seq = 0;

  const bearer = () => ({ authorization: `Bearer ${token}` });
  const adminUrl = (path: string) =>
    `${app.url.admin}${path}${path.includes('?') ? '&' : '?'}tenant_id=${tenant.id}`;

  beforeAll(async () => {
    app = await startTestApp(shape, {
      env: { LUDUS_RATE_LIMIT_ADMIN: 'off', LUDUS_RATE_LIMIT_QUERY: 'off', LUDUS_RATE_LIMIT_INGEST: 'off' },
    });
    routes = allRoutes(app.ctx);
    ({ tenant, key, token } = await tenantWithCredentials(app));
    const admin = async (path: string, body: unknown) => {
      const r = await call('POST', adminUrl(path), { headers: { 'x-api-key': key }, body });
      expect([path, r.status]).toEqual([path, 201]);
    };
    await admin('/v1/leaderboards', {
      leaderboard_id: 'points',
      name: 'points',
      config: {
        timeframe: { type: 'all_time' },
        scoring: { rules: [{ event_type: '*', points_expression: 'attrs.p' }], aggregation: 'sum' },
      },
    });
    await admin('/v1/wallet/currencies', {
      id: 'coins',
      name: 'Coins',
      is_spendable: true,
      decimal_places: 0,
    });
    expect((await grant({ user_id: 'alice', amount: 10 })).status).toBe(200);
    // One event scored: the processors have started and settled before any snapshot is taken.
    expect((await event({ actor: { user_id: 'alice' } })).status).toBe(202);
    await expectScore('alice', 1);
  }, 120_000);
  afterAll(() => app?.stop());

  const grant = (body: Record<string, unknown>) =>
    call('POST', adminUrl('/v1/wallet/grant'), {
      headers: { 'x-api-key': key },
      body: { currency_id: 'coins', ...body },
    });

  const event = (extra: Record<string, unknown>) =>
    call('POST', `${app.url.ingest}/v1/events`, {
      headers: bearer(),
      body: {
        event_id: `ev-${++seq}`,
        type: 'match',
        occurred_at: new Date(Date.now() - 60_000).toISOString(),
        attrs: { p: 1 },
        ...extra,
      },
    });

  async function expectScore(user: string, expected: number) {
    let last: unknown;
    await waitFor(
      async () => {
        const r = await call(
          'GET',
          `${app.url.query}/v1/leaderboards/points/score/${encodeURIComponent(user)}`,
          { headers: bearer() },
        );
        last = r.body;
        return r.status === 200 && r.body.found && r.body.score === expected;
      },
      { timeoutMs: 30_000, what: `score ${expected} of ${user}`, describe: () => JSON.stringify(last) },
    );
  }

  /** Row counts of every table of the app's schema, and the event log's end offsets. */
  async function snapshot(): Promise<string> {
    const { sql, eventLog } = app.ctx.adapters;
    const tables = await sql.query<{ table_name: string }>(
      `SELECT table_name FROM information_schema.tables
       WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name`,
    );
    const counts: Record<string, number> = {};
    for (const { table_name } of tables.rows) {
      const r = await sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${table_name}"`);
      counts[table_name] = Number(r.rows[0]!.n);
    }
    const ends = await eventLog.endOffsets(EVENTS_TOPIC);
    return JSON.stringify({ counts, log: [...ends.entries()].sort() });
  }

  /** Runs `fn` and shows that nothing was stored: every table and the log as before. */
  async function unchanged(fn: () => Promise<void>) {
    // Settled first: two equal snapshots in a row (the processors may still be writing).
    let before = await snapshot();
    await waitFor(async () => {
      const again = await snapshot();
      const same = again === before;
      before = again;
      return same;
    });
    await fn();
    expect(JSON.parse(await snapshot())).toEqual(JSON.parse(before));
  }

  /** The credential each kind of route takes, and its URL with path parameters filled. */
  function request(r: RouteSpec, fill: (name: string) => string) {
    const path = r.path.replace(/:([A-Za-z_]+)/g, (_m, name: string) => fill(name));
    const base = app.url[r.gateway];
    if (r.auth.kind === 'root') return { url: `${base}${path}`, headers: { 'x-api-key': app.rootKey } };
    if (r.auth.kind === 'admin')
      return {
        url: r.path.includes(':tenant_id') ? `${base}${path}` : `${base}${path}?tenant_id=${tenant.id}`,
        headers: { 'x-api-key': key },
      };
    return { url: `${base}${path}`, headers: bearer() };
  }
  const ids = (name: string) => (name === 'tenant_id' ? tenant.id : name === 'user_id' ? 'alice' : 'x');

  function expectRefused(
    what: string,
    res: { status: number; body: { error?: { code?: string; message?: string } } },
    message: string | RegExp,
  ) {
    expect([what, res.status, res.body?.error?.code]).toEqual([what, 400, 'VALIDATION_ERROR']);
    expect([what, res.body.error!.message]).toEqual([
      what,
      typeof message === 'string' ? expect.stringContaining(message) : expect.stringMatching(message),
    ]);
  }

  it('every route with a body refuses NUL, a lone surrogate and deep nesting, naming the field', async () => {
    const withBody = routes.filter((r) => r.body && r.method !== 'GET' && r.method !== 'DELETE');
    expect(withBody.length).toBeGreaterThan(20);
    const hostile: Array<[string, string, string | RegExp]> = [
      ['NUL', '{"zz":"a\\u0000b"}', 'body.zz must not contain NUL characters'],
      ['lone surrogate', '{"zz":["ok","\\ud800"]}', 'body.zz[1] must be well-formed Unicode'],
      ['NUL in a key', '{"zz":{"k\\u0000":1}}', 'body.zz["k\\u0000"]: the key must not contain NUL'],
      [
        '5,000 levels',
        `{"zz":${deepJson(5000)}}`,
        new RegExp(`^body\\.zz(\\.a){${MAX_NESTING - 1}}: nesting deeper than ${MAX_NESTING} levels$`),
      ],
    ];
    await unchanged(async () => {
      for (const r of withBody) {
        const { url, headers } = request(r, ids);
        for (const [what, raw, message] of hostile) {
          const res = await call(r.method, url, { headers, raw });
          if (r.bodyRule === 'handler') {
            // Ingestion: judged per event (the tests below); a bulk body of no events is refused.
            expect(res.status).toBeGreaterThanOrEqual(400);
            continue;
          }
          expectRefused(`${r.method} ${r.path}: ${what}`, res, message);
        }
      }
    });
  });

  it('every path parameter refuses %00, and every query parameter NUL', async () => {
    const withParams = routes.filter((r) => r.path.includes('/:'));
    expect(withParams.length).toBeGreaterThan(20);
    await unchanged(async () => {
      for (const r of withParams) {
        for (const name of [...r.path.matchAll(/:([A-Za-z_]+)/g)].map((m) => m[1]!)) {
          const { url, headers } = request(r, (n) => (n === name ? '%00' : ids(n)));
          const body = r.method === 'GET' || r.method === 'DELETE' ? undefined : {};
          expectRefused(
            `${r.method} ${r.path} :${name}`,
            await call(r.method, url, { headers, body }),
            `path.${name} must not contain NUL characters`,
          );
        }
      }
      for (const r of routes.filter((x) => x.method === 'GET' && x.gateway !== 'ingest')) {
        const { url, headers } = request(r, ids);
        expectRefused(
          `${r.method} ${r.path} ?user_id`,
          await call('GET', `${url}${url.includes('?') ? '&' : '?'}user_id=a%00`, { headers }),
          'query.user_id must not contain NUL characters',
        );
      }
    });
  });

  it('refuses the inputs that reached a store, each naming its field', async () => {
    const post = (path: string, raw: string, headers: Record<string, string> = { 'x-api-key': key }) =>
      call('POST', path.startsWith('http') ? path : adminUrl(path), { headers, raw });
    const cases: Array<[string, () => ReturnType<typeof post>, string | RegExp]> = [
      [
        'grant user_id lone surrogate',
        () => post('/v1/wallet/grant', '{"user_id":"\\ud800","currency_id":"coins","amount":1}'),
        'body.user_id must be well-formed Unicode',
      ],
      [
        'deduct user_id lone surrogate',
        () => post('/v1/wallet/deduct', '{"user_id":"\\udfff","currency_id":"coins","amount":1}'),
        'body.user_id must be well-formed Unicode',
      ],
      [
        'grant user_id NUL',
        () => post('/v1/wallet/grant', '{"user_id":"al\\u0000ice","currency_id":"coins","amount":1}'),
        'body.user_id must not contain NUL',
      ],
      [
        'grant idempotency_key NUL',
        () =>
          post(
            '/v1/wallet/grant',
            '{"user_id":"alice","currency_id":"coins","amount":1,"idempotency_key":"k\\u0000"}',
          ),
        'body.idempotency_key must not contain NUL',
      ],
      [
        'grant source_type NUL',
        () =>
          post(
            '/v1/wallet/grant',
            '{"user_id":"alice","currency_id":"coins","amount":1,"source_type":"\\u0000"}',
          ),
        'body.source_type must not contain NUL',
      ],
      [
        'grant user_id of 200 CJK characters (600 bytes)',
        () =>
          post(
            '/v1/wallet/grant',
            JSON.stringify({ user_id: CJK_600_BYTES, currency_id: 'coins', amount: 1 }),
          ),
        'body.user_id must be at most 256 UTF-8 bytes',
      ],
      [
        'currency name NUL',
        () =>
          post(
            '/v1/wallet/currencies',
            '{"id":"gems","name":"G\\u0000","is_spendable":true,"decimal_places":0}',
          ),
        'body.name must not contain NUL',
      ],
      [
        'tier benefits 5,000 levels deep',
        () =>
          post(
            '/v1/wallet/tiers',
            `{"tier_name":"gold","tier_level":1,"min_lifetime_points":1,"currency_id":"coins","benefits":${deepJson(5000)}}`,
          ),
        'body.benefits.a.a',
      ],
      [
        'reward item payload 5,000 levels deep',
        () => post('/v1/reward-items', `{"name":"badge","reward_type":"badge","payload":${deepJson(5000)}}`),
        'nesting deeper than 32 levels',
      ],
      [
        'leaderboard description NUL',
        () =>
          post(
            '/v1/leaderboards',
            '{"leaderboard_id":"b2","name":"b","description":"\\u0000","config":{"timeframe":{"type":"all_time"},"scoring":{"rules":[{"event_type":"*","points_expression":"1"}],"aggregation":"sum"}}}',
          ),
        'body.description must not contain NUL',
      ],
      [
        'webhook description lone surrogate',
        () =>
          post(
            '/v1/webhooks',
            '{"url":"https://hooks.example.com/a","event_types":["*"],"description":"\\udc00"}',
          ),
        'body.description must be well-formed Unicode',
      ],
      [
        'tenant name NUL (operator)',
        () => post(`${app.url.admin}/v1/tenants`, '{"name":"t\\u0000"}', { 'x-api-key': app.rootKey }),
        'body.name must not contain NUL',
      ],
      [
        'balances of user %00',
        () =>
          call('GET', `${app.url.query}/v1/wallet/balances?user_id=%00`, {
            headers: bearer(),
          }) as ReturnType<typeof post>,
        'query.user_id must not contain NUL',
      ],
    ];
    await unchanged(async () => {
      for (const [what, send, message] of cases) expectRefused(what, await send(), message);
    });
  });

  it('ingestion refuses each bad event naming its field; the signed variant answers 422', async () => {
    const cases: Array<[string, Record<string, unknown> | string, string]> = [
      ['attrs 5,000 levels deep', `"attrs":${deepJson(5000)}`, 'attrs.a.a'],
      ['subject 5,000 levels deep', `"subject":${deepJson(5000)}`, 'subject.a.a'],
      [
        'actor.metadata 5,000 levels deep',
        `"actor":{"user_id":"bob","metadata":${deepJson(5000)}}`,
        'actor.metadata.a',
      ],
      ['user_id NUL', `"actor":{"user_id":"b\\u0000"}`, 'actor.user_id must not contain NUL'],
      [
        'user_id lone surrogate',
        `"actor":{"user_id":"\\ud800"}`,
        'actor.user_id must be well-formed Unicode',
      ],
      ['type NUL', `"type":"m\\u0000"`, 'type must not contain NUL'],
      [
        'user_id of 600 bytes',
        `"actor":{"user_id":"${CJK_600_BYTES}"}`,
        'actor.user_id must be at most 256 UTF-8 bytes',
      ],
      ['event_id of 600 bytes', `"event_id":"${CJK_600_BYTES}"`, 'event_id must be at most 256 UTF-8 bytes'],
    ];
    const raw = (field: string) => {
      const base: Record<string, string> = {
        event_id: `"ev-${++seq}"`,
        type: '"match"',
        actor: '{"user_id":"bob"}',
        occurred_at: `"${new Date(Date.now() - 60_000).toISOString()}"`,
        attrs: '{"p":1}',
      };
      const name = /^"(\w+)"/.exec(field)![1]!;
      base[name] = field.slice(name.length + 3);
      return `{${Object.entries(base)
        .map(([k, v]) => `"${k}":${v}`)
        .join(',')}}`;
    };
    await unchanged(async () => {
      for (const [what, field, message] of cases) {
        const res = await call('POST', `${app.url.ingest}/v1/events`, {
          headers: bearer(),
          raw: raw(field as string),
        });
        expectRefused(what, res, message);
      }
      // The signed variant (flat shape): the same refusal in its own error format.
      const body = JSON.stringify({
        event_id: `ev-${++seq}`,
        event_type: 'match',
        user_id: CJK_600_BYTES,
        timestamp: new Date().toISOString(),
      });
      const ts = String(Math.floor(Date.now() / 1000));
      const signed = await call('POST', `${app.url.ingest}/v1/events`, {
        headers: {
          'x-tenant-id': tenant.id,
          'x-timestamp': ts,
          'x-signature': `hmac-sha256=${signRequest(tenant.hmac_secret, 'POST', '/v1/events', ts, body)}`,
        },
        raw: body,
      });
      expect(signed.status).toBe(422);
      expect(JSON.stringify(signed.body)).toContain('user_id must be at most 256 UTF-8 bytes');
    });
  });

  it('a bulk request answers per event: the bad ones fail naming the field, the good one is scored', async () => {
    const good = `"event_id":"ev-${++seq}","type":"match","actor":{"user_id":"carol"},"occurred_at":"${new Date(Date.now() - 60_000).toISOString()}","attrs":{"p":3}`;
    const bad = (i: number, rest: string) =>
      `{"event_id":"bad-${seq}-${i}","type":"match","occurred_at":"${new Date().toISOString()}",${rest}}`;
    const raw = `{"events":[${bad(1, `"actor":{"user_id":"${CJK_600_BYTES}"}`)},${bad(2, `"actor":{"user_id":"d"},"attrs":${deepJson(5000)}`)},${bad(3, '"actor":{"user_id":"\\ud800"}')},{${good}}]}`;
    const res = await call('POST', `${app.url.ingest}/v1/events/bulk`, { headers: bearer(), raw });
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ status: 'partial', total: 4, accepted: 1, failed: 3 });
    expect(res.body.results.map((r: { status: string }) => r.status)).toEqual([
      'failed',
      'failed',
      'failed',
      'accepted',
    ]);
    expect(res.body.results[0].error).toContain('actor.user_id must be at most 256 UTF-8 bytes');
    expect(res.body.results[1].error).toContain('nesting deeper than 32 levels');
    expect(res.body.results[2].error).toContain('actor.user_id must be well-formed Unicode');
    await expectScore('carol', 3);
  });

  it('still serves afterwards: a grant succeeds, and the longest allowed user id is scored', async () => {
    const g = await grant({ user_id: 'alice', amount: 5, idempotency_key: `after-${seq}` });
    expect(g.status).toBe(200);
    expect(g.body.balance_after).toBe(15);
    const longest = '界'.repeat(85); // 255 UTF-8 bytes: within the limit
    expect((await event({ actor: { user_id: longest }, attrs: { p: 7 } })).status).toBe(202);
    await expectScore(longest, 7);
    expect((await event({ actor: { user_id: 'alice' } })).status).toBe(202);
    await expectScore('alice', 2);
  });
});
