/**
 * The Ingestion Gateway end to end, in both shapes: single and bulk events with a tenant JWT, an
 * end-user JWT and a signed request (nested and flat shapes), every validation rule with a message
 * naming the field, the tenant stamped from the credential, the body limits, and proof that an
 * accepted event is really in the event log (the log's end offsets grow and the event is scored).
 */
import { request } from 'node:http';
import { signRequest } from '../../http/auth/authenticator';
import { ManualClock } from '../../core/clock';
import { EVENTS_TOPIC } from '../../schemas/topics';
import {
  call,
  createKey,
  createTenant,
  SHAPES,
  startTestApp,
  tenantToken,
  userToken,
  type TestApp,
} from '../support/app';
import { waitFor } from '../support/wait';

const T0 = Date.parse('2026-11-20T12:00:00Z');
const HOUR = 3600_000;

type Tenant = Awaited<ReturnType<typeof createTenant>>;

describe.each(SHAPES)('ingestion gateway [%s]', (shape) => {
  let app: TestApp;
  let clock: ManualClock;
  let tenant: Tenant;
  let other: Tenant;
  let token: string;
  let otherToken: string;
  let seq = 0;

  beforeAll(async () => {
    clock = new ManualClock(T0);
    app = await startTestApp(shape, { clock, env: { LUDUS_RATE_LIMIT_INGEST: 'off' } });
    tenant = await createTenant(app);
    other = await createTenant(app);
    token = await tenantToken(tenant);
    otherToken = await tenantToken(other);
    // The same board in both tenants: an event must count only in the credential's tenant.
    for (const t of [tenant, other]) {
      const key = (await createKey(app, [t.id])).key;
      const r = await call('POST', `${app.url.admin}/v1/leaderboards?tenant_id=${t.id}`, {
        headers: { 'x-api-key': key },
        body: {
          leaderboard_id: 'points',
          name: 'points',
          config: {
            timeframe: { type: 'all_time' },
            scoring: { rules: [{ event_type: '*', points_expression: 'attrs.p' }], aggregation: 'sum' },
          },
        },
      });
      expect(r.status).toBe(201);
    }
  });
  afterAll(() => app?.stop());

  const bearer = (t: string) => ({ authorization: `Bearer ${t}` });
  const uid = (name: string) => `${name}-${++seq}`;

  function ev(user: string, p: number, extra: Record<string, unknown> = {}) {
    return {
      event_id: uid('ev'),
      type: 'match',
      actor: { user_id: user },
      occurred_at: new Date(clock.now() - 60_000).toISOString(),
      attrs: { p },
      ...extra,
    };
  }

  /** Records in the events topic, over every partition. */
  async function logEnd(): Promise<number> {
    const ends = await app.ctx.adapters.eventLog.endOffsets(EVENTS_TOPIC);
    return [...ends.values()].reduce((a, b) => a + b, 0);
  }

  const post = (path: string, body: unknown, headers: Record<string, string> = bearer(token)) =>
    call('POST', `${app.url.ingest}${path}`, { headers, body });

  /** A signed request (docs/authentication.md) over the exact bytes sent. */
  function signed(path: string, body: unknown, t: Tenant = tenant) {
    const raw = JSON.stringify(body);
    const ts = String(Math.floor(clock.now() / 1000));
    return call('POST', `${app.url.ingest}${path}`, {
      headers: {
        'x-tenant-id': t.id,
        'x-timestamp': ts,
        'x-signature': `hmac-sha256=${signRequest(t.hmac_secret, 'POST', path, ts, raw)}`,
      },
      raw,
    });
  }

  async function score(user: string, t = token): Promise<{ found: boolean; score: number }> {
    const r = await call('GET', `${app.url.query}/v1/leaderboards/points/score/${user}`, {
      headers: bearer(t),
    });
    expect(r.status).toBe(200);
    return r.body;
  }

  /** Waits until the user's score in the credential tenant's board is `expected`. */
  async function expectScore(user: string, expected: number) {
    let last: unknown;
    await waitFor(
      async () => {
        const s = await score(user);
        last = s;
        return s.found && s.score === expected;
      },
      { timeoutMs: 15000, what: `score ${expected} of ${user}`, describe: () => JSON.stringify(last) },
    );
  }

  /** A request that must change nothing: the log's end offsets stay where they were. */
  async function unchangedLog<T>(fn: () => Promise<T>): Promise<T> {
    const before = await logEnd();
    const out = await fn();
    expect(await logEnd()).toBe(before);
    return out;
  }

  it('accepts one event with a tenant JWT: 202, in the log, scored once', async () => {
    const before = await logEnd();
    const e = ev(uid('ann'), 7);
    const r = await post('/v1/events', e);
    expect(r.status).toBe(202);
    expect(r.body).toEqual({ status: 'accepted', event_id: e.event_id });
    expect(await logEnd()).toBe(before + 1);
    await expectScore(e.actor.user_id, 7);
  });

  it('accepts a signed request with 200 and the same body, in the nested and the flat shape', async () => {
    const before = await logEnd();
    const user = uid('sig');
    const nested = ev(user, 3);
    const r1 = await signed('/v1/events', nested);
    expect(r1.status).toBe(200);
    expect(r1.body).toEqual({ status: 'accepted', event_id: nested.event_id });
    const flat = {
      event_id: uid('flat'),
      event_type: 'match',
      user_id: user,
      timestamp: new Date(clock.now() - 1000).toISOString(),
      attributes: { p: 4 },
    };
    const r2 = await signed('/v1/events', flat);
    expect(r2.status).toBe(200);
    expect(r2.body).toEqual({ status: 'accepted', event_id: flat.event_id });
    // The flat shape in bulk too; its attributes are the event's attrs.
    const flat2 = { ...flat, event_id: uid('flat'), attributes: { p: 10 } };
    const r3 = await signed('/v1/events/bulk', { events: [flat2] });
    expect(r3.status).toBe(200);
    expect(r3.body).toEqual({
      status: 'accepted',
      total: 1,
      accepted: 1,
      failed: 0,
      results: [{ event_id: flat2.event_id, status: 'accepted' }],
    });
    expect(await logEnd()).toBe(before + 3);
    await expectScore(user, 17);
  });

  it('refuses the flat shape from a JWT (it is the signed variant only)', async () => {
    const r = await unchangedLog(() =>
      post('/v1/events', {
        event_id: uid('flat'),
        event_type: 'match',
        user_id: 'u',
        timestamp: new Date(clock.now()).toISOString(),
      }),
    );
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ code: 'VALIDATION_ERROR', message: 'type is required' });
  });

  it('validates bulk events one by one: partial, accepted and failed batches', async () => {
    const user = uid('bulk');
    const good1 = ev(user, 1);
    const good2 = ev(user, 2);
    const noType = { ...ev(user, 100), type: undefined };
    const future = ev(user, 100, { occurred_at: new Date(clock.now() + HOUR + 1000).toISOString() });
    const badAttrs = ev(user, 100, { attrs: [1, 2] });
    const noId = { ...ev(user, 100), event_id: undefined };
    const before = await logEnd();
    const r = await post('/v1/events/bulk', { events: [good1, noType, future, good2, badAttrs, noId] });
    expect(r.status).toBe(202);
    expect(r.body).toEqual({
      status: 'partial',
      total: 6,
      accepted: 2,
      failed: 4,
      results: [
        { event_id: good1.event_id, status: 'accepted' },
        { event_id: noType.event_id, status: 'failed', error: 'Validation failed: type is required' },
        {
          event_id: future.event_id,
          status: 'failed',
          error: 'Validation failed: occurred_at is more than 1 hour in the future',
        },
        { event_id: good2.event_id, status: 'accepted' },
        {
          event_id: badAttrs.event_id,
          status: 'failed',
          error: 'Validation failed: attrs must be an object',
        },
        { event_id: null, status: 'failed', error: 'Validation failed: event_id is required' },
      ],
    });
    expect(await logEnd()).toBe(before + 2);
    await expectScore(user, 3);

    const all = await post('/v1/events/bulk', { events: [ev(user, 5), ev(user, 6)] });
    expect(all.body).toMatchObject({ status: 'accepted', total: 2, accepted: 2, failed: 0 });
    const none = await unchangedLog(() =>
      post('/v1/events/bulk', { events: [{ ...ev(user, 1), type: '' }, 'not an event'] }),
    );
    expect(none.body).toEqual({
      status: 'failed',
      total: 2,
      accepted: 0,
      failed: 2,
      results: [
        {
          event_id: expect.any(String),
          status: 'failed',
          error: expect.stringMatching(/^Validation failed: type /),
        },
        { event_id: null, status: 'failed', error: 'Validation failed: event must be a JSON object' },
      ],
    });
    await expectScore(user, 14);
  });

  it('refuses an empty batch and one of 101 events with 400 VALIDATION_ERROR', async () => {
    for (const events of [[], Array.from({ length: 101 }, () => ev('many', 1))]) {
      const r = await unchangedLog(() => post('/v1/events/bulk', { events }));
      expect(r.status).toBe(400);
      expect(r.body.error).toMatchObject({ code: 'VALIDATION_ERROR', status: 400 });
      expect(r.body.error.message).toMatch(/^body\.events must NOT have (fewer than 1|more than 100) items$/);
    }
    for (const body of [{}, { events: 'x' }]) {
      const r = await unchangedLog(() => post('/v1/events/bulk', body));
      expect([r.status, r.body.error.code]).toEqual([400, 'VALIDATION_ERROR']);
      expect(r.body.error.message).toMatch(/body\.events/);
    }
    // 100 is the limit, not 99.
    const hundred = await post('/v1/events/bulk', {
      events: Array.from({ length: 100 }, () => ev(uid('hundred'), 1)),
    });
    expect(hundred.body).toMatchObject({ status: 'accepted', total: 100, accepted: 100 });
  });

  describe('every validation rule, single (400) and bulk (a failed result), naming the field', () => {
    const base = () => ev('val-user', 1);
    const cases: Array<[string, () => unknown, RegExp]> = [
      ['event_id missing', () => ({ ...base(), event_id: undefined }), /^event_id is required$/],
      [
        'event_id empty',
        () => ({ ...base(), event_id: '' }),
        /^event_id must NOT have fewer than 1 characters$/,
      ],
      ['event_id too long', () => ({ ...base(), event_id: 'x'.repeat(201) }), /^event_id must NOT have more/],
      ['event_id not a string', () => ({ ...base(), event_id: 42 }), /^event_id must be a string$/],
      ['event_id with NUL', () => ({ ...base(), event_id: 'a\u0000b' }), /^event_id must not contain NUL/],
      [
        'event_id lone surrogate',
        () => ({ ...base(), event_id: 'a\ud800b' }),
        /^event_id must be well-formed/,
      ],
      ['type missing', () => ({ ...base(), type: undefined }), /^type is required$/],
      ['type empty', () => ({ ...base(), type: '' }), /^type must NOT have fewer than 1 characters$/],
      ['type with NUL', () => ({ ...base(), type: 'm\u0000' }), /^type must not contain NUL/],
      ['actor missing', () => ({ ...base(), actor: undefined }), /^actor is required$/],
      ['actor not an object', () => ({ ...base(), actor: 'bob' }), /^actor must be an object$/],
      ['actor.user_id missing', () => ({ ...base(), actor: {} }), /^actor\.user_id is required$/],
      [
        'actor.user_id empty',
        () => ({ ...base(), actor: { user_id: '' } }),
        /^actor\.user_id must NOT have fewer than 1 characters$/,
      ],
      [
        'actor.user_id with NUL',
        () => ({ ...base(), actor: { user_id: 'u\u0000' } }),
        /^actor\.user_id must not contain NUL/,
      ],
      [
        'actor.metadata not an object',
        () => ({ ...base(), actor: { user_id: 'u', metadata: 3 } }),
        /^actor\.metadata must be an object$/,
      ],
      ['occurred_at missing', () => ({ ...base(), occurred_at: undefined }), /^occurred_at is required$/],
      [
        'occurred_at not a timestamp',
        () => ({ ...base(), occurred_at: 'yesterday' }),
        /^occurred_at must match format/,
      ],
      [
        'occurred_at more than 1 h ahead',
        () => ({ ...base(), occurred_at: new Date(clock.now() + HOUR + 1).toISOString() }),
        /^occurred_at is more than 1 hour in the future$/,
      ],
      ['attrs an array', () => ({ ...base(), attrs: [] }), /^attrs must be an object$/],
      ['attrs a string', () => ({ ...base(), attrs: 'p=1' }), /^attrs must be an object$/],
      ['attrs null', () => ({ ...base(), attrs: null }), /^attrs must be an object$/],
      ['subject not an object', () => ({ ...base(), subject: 'x' }), /^subject must be an object$/],
      ['not an object', () => [base()], /^event must be a JSON object$/],
    ];

    it.each(cases)('%s', async (_name, make, message) => {
      const body = make();
      const single = await unchangedLog(() => post('/v1/events', body));
      expect(single.status).toBe(400);
      expect(single.body).toEqual({
        error: { code: 'VALIDATION_ERROR', message: expect.any(String), status: 400 },
      });
      expect(single.body.error.message).toMatch(message);

      const ok = ev('val-user', 1);
      const bulk = await post('/v1/events/bulk', { events: [body, ok] });
      expect(bulk.status).toBe(202);
      expect(bulk.body).toMatchObject({ status: 'partial', total: 2, accepted: 1, failed: 1 });
      expect(bulk.body.results[1]).toEqual({ event_id: ok.event_id, status: 'accepted' });
      expect(bulk.body.results[0].status).toBe('failed');
      expect(bulk.body.results[0].error).toMatch(
        new RegExp(`^Validation failed: ${message.source.slice(1)}`),
      );
    });

    it('accepts occurred_at exactly 1 hour ahead, and optional fields when well-formed', async () => {
      const user = uid('edge');
      const r = await post('/v1/events', {
        ...ev(user, 2),
        occurred_at: new Date(clock.now() + HOUR).toISOString(),
        subject: { type: 'match', id: 'm1' },
        actor: { user_id: user, metadata: { level: 3 } },
      });
      expect(r.status).toBe(202);
      const noAttrs = await post('/v1/events', { ...ev(user, 0), attrs: undefined });
      expect(noAttrs.status).toBe(202);
      await expectScore(user, 2);
    });
  });

  it('stamps the tenant from the credential: a tenant_id in the body is overwritten', async () => {
    const user = uid('stamp');
    const single = await post('/v1/events', { ...ev(user, 5), tenant_id: other.id });
    expect(single.status).toBe(202);
    const bulk = await post('/v1/events/bulk', { events: [{ ...ev(user, 6), tenant_id: other.id }] });
    expect(bulk.body.accepted).toBe(1);
    const sig = await signed('/v1/events', { ...ev(user, 7), tenant_id: other.id });
    expect(sig.status).toBe(200);
    await expectScore(user, 18);
    // The other tenant's identical board never saw them (processed already: the sum above is final).
    expect(await score(user, otherToken)).toMatchObject({ found: false, score: 0 });
    // And the other tenant's own credential lands events in the other tenant only.
    const mine = await post('/v1/events', { ...ev(user, 1), tenant_id: tenant.id }, bearer(otherToken));
    expect(mine.status).toBe(202);
    await waitFor(async () => (await score(user, otherToken)).score === 1, {
      what: 'score in the other tenant',
    });
    expect(await score(user)).toMatchObject({ found: true, score: 18 });
  });

  it('lets an end-user token send events only for its own user', async () => {
    const me = uid('me');
    const meToken = await userToken(tenant, me);
    const foreign = await unchangedLog(() => post('/v1/events', ev(uid('someone'), 1), bearer(meToken)));
    expect(foreign.status).toBe(403);
    expect(foreign.body.error).toMatchObject({ code: 'FORBIDDEN', status: 403 });
    expect(foreign.body.error.message).toMatch(/actor\.user_id/);
    const own = await post('/v1/events', ev(me, 2), bearer(meToken));
    expect(own.status).toBe(202);
    const stranger = ev(uid('stranger'), 50);
    const ownToo = ev(me, 3);
    const bulk = await post('/v1/events/bulk', { events: [stranger, ownToo] }, bearer(meToken));
    expect(bulk.status).toBe(202);
    expect(bulk.body).toEqual({
      status: 'partial',
      total: 2,
      accepted: 1,
      failed: 1,
      results: [
        {
          event_id: stranger.event_id,
          status: 'failed',
          error: expect.stringMatching(/^Validation failed: .*own user/),
        },
        { event_id: ownToo.event_id, status: 'accepted' },
      ],
    });
    await expectScore(me, 5);
    expect(await score(stranger.actor.user_id)).toMatchObject({ found: false });
  });

  it('refuses a body over 1 MB with 413, declared or streamed, and accepts one just under', async () => {
    const big = JSON.stringify({ ...ev('big', 1), attrs: { pad: 'x'.repeat(1024 * 1024) } });
    const declared = await unchangedLog(() =>
      call('POST', `${app.url.ingest}/v1/events`, { headers: bearer(token), raw: big }),
    );
    expect(declared.status).toBe(413);
    expect(declared.body.error).toMatchObject({ code: 'PAYLOAD_TOO_LARGE', status: 413 });

    // Chunked, without a Content-Length: the limit holds while reading.
    const streamed = await unchangedLog(() => chunkedPost(`${app.url.ingest}/v1/events/bulk`, big, token));
    expect(streamed.status).toBe(413);
    expect(JSON.parse(streamed.body).error.code).toBe('PAYLOAD_TOO_LARGE');

    const user = uid('near');
    const near = JSON.stringify({ ...ev(user, 9), attrs: { p: 9, pad: 'y'.repeat(1000 * 1000) } });
    expect(Buffer.byteLength(near)).toBeLessThan(1024 * 1024);
    const ok = await call('POST', `${app.url.ingest}/v1/events`, { headers: bearer(token), raw: near });
    expect(ok.status).toBe(202);
    await expectScore(user, 9);
  });

  it('refuses malformed JSON and malformed UTF-8 with 400 VALIDATION_ERROR', async () => {
    for (const path of ['/v1/events', '/v1/events/bulk']) {
      const json = await unchangedLog(() =>
        call('POST', `${app.url.ingest}${path}`, { headers: bearer(token), raw: '{"event_id": "x",' }),
      );
      expect(json.status).toBe(400);
      expect(json.body.error).toMatchObject({ code: 'VALIDATION_ERROR', status: 400 });
      expect(json.body.error.message).toMatch(/^Malformed JSON/);

      const valid = Buffer.from(JSON.stringify(ev('utf', 1)));
      const at = valid.indexOf('utf');
      const bytes = Buffer.concat([valid.subarray(0, at), Buffer.from([0xc3, 0x28]), valid.subarray(at)]);
      const utf = await unchangedLog(() =>
        call('POST', `${app.url.ingest}${path}`, { headers: bearer(token), raw: bytes }),
      );
      expect(utf.status).toBe(400);
      expect(utf.body.error).toMatchObject({
        code: 'VALIDATION_ERROR',
        message: 'Request body is not valid UTF-8',
      });
    }
    const none = await unchangedLog(() =>
      call('POST', `${app.url.ingest}/v1/events`, { headers: bearer(token) }),
    );
    expect(none.status).toBe(400);
    expect(none.body.error.code).toBe('VALIDATION_ERROR');
  });

  it('answers signed-variant validation errors with 422 and {error, code}: VAL_001 missing, VAL_002 invalid', async () => {
    const flat = () => ({
      event_id: uid('sv'),
      event_type: 'match',
      user_id: 'sv-user',
      timestamp: new Date(clock.now()).toISOString(),
      attributes: { p: 1 },
    });
    const cases: Array<[unknown, string, RegExp]> = [
      [{ ...flat(), timestamp: undefined }, 'VAL_001', /^timestamp is required$/],
      [{ ...flat(), user_id: undefined }, 'VAL_001', /^user_id is required$/],
      [{ ...ev('sv-user', 1), type: undefined }, 'VAL_001', /^type is required$/],
      [{ ...flat(), event_type: '' }, 'VAL_002', /^event_type must NOT have fewer than 1 characters$/],
      [{ ...flat(), timestamp: 'soon' }, 'VAL_002', /^timestamp must match format/],
      [{ ...flat(), attributes: [] }, 'VAL_002', /^attributes must be an object$/],
      [
        { ...flat(), timestamp: new Date(clock.now() + 2 * HOUR).toISOString() },
        'VAL_002',
        /^timestamp is more than 1 hour in the future$/,
      ],
      [{ ...flat(), event_id: 'a\u0000' }, 'VAL_002', /^event_id must not contain NUL/],
      [{ ...flat(), user_id: 'a\u0000' }, 'VAL_002', /^user_id must not contain NUL/],
      [
        { ...ev('sv-user', 1), actor: { user_id: 'a\u0000' } },
        'VAL_002',
        /^actor\.user_id must not contain NUL/,
      ],
      [{ ...ev('sv-user', 1), attrs: 5 }, 'VAL_002', /^attrs must be an object$/],
    ];
    for (const [body, code, message] of cases) {
      const r = await unchangedLog(() => signed('/v1/events', body));
      expect([r.status, r.body.code]).toEqual([422, code]);
      expect(Object.keys(r.body).sort()).toEqual(['code', 'error']);
      expect(r.body.error).toMatch(message);
      // In bulk the same event is a failed result of a 200 answer.
      const b = await unchangedLog(() => signed('/v1/events/bulk', { events: [body] }));
      expect(b.status).toBe(200);
      expect(b.body).toMatchObject({ status: 'failed', total: 1, accepted: 0, failed: 1 });
      expect(b.body.results[0].error).toMatch(new RegExp(`^Validation failed: ${message.source.slice(1)}`));
    }
  });

  it('refuses requests without a credential and never touches the log', async () => {
    const r = await unchangedLog(() => call('POST', `${app.url.ingest}/v1/events`, { body: ev('anon', 1) }));
    expect(r.status).toBe(401);
    expect(r.body.error.code).toBe('UNAUTHORIZED');
  });
});

/** POST with Transfer-Encoding: chunked (no Content-Length). */
function chunkedPost(url: string, body: string, token: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString('utf8')));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    // The server may answer 413 and close before the whole body is written.
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EPIPE' && err.code !== 'ECONNRESET') reject(err);
    });
    const buf = Buffer.from(body);
    for (let i = 0; i < buf.length; i += 64 * 1024) req.write(buf.subarray(i, i + 64 * 1024));
    req.end();
  });
}
