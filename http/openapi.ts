/**
 * The OpenAPI 3.1 document of a gateway, built from its RouteSpecs and the JSON Schemas that
 * validate them and describe their answers (schemas/http/). The page that renders it is
 * http/reference.ts.
 */
import type { GatewayName } from './types';
import type { RouteSpec } from './route';
import { schemas, type SchemaSet } from './validate';

const TITLES: Record<GatewayName, string> = {
  ingest: 'Ludus Ingestion Gateway',
  admin: 'Ludus Admin Gateway',
  query: 'Ludus Query Gateway',
};

const errorEnvelope = {
  type: 'object',
  description: 'The error envelope of every gateway (docs/api.md "Errors").',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message', 'status'],
      properties: {
        code: { type: 'string', description: 'Stable code (VALIDATION_ERROR, NOT_FOUND, ...)' },
        message: { type: 'string' },
        status: { type: 'integer' },
        details: { description: 'More about the error, when there is more to say' },
      },
    },
  },
  examples: [{ error: { code: 'NOT_FOUND', message: 'Leaderboard lb_1 not found', status: 404 } }],
};

const signedError = {
  type: 'object',
  description:
    'The flat error of the signed-request variant (SPEC.md "Errors": AUTH_001..., VAL_001, VAL_002).',
  required: ['error', 'code'],
  properties: { error: { type: 'string' }, code: { type: 'string' } },
  examples: [{ error: 'Invalid signature', code: 'AUTH_001' }],
};

/** Error answers, shared by the operations as components.responses: status → name, text. */
const ERROR_RESPONSES: Record<string, { name: string; text: string }> = {
  '400': {
    name: 'BadRequest',
    text: 'Invalid input (VALIDATION_ERROR; INVALID_INPUT on leaderboard queries)',
  },
  '401': { name: 'Unauthorized', text: 'Missing or invalid credential' },
  '402': { name: 'PaymentRequired', text: 'Insufficient balance (INSUFFICIENT_BALANCE)' },
  '403': { name: 'Forbidden', text: 'The credential may not do this, or the tenant is suspended' },
  '404': { name: 'NotFound', text: 'Not found (or not visible to this credential)' },
  '409': {
    name: 'Conflict',
    text: 'Conflicts with the current state (a name in use, a reference in use, a key reused)',
  },
  '413': { name: 'PayloadTooLarge', text: "Body over the route's byte limit" },
  '422': {
    name: 'SignedInvalid',
    text: 'Signed variant: the body is invalid (VAL_001 a required field is missing, VAL_002 invalid)',
  },
  '429': { name: 'RateLimited', text: 'Rate limited: the Retry-After header says when to come back' },
  '503': { name: 'Unavailable', text: 'A dependency is unavailable; retry later' },
  '5XX': { name: 'ServerError', text: 'Unexpected error; retry later' },
};

/** The statuses whose answer on a signed route may be either error form. */
const EITHER_FORM = ['401', '403', '429'];

/** A schema id as an OpenAPI component name. */
const component = (id: string) => `#/components/schemas/${id}`;

/** The error statuses a route can answer: those of the chain for its auth and inputs, plus its own. */
function errorStatuses(r: RouteSpec): string[] {
  const out = new Set<number>([400]);
  if (r.auth.kind !== 'public') [401, 403, 429].forEach((x) => out.add(x));
  if (r.path.includes(':') || (r.auth.kind === 'admin' && r.auth.tenant !== false)) out.add(404);
  if (r.method !== 'GET') out.add(409);
  if (r.method === 'POST' || r.method === 'PUT') out.add(413);
  if (r.auth.kind === 'tenant' && r.auth.signed) out.add(422);
  for (const x of r.errors ?? []) out.add(x);
  return [...[...out].sort((a, b) => a - b).map(String), '5XX'];
}

