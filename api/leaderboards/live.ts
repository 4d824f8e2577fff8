/**
 * Live leaderboard updates over WebSocket: `GET /v1/leaderboards/{leaderboard_id}/ws` on the query
 * gateway (protocol, caps and close codes in docs/leaderboards.md "Live updates over WebSocket").
 * The JWT comes on the upgrade request (`Authorization: Bearer`, or `?access_token=` for browsers,
 * which cannot set headers).
 *
 * On connect the server sends the first page; then, at most once per `throttleMs`, it re-reads the
 * page and sends it when it changed. Sockets watching the same page (tenant, board and version,
 * window, page, page size) share one poll: one read per interval per distinct page, fanned out.
 * Reading the shared rank index (not listening to one process's pipeline) makes this work with any
 * number of processor and API instances.
 *
 * No client can stop the process: the raw upgrade socket has an error listener from the first
 * moment, and each WebSocket has one, so a protocol violation (oversize 1009, invalid UTF-8 1007,
 * bad opcode, unmasked frame or RSV bits 1002) closes that socket alone with ws's close code.
 *
 * Credentials are re-checked while a socket is open: it is closed at its token's `exp` (4401), when
 * its tenant is suspended or removed (4403), and when the secret that signed its token is rotated,
 * or for identity-provider tokens the provider settings change (4409). Tenants are re-read every
 * `recheckMs` (one read per tenant with open sockets), so a change made by another process counts.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import { Counter, Gauge, type Registry } from 'prom-client';
import { WebSocket, WebSocketServer, type RawData } from 'ws';
import type { RateLimiter } from '../../adapters/ratelimit/types';
import type { Sql } from '../../adapters/sql/types';
import { inputProblem } from '../../http/input';
import type { Clock } from '../../core/clock';
import type { Leaderboard } from '../../core/leaderboards/definition';
import { LeaderboardQueries, WindowNotFound } from '../../core/leaderboards/queries';
import { getBoard } from '../../core/leaderboards/store';
import type { Tenant, TenantSecrets } from '../../core/tenancy/store';
import type { RateLimitSpec } from '../../shared/settings';
import type { Logger } from '../../shared/logger';
import type { Authenticator } from '../../http/auth/authenticator';
import { ApiError, errors } from '../../http/errors';
import { rawHttpResponse } from '../../http/gateway';
import { groupBy } from '../../shared/group-by';

export interface LiveOptions {
  throttleMs: number;
  pingMs: number;
  /** How often the tenants of open sockets are re-read (suspension, rotation). */
  recheckMs: number;
  defaultPageSize: number;
  maxPageSize: number;
  /** Open sockets per process: in all, per tenant, per end user. */
  maxConnections: number;
  maxPerTenant: number;
  maxPerUser: number;
}

export const LIVE_DEFAULTS: LiveOptions = {
  throttleMs: 1000,
  pingMs: 30_000,
  recheckMs: 2000,
  defaultPageSize: 100,
  maxPageSize: 1000,
  maxConnections: 10_000,
  maxPerTenant: 1000,
  maxPerUser: 5,
};

/** Application close codes (docs/leaderboards.md); protocol violations use ws's 1002, 1007, 1009. */
export const LIVE_CLOSE = {
  tokenExpired: { code: 4401, reason: 'Token expired' },
  tenantSuspended: { code: 4403, reason: 'Tenant suspended or removed' },
  credentialsRotated: { code: 4409, reason: 'Tenant credentials rotated' },
  tooManyMessages: { code: 1008, reason: 'Too many messages in flight' },
} as const;
type CloseReason = (typeof LIVE_CLOSE)[keyof typeof LIVE_CLOSE];

/** Client messages awaiting an answer on one socket before it is closed (1008). */
const MAX_IN_FLIGHT = 16;
/** Pushes are skipped while a slow reader has this much unsent (the next change catches it up). */
const MAX_BUFFERED_BYTES = 1 << 20;
/** setTimeout's longest delay; later expiries are caught by the periodic re-check. */
const MAX_TIMER_MS = 2 ** 31 - 1;

const PATH = /^\/v1\/leaderboards\/([A-Za-z0-9_.-]{1,64})\/ws$/;

interface View {
  page: number;
  pageSize: number;
  windowKey: string | undefined;
}

