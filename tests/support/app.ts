/**
 * An application started in-process on free ports, in either shape, for end-to-end tests of the
 * gateways. The distributed shape uses the real stack of tests/support/stack.ts.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SignJWT } from 'jose';
import { openApp, type OpenedApp } from '../../runtime/app';
import { loadConfig } from '../../runtime/config';
import type { AppContext } from '../../runtime/context';
import { createLogger } from '../../shared/logger';
import { startRoles, type RunningRoles } from '../../runtime/roles';
import type { Clock } from '../../core/clock';
import { removeStackState, stateOfEnv } from './cleanup';
import { checkAnswer, registerGateway, unregisterGateway } from './openapi-check';
import { stack, uniqueName } from './stack';

export type Shape = 'embedded' | 'distributed';
export const SHAPES: Shape[] = ['embedded', 'distributed'];

export interface TestApp {
  ctx: AppContext;
  /** Base URLs of the listeners: the gateways the roles run, and `ops` (runtime/ops.ts). */
  url: { ingest: string; admin: string; query: string; ops: string };
  rootKey: string;
  stop(): Promise<void>;
}

export function shapeEnv(shape: Shape): Record<string, string> {
  if (shape === 'embedded') return {};
  return {
    LUDUS_SHAPE: 'distributed',
    LUDUS_DATABASE_URL: stack.pgUrl,
    // A schema of its own: offsets, the scheduler lease and windows never mix between test apps.
    LUDUS_DATABASE_SCHEMA: uniqueName('app'),
    LUDUS_KAFKA_BROKERS: stack.kafkaBrokers.join(','),
    LUDUS_SCHEMA_REGISTRY_URL: stack.schemaRegistryUrl,
    LUDUS_REDIS_URL: stack.redisUrl,
    LUDUS_REDIS_PREFIX: `${uniqueName('app')}:`,
    LUDUS_CLICKHOUSE_URL: stack.clickhouseUrl,
    LUDUS_CLICKHOUSE_DATABASE: 'ludus_test',
    LUDUS_TOPIC_PREFIX: `${uniqueName('app')}.`,
    LUDUS_SECRET_KEY: randomBytes(32).toString('base64'),
  };
}

export async function startTestApp(
  shape: Shape,
  opts: {
    env?: Record<string, string>;
    roles?: string;
    clock?: Clock;
    /** Leave the app's topics, keys and schema on the stack at stop() (the caller removes them). */
    keepState?: boolean;
  } = {},
): Promise<TestApp> {
  const dir = mkdtempSync(join(tmpdir(), 'ludus-test-'));
  const rootKey = `ldr_${randomBytes(32).toString('base64url')}`;
  const env: Record<string, string> = {
    LUDUS_DATA_DIR: dir,
    LUDUS_HOST: '127.0.0.1',
    LUDUS_INGEST_PORT: '0',
    LUDUS_ADMIN_PORT: '0',
    LUDUS_QUERY_PORT: '0',
    LUDUS_OPS_PORT: '0',
    LUDUS_ROOT_KEY: rootKey,
    LUDUS_ROLES: opts.roles ?? 'ingest,api,processors',
    LUDUS_TENANT_CACHE_MS: '0',
    // Longer than any pause between a test's requests: a server closing an idle keep-alive
    // connection at the moment the client reuses it answers "other side closed" (a race of HTTP
    // keep-alive itself, seen under load); tests of the timeout set their own.
    LUDUS_HTTP_KEEP_ALIVE_TIMEOUT_MS: '60000',
    // No pipeline warm-up (2 s of synthetic work per app start); tests/scenario/warm-up.test.ts
    // covers it.
    LUDUS_PIPELINE_WARM_UP_MS: '0',
    LUDUS_INGEST_WARM_UP_MS: '0',
    ...shapeEnv(shape),
    ...opts.env,
  };
  const config = loadConfig(env);
  // What stop() removes from the shared stack: only names made unique for this app by shapeEnv.
  const state = shape === 'distributed' ? stateOfEnv(env) : {};
  const log = createLogger(process.env.LUDUS_TEST_LOG_LEVEL ?? 'silent');
  let app: OpenedApp | null = null;
  let running: RunningRoles | null = null;
  try {
    app = await openApp(config, log, opts.clock);
    running = await startRoles(app.ctx);
  } catch (err) {
    await app?.close();
    rmSync(dir, { recursive: true, force: true });
    await removeStackState(state);
    throw err;
  }
  const url = Object.fromEntries(running.listening.map((l) => [l.gateway, l.url])) as TestApp['url'];
  const gatewayUrls = [url.ingest, url.admin, url.query].filter((u): u is string => Boolean(u));
  gatewayUrls.forEach(registerGateway);
  return {
    ctx: app.ctx,
    url,
    rootKey,
    stop: async () => {
      gatewayUrls.forEach(unregisterGateway);
      await running!.stop();
      await app!.close();
      rmSync(dir, { recursive: true, force: true });
      // Topics, consumer groups, registry subjects, Redis keys and the Postgres schema of this app.
      if (!opts.keepState) await removeStackState(state);
    },
  };
}

