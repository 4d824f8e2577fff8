/**
 * The OpenAPI 3.1 document of a gateway, built from its RouteSpecs and the JSON Schemas that
 * validate them and describe their answers (schemas/http/). The page that renders it is
 * api/reference.ts.
 */
import type { GatewayName } from './http/gateway';
import type { RouteSpec } from './http/route';
import { schemas, type SchemaSet } from './http/validate';

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

const ERROR_TEXT: Record<string, string> = {
  '400': 'Invalid input (VALIDATION_ERROR, or INVALID_INPUT on leaderboard queries)',
  '401': 'Missing or invalid credential',
  '403': 'The credential may not do this, or the tenant is suspended',
  '404': 'Not found (or not visible to this credential)',
  '409': 'Conflicts with the current state (a name in use, a reference in use, a key reused)',
  '413': "Body over the route's byte limit",
  '422': 'Signed variant: the body is invalid (VAL_001 missing field, VAL_002 invalid value)',
  '429': 'Rate limited (Retry-After says when to come back)',
  '503': 'A dependency is unavailable; retry later',
  '5XX': 'Unexpected error; retry later',
};

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

function errorResponse(r: RouteSpec, status: string): Record<string, unknown> {
  const signed = r.auth.kind === 'tenant' && r.auth.signed;
  const schema =
    status === '422'
      ? { $ref: component('SignedError') }
      : signed && ['401', '403', '429'].includes(status)
        ? { oneOf: [{ $ref: component('Error') }, { $ref: component('SignedError') }] }
        : { $ref: component('Error') };
  return { description: ERROR_TEXT[status] ?? 'Error', content: { 'application/json': { schema } } };
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
      // A route without a response schema is refused by api/openapi.test.ts (not here: it still serves).
      responses[String(status)] = {
        description: 'Success',
        ...(r.response ? { content: jsonContent(r.response, set, used) } : {}),
      };
    }
    for (const [s, id] of Object.entries(r.alsoAnswers ?? {})) {
      responses[s] = { description: 'Success (signed-request variant)', content: jsonContent(id, set, used) };
    }
    for (const s of errorStatuses(r)) responses[s] = errorResponse(r, s);
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
  const components: Record<string, unknown> = { Error: errorEnvelope, SignedError: signedError };
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
      { url: `http://localhost:${DEFAULT_PORTS[gateway]}`, description: 'The default local address' },
    ],
    tags: [...new Set(routes.filter((x) => x.gateway === gateway).map((x) => x.tag))].map((name) => ({
      name,
    })),
    paths,
    components: {
      schemas: components,
      securitySchemes: {
        apiKey: {
          type: 'apiKey',
          in: 'header',
          name: 'X-API-Key',
          description: 'An API key or the root key',
        },
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
      },
    },
  };
}

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