interface Conn {
  ws: WebSocket;
  tenantId: string;
  board: Leaderboard;
  view: View;
  token: string;
  /** HS256: signed with the tenant's secret; otherwise the identity provider's settings it was verified with. */
  hs256: boolean;
  idp: string;
  /** Token expiry, Unix ms, or null. */
  exp: number | null;
  group: PageGroup | null;
  lastSent: string;
  inFlight: number;
  queue: Promise<void>;
  closing: boolean;
  timers: NodeJS.Timeout[];
}

/** One read of a page: both messages rendered once and sent to every watcher. */
type Reading =
  | { at: number; kind: 'page'; json: string; page: string; update: string }
  | { at: number; kind: 'error'; json: string; message: string };

interface PageGroup {
  key: string;
  board: Leaderboard;
  view: View;
  members: Set<Conn>;
  /** Members owed a full `page` message (just joined or reconfigured). */
  waiting: Set<Conn>;
  last: Reading | null;
  reading: boolean;
  timer: NodeJS.Timeout;
}

export interface LiveDeps {
  sql: Sql;
  queries: LeaderboardQueries;
  auth: Authenticator;
  log: Logger;
  clock: Clock;
  /** The query gateway's limiter and limits: an upgrade and each client message count as a request. */
  rateLimiter: RateLimiter;
  rateLimit: RateLimitSpec;
  /** Where the live metrics are registered (optional). */
  registry?: Registry;
}

