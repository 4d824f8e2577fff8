/**
 * The OpenAPI 3.1 document of a gateway, built from its RouteSpecs and the JSON Schemas that
 * validate them (schemas/http/), and a small self-contained HTML reference rendered from it.
 */
import type { GatewayName } from './http/gateway';
import type { RouteSpec } from './http/route';
import { schemas } from './http/validate';

const TITLES: Record<GatewayName, string> = {
  ingest: 'Ludus Ingestion Gateway',
  admin: 'Ludus Admin Gateway',
  query: 'Ludus Query Gateway',
};

const errorEnvelope = {
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message', 'status'],
      properties: { code: { type: 'string' }, message: { type: 'string' }, status: { type: 'integer' } },
    },
  },
};

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
    const params = [...r.path.matchAll(/:([A-Za-z_]+)/g)].map((m) => ({
      name: m[1],
      in: 'path',
      required: true,
      schema: { type: 'string' },
    }));
    const queryParams: unknown[] = [];
    if (r.auth.kind === 'admin' && r.auth.tenant !== false && !r.path.includes(':tenant_id')) {
      queryParams.push({
        name: 'tenant_id',
        in: 'query',
        required: r.auth.tenant === true,
        schema: { type: 'string' },
      });
    }
    if (r.query) {
      const q = set.all.get(r.query) as { properties?: Record<string, unknown>; required?: string[] };
      for (const [name, schema] of Object.entries(q.properties ?? {})) {
        queryParams.push({ name, in: 'query', required: (q.required ?? []).includes(name), schema });
      }
    }
    const op: Record<string, unknown> = {
      summary: r.summary,
      tags: [r.tag],
      operationId: `${r.method.toLowerCase()}${path.replace(/[{}]/g, '').replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ? c.toUpperCase() : ''))}`,
      parameters: [...params, ...queryParams],
      security: security(r),
      responses: {
        [String(r.status ?? 200)]: { description: r.status === 204 ? 'No content' : 'Success' },
        default: {
          description: 'Error',
          content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
        },
      },
    };
    if (r.body) {
      used.add(r.body);
      op.requestBody = {
        required: true,
        content: { 'application/json': { schema: { $ref: `#/components/schemas/${r.body}` } } },
      };
    }
    (paths[path] ??= {})[r.method.toLowerCase()] = op;
  }
  const components: Record<string, unknown> = { Error: errorEnvelope };
  for (const id of used) {
    const { $id: _id, ...schema } = set.all.get(id) as { $id: string };
    components[id] = schema;
  }
  return {
    openapi: '3.1.0',
    info: {
      title: TITLES[gateway],
      version,
      description:
        'See docs/ for guides. Errors use the envelope {error: {code, message, status}}.' +
        (gateway === 'query'
          ? ' Live leaderboard updates: GET /v1/leaderboards/{leaderboard_id}/ws upgrades to a WebSocket' +
            ' (not an HTTP operation, so not listed below); its messages, close codes and limits are in' +
            ' docs/leaderboards.md, "Live updates over WebSocket".'
          : ''),
    },
    paths,
    components: {
      schemas: components,
      securitySchemes: {
        apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
        bearer: {
          type: 'http',
          scheme: 'bearer',
          description: 'API key, admin JWT, tenant JWT or end-user JWT',
        },
        signature: {
          type: 'apiKey',
          in: 'header',
          name: 'X-Signature',
          description: 'hmac-sha256=<hex> with X-Tenant-Id and X-Timestamp',
        },
      },
    },
  };
}

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

const esc = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** A dependency-free HTML page listing every operation with its schema. */
export function renderDocsPage(doc: Record<string, unknown>): string {
  const info = doc.info as { title: string; version: string };
  const paths = doc.paths as Record<
    string,
    Record<
      string,
      {
        summary: string;
        tags: string[];
        requestBody?: unknown;
        parameters: Array<{ name: string; in: string; required: boolean }>;
      }
    >
  >;
  const comps = (doc.components as { schemas: Record<string, unknown> }).schemas;
  const rows: string[] = [];
  for (const [path, ops] of Object.entries(paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const params = op.parameters
        .map((p) => `<code>${esc(p.name)}</code> (${p.in}${p.required ? ', required' : ''})`)
        .join(', ');
      const ref = (op.requestBody as { content?: Record<string, { schema: { $ref: string } }> } | undefined)
        ?.content?.['application/json']?.schema.$ref;
      const body = ref
        ? `<details><summary>Body schema</summary><pre>${esc(JSON.stringify(comps[ref.split('/').pop()!], null, 2))}</pre></details>`
        : '';
      rows.push(
        `<section><h3><span class="m ${method}">${method.toUpperCase()}</span> <code>${esc(path)}</code></h3><p>${esc(op.summary)} <em>[${esc(op.tags.join(', '))}]</em></p>${params ? `<p>Parameters: ${params}</p>` : ''}${body}</section>`,
      );
    }
  }
  return `<!doctype html><html><head><meta charset="utf-8"><title>${esc(info.title)}</title>
<style>body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
section{border-top:1px solid #ddd;padding:.5rem 0}.m{display:inline-block;min-width:4.5rem;font-weight:bold}
.get{color:#0a6}.post{color:#06c}.put{color:#a60}.delete{color:#c22}pre{background:#f6f6f6;padding:.5rem;overflow:auto}</style>
</head><body><h1>${esc(info.title)} <small>${esc(info.version)}</small></h1>
<p>Machine-readable: <a href="/openapi.json">/openapi.json</a> (OpenAPI 3.1).</p>${rows.join('\n')}</body></html>`;
}
