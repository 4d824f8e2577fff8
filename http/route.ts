/**
 * Routes as data. Every feature declares its routes as RouteSpecs; one function mounts them with
 * the same explicit chain (read body, authenticate, resolve the tenant, rate limit, validate,
 * end-user check, handler, domain errors mapped to HTTP, presenter). The OpenAPI document and
 * the tenant-isolation test are built from the same list, so a new route is documented and
 * covered without more code.
 */
import type Koa from 'koa';
import type Router from '@koa/router';
import type { RateLimiter } from '../adapters/ratelimit/types';
import type { Queryable, Sql } from '../adapters/sql/types';
import type { Clock } from '../core/clock';
import type { Tenant } from '../core/tenancy/store';
import type { RateLimitSpec } from '../shared/settings';
import type { Logger } from '../shared/logger';
import { SignedRequestError, signedErrors, type Authenticator, type Principal } from './auth/authenticator';
import { parseJsonBody, readRawBody } from './body';
import { inputProblem, paramsProblem } from './input';
import { toApiError } from './domain-errors';
import { ApiError, errors } from './errors';
import { RenderedJson } from './rendered';
import type { HttpSchemas } from '../schemas/http/types';
import type { GatewayName, GatewayState } from './types';
import { schemas, validateOrThrow } from './validate';

export type Method = 'GET' | 'POST' | 'PUT' | 'DELETE';

/**
 * Who may call a route.
 * - public: anyone.
 * - root: the operator's root key only.
 * - admin: an API key or admin JWT (or the root key) with `scope`; with `tenant: true` the tenant
 *   comes from the `tenant_id` path segment or `?tenant_id` and the key must have access to it.
 * - tenant: a tenant or end-user JWT; with `signed: true` also a signed request. The tenant comes
 *   from the credential; a `tenant_id` path segment must name the same tenant.
 */
export type AuthRule =
  | { kind: 'public' }
  | { kind: 'root' }
  | { kind: 'admin'; scope: string | null; tenant: boolean | 'optional' }
  | { kind: 'tenant'; signed: boolean };

/** Whether the chain always resolves a tenant for the rule (else the request's tenant may be null). */
export function resolvesTenant(rule: AuthRule): boolean {
  return rule.kind === 'tenant' || (rule.kind === 'admin' && rule.tenant === true);
}

/**
 * The tenant of a request under an auth rule: `Tenant` where the chain always resolves one (a
 * tenant credential; an admin rule with `tenant: true`), `null` where it never does, else either.
 */
export type TenantOf<A extends AuthRule> = A extends { kind: 'tenant' } | { kind: 'admin'; tenant: true }
  ? Tenant
  : A extends { kind: 'public' } | { kind: 'root' } | { kind: 'admin'; tenant: false }
    ? null
    : Tenant | null;

/** A schema id in schemas/http/. */
export type SchemaId = keyof HttpSchemas;

/** The body a handler gets: the body schema's type (after validation), else the parsed JSON. */
export type BodyOf<S extends SchemaId | undefined> = S extends SchemaId ? HttpSchemas[S] : unknown;

/** The query a handler gets: the query schema's type (after validation), else the raw query. */
export type QueryOf<S extends SchemaId | undefined> = S extends SchemaId
  ? HttpSchemas[S]
  : Record<string, unknown>;

type ParamNames<P extends string> = P extends `${string}:${infer N}/${infer R}`
  ? N | ParamNames<`/${R}`>
  : P extends `${string}:${infer N}`
    ? N
    : never;

/** The path parameters of a Koa path: `/v1/webhooks/:webhook_id` → `{webhook_id: string}`. */
export type PathParams<P extends string> = string extends P
  ? Record<string, string>
  : { [K in ParamNames<P>]: string };

export interface RouteRequest<
  B = unknown,
  Q = Record<string, unknown>,
  T extends Tenant | null = Tenant | null,
  P = Record<string, string>,
> {
  body: B;
  query: Q;
  params: P;
  /** Raw request bytes (signatures). */
  raw: Buffer;
  principal: Principal | null;
  /** The tenant the request acts on (null for public and operator routes; see `TenantOf`). */
  tenant: T;
  log: Logger;
  requestId: string;
  ctx: Koa.ParameterizedContext<GatewayState>;
  /**
   * Where the handler runs its statements: the route's transaction when the route declares
   * `transaction: true` (everything it writes commits together, or nothing does when it throws),
   * else the pool.
   */
  q: Queryable;
}

