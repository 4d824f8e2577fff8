/**
 * Admin routes of reward configs: `/v1/rewards-catalog?tenant_id`, shared with catalog rewards
 * (docs/store.md "One path family, two records"): a body with `tiers` is a reward config, one with
 * `slug` or `fulfillment` and no `tiers` a catalog reward; an id names whichever record has it (both
 * are UUIDs); the list is of reward configs unless `kind=catalog_reward`.
 */
import {
  createConfig,
  deleteConfig,
  getConfig,
  listConfigs,
  updateConfig,
  validateTiers,
  type RewardTier,
} from '../../core/rewards/configs';
import { inUseMessage, usersOfConfig } from '../../core/rewards/references';
import { answerRefusals } from '../../http/domain-errors';
import { errors } from '../../http/errors';
import { route, validated, type RouteSpec } from '../../http/route';
import type { RewardConfigCreate } from '../../schemas/http/types';

/** Whether a body is a catalog reward (slug or fulfillment, no tiers) rather than a reward config. */
export function isCatalogShaped(raw: unknown): boolean {
  return Boolean(
    raw && typeof raw === 'object' && !('tiers' in raw) && ('slug' in raw || 'fulfillment' in raw),
  );
}
import { common, inUseOnRace, read, write, type RewardAdminDeps } from './common';

/**
 * Validated tiers as core's type. The schema lets a custom condition leave out `rules`, which
 * TierCondition (`rules: unknown`) does not say: a bridge between the two types, not a conversion
 * (the tiers are stored and answered as they were sent).
 */
const asTiers = (tiers: RewardConfigCreate['tiers']): RewardTier[] => tiers as RewardTier[];

export function rewardConfigRoutes(deps: RewardAdminDeps): RouteSpec[] {
  const { sql, clock, catalog } = deps;
  const config = async (tenantId: string, id: string) => {
    const c = await getConfig(sql, tenantId, id);
    if (!c) throw errors.notFound(`Reward config ${id} not found`);
    return c;
  };
  /** The catalog reward an id names when no reward config has it, else null. */
  const catalogReward = async (tenantId: string, id: string) =>
    catalog && !(await getConfig(sql, tenantId, id)) ? catalog.get(tenantId, id) : null;
  const neither = (id: string) => errors.notFound(`Reward config or catalog reward ${id} not found`);
  return [
    route({
      ...common,
      method: 'POST',
      path: '/v1/rewards-catalog',
      summary:
        'Create a reward config ({name, description?, tiers}: answers its reward_config_id) or a catalog reward (a body with slug or fulfillment and no tiers)',
      response: 'rewards_catalog.view',
      // Validated by the handler, after telling a catalog reward body apart.
      accepts: ['reward_config.create', 'catalog_reward.create'],
      auth: write,
      status: 201,
      errors: [409, 503],
      handler: async (req) => {
        const raw = req.body;
        if (isCatalogShaped(raw)) {
          if (!catalog)
            throw errors.validation('This body is a catalog reward; a reward config needs tiers.');
          return catalog.create(req.tenant.id, raw);
        }
        const b = validated('reward_config.create', raw);
        const tiers = asTiers(b.tiers);
        return missingItemOnRace(() =>
          sql.tx(async (q) => {
            const err = await validateTiers(q, req.tenant.id, tiers);
            if (err) throw errors.validation(err);
            return createConfig(q, req.tenant.id, { ...b, tiers }, clock.now());
          }),
        );
      },
    }),
    route({
      ...common,
      method: 'GET',
      path: '/v1/rewards-catalog',
      summary: 'List reward configs, or catalog rewards with kind=catalog_reward (active by default)',
      response: 'rewards_catalog.list.view',
      auth: read,
      query: 'rewards_catalog.list.query',
      handler: async ({ tenant, query: q }) => {
        if (q.kind === 'catalog_reward' && catalog) {
          const r = await catalog.list(tenant.id, q);
          return { rewards: r.rewards, total: r.total, limit: q.limit, offset: q.offset };
        }
        const r = await listConfigs(sql, tenant.id, q.limit, q.offset);
        return { reward_configs: r.configs, total: r.total, limit: q.limit, offset: q.offset };
      },
    }),
    route({
      ...common,
      method: 'GET',
      path: '/v1/rewards-catalog/:reward_id',
      summary: 'Get a reward config or a catalog reward',
      response: 'rewards_catalog.view',
      auth: read,
      handler: async ({ tenant, params }) => {
        const id = params.reward_id;
        const c = await getConfig(sql, tenant.id, id);
        if (c) return c;
        const r = await catalogReward(tenant.id, id);
        if (!r) throw neither(id);
        return r;
      },
    }),
    route({
      ...common,
      method: 'PUT',
      path: '/v1/rewards-catalog/:reward_id',
      summary: 'Update a reward config or a catalog reward (changed fields)',
      response: 'rewards_catalog.view',
      auth: write,
      accepts: ['reward_config.update', 'catalog_reward.update'],
      errors: [409, 503],
      handler: async ({ tenant, params, body: raw }) => {
        if (await catalogReward(tenant.id, params.reward_id))
          return catalog!.update(tenant.id, params.reward_id, raw);
        if (raw === undefined) throw errors.validation('Request body is required');
        const b = validated('reward_config.update', raw);
        await config(tenant.id, params.reward_id);
        const tiers = b.tiers && asTiers(b.tiers);
        const updated = await missingItemOnRace(() =>
          sql.tx(async (q) => {
            if (tiers) {
              const err = await validateTiers(q, tenant.id, tiers);
              if (err) throw errors.validation(err);
            }
            return updateConfig(q, tenant.id, params.reward_id, { ...b, tiers }, clock.now());
          }),
        );
        if (!updated) throw errors.notFound(`Reward config ${params.reward_id} not found`);
        return updated;
      },
    }),
    route({
      ...common,
      method: 'DELETE',
      path: '/v1/rewards-catalog/:reward_id',
      summary: 'Delete a reward config, or deactivate a catalog reward',
      response: 'rewards_catalog.view',
      auth: write,
      handler: async ({ tenant, params }) => {
        const id = params.reward_id;
        if (await catalogReward(tenant.id, id)) return catalog!.deactivate(tenant.id, id);
        const r = await inUseOnRace(
          () => sql.tx((q) => deleteConfig(q, tenant.id, id)),
          async () => inUseMessage(`reward config ${id}`, await usersOfConfig(sql, tenant.id, id)),
        );
        if (!r) throw catalog ? neither(id) : errors.notFound(`Reward config ${id} not found`);
        if ('in_use' in r) throw errors.conflict(r.in_use);
        return r.deleted;
      },
    }),
  ];
}

/** A config write the foreign keys refused: an item it names was deleted meanwhile. */
function missingItemOnRace<T>(run: () => Promise<T>): Promise<T> {
  return answerRefusals(run, {
    foreignKey: () => errors.validation('body.tiers: a reward item the tiers name does not exist'),
  });
}
