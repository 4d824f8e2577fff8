/**
 * Admin routes of reward items: `/v1/reward-items?tenant_id`, `/v1/tenants/{tenant_id}/reward-items`,
 * and the create form `POST /v1/rewards?tenant_id`.
 */
import { inUseMessage, usersOfItem } from '../../core/rewards/references';
import {
  createItem,
  deleteItem,
  getItem,
  listItems,
  updateItem,
  validatePayload,
} from '../../core/rewards/items';
import { errors } from '../../http/errors';
import { route, type RouteSpec } from '../../http/route';
import { bothForms } from '../forms';
import { common, inUseOnRace, read, write, type RewardAdminDeps } from './common';

export function rewardItemRoutes(deps: RewardAdminDeps): RouteSpec[] {
  const { sql, clock } = deps;
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
  ];
}
