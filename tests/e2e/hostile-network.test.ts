/**
 * Hostile network clients (issue 11 items 1, 5, 10, 11), in both shapes: hand-made WebSocket frames
 * that break the protocol, sockets whose credentials go stale, one tenant or user trying to hold
 * every live socket, and connections that trickle or hoard. After each, the same process still
 * serves every gateway, scores a new event and pushes it to another live socket.
 */
import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { WebSocket } from 'ws';
import {
  call,
  createKey,
  createTenant,
  jwt,
  SHAPES,
  startTestApp,
  tenantToken,
  userToken,
  type TestApp,
} from '../support/app';
import { clearOfWindowEdge, waitFor } from '../support/wait';

const HEADERS_TIMEOUT_MS = 2500;
const REQUEST_TIMEOUT_MS = 3500;
const PER_ADDRESS = 16;
const THROTTLE_MS = 100;
const QUERY_LIMIT = 150;

type TenantInfo = Awaited<ReturnType<typeof createTenant>>;

// ---- raw sockets and frames --------------------------------------------------------------

const portOf = (url: string) => Number(new URL(url).port);

/** A TCP connection to 127.0.0.1 that records what it receives and when it closes. */
class Raw {
  buf = Buffer.alloc(0);
  closedAt: number | null = null;
  readonly openedAt = Date.now();
  readonly sock: Socket;
  constructor(port: number) {
    this.sock = connect(port, '127.0.0.1');
    this.sock.on('data', (d) => (this.buf = Buffer.concat([this.buf, d])));
    this.sock.on('close', () => (this.closedAt = Date.now()));
    this.sock.on('error', () => undefined);
  }
  get closed() {
    return this.closedAt !== null;
  }
  get text() {
    return this.buf.toString('latin1');
  }
  status(): number | null {
    const m = /^HTTP\/1\.1 (\d{3})/.exec(this.text);
    return m ? Number(m[1]) : null;
  }
  /** Frames the server sent after the 101 response. */
  frames(): Array<{ opcode: number; payload: Buffer }> {
    const start = this.buf.indexOf('\r\n\r\n');
    if (start < 0) return [];
    const out: Array<{ opcode: number; payload: Buffer }> = [];
    let i = start + 4;
    while (i + 2 <= this.buf.length) {
      const opcode = this.buf[i]! & 0x0f;
      let len = this.buf[i + 1]! & 0x7f;
      let at = i + 2;
      if (len === 126) {
        if (at + 2 > this.buf.length) break;
        len = this.buf.readUInt16BE(at);
        at += 2;
      } else if (len === 127) {
        if (at + 8 > this.buf.length) break;
        len = Number(this.buf.readBigUInt64BE(at));
        at += 8;
      }
      if (at + len > this.buf.length) break;
      out.push({ opcode, payload: this.buf.subarray(at, at + len) });
      i = at + len;
    }
    return out;
  }
  closeCode(): number | null {
    const c = this.frames().find((f) => f.opcode === 0x8);
    return c && c.payload.length >= 2 ? c.payload.readUInt16BE(0) : null;
  }
}