/** The error answer of a route for a status, as a reference to a shared response (added to `shared`). */
function errorResponse(
  r: RouteSpec,
  status: string,
  shared: Record<string, unknown>,
): Record<string, unknown> {
  const signed = r.auth.kind === 'tenant' && r.auth.signed;
  const either = signed && EITHER_FORM.includes(status);
  const base = ERROR_RESPONSES[status] ?? { name: `Error${status}`, text: 'Error' };
  const name = either ? `${base.name}EitherForm` : base.name;
  if (!shared[name]) {
    const schema =
      status === '422'
        ? { $ref: component('SignedError') }
        : either
          ? { oneOf: [{ $ref: component('Error') }, { $ref: component('SignedError') }] }
          : { $ref: component('Error') };
    shared[name] = {
      description: either ? `${base.text} (the signed variant answers {error, code})` : base.text,
      ...(status === '429'
        ? { headers: { 'Retry-After': { description: 'Seconds to wait', schema: { type: 'integer' } } } }
        : {}),
      content: { 'application/json': { schema } },
    };
  }
  return { $ref: `#/components/responses/${name}` };
}

/** `{$ref: 'leaderboard'}` (a schema id) → `{$ref: '#/components/schemas/leaderboard'}`, deeply. */
function rewriteRefs(node: unknown, seen: Set<string>): unknown {
  if (Array.isArray(node)) return node.map((x) => rewriteRefs(x, seen));
  if (!node || typeof node !== 'object') return node;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(node)) {
    if (k === '$id') continue;
    if (k === '$ref' && typeof v === 'string' && !v.startsWith('#')) {
      seen.add(v);
      out[k] = component(v);
    } else out[k] = rewriteRefs(v, seen);
  }
  return out;
}

const operationId = (method: string, path: string) =>
  `${method.toLowerCase()}${path.replace(/[{}]/g, '').replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ? c.toUpperCase() : ''))}`;

function jsonContent(id: string, set: SchemaSet, used: Set<string>): Record<string, unknown> {
  used.add(id);
  const example = (set.all.get(id) as { examples?: unknown[] }).examples?.[0];
  return {
    'application/json': { schema: { $ref: component(id) }, ...(example === undefined ? {} : { example }) },
  };
}

export function buildOpenApi(
  gateway: GatewayName,
  routes: RouteSpec[],
  version: string,
): Record<string, unknown> {
  const set = schemas();
  const paths: Record<string, Record<string, unknown>> = {};
  const used = new Set<string>();
  const sharedResponses: Record<string, unknown> = {};
  const usedSchemes = new Set<string>();
  for (const r of routes.filter((x) => x.gateway === gateway)) {
    const path = r.path.replace(/:([A-Za-z_]+)/g, '{$1}');
    const parameters = new Map<string, unknown>();
    for (const m of r.path.matchAll(/:([A-Za-z_]+)/g)) {
      parameters.set(`path:${m[1]}`, { name: m[1], in: 'path', required: true, schema: { type: 'string' } });
    }
    if (r.auth.kind === 'admin' && r.auth.tenant !== false && !r.path.includes(':tenant_id')) {
      parameters.set('query:tenant_id', {
        name: 'tenant_id',
        in: 'query',
        required: r.auth.tenant === true,
        description: 'The tenant acted on (a key with access to one tenant may leave it out)',
        schema: { type: 'string' },
      });
    }
    if (r.query) {
      const q = set.all.get(r.query) as { properties?: Record<string, unknown>; required?: string[] };
      for (const [name, schema] of Object.entries(q.properties ?? {})) {
        if (parameters.has(`path:${name}`)) continue;
        parameters.set(`query:${name}`, {
          name,
          in: 'query',
          required: (q.required ?? []).includes(name),
          schema: rewriteRefs(schema, used),
        });
      }
    }
    const status = r.status ?? 200;
    const responses: Record<string, unknown> = {};
    if (status === 204) responses['204'] = { description: 'Done; no body' };
    else {
      // A route without a response schema is refused by http/openapi.test.ts (not here: it still serves).
      responses[String(status)] = {
        description: 'Success',
        ...(r.response ? { content: jsonContent(r.response, set, used) } : {}),
      };
    }
    for (const [s, id] of Object.entries(r.alsoAnswers ?? {})) {
      responses[s] = { description: 'Success (signed-request variant)', content: jsonContent(id, set, used) };
    }
    for (const s of errorStatuses(r)) responses[s] = errorResponse(r, s, sharedResponses);
    security(r).forEach((alt) => Object.keys(alt).forEach((k) => usedSchemes.add(k)));
    const op: Record<string, unknown> = {
      summary: r.summary,
      tags: [r.tag],
      operationId: operationId(r.method, path),
      parameters: [...parameters.values()],
      security: security(r),
      responses,
    };
    const bodies = r.accepts ?? (r.body ? [r.body] : []);
    if (bodies.length > 0) {
      bodies.forEach((b) => used.add(b));
      const schema =
        bodies.length === 1
          ? { $ref: component(bodies[0]!) }
          : { oneOf: bodies.map((b) => ({ $ref: component(b) })) };
      const example = (set.all.get(bodies[0]!) as { examples?: unknown[] }).examples?.[0];
      op.requestBody = {
        required: true,
        content: { 'application/json': { schema, ...(example === undefined ? {} : { example }) } },
      };
    }
    (paths[path] ??= {})[r.method.toLowerCase()] = op;
  }
  const components: Record<string, unknown> = { Error: errorEnvelope };
  if (JSON.stringify(sharedResponses).includes(component('SignedError')))
    components.SignedError = signedError;
  // Schemas reference each other by id: take in every one reached.
  const pending = [...used];
  const done = new Set<string>();
  while (pending.length > 0) {
    const id = pending.pop()!;
    if (done.has(id)) continue;
    done.add(id);
    const found = new Set<string>();
    components[id] = rewriteRefs(set.all.get(id), found);
    pending.push(...found);
  }
  return {
    openapi: '3.1.0',
    info: {
      title: TITLES[gateway],
      version,
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
      description:
        'The guides are in docs/ (docs/api.md: conventions, errors, pagination; docs/authentication.md: ' +
        'credentials). Errors use the envelope {error: {code, message, status}}; the signed-request ' +
        'variant answers {error, code}.' +
        (gateway === 'query'
          ? ' Live leaderboard updates: GET /v1/leaderboards/{leaderboard_id}/ws upgrades to a WebSocket' +
            ' (not an HTTP operation, so not listed below); its messages, close codes and limits are in' +
            ' docs/leaderboards.md, "Live updates over WebSocket".'
          : ''),
    },
    servers: [
      { url: `http://127.0.0.1:${DEFAULT_PORTS[gateway]}`, description: 'The default local address' },
    ],
    tags: [...new Set(routes.filter((x) => x.gateway === gateway).map((x) => x.tag))].map((name) => ({
      name,
      description: TAG_TEXT[name] ?? name,
    })),
    paths,
    components: {
      schemas: components,
      responses: sharedResponses,
      securitySchemes: Object.fromEntries(
        Object.entries(SECURITY_SCHEMES).filter(([name]) => usedSchemes.has(name)),
      ),
    },
  };
}