/**
 * A route as data, as the chain, the OpenAPI document and the tests read it. Declare one with
 * `route()`, which types the handler's request from the route's schemas, auth rule and path.
 */
export interface RouteSpec {
  gateway: GatewayName;
  method: Method;
  /** Koa path, e.g. `/v1/tenants/:tenant_id/webhooks/:webhook_id`. */
  path: string;
  summary: string;
  tag: string;
  auth: AuthRule;
  /** Schema ids in schemas/http/ for the JSON body and the query string. */
  body?: SchemaId;
  query?: SchemaId;
  /** Success status; 204 sends no body. Default 200. */
  status?: number;
  /**
   * Schema id in schemas/http/ of the success body (every route but a 204 has one: the OpenAPI
   * document describes it, and the tests check every answer they receive against the document).
   */
  response?: string;
  /** Further success answers: status → schema id (the signed variant's 200 on ingestion). */
  alsoAnswers?: Record<number, string>;
  /**
   * Body schemas the handler validates itself (documented as one of them), for a route whose
   * body has several forms (ingestion: the flat event of the signed variant). Else `body`.
   */
  accepts?: string[];
  /** Error statuses beyond those the chain can answer for every route (e.g. 503). */
  errors?: number[];
  /** Bytes; default 1 MB. */
  bodyLimit?: number;
  /** Error code for an invalid query string (INVALID_INPUT on leaderboard queries). */
  queryErrorCode?: 'VALIDATION_ERROR' | 'INVALID_INPUT';
  /**
   * 'handler': the handler applies the input rule (./input.ts) to the body itself, in parts
   * (ingestion: per event, so a bad event of a bulk request is a failed result). Default: the
   * chain refuses the whole request.
   */
  bodyRule?: 'handler';
  /**
   * The handler runs in one SQL transaction (`req.q`), opened after the request is authenticated
   * and validated: it commits when the handler returns and rolls back when it throws, so a refused
   * request changes nothing. Default: no transaction (`req.q` is the pool).
   */
  transaction?: boolean;
  /** The route's handler returns the response body. */
  handler(req: RouteRequest): Promise<unknown>;
}

/** A route as `route()` takes it: the handler's request is typed from the other fields. */
export interface TypedRoute<
  A extends AuthRule,
  P extends string,
  BS extends SchemaId | undefined,
  QS extends SchemaId | undefined,
> extends Omit<RouteSpec, 'auth' | 'path' | 'body' | 'query' | 'handler'> {
  path: P;
  auth: A;
  body?: BS;
  query?: QS;
  /** Returns the response body. */
  handler: (req: RouteRequest<BodyOf<BS>, QueryOf<QS>, TenantOf<A>, PathParams<P>>) => Promise<unknown>;
}

/**
 * Declares a route whose handler gets a typed request: `body` and `query` typed from the schema
 * ids the route names (schemas/http/types.ts, as the values are after validation, defaults filled),
 * `tenant` narrowed by the auth rule (`TenantOf`), `params` from the path. The chain (mountRoutes)
 * guarantees each: it validates the body and query against those schemas, and never runs a
 * handler without the tenant its rule promises.
 */
export function route<
  const A extends AuthRule,
  const P extends string,
  BS extends SchemaId | undefined = undefined,
  QS extends SchemaId | undefined = undefined,
>(spec: TypedRoute<A, P, BS, QS>): RouteSpec {
  return spec as RouteSpec;
}

/**
 * Validates a body against a schema the handler applies itself (a route whose body has several
 * forms names them in `accepts`; a route without a body schema checks an optional body), typed.
 */
export function validated<S extends SchemaId>(id: S, data: unknown): HttpSchemas[S] {
  return validateOrThrow<HttpSchemas[S]>(id, data, 'body');
}

export interface MountDeps {
  auth: Authenticator;
  rateLimiter: RateLimiter;
  rateLimit: RateLimitSpec;
  clock: Clock;
  /** The SQL store: the pool handed to handlers, and the transactions of `transaction` routes. */
  sql: Sql;
}

