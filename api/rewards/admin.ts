/**
 * Admin routes of reward items, reward configs and grants (scope rewards:read / rewards:write).
 * Reward items: `/v1/reward-items?tenant_id`, `/v1/tenants/{tenant_id}/reward-items`, and the create
 * form `POST /v1/rewards?tenant_id`. Reward configs: `/v1/rewards-catalog?tenant_id`, told apart
 * from catalog rewards by their shape (a body with `tiers` is a reward config; docs/rewards.md).
 */
import type { Sql } from '../../adapters/sql/types';
import type { Clock } from '../../core/clock';
import {
  createConfig,
  deleteConfig,
  getConfig,
  listConfigs,
  updateConfig,
  validateTiers,
  type RewardTier,
} from '../../core/rewards/configs';
import { grantsOf } from '../../core/rewards/grant';
import { inUseMessage, usersOfConfig, usersOfItem } from '../../core/rewards/references';
import {
  createItem,
  deleteItem,
  getItem,
  listItems,
  updateItem,
  validatePayload,
} from '../../core/rewards/items';
import { scope } from '../../http/auth/scopes';
import { answerRefusals } from '../../http/domain-errors';
import { errors } from '../../http/errors';
import { route, validated, type RouteSpec } from '../../http/route';
import type { RewardConfigCreate } from '../../schemas/http/types';
import { bothForms } from '../leaderboards/admin';

const read = { kind: 'admin', scope: scope.read('rewards'), tenant: true } as const;
const write = { kind: 'admin', scope: scope.write('rewards'), tenant: true } as const;

/**
 * Validated tiers as core's type. The schema lets a custom condition leave out `rules`, which
 * TierCondition (`rules: unknown`) does not say: a bridge between the two types, not a conversion
 * (the tiers are stored and answered as they were sent).
 */
const asTiers = (tiers: RewardConfigCreate['tiers']): RewardTier[] => tiers as RewardTier[];

export function rewardAdminRoutes(deps: { sql: Sql; clock: Clock }): RouteSpec[] {
  const { sql, clock } = deps;
  const common = { gateway: 'admin', tag: 'Rewards' } as const;
  const createItemRoute = route({
    ...common,
    method: 'POST',
    path: '/v1/reward-items',
    summary: 'Create a reward item',
    response: 'reward_item.view',
    auth: write,
    body: 'reward_item.create',
    status: 201,
    handler: async ({ tenant, body: b }) => {
      if (!b.name.trim()) throw errors.validation('body.name must not be blank');
      if (!b.reward_type.trim()) throw errors.validation('body.reward_type must not be blank');
      const err = validatePayload(b.reward_type, b.payload);
      if (err) throw errors.validation(err);
      return createItem(sql, tenant.id, b, clock.now());
    },
  });
  const config = async (tenantId: string, id: string) => {
    const c = await getConfig(sql, tenantId, id);
    if (!c) throw errors.notFound(`Reward config ${id} not found`);
    return c;
  };
  return [
    ...bothForms(createItemRoute),
    { ...createItemRoute, path: '/v1/rewards' },
    ...bothForms(
      route({
        ...common,
        method: 'GET',
        path: '/v1/reward-items',
        summary: 'List reward items',
        response: 'reward_item.list.view',
        auth: read,
        query: 'list.query',
        handler: async ({ tenant, query: q }) => {
          const r = await listItems(sql, tenant.id, q.limit, q.offset);
          return { reward_items: r.items, total: r.total, limit: q.limit, offset: q.offset };
        },
      }),
    ),
    ...bothForms(
      route({
        ...common,
        method: 'GET',
        path: '/v1/reward-items/:item_id',
        summary: 'Get a reward item',
        response: 'reward_item.view',
        auth: read,
        handler: async ({ tenant, params }) => {
          const i = await getItem(sql, tenant.id, params.item_id);
          if (!i) throw errors.notFound(`Reward item ${params.item_id} not found`);
          return i;
        },
      }),
    ),
    ...bothForms(
      route({
        ...common,
        method: 'PUT',
        path: '/v1/reward-items/:item_id',
        summary: 'Update a reward item',
        response: 'reward_item.view',
        auth: write,
        body: 'reward_item.update',
        handler: async ({ tenant, params, body: b }) => {
          const cur = await getItem(sql, tenant.id, params.item_id);
          if (!cur) throw errors.notFound(`Reward item ${params.item_id} not found`);
          if (b.name !== undefined && !b.name.trim()) throw errors.validation('body.name must not be blank');
          const err = validatePayload(b.reward_type ?? cur.reward_type, b.payload ?? cur.payload);
          if (err) throw errors.validation(err);
          const updated = await updateItem(sql, tenant.id, params.item_id, b, clock.now());
          // Deleted between the check and the update: 404, not a 200 with a null body.
          if (!updated) throw errors.notFound(`Reward item ${params.item_id} not found`);
          return updated;
        },
      }),
    ),
    ...bothForms(
      route({
        ...common,
        method: 'DELETE',
        path: '/v1/reward-items/:item_id',
        summary: 'Delete a reward item (past grants keep their copy)',
        response: 'reward_item.deleted.view',
        auth: write,
        handler: async ({ tenant, params }) => {
          const id = params.item_id;
          const r = await inUseOnRace(
            () => sql.tx((q) => deleteItem(q, tenant.id, id)),
            async () => inUseMessage(`reward item ${id}`, await usersOfItem(sql, tenant.id, id)),
          );
          if (!r) throw errors.notFound(`Reward item ${id} not found`);
          if ('in_use' in r) throw errors.conflict(r.in_use);
          return { deleted: true, item_id: r.deleted.item_id };
        },
      }),
    ),
    // ---- reward configs ----
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
    // ---- grants ----
    ...bothForms(
      route({
        ...common,
        method: 'GET',
        path: '/v1/reward-grants',
        summary: "A user's granted reward items (credited, owned, or waiting for fulfilment)",
        response: 'reward_grant.list.view',
        auth: read,
        query: 'grants.query',
        handler: async ({ tenant, query: q }) => {
          if (!q.user_id) throw errors.validation('query.user_id is required');
          return { user_id: q.user_id, ...(await grantsOf(sql, tenant.id, q.user_id, q.limit, q.offset)) };
        },
      }),
    ),
  ];
}

export function rewardQueryRoutes(deps: { sql: Sql }): RouteSpec[] {
  return [
    route({
      gateway: 'query',
      method: 'GET',
      path: '/v1/grants/user/:user_id',
      summary: "A user's granted reward items",
      response: 'reward_grant.list.view',
      tag: 'Rewards',
      auth: { kind: 'tenant', signed: false },
      query: 'list.query',
      handler: async ({ tenant, params, query: q }) => {
        return {
          user_id: params.user_id,
          ...(await grantsOf(deps.sql, tenant.id, params.user_id, q.limit, q.offset)),
        };
      },
    }),
  ];
}

/**
 * A delete the foreign keys refused: a user attached itself between the in-use check and the
 * delete (core/rewards/references.ts). Answered like the check would have: 409 naming the users.
 */
function inUseOnRace<T>(run: () => Promise<T>, users: () => Promise<string | null>): Promise<T> {
  return answerRefusals(run, {
    foreignKey: async () => errors.conflict((await users()) ?? 'It is still used; detach it first'),
  });
}

/** A config write the foreign keys refused: an item it names was deleted meanwhile. */
function missingItemOnRace<T>(run: () => Promise<T>): Promise<T> {
  return answerRefusals(run, {
    foreignKey: () => errors.validation('body.tiers: a reward item the tiers name does not exist'),
  });
}
