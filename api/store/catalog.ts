/**
 * Admin routes of catalog rewards: `/v1/tenants/{tenant_id}/rewards-catalog` (SPEC.md "Admin:
 * reward configs and catalog"). The `?tenant_id` form `/v1/rewards-catalog` is shared with reward
 * configs (api/rewards/configs.ts), which hands catalog-shaped bodies and ids to `catalogOps`.
 */
import {
  createReward,
  deactivateReward,
  getReward,
  getRewardBySlug,
  listRewards,
  mergeReward,
  updateReward,
  type CatalogInput,
  type CatalogReward,
} from '../../core/store/catalog';
import { answerRefusals } from '../../http/domain-errors';
import { errors } from '../../http/errors';
import { route, validated, type RouteSpec } from '../../http/route';
import type { CatalogRewardCreate, CatalogRewardUpdate } from '../../schemas/http/types';
import { adminCommon, catalogRead, catalogWrite, checkCatalog, type StoreDeps } from './common';

/** The operations on catalog rewards both path forms use. */
export function catalogOps(deps: StoreDeps) {
  const { sql, clock } = deps;
  const slugTaken = (slug: string) => () =>
    errors.conflict(`body.slug: ${slug} is already used by another reward`);
  const mustGet = async (tenantId: string, id: string) => {
    const r = await getReward(sql, tenantId, id);
    if (!r) throw errors.notFound(`Catalog reward ${id} not found`);
    return r;
  };
  return {
    get: (tenantId: string, id: string) => getReward(sql, tenantId, id),
    mustGet,
    /** Validates a raw body as a new catalog reward and creates it. */
    async create(tenantId: string, raw: unknown): Promise<CatalogReward> {
      const b: CatalogRewardCreate = validated('catalog_reward.create', raw);
      const input = b as CatalogInput & CatalogRewardCreate;
      await checkCatalog(deps, tenantId, input);
      if (await getRewardBySlug(sql, tenantId, b.slug)) throw slugTaken(b.slug)();
      return answerRefusals(() => sql.tx((q) => createReward(q, tenantId, input, clock.now(), deps.random)), {
        unique: slugTaken(b.slug),
      });
    },
    /** Validates a raw body as changed fields of reward `id` and applies them. */
    async update(tenantId: string, id: string, raw: unknown): Promise<CatalogReward> {
      const b: CatalogRewardUpdate = validated('catalog_reward.update', raw);
      const p = b as CatalogInput;
      const cur = await mustGet(tenantId, id);
      await checkCatalog(deps, tenantId, mergeReward(cur, p));
      if (p.slug !== undefined && p.slug !== cur.slug && (await getRewardBySlug(sql, tenantId, p.slug)))
        throw slugTaken(p.slug)();
      const out = await answerRefusals(() => sql.tx((q) => updateReward(q, tenantId, cur, p, clock.now())), {
        unique: slugTaken(p.slug ?? cur.slug),
      });
      if (!out) throw errors.notFound(`Catalog reward ${id} not found`);
      return out;
    },
    async deactivate(tenantId: string, id: string): Promise<CatalogReward> {
      const out = await deactivateReward(sql, tenantId, id, clock.now());
      if (!out) throw errors.notFound(`Catalog reward ${id} not found`);
      return out;
    },
    list: (tenantId: string, f: { active: boolean; limit: number; offset: number }) =>
      listRewards(sql, tenantId, f),
  };
}

export type CatalogOps = ReturnType<typeof catalogOps>;

export function catalogRoutes(deps: StoreDeps): RouteSpec[] {
  const ops = catalogOps(deps);
  const base = '/v1/tenants/:tenant_id/rewards-catalog';
  return [
    route({
      ...adminCommon,
      method: 'POST',
      path: base,
      summary: 'Create a catalog reward',
      response: 'catalog_reward.view',
      auth: catalogWrite,
      body: 'catalog_reward.create',
      status: 201,
      errors: [409, 503],
      handler: async ({ tenant, body }) => ops.create(tenant.id, body),
    }),
    route({
      ...adminCommon,
      method: 'GET',
      path: base,
      summary: 'List catalog rewards (active ones by default; limit 50)',
      response: 'catalog_reward.list.view',
      auth: catalogRead,
      query: 'catalog.list.query',
      handler: async ({ tenant, query: q }) => {
        const r = await ops.list(tenant.id, q);
        return { rewards: r.rewards, total: r.total, limit: q.limit, offset: q.offset };
      },
    }),
    route({
      ...adminCommon,
      method: 'GET',
      path: `${base}/:reward_id`,
      summary: 'Get a catalog reward',
      response: 'catalog_reward.view',
      auth: catalogRead,
      handler: async ({ tenant, params }) => ops.mustGet(tenant.id, params.reward_id),
    }),
    route({
      ...adminCommon,
      method: 'PUT',
      path: `${base}/:reward_id`,
      summary: 'Update a catalog reward (any fields; stock given replaces the remaining stock)',
      response: 'catalog_reward.view',
      auth: catalogWrite,
      body: 'catalog_reward.update',
      errors: [409, 503],
      handler: async ({ tenant, params, body }) => ops.update(tenant.id, params.reward_id, body),
    }),
    route({
      ...adminCommon,
      method: 'DELETE',
      path: `${base}/:reward_id`,
      summary: 'Deactivate a catalog reward (soft delete; its orders keep it)',
      response: 'catalog_reward.view',
      auth: catalogWrite,
      handler: async ({ tenant, params }) => ops.deactivate(tenant.id, params.reward_id),
    }),
  ];
}
