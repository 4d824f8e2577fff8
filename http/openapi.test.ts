/**
 * The OpenAPI documents as a contract: every operation documents its answers with schemas that
 * exist, every schema's example is valid, every reference resolves, and no two path templates
 * can match one URL (but where a reserved tenant id settles it).
 */
import { buildOpenApi } from './openapi';
import type { GatewayName } from './types';
import { reservedTenantIds } from './route';
import { schemas } from './validate';
import { describeRoutes } from '../runtime/routes';

const routes = describeRoutes();
const set = schemas();
const GATEWAYS: GatewayName[] = ['ingest', 'admin', 'query'];
/**
 * Path parameters whose values are UUIDs, which no literal segment is: a literal beside one names
 * its own route (SPEC.md's /v1/coupons/user/{user_id}/redemptions beside .../{coupon_id}; the
 * literal route is mounted first and wins).
 */
const UUID_PARAMS = new Set([':coupon_id']);

describe('the OpenAPI documents', () => {
  it('give every operation a success schema, and name only schemas that exist', () => {
    const missing = routes
      .filter((r) => (r.status ?? 200) !== 204 && !r.response)
      .map((r) => `${r.gateway} ${r.method} ${r.path}`);
    expect(missing).toEqual([]);
    for (const r of routes) {
      const ids = [r.body, r.query, r.response, ...(r.accepts ?? []), ...Object.values(r.alsoAnswers ?? {})];
      for (const id of ids.filter((x): x is string => x !== undefined)) {
        expect([r.path, id, set.all.has(id)]).toEqual([r.path, id, true]);
      }
    }
  });

  it('hold examples that their own schemas accept', () => {
    let checked = 0;
    for (const [id, schema] of set.all) {
      for (const example of (schema as { examples?: unknown[] }).examples ?? []) {
        const validate = set.get(id);
        const ok = validate(structuredClone(example));
        expect([id, ok ? 'valid' : JSON.stringify(validate.errors)]).toEqual([id, 'valid']);
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(20);
  });

  it.each(GATEWAYS)('resolve every reference of the %s document', (gateway) => {
    const doc = buildOpenApi(gateway, routes, 'test') as {
      components: { schemas: Record<string, unknown>; responses: Record<string, unknown> };
    };
    const refs = [...JSON.stringify(doc).matchAll(/"\$ref":"#\/components\/(schemas|responses)\/([^"]+)"/g)];
    expect(refs.length).toBeGreaterThan(0);
    for (const [, kind, name] of refs) {
      expect([kind, name, Boolean(doc.components[kind as 'schemas'][name!])]).toEqual([kind, name, true]);
    }
  });

  it('let no two path templates match one URL unless a reserved tenant id settles it', () => {
    const reserved = reservedTenantIds();
    const segments = (p: string) => p.split('/').filter(Boolean);
    const unresolved: string[] = [];
    for (const a of routes) {
      for (const b of routes) {
        if (a === b || a.gateway !== b.gateway || a.method !== b.method) continue;
        const A = segments(a.path);
        const B = segments(b.path);
        if (A.length !== B.length) continue;
        let overlap = true;
        let settled = false;
        A.forEach((x, i) => {
          const y = B[i]!;
          if (x === y) return;
          if (!x.startsWith(':') && !y.startsWith(':')) overlap = false;
          else if (x === ':tenant_id' && !y.startsWith(':') && reserved.has(y)) settled = true;
          else if (y === ':tenant_id' && !x.startsWith(':') && reserved.has(x)) settled = true;
          else if (UUID_PARAMS.has(x) && !y.startsWith(':')) settled = true;
          else if (UUID_PARAMS.has(y) && !x.startsWith(':')) settled = true;
        });
        if (overlap && !settled) unresolved.push(`${a.gateway} ${a.method} ${a.path} <> ${b.path}`);
      }
    }
    expect(unresolved).toEqual([]);
    // And the tenant schema refuses every reserved word.
    for (const word of reserved) expect(set.get('tenant.create')({ name: 'x', id: word })).toBe(false);
  });
});