export function attachLiveLeaderboards(
  server: Server,
  deps: LiveDeps,
  opts: LiveOptions = LIVE_DEFAULTS,
): { close(): void } {
  const wss = new WebSocketServer({ noServer: true, maxPayload: 4096 });
  wss.on('error', (err) => deps.log.warn({ err }, 'live WebSocket server error'));
  const conns = new Set<Conn>();
  const groups = new Map<string, PageGroup>();
  /** Reserved or open sockets: in all, per tenant, per tenant and user. */
  let total = 0;
  const perTenant = new Map<string, number>();
  const perUser = new Map<string, number>();
  const metrics = liveMetrics(deps.registry, () => ({ sockets: conns.size, pages: groups.size }));

  const bump = (m: Map<string, number>, key: string, by: number) => {
    const n = (m.get(key) ?? 0) + by;
    if (n <= 0) m.delete(key);
    else m.set(key, n);
  };

  const refuse = (socket: Duplex, err: ApiError, headers: Record<string, string> = {}) => {
    metrics.refused.inc({ status: String(err.status) });
    if (!socket.writable) return void socket.destroy();
    socket.end(rawHttpResponse(err, headers));
    setTimeout(() => socket.destroy(), 1000).unref();
  };

  /** A hit on the query gateway's limiter; null when allowed, else the 429 and its headers. */
  const overLimit = async (key: string): Promise<[ApiError, Record<string, string>] | null> => {
    if (deps.rateLimit.length === 0) return null;
    const now = deps.clock.now();
    const d = await deps.rateLimiter.hit(key, deps.rateLimit, now);
    if (d.allowed) return null;
    return [
      errors.rateLimited(`Rate limit of ${d.limit} requests exceeded; retry after the reset`),
      {
        'Retry-After': String(Math.max(1, Math.ceil((d.resetAt - now) / 1000))),
        'X-RateLimit-Limit': String(d.limit),
        'X-RateLimit-Remaining': String(d.remaining),
        'X-RateLimit-Reset': String(Math.ceil(d.resetAt / 1000)),
      },
    ];
  };

  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    // Node removes its own listener on upgrade: without this a reset during authentication is fatal.
    socket.on('error', (err) => deps.log.debug({ err: err.message }, 'live upgrade socket error'));
    upgrade(req, socket, head).catch((err) => {
      deps.log.error({ err }, 'live upgrade failed');
      refuse(socket, errors.internal());
    });
  });

  async function upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const m = PATH.exec(url.pathname);
    if (!m) return refuse(socket, errors.notFound('No WebSocket route here'));
    const full = () =>
      refuse(socket, errors.unavailable('Too many live connections on this server; retry later'), {
        'Retry-After': '5',
      });
    if (total >= opts.maxConnections) return full();
    const fromQuery = url.searchParams.get('access_token');
    const authorization = req.headers.authorization ?? (fromQuery ? `Bearer ${fromQuery}` : undefined);
    let auth: Awaited<ReturnType<Authenticator['token']>>;
    try {
      auth = await deps.auth.token(authorization);
    } catch (err) {
      // Failed credentials count against the caller's address, as on the routes.
      const limited = await overLimit(`query:anon:${(socket as Socket).remoteAddress ?? ''}`);
      if (limited) return refuse(socket, ...limited);
      return refuse(socket, err instanceof ApiError ? err : errors.unauthorized('Invalid credential'));
    }
    const { principal, tenant } = auth;
    const limited = await overLimit(`query:${tenant.id}`);
    if (limited) return refuse(socket, ...limited);
    const userKey = principal.kind === 'user' ? `${tenant.id}\u0000${principal.userId}` : null;
    if ((perTenant.get(tenant.id) ?? 0) >= opts.maxPerTenant) {
      return refuse(
        socket,
        errors.rateLimited(`Tenant holds ${opts.maxPerTenant} live connections on this server`),
        { 'Retry-After': '5' },
      );
    }
    if (userKey && (perUser.get(userKey) ?? 0) >= opts.maxPerUser) {
      return refuse(
        socket,
        errors.rateLimited(`User holds ${opts.maxPerUser} live connections on this server`),
        { 'Retry-After': '5' },
      );
    }
    if (total >= opts.maxConnections) return full();
    if (socket.destroyed) return;
    // Reserved now (the board read below is asynchronous); released when the TCP socket closes,
    // whether the handshake completes or not.
    total++;
    bump(perTenant, tenant.id, 1);
    if (userKey) bump(perUser, userKey, 1);
    socket.once('close', () => {
      total--;
      bump(perTenant, tenant.id, -1);
      if (userKey) bump(perUser, userKey, -1);
    });
    const board = await getBoard(deps.sql, tenant.id, m[1]!);
    if (!board) return refuse(socket, errors.notFound(`Leaderboard ${m[1]} not found`));
    if (socket.destroyed) return;
    const token = authorization!.replace(/^Bearer\s+/i, '').trim();
    const exp = decodeJwt(token).exp;
    wss.handleUpgrade(req, socket, head, (ws) =>
      serve({
        ws,
        tenantId: tenant.id,
        board,
        view: { page: 1, pageSize: opts.defaultPageSize, windowKey: undefined },
        token,
        hs256: decodeProtectedHeader(token).alg === 'HS256',
        idp: idpFingerprint(tenant),
        exp: typeof exp === 'number' ? exp * 1000 : null,
        group: null,
        lastSent: '',
        inFlight: 0,
        queue: Promise.resolve(),
        closing: false,
        timers: [],
      }),
    );
  }

  function send(c: Conn, text: string): boolean {
    if (c.closing || c.ws.readyState !== WebSocket.OPEN) return false;
    if (c.ws.bufferedAmount > MAX_BUFFERED_BYTES) return false;
    c.ws.send(text);
    return true;
  }

  function deliver(c: Conn, r: Reading, full: boolean): void {
    if (!full && r.json === c.lastSent) return;
    const text = r.kind === 'page' ? (full ? r.page : r.update) : r.message;
    if (send(c, text)) c.lastSent = r.json;
  }

  async function read(g: PageGroup): Promise<void> {
    if (g.reading) return;
    g.reading = true;
    let r: Reading;
    try {
      metrics.reads.inc();
      const w = await deps.queries.resolve(g.board, g.view.windowKey);
      const p = await deps.queries.page(g.board, w, (g.view.page - 1) * g.view.pageSize, g.view.pageSize);
      const body = {
        leaderboard_id: g.board.leaderboard_id,
        window_key: w.key.window_key,
        window_status: w.source === 'closed' ? 'completed' : 'live',
        page: g.view.page,
        page_size: g.view.pageSize,
        total_entries: p.total,
        entries: p.entries,
      };
      r = {
        at: Date.now(),
        kind: 'page',
        json: JSON.stringify(body),
        page: JSON.stringify({ type: 'page', ...body }),
        update: JSON.stringify({ type: 'update', ...body }),
      };
    } catch (err) {
      const msg =
        err instanceof WindowNotFound
          ? { type: 'error', code: 'NOT_FOUND', message: err.message }
          : { type: 'error', code: 'INTERNAL_ERROR', message: 'Could not read the leaderboard; retrying' };
      if (!(err instanceof WindowNotFound)) deps.log.warn({ err }, 'live page read failed');
      const message = JSON.stringify(msg);
      r = { at: Date.now(), kind: 'error', json: message, message };
    } finally {
      g.reading = false;
    }
    g.last = r;
    const owed = new Set(g.waiting);
    g.waiting.clear();
    for (const c of g.members) deliver(c, r, owed.has(c));
  }

  function leaveGroup(c: Conn): void {
    const g = c.group;
    if (!g) return;
    c.group = null;
    g.members.delete(c);
    g.waiting.delete(c);
    if (g.members.size === 0) {
      clearInterval(g.timer);
      groups.delete(g.key);
    }
  }

  /** Puts a socket on the poll of its view's page and owes it a full page. */
  function joinGroup(c: Conn): void {
    leaveGroup(c);
    if (c.closing) return;
    const key = [
      c.tenantId,
      c.board.leaderboard_id,
      c.board.version,
      c.view.windowKey ?? '',
      c.view.page,
      c.view.pageSize,
    ].join('\u0000');
    let g = groups.get(key);
    if (!g) {
      const created: PageGroup = {
        key,
        board: c.board,
        view: { ...c.view },
        members: new Set(),
        waiting: new Set(),
        last: null,
        reading: false,
        timer: setInterval(() => void read(created), opts.throttleMs),
      };
      groups.set(key, created);
      g = created;
    }
    g.members.add(c);
    c.group = g;
    if (g.last && Date.now() - g.last.at < opts.throttleMs) deliver(c, g.last, true);
    else {
      g.waiting.add(c);
      void read(g);
    }
  }

  function closeConn(c: Conn, why: CloseReason): void {
    if (c.closing) return;
    metrics.closed.inc({ code: String(why.code) });
    leaveGroup(c);
    c.closing = true;
    c.ws.close(why.code, why.reason);
  }

  function serve(c: Conn): void {
    const { ws } = c;
    conns.add(c);
    // ws closes the socket with 1002, 1007 or 1009 on a protocol violation and then emits this.
    ws.on('error', (err: Error & { code?: string }) => {
      metrics.closed.inc({ code: 'protocol' });
      deps.log.debug({ err: err.message, code: err.code }, 'live socket protocol error');
    });
    let alive = true;
    c.timers.push(
      setInterval(() => {
        if (!alive) return ws.terminate();
        alive = false;
        ws.ping();
      }, opts.pingMs),
    );
    if (c.exp !== null) {
      const ms = c.exp - deps.clock.now();
      if (ms < MAX_TIMER_MS)
        c.timers.push(setTimeout(() => closeConn(c, LIVE_CLOSE.tokenExpired), Math.max(0, ms)));
    }
    ws.on('pong', () => (alive = true));
    ws.on('close', () => {
      for (const t of c.timers) clearTimeout(t);
      leaveGroup(c);
      conns.delete(c);
    });
    ws.on('message', (data: RawData) => {
      if (c.inFlight >= MAX_IN_FLIGHT) return closeConn(c, LIVE_CLOSE.tooManyMessages);
      c.inFlight++;
      c.queue = c.queue
        .then(() => onMessage(c, data))
        .catch((err) => deps.log.warn({ err }, 'live message failed'))
        .finally(() => c.inFlight--);
    });
    joinGroup(c);
  }

  async function onMessage(c: Conn, data: RawData): Promise<void> {
    if (c.closing) return;
    const error = (code: string, message: string) =>
      send(c, JSON.stringify({ type: 'error', code, message }));
    const limited = await overLimit(`query:${c.tenantId}`);
    if (limited) return void error('RATE_LIMITED', limited[0].message);
    const msg = parseMessage(data.toString(), opts);
    if ('error' in msg) return void error('VALIDATION_ERROR', msg.error);
    if (msg.type === 'configure') {
      if (msg.page !== undefined) c.view.page = msg.page;
      if (msg.page_size !== undefined) c.view.pageSize = msg.page_size;
      if (msg.window_key !== undefined)
        c.view.windowKey = msg.window_key === null ? undefined : msg.window_key;
    } else {
      c.view.page = msg.page;
      if (msg.page_size !== undefined) c.view.pageSize = msg.page_size;
    }
    joinGroup(c);
  }

  /** Why a socket must close now, given its tenant as stored (null: removed), or null. */
  function revoked(c: Conn, t: TenantSecrets | null, now: number): CloseReason | null {
    if (c.exp !== null && now >= c.exp) return LIVE_CLOSE.tokenExpired;
    if (!t || t.tenant.status !== 'active') return LIVE_CLOSE.tenantSuspended;
    if (c.hs256 ? !signedWith(c.token, t.jwtSecret) : idpFingerprint(t.tenant) !== c.idp)
      return LIVE_CLOSE.credentialsRotated;
    return null;
  }

  let rechecking = false;
  const recheck = setInterval(() => {
    if (rechecking || conns.size === 0) return;
    rechecking = true;
    void (async () => {
      const byTenant = groupBy(
        [...conns].filter((c) => !c.closing),
        (c) => c.tenantId,
      );
      for (const [tenantId, list] of byTenant) {
        let t: TenantSecrets | null;
        try {
          t = await deps.auth.tenant(tenantId);
        } catch (err) {
          // The store is unreachable: keep the sockets; the next round checks again.
          deps.log.warn({ err, tenant_id: tenantId }, 'live credential re-check failed');
          continue;
        }
        const now = deps.clock.now();
        for (const c of list) {
          const why = revoked(c, t, now);
          if (why) closeConn(c, why);
        }
      }
    })().finally(() => (rechecking = false));
  }, opts.recheckMs);

  return {
    close() {
      clearInterval(recheck);
      for (const g of groups.values()) clearInterval(g.timer);
      groups.clear();
      for (const c of conns) for (const t of c.timers) clearTimeout(t);
      for (const c of wss.clients) c.terminate();
      wss.close();
    },
  };
}

