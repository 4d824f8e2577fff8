/**
 * Admin routes of coupon definitions (SPEC.md "Admin: coupons"), under `?tenant_id` and
 * `/v1/tenants/{tenant_id}/coupons`: create, list (across tenants without a tenant: every tenant
 * for the root key or a `*` key, the key's tenants for a multi-tenant key), get, update, status,
 * delete (archives, 204) and generate.
 */
import type { Queryable } from '../../adapters/sql/types';
import {
  codeTaken,
  configProblem,
  createDefinition,
  getDefinition,
  listDefinitions,
  moveStatus,
  referenceProblem,
  updateDefinition,
  view,
  type CouponConfig,
} from '../../core/coupons/definitions';
import { generateCoupons } from '../../core/coupons/generate';
import { answerRefusals } from '../../http/domain-errors';
import { errors } from '../../http/errors';
import { route, type RouteSpec } from '../../http/route';
import { bothForms } from '../forms';
import { common, read, write, type CouponDeps } from './common';

/** Bodies of up to 100,000 user ids (and as many custom codes) for the generate route. */
const GENERATE_BODY_LIMIT = 32 * 1024 * 1024;

export function couponDefinitionRoutes(deps: CouponDeps): RouteSpec[] {
  const { sql, clock, random } = deps;
  const mustGet = async (q: Queryable, tenantId: string, id: string, lock = false) => {
    const d = await getDefinition(q, tenantId, id, lock);
    if (!d) throw errors.notFound(`Coupon definition ${id} not found`);
    return d;
  };
  /** Every rule of a config, in the transaction that writes it (the reward item is then kept by its key). */
  const check = async (q: Queryable, tenantId: string, c: CouponConfig, definitionId?: string) => {
    const p = configProblem(c) ?? (await referenceProblem(q, tenantId, c));
    if (p) throw errors.validation(p);
    if (c.custom_code !== undefined) {
      const other = await codeTaken(q, tenantId, c.custom_code, definitionId);
      if (other)
        throw errors.conflict(`body.config.custom_code: ${c.custom_code} is already a code of this tenant`);
    }
  };
  const refusals = (c: CouponConfig | undefined) => ({
    foreignKey: () =>
      errors.validation(`body.config.reward_item_id: reward item ${c?.reward_item_id} does not exist`),
    unique: () =>
      errors.conflict(`body.config.custom_code: ${c?.custom_code} is already a code of this tenant`),
  });
  return [
    ...bothForms(
      route({
        ...common,
        method: 'POST',
        path: '/v1/coupons',
        summary: 'Create a coupon definition (status active; case_sensitive and code_length defaulted)',
        auth: write,
        body: 'coupon.create',
        status: 201,
        response: 'coupon.view',
        handler: async ({ tenant, body: b }) =>
          answerRefusals(
            () =>
              sql.tx(async (q) => {
                await check(q, tenant.id, b.config);
                return createDefinition(q, random, tenant.id, b, clock.now());
              }),
            refusals(b.config),
          ),
      }),
    ),
    ...bothForms(
      route({
        ...common,
        method: 'GET',
        path: '/v1/coupons',
        summary:
          "List coupon definitions; without a tenant, an operator or multi-tenant API key lists every tenant's it may see",
        auth: { kind: 'admin', scope: read.scope, tenant: 'optional' },
        query: 'coupon.list.query',
        response: 'coupon.list.view',
        handler: async ({ tenant, principal, query: q }) => {
          let tenants: string[] | null;
          if (tenant) tenants = [tenant.id];
          else if (principal?.kind === 'api_key' && !principal.key.tenant_ids.includes('*'))
            tenants = principal.key.tenant_ids;
          else tenants = null;
          return listDefinitions(sql, tenants, q);
        },
      }),
    ),
    ...bothForms(
      route({
        ...common,
        method: 'GET',
        path: '/v1/coupons/:definition_id',
        summary: 'Get a coupon definition',
        auth: read,
        response: 'coupon.view',
        handler: async ({ tenant, params }) => view(await mustGet(sql, tenant.id, params.definition_id)),
      }),
    ),
    ...bothForms(
      route({
        ...common,
        method: 'PUT',
        path: '/v1/coupons/:definition_id',
        summary:
          'Update a coupon definition (any of name, description, config; a config replaces the whole config)',
        auth: write,
        body: 'coupon.update',
        response: 'coupon.view',
        handler: async ({ tenant, params, body: b }) =>
          answerRefusals(
            () =>
              sql.tx(async (q) => {
                await mustGet(q, tenant.id, params.definition_id, true);
                if (b.config) await check(q, tenant.id, b.config, params.definition_id);
                const d = await updateDefinition(q, tenant.id, params.definition_id, b, clock.now());
                if (!d) throw errors.notFound(`Coupon definition ${params.definition_id} not found`);
                return d;
              }),
            refusals(b.config),
          ),
      }),
    ),
    ...bothForms(
      route({
        ...common,
        method: 'PUT',
        path: '/v1/coupons/:definition_id/status',
        summary: 'Pause or resume a coupon definition (active or paused only)',
        auth: write,
        body: 'coupon.status',
        response: 'coupon.view',
        handler: async ({ tenant, params, body: b }) => {
          const r = await sql.tx((q) =>
            moveStatus(q, tenant.id, params.definition_id, b.status, clock.now()),
          );
          if (!r) throw errors.notFound(`Coupon definition ${params.definition_id} not found`);
          if ('refused' in r) throw errors.conflict(r.refused);
          return r;
        },
      }),
    ),
    ...bothForms(
      route({
        ...common,
        method: 'DELETE',
        path: '/v1/coupons/:definition_id',
        summary:
          'Archive a coupon definition (204; its coupons and history are kept, nothing can be redeemed)',
        auth: write,
        status: 204,
        handler: async ({ tenant, params }) => {
          const r = await sql.tx((q) =>
            moveStatus(q, tenant.id, params.definition_id, 'archived', clock.now()),
          );
          if (!r) throw errors.notFound(`Coupon definition ${params.definition_id} not found`);
          return undefined;
        },
      }),
    ),
    ...bothForms(
      route({
        ...common,
        method: 'POST',
        path: '/v1/coupons/:definition_id/generate',
        summary:
          'Generate coupons for users (random codes, or custom_codes per user, or the shared custom_code), all or nothing',
        auth: write,
        body: 'coupon.generate',
        bodyLimit: GENERATE_BODY_LIMIT,
        response: 'coupon.generated.view',
        handler: async ({ tenant, params, body: b }) => {
          const out = await sql.tx(async (q) => {
            const d = await mustGet(q, tenant.id, params.definition_id);
            if (d.status !== 'active')
              throw errors.conflict(`Coupon definition ${d.id} is ${d.status}: it generates nothing`);
            const c = d.config;
            if (b.custom_codes !== undefined) {
              if (c.code_format !== 'custom')
                throw errors.validation('body.custom_codes applies to custom-format definitions only');
              if (b.custom_codes.length !== b.user_ids.length)
                throw errors.validation(
                  `body.custom_codes must have one code per user id (${b.user_ids.length}), got ${b.custom_codes.length}`,
                );
            } else if (c.code_format === 'custom' && c.custom_code === undefined) {
              throw errors.validation(
                'body.custom_codes is required: the definition is custom-format without a shared custom_code',
              );
            }
            return generateCoupons(q, random, d, b.user_ids, {
              custom_codes: b.custom_codes,
              source: 'admin',
              now: clock.now(),
            });
          });
          return {
            generated: out.generated,
            coupons: out.coupons.map((x) => ({ user_id: x.user_id, code: x.code })),
          };
        },
      }),
    ),
  ];
}