/** Mounts the routes of one gateway on its router. */
export function mountRoutes(
  router: Router<GatewayState>,
  gateway: GatewayName,
  routes: RouteSpec[],
  deps: MountDeps,
): void {
  const reserved = reservedTenantIds();
  for (const spec of routes.filter((r) => r.gateway === gateway)) {
    const route = async (ctx: Koa.ParameterizedContext<GatewayState>, next: Koa.Next) => {
      const params = (ctx as unknown as { params: Record<string, string> }).params ?? {};
      // A reserved word in the tenant's place is the other route's literal segment (http/openapi.test.ts).
      if (params.tenant_id !== undefined && reserved.has(params.tenant_id)) return next();
      const signedAttempt = isSignedAttempt(ctx, spec);
      // A signed request is authenticated over its bytes before its body is judged, so a body
      // error answers in the signed variant's form (and an unsigned sender learns nothing first).
      let deferred: ApiError | null = null;
      const defer = (err: unknown) => {
        if (!signedAttempt || !(err instanceof ApiError)) throw err;
        deferred ??= err;
      };
      const raw =
        spec.method === 'GET' || spec.method === 'DELETE'
          ? Buffer.alloc(0)
          : await readRawBody(ctx, spec.bodyLimit);
      let json: unknown;
      try {
        json = parseJsonBody(ctx, raw);
      } catch (err) {
        defer(err);
      }
      // One rule for every string and free-form value, before anything reads them (./input.ts).
      const problem =
        paramsProblem(params) ??
        inputProblem(ctx.query, 'query') ??
        (spec.bodyRule === 'handler' ? null : inputProblem(json, 'body'));
      if (problem) defer(errors.validation(problem));

      let auth: { principal: Principal | null; tenant: Tenant | null };
      const anonKey = `${gateway}:anon:${ctx.ip}`;
      // An address whose failure budget is spent is refused before any credential work.
      if (spec.auth.kind !== 'public') refuseSpentAddress(ctx, spec, anonKey, deps);
      try {
        auth = await authenticate(ctx, spec, params, raw, deps);
      } catch (err) {
        // Failed credentials count against the caller's address, which also slows key guessing.
        if (spec.auth.kind !== 'public') await limit(ctx, spec, anonKey, deps, null);
        throw err;
      }
      const { principal, tenant } = auth;
      // What `TenantOf` promises the handler (authenticate() resolves it or refuses the request).
      if (tenant === null && resolvesTenant(spec.auth))
        throw new Error(`${spec.method} ${spec.path}: the auth rule resolved no tenant`);
      if (tenant) await limit(ctx, spec, `${gateway}:${tenant.id}`, deps, principal);
      if (deferred) throw deferred;

      const rawQuery: Record<string, unknown> = { ...ctx.query };
      if (spec.auth.kind === 'admin' && spec.auth.tenant !== false) delete rawQuery.tenant_id;
      if (principal?.kind === 'user') enforceOwnUser(principal.userId, params, rawQuery, json);
      if (
        spec.auth.kind === 'tenant' &&
        rawQuery.tenant_id !== undefined &&
        rawQuery.tenant_id !== tenant?.id
      ) {
        throw errors.forbidden('tenant_id names another tenant than the credential');
      }
      const query: Record<string, unknown> = spec.query
        ? validateOrThrow(spec.query, rawQuery, 'query', spec.queryErrorCode)
        : rawQuery;
      let body: unknown = json;
      if (spec.body) {
        if (body === undefined) throw errors.validation('Request body is required');
        body = validateOrThrow(spec.body, body, 'body');
      }

      ctx.status = spec.status ?? 200;
      let out: unknown;
      try {
        const request = (q: Queryable) =>
          spec.handler(new ChainRequest(body, query, params, raw, principal, tenant, ctx, q));
        out = spec.transaction ? await deps.sql.tx(request) : await request(deps.sql);
      } catch (err) {
        // A domain error the handler let through answers as ./domain-errors.ts maps it.
        throw toApiError(err);
      }
      if (ctx.status === 204) return;
      if (out instanceof RenderedJson) {
        // Serialised once for several requests (./rendered.ts): the same bytes as ctx.body = value.
        ctx.type = 'application/json';
        ctx.body = out.bytes;
      } else if (out === null) {
        // Koa treats a null body as "no content"; some answers are a JSON null (SPEC: tier view).
        ctx.type = 'application/json';
        ctx.body = 'null';
      } else ctx.body = out === undefined ? {} : out;
    };
    router.register(spec.path, [spec.method], [signedVariantErrors(spec), route]);
  }
}