/** True when the HS256 token's signature is made with this secret. */
function signedWith(token: string, secret: string): boolean {
  const [h, p, sig] = token.split('.');
  const mac = createHmac('sha256', secret).update(`${h}.${p}`).digest();
  const given = Buffer.from(sig ?? '', 'base64url');
  return given.length === mac.length && timingSafeEqual(given, mac);
}

function idpFingerprint(t: Tenant): string {
  return createHash('sha256').update(JSON.stringify(t.idp)).digest('base64url');
}

function liveMetrics(registry: Registry | undefined, state: () => { sockets: number; pages: number }) {
  const registers = registry ? [registry] : [];
  new Gauge({
    name: 'ludus_live_sockets',
    help: 'Open live leaderboard WebSockets in this process',
    registers,
    collect() {
      this.set(state().sockets);
    },
  });
  new Gauge({
    name: 'ludus_live_pages',
    help: 'Distinct pages watched by live sockets (one shared poll each)',
    registers,
    collect() {
      this.set(state().pages);
    },
  });
  return {
    reads: new Counter({
      name: 'ludus_live_page_reads_total',
      help: 'Page reads made by live polls (one per distinct page per interval, plus joins)',
      registers,
    }),
    refused: new Counter({
      name: 'ludus_live_upgrades_refused_total',
      help: 'Live WebSocket upgrades refused, by HTTP status',
      labelNames: ['status'],
      registers,
    }),
    closed: new Counter({
      name: 'ludus_live_closed_total',
      help: 'Live sockets closed by the server, by close code (protocol: a protocol violation)',
      labelNames: ['code'],
      registers,
    }),
  };
}

