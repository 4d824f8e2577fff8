/**
 * Query routes of streaks (SPEC.md leaves them to us; docs/streaks.md): a user's streaks and one
 * streak with the history of its periods, in the short form (tenant from the JWT) and the long
 * form `/v1/tenants/{tenant_id}/streaks/...` (tenant JWT or signed request). An end-user token
 * reaches only its own user (the route chain checks `user_id`).
 */
import type { Sql } from '../../adapters/sql/types';
import type { Clock } from '../../core/clock';
import { userStreak, userStreaks } from '../../core/streaks/views';
import { errors } from '../../http/errors';
import { route, type RouteSpec } from '../../http/route';

const short = { kind: 'tenant', signed: false } as const;
const long = { kind: 'tenant', signed: true } as const;

export function streakQueryRoutes(deps: { sql: Sql; clock: Clock }): RouteSpec[] {
  const { sql, clock } = deps;
  const forms = (path: string) => [
    { path, auth: short },
    { path: path.replace(/^\/v1\//, '/v1/tenants/:tenant_id/'), auth: long },
  ];
  return [
    ...forms('/v1/streaks/user/:user_id').map(({ path, auth }) =>
      route({
        gateway: 'query',
        method: 'GET',
        path: path as '/v1/streaks/user/:user_id',
        summary: "A user's streaks: one entry per active or paused definition",
        tag: 'Streaks',
        auth,
        response: 'streak.user.list.view',
        handler: async ({ tenant, params }) => userStreaks(sql, tenant.id, params.user_id, clock.now()),
      }),
    ),
    ...forms('/v1/streaks/user/:user_id/:streak_id').map(({ path, auth }) =>
      route({
        gateway: 'query',
        method: 'GET',
        path: path as '/v1/streaks/user/:user_id/:streak_id',
        summary: "A user's streak of one definition, with the paged history of its periods",
        tag: 'Streaks',
        auth,
        query: 'streak.user.query',
        response: 'streak.user.view',
        handler: async ({ tenant, params, query: q }) => {
          const v = await userStreak(sql, tenant.id, params.user_id, params.streak_id, clock.now(), q);
          if (!v) throw errors.notFound(`Streak definition ${params.streak_id} not found`);
          return v;
        },
      }),
    ),
  ];
}