/**
 * The request a handler gets. A class, so that every request has the same shape: a getter written
 * in an object literal gives each request object a shape of its own (see http/gateway.ts
 * `RequestState`), which cost the query gateway about a quarter of its CPU per request.
 */
class ChainRequest implements RouteRequest {
  constructor(
    readonly body: unknown,
    readonly query: Record<string, unknown>,
    readonly params: Record<string, string>,
    readonly raw: Buffer,
    readonly principal: Principal | null,
    readonly tenant: Tenant | null,
    readonly ctx: Koa.ParameterizedContext<GatewayState>,
    readonly q: Queryable,
  ) {}

  /** Read on use: the request's child logger is made on first access (http/gateway.ts). */
  get log(): Logger {
    return this.ctx.state.log;
  }

  get requestId(): string {
    return this.ctx.state.requestId;
  }
}

/**
 * Tenant ids no tenant may take (schemas/http/tenant.create.json `id.not.enum`): literal path
 * segments that stand where another route form has `{tenant_id}`, e.g. `/v1/wallet/balances/{currency_id}`
 * beside `/v1/wallet/{tenant_id}/balances`. The long form passes such a URL on to the short one.
 */
export function reservedTenantIds(): Set<string> {
  const schema = schemas().all.get('tenant.create') as {
    properties: { id: { not?: { enum?: string[] } } };
  };
  return new Set(schema.properties.id.not?.enum ?? []);
}

/** A request for a route that takes signed requests, carrying the signed variant's headers. */
function isSignedAttempt(ctx: Koa.Context, spec: RouteSpec): boolean {
  return (
    spec.auth.kind === 'tenant' &&
    spec.auth.signed &&
    Boolean(ctx.get('x-signature') || ctx.get('x-tenant-id'))
  );
}

/**
 * Every error of a signed request answers in the signed variant's body `{error, code}` (SPEC.md
 * "Errors"): a validation failure (malformed JSON or UTF-8, an empty or invalid body, a bad query)
 * is 422 `VAL_001` when something required is missing, else `VAL_002`; any other error keeps its
 * status and code. Unexpected errors stay the gateway's 500 INTERNAL_ERROR.
 */
function signedVariantErrors(spec: RouteSpec): Koa.Middleware<GatewayState> {
  return async (ctx, next) => {
    try {
      await next();
    } catch (err) {
      if (!(err instanceof ApiError) || err instanceof SignedRequestError || !isSignedAttempt(ctx, spec))
        throw err;
      if (err.status === 429) throw signedErrors.rateLimited();
      if (err.code === 'VALIDATION_ERROR' || err.code === 'INVALID_INPUT')
        throw signedErrors.invalid(/\bis required\b/.test(err.message) ? 'VAL_001' : 'VAL_002', err.message);
      throw new SignedRequestError(err.status, err.code, err.message);
    }
  };
}

