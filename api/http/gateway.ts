import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import Koa from 'koa';
import Router from '@koa/router';
import type { Logger } from '../../runtime/logger';
import type { Metrics } from '../../runtime/metrics';
import { buildOpenApi, renderDocsPage } from '../openapi';
import { ApiError, errors } from './errors';
import { mountRoutes, type MountDeps, type RouteSpec } from './route';

export type GatewayName = 'ingest' | 'admin' | 'query';

/** A dependency a gateway needs to serve traffic; /ready answers 503 when one fails. */
export interface ReadinessCheck {
  /** Key in the /ready body, e.g. database, message_queue, rank_index. */
  name: string;
  check(): Promise<void>;
}

export interface GatewayState {
  requestId: string;
  log: Logger;
}

export interface Gateway {
  name: GatewayName;
  app: Koa<GatewayState>;
  /** Feature routers mount here. */
  router: Router<GatewayState>;
}

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
  const app = new Koa<GatewayState>();
  app.proxy = false;
  const router = new Router<GatewayState>();

  app.use(async (ctx, next) => {
    const started = process.hrtime.bigint();
    const incoming = ctx.get('x-request-id');
    ctx.state.requestId = /^[A-Za-z0-9._:-]{1,128}$/.test(incoming) ? incoming : randomUUID();
    ctx.state.log = deps.log.child({ gateway: name, request_id: ctx.state.requestId });
    ctx.set('X-Request-Id', ctx.state.requestId);
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

  const openapi = buildOpenApi(name, deps.routes, deps.version);
  router.get('/openapi.json', (ctx) => {
    ctx.body = openapi;
  });
  const docsPage = renderDocsPage(openapi);
  router.get('/docs', (ctx) => {
    ctx.type = 'html';
    ctx.body = docsPage;
  });
  mountRoutes(router, name, deps.routes, deps.mount);

  app.use(router.routes());
  app.use(router.allowedMethods({ throw: false }));
  return { name, app, router };
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

/** Starts listening; resolves with the server once bound (port 0 picks a free port). */
export function listen(gateway: Gateway, host: string, port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = gateway.app.listen(port, host);
    server.once('listening', () => resolve(server));
    server.once('error', reject);
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