function upgradeRequest(path: string, token: string): string {
  return (
    `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
    `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n` +
    `Authorization: Bearer ${token}\r\n\r\n`
  );
}

/** A client frame; every field can be set wrong on purpose. */
function frame(
  opcode: number,
  payload: Buffer,
  o: { fin?: boolean; mask?: boolean; rsv?: number; declaredLength?: number } = {},
): Buffer {
  const mask = o.mask ?? true;
  const len = o.declaredLength ?? payload.length;
  const head = [((o.fin ?? true) ? 0x80 : 0) | ((o.rsv ?? 0) << 4) | opcode];
  const m = mask ? 0x80 : 0;
  let ext = Buffer.alloc(0);
  if (len < 126) head.push(m | len);
  else if (len < 65536) {
    head.push(m | 126);
    ext = Buffer.alloc(2);
    ext.writeUInt16BE(len);
  } else {
    head.push(m | 127);
    ext = Buffer.alloc(8);
    ext.writeBigUInt64BE(BigInt(len));
  }
  if (!mask) return Buffer.concat([Buffer.from(head), ext, payload]);
  const key = randomBytes(4);
  const body = Buffer.from(payload.map((b, i) => b ^ key[i % 4]!));
  return Buffer.concat([Buffer.from(head), ext, key, body]);
}

// ---- metrics -----------------------------------------------------------------------------

async function metric(app: TestApp, name: string): Promise<number> {
  const r = await call('GET', `${app.url.query}/metrics`);
  const line = (r.body as string).split('\n').find((l) => l.startsWith(`${name} `));
  return line ? Number(line.split(' ')[1]) : 0;
}

describe.each(SHAPES)('hostile network clients [%s]', (shape) => {
  let app: TestApp;
  let main: TenantInfo;
  let n = 0;

  beforeAll(async () => {
    app = await startTestApp(shape, {
      roles: shape === 'embedded' ? 'all' : 'ingest,api,processors,scheduler',
      env: {
        LUDUS_LIVE_THROTTLE_MS: String(THROTTLE_MS),
        LUDUS_LIVE_RECHECK_MS: '100',
        LUDUS_LIVE_MAX_PER_TENANT: '8',
        LUDUS_LIVE_MAX_PER_USER: '2',
        LUDUS_RATE_LIMIT_QUERY: `${QUERY_LIMIT}/m`,
        LUDUS_HTTP_HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
        LUDUS_HTTP_REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
        LUDUS_HTTP_KEEP_ALIVE_TIMEOUT_MS: '1000',
        LUDUS_HTTP_MAX_CONNECTIONS_PER_ADDRESS: String(PER_ADDRESS),
      },
    });
    main = await setUpTenant();
  });
  afterAll(() => app?.stop());

  /** A tenant with a `live` sum board. */
  async function setUpTenant(): Promise<TenantInfo> {
    const t = await createTenant(app);
    const key = (await createKey(app, [t.id])).key;
    const r = await call('POST', `${app.url.admin}/v1/leaderboards?tenant_id=${t.id}`, {
      headers: { 'x-api-key': key },
      body: {
        leaderboard_id: 'live',
        name: 'Live',
        config: {
          timeframe: { type: 'all_time' },
          scoring: { rules: [{ event_type: 'hit', points_expression: 'attrs.p' }], aggregation: 'sum' },
        },
      },
    });
    expect(r.status).toBe(201);
    return t;
  }

  const post = async (t: TenantInfo, user: string, p: number) => {
    const r = await call('POST', `${app.url.ingest}/v1/events`, {
      headers: { authorization: `Bearer ${await tenantToken(t)}` },
      body: {
        event_id: `hostile-${shape}-${++n}`,
        type: 'hit',
        actor: { user_id: user },
        occurred_at: new Date().toISOString(),
        attrs: { p },
      },
    });
    expect(r.status).toBe(202);
  };

  /** A live socket through the ws client, recording messages and how it closed. */
  function open(token: string, path = '/v1/leaderboards/live/ws') {
    const ws = new WebSocket(`${app.url.query.replace('http', 'ws')}${path}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    const s = {
      ws,
      messages: [] as any[],
      status: null as number | null,
      refusal: null as any,
      close: null as { code: number; reason: string } | null,
    };
    ws.on('message', (d) => s.messages.push(JSON.parse(d.toString())));
    ws.on('close', (code, reason) => (s.close = { code, reason: reason.toString() }));
    ws.on('unexpected-response', (_req, res) => {
      s.status = res.statusCode ?? 0;
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => {
        s.refusal = { body: JSON.parse(body), headers: res.headers };
        ws.terminate();
      });
    });
    ws.on('open', () => (s.status = 101));
    ws.on('error', () => undefined);
    return s;
  }
  const opened = (s: ReturnType<typeof open>) =>
    waitFor(() => s.messages.some((m) => m.type === 'page'), { what: 'first page' });
  const refused = (s: ReturnType<typeof open>) => waitFor(() => s.refusal, { what: 'a refusal' });

  /** Every gateway answers, the pipeline scores a new event, and a live socket is pushed it. */
  async function stillServing(watcher?: ReturnType<typeof open>) {
    for (const url of Object.values(app.url)) expect((await call('GET', `${url}/health`)).status).toBe(200);
    const w = watcher ?? open(await userToken(main, 'watcher'));
    try {
      await opened(w);
      const user = `after-${++n}`;
      await post(main, user, 7);
      await waitFor(
        () => w.messages.some((m) => m.entries?.some((e: any) => e.user_id === user && e.score === 7)),
        { what: `a push with ${user} scored`, timeoutMs: 30_000 },
      );
    } finally {
      if (!watcher) w.ws.close();
    }
  }

  it('closes the one socket that breaks the protocol and keeps the process serving', async () => {
    const watcher = open(await userToken(main, 'watcher'));
    await opened(watcher);
    const userTok = await userToken(main, 'attacker');
    const text = (b: Buffer) => frame(0x1, b);
    const cases: Array<[string, Buffer, number]> = [
      ['text frame over the size limit', text(Buffer.alloc(5000, 0x61)), 1009],
      ['invalid UTF-8', text(Buffer.from([0x7b, 0xff, 0xfe, 0x7d])), 1007],
      ['reserved opcode 0x3', frame(0x3, Buffer.from('x')), 1002],
      ['unmasked client frame', frame(0x1, Buffer.from('{}'), { mask: false }), 1002],
      ['RSV1 without an extension', frame(0x1, Buffer.from('{}'), { rsv: 4 }), 1002],
      ['RSV3 set', frame(0x1, Buffer.from('{}'), { rsv: 1 }), 1002],
      ['fragmented ping', frame(0x9, Buffer.from('x'), { fin: false }), 1002],
      ['ping over 125 bytes', frame(0x9, Buffer.alloc(200)), 1002],
      ['continuation with nothing to continue', frame(0x0, Buffer.from('x')), 1002],
      ['declared 2^62 byte frame', frame(0x2, Buffer.alloc(0), { declaredLength: 2 ** 62 }), 1009],
    ];
    for (const [what, bytes, code] of cases) {
      const raw = new Raw(portOf(app.url.query));
      raw.sock.write(upgradeRequest('/v1/leaderboards/live/ws', userTok));
      await waitFor(() => raw.status(), { what: `handshake (${what})` });
      expect(raw.status()).toBe(101);
      raw.sock.write(bytes);
      await waitFor(() => raw.closeCode() !== null || raw.closed, { what: `close (${what})` });
      expect([what, raw.closeCode()]).toEqual([what, code]);
      await waitFor(() => raw.closed, { what: `socket closed (${what})` });
    }

    // Resets at every stage: during authentication, right after the 101, and mid-body on HTTP.
    const other = await setUpTenant();
    for (let i = 0; i < 5; i++) {
      const raw = new Raw(portOf(app.url.query));
      raw.sock.write(upgradeRequest('/v1/leaderboards/live/ws', await userToken(other, `r${i}`)));
      raw.sock.resetAndDestroy();
    }
    const half = new Raw(portOf(app.url.query));
    half.sock.write(upgradeRequest('/v1/leaderboards/live/ws', userTok));
    await waitFor(() => half.status(), { what: 'handshake' });
    half.sock.write(frame(0x1, Buffer.from('{"type":"request_page","page":1}')).subarray(0, 5));
    half.sock.resetAndDestroy();
    const body = new Raw(portOf(app.url.ingest));
    body.sock.write(
      'POST /v1/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"a":',
    );
    await new Promise((r) => body.sock.write('', r));
    body.sock.resetAndDestroy();

    // Malformed HTTP on every gateway: 400 (or 431 for huge headers) with the envelope, socket closed.
    for (const url of Object.values(app.url)) {
      const bad = new Raw(portOf(url));
      bad.sock.write('GET / HTTP/1.1\r\nHost x\r\n\r\n');
      await waitFor(() => bad.closed, { what: 'malformed request closed' });
      expect(bad.status()).toBe(400);
      expect(JSON.parse(bad.text.slice(bad.text.indexOf('\r\n\r\n') + 4)).error.code).toBe(
        'VALIDATION_ERROR',
      );
      const big = new Raw(portOf(url));
      big.sock.write(`GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
      await waitFor(() => big.closed, { what: 'oversized headers closed' });
      expect(big.status()).toBe(431);
    }

    // The watcher was never disturbed and gets the next push.
    expect(watcher.close).toBeNull();
    await stillServing(watcher);
    watcher.ws.close();
  });

  it('closes a live socket at its token expiry (4401), tenant suspension (4403) and credential rotation (4409)', async () => {
    const bystander = open(await userToken(main, 'bystander'));
    await opened(bystander);

    // Expiry: a token good for two to three seconds.
    const expiring = open(
      await jwt(main.jwt_secret, { sub_type: 'user', tenant_id: main.id, sub: 'short' }, 3),
    );
    await opened(expiring);
    const c1 = await waitFor(() => expiring.close, { what: 'expiry close' });
    expect(c1).toEqual({ code: 4401, reason: 'Token expired' });

    // Suspension made in the store directly, as another process would: no in-process event.
    const s = await setUpTenant();
    const suspended = open(await userToken(s, 'u'));
    await opened(suspended);
    await app.ctx.adapters.sql.query(`UPDATE tenants SET status = 'suspended' WHERE id = $1`, [s.id]);
    const c2 = await waitFor(() => suspended.close, { what: 'suspension close' });
    expect(c2).toEqual({ code: 4403, reason: 'Tenant suspended or removed' });
    const again = open(await userToken(s, 'u'));
    expect((await refused(again)).body.error.code).toBe('FORBIDDEN');

    // Rotation through the operator route: the old secret signed the socket's token.
    const r = await setUpTenant();
    const rotating = open(await userToken(r, 'u'));
    await opened(rotating);
    const rot = await call('POST', `${app.url.admin}/v1/tenants/${r.id}/rotate-secrets`, {
      headers: { 'x-api-key': app.rootKey },
    });
    expect(rot.status).toBe(200);
    const c3 = await waitFor(() => rotating.close, { what: 'rotation close' });
    expect(c3).toEqual({ code: 4409, reason: 'Tenant credentials rotated' });
    const fresh = open(await userToken({ id: r.id, jwt_secret: rot.body.jwt_secret }, 'u'));
    await opened(fresh);
    fresh.ws.close();

    expect(bystander.close).toBeNull();
    await stillServing(bystander);
    bystander.ws.close();
  });

  it('caps live sockets per user and per tenant with a 429 before the handshake', async () => {
    const t = await setUpTenant();
    const before = await metric(app, 'ludus_live_sockets');
    const u1 = await userToken(t, 'one');
    const a = open(u1);
    const b = open(u1);
    await Promise.all([opened(a), opened(b)]);
    const c = open(u1);
    const refusal = await refused(c);
    expect(c.status).toBe(429);
    expect(refusal.body).toEqual({
      error: { code: 'RATE_LIMITED', message: 'User holds 2 live connections on this server', status: 429 },
    });
    expect(Number(refusal.headers['retry-after'])).toBeGreaterThan(0);
    expect(await metric(app, 'ludus_live_sockets')).toBe(before + 2);
    // A slot comes back when a socket closes.
    a.ws.close();
    await waitFor(
      async () => {
        const d = open(u1);
        await waitFor(() => d.status, { what: 'an answer' });
        d.ws.close();
        return d.status === 101;
      },
      { what: 'a freed slot' },
    );

    // Per tenant: 8, across users and tenant tokens; another tenant is not affected.
    const held = [b];
    for (let i = 0; i < 7; i++) held.push(open(i < 3 ? await userToken(t, `u${i}`) : await tenantToken(t)));
    await Promise.all(held.map(opened));
    const over = open(await tenantToken(t));
    expect((await refused(over)).body.error).toEqual({
      code: 'RATE_LIMITED',
      message: 'Tenant holds 8 live connections on this server',
      status: 429,
    });
    for (const h of held) h.ws.close();
    await stillServing();
  });

  it('counts upgrades and client messages in the query rate limit', async () => {
    const t = await setUpTenant();
    const tok = await tenantToken(t);
    const whoami = () =>
      call('GET', `${app.url.query}/v1/whoami`, { headers: { authorization: `Bearer ${tok}` } });
    await clearOfWindowEdge(60_000, 15_000);
    const r0 = Number((await whoami()).headers.get('x-ratelimit-remaining'));
    const a = open(tok);
    const b = open(tok);
    await Promise.all([opened(a), opened(b)]);
    a.ws.send(JSON.stringify({ type: 'request_page', page: 1 }));
    await waitFor(() => a.messages.filter((m) => m.type === 'page').length === 2, { what: 'second page' });
    // Two upgrades, one message and this request.
    expect(Number((await whoami()).headers.get('x-ratelimit-remaining'))).toBe(r0 - 4);
    // Spend the rest on HTTP; then an upgrade is refused and a message answered RATE_LIMITED.
    for (let i = 0; i < QUERY_LIMIT && (await whoami()).status !== 429; i++);
    const c = open(tok);
    const refusal = await refused(c);
    expect(c.status).toBe(429);
    expect(refusal.body.error.code).toBe('RATE_LIMITED');
    expect(Number(refusal.headers['retry-after'])).toBeGreaterThan(0);
    a.ws.send(JSON.stringify({ type: 'request_page', page: 1 }));
    await waitFor(() => a.messages.some((m) => m.type === 'error' && m.code === 'RATE_LIMITED'), {
      what: 'RATE_LIMITED message',
    });
    a.ws.close();
    b.ws.close();
    await stillServing();
  });

  it('shares one poll among the sockets that watch the same page', async () => {
    const t = await setUpTenant();
    await post(t, 'p1', 1);
    await waitFor(() => metric(app, 'ludus_live_sockets').then((v) => v === 0), { what: 'no sockets' });
    const tok = await tenantToken(t);
    const socks = Array.from({ length: 6 }, () => open(tok));
    await Promise.all(socks.map(opened));
    expect(await metric(app, 'ludus_live_pages')).toBe(1);
    expect(await metric(app, 'ludus_live_sockets')).toBe(6);
    const r0 = await metric(app, 'ludus_live_page_reads_total');
    const t0 = Date.now();
    const r1 = await waitFor(
      () => metric(app, 'ludus_live_page_reads_total').then((v) => (v >= r0 + 10 ? v : 0)),
      { what: 'ten reads' },
    );
    const intervals = (Date.now() - t0) / THROTTLE_MS;
    // One page: about one read per interval (six unshared polls would make six).
    expect(r1 - r0).toBeLessThanOrEqual(intervals + 3);
    // Every socket still gets the changes.
    await post(t, 'p2', 5);
    await waitFor(
      () => socks.every((s) => s.messages.some((m) => m.type === 'update' && m.total_entries === 2)),
      {
        what: 'an update on every socket',
      },
    );
    socks[0]!.ws.send(JSON.stringify({ type: 'request_page', page: 2 }));
    await waitFor(() => socks[0]!.messages.some((m) => m.type === 'page' && m.page === 2), {
      what: 'page 2',
    });
    expect(await metric(app, 'ludus_live_pages')).toBe(2);
    for (const s of socks) s.ws.close();
  });

  it('cuts connections that trickle headers or a body, and serves others meanwhile', async () => {
    const trickles: Array<{ raw: Raw; kind: string; timer?: NodeJS.Timeout }> = [];
    const drip = (raw: Raw, bytes: string) =>
      setInterval(() => {
        if (!raw.closed) raw.sock.write(bytes);
      }, 200);
    // Body trickles go to routes that read a body (the query gateway and the operations listener
    // have none: answered early, still cut).
    const bodyPath = { ingest: '/v1/events', admin: '/v1/tenants', query: '/v1/whoami', ops: '/metrics' };
    const readsBody = (gateway: string) => gateway === 'ingest' || gateway === 'admin';
    for (const [gateway, url] of Object.entries(app.url) as Array<[keyof typeof bodyPath, string]>) {
      expect(bodyPath[gateway]).toBeDefined();
      for (let i = 0; i < 3; i++) {
        const h = new Raw(portOf(url));
        h.sock.write('GET /health HTTP/1.1\r\nHost: x\r\n');
        trickles.push({ raw: h, kind: 'headers', timer: drip(h, 'X-A: b\r\n') });
        const b = new Raw(portOf(url));
        b.sock.write(
          `POST ${bodyPath[gateway]} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n`,
        );
        trickles.push({ raw: b, kind: readsBody(gateway) ? 'body' : 'early body', timer: drip(b, ' ') });
      }
      const silent = new Raw(portOf(url));
      trickles.push({ raw: silent, kind: 'silent' });
    }
    try {
      // A normal client is served while they trickle (a bounded loop until they are all cut).
      let served = 0;
      await waitFor(
        async () => {
          for (const url of Object.values(app.url)) {
            expect((await call('GET', `${url}/health`)).status).toBe(200);
            served++;
          }
          return trickles.every((t) => t.raw.closed);
        },
        { what: 'every trickling connection cut', timeoutMs: REQUEST_TIMEOUT_MS + 10_000, intervalMs: 200 },
      );
      expect(served).toBeGreaterThanOrEqual(3);
      for (const t of trickles) {
        const lived = t.raw.closedAt! - t.raw.openedAt;
        expect([t.kind, lived >= HEADERS_TIMEOUT_MS - 100]).toEqual([t.kind, true]);
        expect([t.kind, lived <= REQUEST_TIMEOUT_MS + 3000]).toEqual([t.kind, true]);
        if (t.kind === 'headers' || t.kind === 'body')
          expect([t.kind, t.raw.status()]).toEqual([t.kind, 408]);
      }
    } finally {
      for (const t of trickles) {
        clearInterval(t.timer);
        t.raw.sock.destroy();
      }
    }
    await stillServing();
  });

  it('closes connections over the per-address cap and serves again once they go', async () => {
    const port = portOf(app.url.ingest);
    const hoard = Array.from({ length: PER_ADDRESS + 4 }, () => new Raw(port));
    try {
      // At least 4 are closed at once (keep-alive connections of this test process may take more slots).
      await waitFor(() => hoard.filter((r) => r.closed).length >= 4, {
        what: 'connections over the cap closed',
      });
      const kept = hoard.filter((r) => !r.closed);
      expect(kept.length).toBeLessThanOrEqual(PER_ADDRESS);
      expect(kept.length).toBeGreaterThanOrEqual(PER_ADDRESS - 4);
      // The first is within the cap and a working connection.
      const first = hoard[0]!;
      first.sock.write('GET /health HTTP/1.1\r\nHost: x\r\n\r\n');
      await waitFor(() => first.status(), { what: 'an answer on a kept connection' });
      expect(first.status()).toBe(200);
      // Closed ones got no answer.
      for (const r of hoard.filter((x) => x.closed)) expect(r.buf.length).toBe(0);
      // The other gateways serve meanwhile.
      expect((await call('GET', `${app.url.query}/health`)).status).toBe(200);
      expect((await call('GET', `${app.url.admin}/health`)).status).toBe(200);
    } finally {
      for (const r of hoard) r.sock.destroy();
    }
    await waitFor(() => call('GET', `${app.url.ingest}/health`).then((r) => r.status === 200), {
      what: 'ingest serving again',
    });
    await stillServing();
  });
});