async function authenticate(
  ctx: Koa.Context,
  spec: RouteSpec,
  params: Record<string, string>,
  raw: Buffer,
  deps: MountDeps,
): Promise<{ principal: Principal | null; tenant: Tenant | null }> {
  const rule = spec.auth;
  switch (rule.kind) {
    case 'public':
      return { principal: null, tenant: null };
    case 'root': {
      const p = await deps.auth.admin({
        apiKey: ctx.get('x-api-key'),
        authorization: ctx.get('authorization'),
      });
      if (p.kind !== 'root') throw errors.forbidden('This operator route needs the root key');
      return { principal: p, tenant: null };
    }
    case 'admin': {
      const p = await deps.auth.admin({
        apiKey: ctx.get('x-api-key'),
        authorization: ctx.get('authorization'),
      });
      if (p.kind === 'api_key' && rule.scope !== null && !hasScope(p.key.scopes, rule.scope)) {
        throw errors.forbidden(`API key lacks the scope ${rule.scope}`);
      }
      if (rule.tenant === false) return { principal: p, tenant: null };
      const tenantId = params.tenant_id ?? firstString(ctx.query.tenant_id);
      if (!tenantId && rule.tenant === 'optional') return { principal: p, tenant: null };
      if (!tenantId) throw errors.validation('tenant_id is required (path segment or ?tenant_id=)');
      if (p.kind === 'api_key' && !p.key.tenant_ids.includes('*') && !p.key.tenant_ids.includes(tenantId)) {
        throw errors.forbidden(`API key has no access to tenant ${tenantId}`);
      }
      const t = await deps.auth.tenant(tenantId);
      if (!t) throw errors.notFound(`Tenant ${tenantId} not found`);
      if (t.tenant.status !== 'active') throw errors.forbidden('Tenant is suspended');
      return { principal: p, tenant: t.tenant };
    }
    case 'tenant': {
      const signed = rule.signed && (ctx.get('x-signature') || ctx.get('x-tenant-id'));
      const out = signed
        ? await deps.auth.signed({
            method: ctx.method,
            path: ctx.path,
            query: ctx.querystring,
            tenantId: ctx.get('x-tenant-id') || undefined,
            timestamp: ctx.get('x-timestamp') || undefined,
            signature: ctx.get('x-signature') || undefined,
            raw,
          })
        : await deps.auth.token(ctx.get('authorization') || undefined);
      if (params.tenant_id !== undefined && params.tenant_id !== out.tenant.id) {
        throw errors.forbidden('The credential belongs to another tenant');
      }
      return out;
    }
  }
}

/** Scopes: `*`, `<feature>:*`, or `<feature>:read|write`; write implies read. */
export function hasScope(granted: string[], needed: string): boolean {
  const [feature] = needed.split(':');
  return granted.some(
    (g) =>
      g === '*' ||
      g === needed ||
      g === `${feature}:*` ||
      (needed.endsWith(':read') && g === `${feature}:write`),
  );
}

async function limit(
  ctx: Koa.Context,
  spec: RouteSpec,
  key: string,
  deps: MountDeps,
  principal: Principal | null,
) {
  if (deps.rateLimit.length === 0) return;
  const d = await deps.rateLimiter.hit(key, deps.rateLimit, deps.clock.now());
  ctx.set('X-RateLimit-Limit', String(d.limit));
  ctx.set('X-RateLimit-Remaining', String(d.remaining));
  ctx.set('X-RateLimit-Reset', String(Math.ceil(d.resetAt / 1000)));
  if (!d.allowed) {
    // An address over its failure budget: remembered so its next requests are refused unverified.
    if (principal === null) deps.auth.failures.refuse(key, d.resetAt, deps.clock.now());
    ctx.set('Retry-After', String(Math.max(1, Math.ceil((d.resetAt - deps.clock.now()) / 1000))));
    throw principal?.kind === 'tenant' && principal.via === 'signature' && spec.auth.kind === 'tenant'
      ? signedErrors.rateLimited()
      : errors.rateLimited(`Rate limit of ${d.limit} requests exceeded; retry after the reset`);
  }
}

/** 429 without touching the store or the limiter while the address's failure budget is spent. */
function refuseSpentAddress(ctx: Koa.Context, spec: RouteSpec, key: string, deps: MountDeps): void {
  const now = deps.clock.now();
  const until = deps.auth.failures.refusedUntil(key, now);
  if (until === null) return;
  ctx.set('X-RateLimit-Remaining', '0');
  ctx.set('X-RateLimit-Reset', String(Math.ceil(until / 1000)));
  ctx.set('Retry-After', String(Math.max(1, Math.ceil((until - now) / 1000))));
  throw spec.auth.kind === 'tenant' && spec.auth.signed && ctx.get('x-signature')
    ? signedErrors.rateLimited()
    : errors.rateLimited('Too many failed authentications from this address; retry after the reset');
}

/** An end-user token reaches only its own user: every user_id in the request must be its own. */
function enforceOwnUser(
  userId: string,
  params: Record<string, string>,
  query: Record<string, unknown>,
  body: unknown,
) {
  const named = [params.user_id, query.user_id, (body as { user_id?: unknown } | undefined)?.user_id];
  for (const u of named) {
    if (u !== undefined && u !== userId)
      throw errors.forbidden('An end-user token may only reach its own user');
  }
}

function firstString(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}
