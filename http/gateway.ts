import { randomUUID } from 'node:crypto';
import { createServer, STATUS_CODES, type Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import Koa from 'koa';
import Router from '@koa/router';
import type { Logger } from '../shared/logger';
import type { Metrics } from '../shared/metrics';
import { buildOpenApi } from './openapi';
import { mountReference } from './reference';
import { ApiError, errors } from './errors';
import { mountRoutes, type MountDeps, type RouteSpec } from './route';
import type { Gateway, GatewayName, GatewayState, ListenerName, ReadinessCheck } from './types';

export type { Gateway, GatewayName, GatewayState, ListenerName, ReadinessCheck } from './types';

const READY_TIMEOUT_MS = 2000;

/**
 * One Koa app per gateway with the shared plumbing: request ids, structured access logs,
 * the single error renderer, /health, /ready and /metrics. Feature routes go on `router`.
 */
export function createGateway(
  name: GatewayName,
  deps: {
    log: Logger;
    metrics: Metrics;
    checks: ReadinessCheck[];
    routes: RouteSpec[];
    mount: MountDeps;
    version: string;
  },
): Gateway {
  const { app, router } = createListenerApp(name, deps);
  const openapi = buildOpenApi(name, deps.routes, deps.version);
  router.get('/openapi.json', (ctx) => {
    ctx.body = openapi;
  });
  mountReference(router, `${(openapi.info as { title: string }).title} reference`);
  mountRoutes(router, name, deps.routes, deps.mount);
  return { name, app, router };
}

/**
 * The plumbing every listener shares (the three gateways and the operations listener,
 * runtime/ops.ts): request ids, structured access logs, the single error renderer, /health,
 * /ready and /metrics. Further routes go on `router`.
 */
export function createListenerApp(
  name: ListenerName,
  deps: { log: Logger; metrics: Metrics; checks: ReadinessCheck[] },
): { app: Koa<GatewayState>; router: Router<GatewayState> } {
  const app = new Koa<GatewayState>();
  app.proxy = false;
  // Errors after the response left the error renderer (a client that reset mid-response): Koa
  // would print them to stderr; they are a client's doing, so a debug line is enough.
  app.on('error', (err: NodeJS.ErrnoException) => {
    if (GONE.has(err.code ?? '')) deps.log.debug({ gateway: name, err: err.message }, 'client went away');
    else deps.log.warn({ gateway: name, err }, 'response stream error');
  });
  const router = new Router<GatewayState>();

  app.use(async (ctx, next) => {
    const started = process.hrtime.bigint();
    const incoming = ctx.get('x-request-id');
    const requestId = /^[A-Za-z0-9._:-]{1,128}$/.test(incoming) ? incoming : randomUUID();
    ctx.state = new RequestState(requestId, deps.log, name);
    ctx.set('X-Request-Id', requestId);
    try {
      await next();
      if (ctx.status === 404 && ctx.body === undefined) {
        throw errors.notFound(`No route for ${ctx.method} ${ctx.path}`);
      }
    } catch (err) {
      renderError(ctx, err);
    } finally {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const route = (ctx as unknown as { _matchedRoute?: string })._matchedRoute ?? 'unmatched';
      deps.metrics.httpRequests.inc({ gateway: name, method: ctx.method, route, status: String(ctx.status) });
      deps.metrics.httpDuration.observe({ gateway: name, method: ctx.method, route }, seconds);
      if (deps.log.isLevelEnabled('info'))
        ctx.state.log.info(
          { method: ctx.method, path: ctx.path, status: ctx.status, ms: Math.round(seconds * 1e4) / 10 },
          'request',
        );
    }
  });

  router.get('/health', (ctx) => {
    ctx.body = { status: 'healthy', gateway: name };
  });
  router.get('/ready', async (ctx) => {
    const results = await Promise.all(
      deps.checks.map(async (c) => {
        try {
          await withTimeout(c.check(), READY_TIMEOUT_MS);
          return [c.name, 'ok'] as const;
        } catch (err) {
          ctx.state.log.warn({ check: c.name, err: (err as Error).message }, 'readiness check failed');
          return [c.name, 'unavailable'] as const;
        }
      }),
    );
    const ready = results.every(([, s]) => s === 'ok');
    ctx.status = ready ? 200 : 503;
    ctx.body = { status: ready ? 'ready' : 'unavailable', ...Object.fromEntries(results) };
  });
  router.get('/metrics', async (ctx) => {
    ctx.type = deps.metrics.registry.contentType;
    ctx.body = await deps.metrics.registry.metrics();
  });

  // The router matches at request time: routes added by the caller after this are served too.
  app.use(router.routes());
  app.use(router.allowedMethods({ throw: false }));
  return { app, router };
}

/**
 * A request's state: its id, and its child logger made on first use (most requests log nothing at
 * the configured level, and a pino child costs about as much as the rest of the request's
 * plumbing). A class, not per-request accessors: a getter defined on each request's own object
 * gives every request object a shape of its own, which V8 keeps in old space and which turns
 * every property access on it megamorphic (docs/performance.md, issue 19 twelfth pass).
 */
class RequestState implements GatewayState {
  private child: Logger | undefined;
  constructor(
    readonly requestId: string,
    private readonly base: Logger,
    private readonly gateway: ListenerName,
  ) {}

  get log(): Logger {
    return (this.child ??= this.base.child({ gateway: this.gateway, request_id: this.requestId }));
  }

  set log(v: Logger) {
    this.child = v;
  }
}

/** The one error renderer: ApiError as the envelope; anything else as 500 without internals. */
export function renderError(ctx: Koa.Context, err: unknown): void {
  let apiError: ApiError;
  if (err instanceof ApiError) {
    apiError = err;
  } else if (isClientHttpError(err)) {
    // Errors thrown by body parsing and similar plumbing (koa's http-errors).
    apiError =
      err.status === 413
        ? errors.tooLarge('Request body exceeds the size limit')
        : errors.validation(err.expose ? err.message : 'Malformed request');
  } else {
    (ctx.state.log as Logger | undefined)?.error({ err }, 'unhandled error');
    apiError = errors.internal();
  }
  ctx.status = apiError.status;
  ctx.body = apiError.toBody();
}

function isClientHttpError(err: unknown): err is { status: number; expose: boolean; message: string } {
  const e = err as { status?: unknown; expose?: unknown };
  return typeof e?.status === 'number' && e.status >= 400 && e.status < 500;
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
    }),
  ]);
}