const SECURITY_SCHEMES: Record<string, unknown> = {
  apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key', description: 'An API key or the root key' },
  bearer: {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'JWT',
    description: 'API key, admin JWT, tenant JWT or end-user JWT (docs/authentication.md)',
  },
  signature: {
    type: 'apiKey',
    in: 'header',
    name: 'X-Signature',
    description: 'hmac-sha256=<hex> with X-Tenant-Id and X-Timestamp (docs/authentication.md)',
  },
};

const TAG_TEXT: Record<string, string> = {
  Auth: 'Who the credential is (whoami) and the exchange of identity-provider tokens',
  Events: 'Event ingestion: one event or a bulk batch (docs/events.md)',
  Leaderboards: "Boards, their windows and pages, a user's rank and neighbours (docs/leaderboards.md)",
  Snapshots: 'Closed windows of a board, frozen at close',
  Levels: "Level systems and a user's level progress",
  Operator: 'Tenants, API keys and dead letters (root key or operator scopes)',
  Rewards: 'Reward items, reward configurations and what users were granted',
  Wallet: 'Currencies, balances, grants and deductions, transactions, earning rules and tiers',
  Webhooks: 'Webhook subscriptions, deliveries, replays and secret rotation (docs/webhooks.md)',
};

const DEFAULT_PORTS: Record<GatewayName, number> = { ingest: 8080, admin: 8081, query: 8082 };

function security(r: RouteSpec): Array<Record<string, string[]>> {
  switch (r.auth.kind) {
    case 'public':
      return [];
    case 'root':
    case 'admin':
      return [{ apiKey: [] }, { bearer: [] }];
    case 'tenant':
      return r.auth.signed ? [{ bearer: [] }, { signature: [] }] : [{ bearer: [] }];
  }
}