type ClientMessage =
  | { type: 'configure'; page?: number; page_size?: number; window_key?: string | null }
  | { type: 'request_page'; page: number; page_size?: number };

/** Validates a client message; unknown types and fields are errors that say what is wrong. */
export function parseMessage(text: string, opts: LiveOptions): ClientMessage | { error: string } {
  let m: Record<string, unknown>;
  try {
    m = JSON.parse(text) as Record<string, unknown>;
  } catch {
    return { error: 'message must be JSON' };
  }
  if (typeof m !== 'object' || m === null || Array.isArray(m))
    return { error: 'message must be a JSON object' };
  const allowed =
    m.type === 'configure'
      ? ['type', 'page', 'page_size', 'window_key']
      : m.type === 'request_page'
        ? ['type', 'page', 'page_size']
        : null;
  if (!allowed) return { error: 'type must be "configure" or "request_page"' };
  const extra = Object.keys(m).find((k) => !allowed.includes(k));
  if (extra) return { error: `${extra} is not allowed` };
  const bad = inputProblem(m, 'message');
  if (bad) return { error: bad };
  const pos = (k: string, max: number) =>
    m[k] === undefined || (Number.isInteger(m[k]) && (m[k] as number) >= 1 && (m[k] as number) <= max);
  if (!pos('page', 100_000)) return { error: 'page must be an integer from 1' };
  if (!pos('page_size', opts.maxPageSize))
    return { error: `page_size must be an integer from 1 to ${opts.maxPageSize}` };
  if (m.type === 'request_page' && m.page === undefined) return { error: 'page is required' };
  if (
    m.window_key !== undefined &&
    m.window_key !== null &&
    (typeof m.window_key !== 'string' || m.window_key.length > 64)
  ) {
    return { error: 'window_key must be a string of at most 64 characters, or null' };
  }
  return m as ClientMessage;
}