/** Limits of a listener (runtime/config.ts `http`; docs/operations.md "Limits, timeouts and caps"). */
export interface ListenLimits {
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  keepAliveTimeoutMs: number;
  /** Open connections from one client address; 0: no cap. */
  maxConnectionsPerAddress: number;
}

/** Node's own defaults, for callers (tests, tools) that pass no limits. */
export const NODE_LISTEN_LIMITS: ListenLimits = {
  headersTimeoutMs: 60_000,
  requestTimeoutMs: 300_000,
  keepAliveTimeoutMs: 5_000,
  maxConnectionsPerAddress: 0,
};

/**
 * Starts listening; resolves with the server once bound (port 0 picks a free port).
 *
 * Every emitter facing the network has a listener here, so no client can stop the process:
 * a malformed or too slow request (`clientError`) is answered 400, 408 or 431 and its socket
 * destroyed; an error of the listening socket after start-up is logged. Headers, whole requests
 * and idle keep-alive connections are cut after their timeouts, and a client address holding
 * `maxConnectionsPerAddress` connections has further ones closed at once.
 */
export function listen(
  gateway: { name: ListenerName; app: Koa<GatewayState> },
  host: string,
  port: number,
  limits: ListenLimits = NODE_LISTEN_LIMITS,
  log?: Logger,
): Promise<Server> {
  const shortest = Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs);
  const server = createServer(
    {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      keepAliveTimeout: limits.keepAliveTimeoutMs,
      // Node checks the two timeouts on this interval (default 30 s): keep it well under them.
      connectionsCheckingInterval: Math.max(25, Math.min(1000, Math.floor(shortest / 4))),
    },
    gateway.app.callback(),
  );
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => answerClientError(err, socket));
  if (limits.maxConnectionsPerAddress > 0) capPerAddress(server, limits.maxConnectionsPerAddress);
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      server.on('error', (err) => log?.error({ err, gateway: gateway.name }, 'listener error'));
      resolve(server);
    });
  });
}

/** The client went away (reset, or closed mid-request): nobody to answer. */
const GONE = new Set(['ECONNRESET', 'EPIPE', 'HPE_INVALID_EOF_STATE', 'ERR_STREAM_PREMATURE_CLOSE']);

const CLIENT_ERROR_STATUS: Record<string, number> = {
  ERR_HTTP_REQUEST_TIMEOUT: 408,
  HPE_HEADER_OVERFLOW: 431,
};

/** A request the HTTP parser refused, or one that took too long: answer it if we still can, then destroy. */
function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  const inFlight = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (GONE.has(err.code ?? '') || !socket.writable || inFlight?.headersSent) {
    socket.destroy();
    return;
  }
  const status = CLIENT_ERROR_STATUS[err.code ?? ''] ?? 400;
  const apiError =
    status === 408
      ? new ApiError(408, 'REQUEST_TIMEOUT', 'The request did not arrive in time')
      : status === 431
        ? new ApiError(431, 'VALIDATION_ERROR', 'Request headers too large')
        : errors.validation('Malformed HTTP request');
  socket.end(rawHttpResponse(apiError));
  // Ending waits for the client to read; a client that never does is dropped anyway.
  setTimeout(() => socket.destroy(), 1000).unref();
}

/** An error envelope as a whole HTTP/1.1 response, for sockets outside Koa (client errors, upgrades). */
export function rawHttpResponse(err: ApiError, headers: Record<string, string> = {}): string {
  const body = JSON.stringify(err.toBody());
  const head = Object.entries({
    'Content-Type': 'application/json',
    'Content-Length': String(Buffer.byteLength(body)),
    Connection: 'close',
    ...headers,
  })
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  return `HTTP/1.1 ${err.status} ${STATUS_CODES[err.status] ?? 'Error'}\r\n${head}\r\n${body}`;
}

/** Closes a new connection at once when its address already holds `max` open ones. */
function capPerAddress(server: Server, max: number): void {
  const open = new Map<string, number>();
  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress ?? '';
    const n = (open.get(address) ?? 0) + 1;
    if (n > max) {
      socket.destroy();
      return;
    }
    open.set(address, n);
    socket.once('close', () => {
      const left = (open.get(address) ?? 1) - 1;
      if (left <= 0) open.delete(address);
      else open.set(address, left);
    });
  });
}

/** Stops accepting connections and waits for in-flight requests (up to timeoutMs). */
export function closeServer(server: Server, timeoutMs: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      server.closeAllConnections();
      resolve();
    }, timeoutMs);
    server.close(() => {
      clearTimeout(timer);
      resolve();
    });
    server.closeIdleConnections();
  });
}
