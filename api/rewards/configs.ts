/**
 * Admin routes of reward configs: `/v1/rewards-catalog?tenant_id`, told apart from catalog rewards
 * by their shape (a body with `tiers` is a reward config; docs/rewards.md).
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
import { common, inUseOnRace, read, write, type RewardAdminDeps } from './common';

/**
 * Validated tiers as core's type. The schema lets a custom condition leave out `rules`, which
 * TierCondition (`rules: unknown`) does not say: a bridge between the two types, not a conversion
 * (the tiers are stored and answered as they were sent).
 */
const asTiers = (tiers: RewardConfigCreate['tiers']): RewardTier[] => tiers as RewardTier[];

export function rewardConfigRoutes(deps: RewardAdminDeps): RouteSpec[] {
  const { sql, clock } = deps;
  const config = async (tenantId: string, id: string) => {
    const c = await getConfig(sql, tenantId, id);
    if (!c) throw errors.notFound(`Reward config ${id} not found`);
    return c;
  };
  return [
    route({
      ...common,
      method: 'POST',
      path: '/v1/rewards-catalog',
      summary: 'Create a reward config ({name, description?, tiers}); answers its reward_config_id',
      response: 'reward_config.view',
      // Validated by the handler, after telling a catalog reward body apart.
      accepts: ['reward_config.create'],
      auth: write,
      status: 201,
      handler: async (req) => {
        const raw = req.body;
        if (raw && typeof raw === 'object' && !('tiers' in raw) && ('slug' in raw || 'fulfillment' in raw)) {
          throw errors.validation(
            'This body is a catalog reward; create catalog rewards under /v1/tenants/{tenant_id}/rewards-catalog (the store, not yet available). A reward config needs tiers.',
          );
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
      summary: 'List reward configs',
      response: 'reward_config.list.view',
      auth: read,
      query: 'list.query',
      handler: async ({ tenant, query: q }) => {
        const r = await listConfigs(sql, tenant.id, q.limit, q.offset);
        return { reward_configs: r.configs, total: r.total, limit: q.limit, offset: q.offset };
      },
    }),
    route({
      ...common,
      method: 'GET',
      path: '/v1/rewards-catalog/:reward_id',
      summary: 'Get a reward config',
      response: 'reward_config.view',
      auth: read,
      handler: async ({ tenant, params }) => config(tenant.id, params.reward_id),
    }),
    route({
      ...common,
      method: 'PUT',
      path: '/v1/rewards-catalog/:reward_id',
      summary: 'Update a reward config',
      response: 'reward_config.view',
      auth: write,
      body: 'reward_config.update',
      handler: async ({ tenant, params, body: b }) => {
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
      summary: 'Delete a reward config',
      response: 'reward_config.view',
      auth: write,
      handler: async ({ tenant, params }) => {
        const id = params.reward_id;
        const r = await inUseOnRace(
          () => sql.tx((q) => deleteConfig(q, tenant.id, id)),
          async () => inUseMessage(`reward config ${id}`, await usersOfConfig(sql, tenant.id, id)),
        );
        if (!r) throw errors.notFound(`Reward config ${id} not found`);
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
