/** Routes of granted reward items: the admin list of a user's grants, and the query gateway's. */
import type { Sql } from '../../adapters/sql/types';
import { grantsOf } from '../../core/rewards/grant';
import { errors } from '../../http/errors';
import { route, type RouteSpec } from '../../http/route';
import { bothForms } from '../forms';
import { common, read, type RewardAdminDeps } from './common';

export function rewardGrantRoutes(deps: RewardAdminDeps): RouteSpec[] {
  const { sql } = deps;
  return [
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