/** A JSON request; returns status, headers and parsed body. */
export async function call(
  method: string,
  url: string,
  opts: { headers?: Record<string, string>; body?: unknown; raw?: string | Buffer } = {},
): Promise<{ status: number; headers: Headers; body: any }> {
  const headers: Record<string, string> = { ...opts.headers };
  let body: string | Buffer | undefined;
  if (opts.raw !== undefined) body = opts.raw;
  else if (opts.body !== undefined) body = JSON.stringify(opts.body);
  if (body !== undefined && !headers['content-type']) headers['content-type'] = 'application/json';
  const res = await fetch(url, { method, headers, body });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    /* not JSON */
  }
  // Every answer of a test app's gateway must match the OpenAPI document it serves.
  await checkAnswer(method, url, res.status, res.headers.get('content-type'), parsed, text);
  return { status: res.status, headers: res.headers, body: parsed };
}

/** Creates a tenant through the operator route; returns its id and secrets. */
export async function createTenant(app: TestApp, name = uniqueName('tenant')) {
  const r = await call('POST', `${app.url.admin}/v1/tenants`, {
    headers: { 'x-api-key': app.rootKey },
    body: { name },
  });
  if (r.status !== 201) throw new Error(`tenant create failed: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body as { id: string; name: string; jwt_secret: string; hmac_secret: string };
}

export type TenantInfo = Awaited<ReturnType<typeof createTenant>>;

/** A new tenant with an API key for it (every scope) and a tenant token: most suites start so. */
export async function tenantWithCredentials(
  app: TestApp,
): Promise<{ tenant: TenantInfo; key: string; token: string }> {
  const tenant = await createTenant(app);
  const key = (await createKey(app, [tenant.id])).key;
  return { tenant, key, token: await tenantToken(tenant) };
}

/**
 * Gives the tenant one webhook endpoint, turned off: the pipeline then records the tenant's webhook
 * events in the outbox (docs/webhooks.md "Which events are recorded"), where suites read a
 * feature's events; nothing is delivered to it.
 */
export async function keepWebhookEvents(app: TestApp, tenantId: string): Promise<void> {
  await app.ctx.adapters.sql.query(
    `INSERT INTO webhooks (id, tenant_id, url, event_types, active, secret_enc, created_at, updated_at)
     VALUES ($1, $2, 'https://example.com/ludus-tests', '{*}', false, 'unused', 0, 0)`,
    [uniqueName('wh'), tenantId],
  );
}

/** Creates an API key through the operator route. */
export async function createKey(app: TestApp, tenant_ids: string[], scopes: string[] = ['*']) {
  const r = await call('POST', `${app.url.admin}/v1/api-keys`, {
    headers: { 'x-api-key': app.rootKey },
    body: { name: uniqueName('key'), tenant_ids, scopes },
  });
  if (r.status !== 201) throw new Error(`key create failed: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body as { id: string; key: string };
}

/** An HS256 JWT with the given claims (exp in seconds from now, default 30 days: tests move injected clocks by days). */
export async function jwt(
  secret: string,
  claims: Record<string, unknown>,
  expIn = 30 * 86400,
): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT(claims)
    .setProtectedHeader({ alg: 'HS256' })
    .setIssuedAt(now)
    .setExpirationTime(now + expIn)
    .sign(new TextEncoder().encode(secret));
}

export const tenantToken = (t: { id: string; jwt_secret: string }) =>
  jwt(t.jwt_secret, { sub_type: 'tenant', sub_id: t.id });
export const userToken = (t: { id: string; jwt_secret: string }, user: string) =>
  jwt(t.jwt_secret, { sub_type: 'user', tenant_id: t.id, sub: user });
