/**
 * Query routes of a user's achievements (docs/achievements.md "User routes"): every active
 * achievement with completion, progress and rarity (filter `completed`), and one achievement.
 * Short form (tenant from the JWT) and long form `/v1/tenants/{tenant_id}/achievements/...`
 * (tenant JWT or signed request). An end-user token reaches only its own user (the route chain).
 */
import type { Sql } from '../../adapters/sql/types';
import type { Clock } from '../../core/clock';
import { getAchievement, listAchievements } from '../../core/achievements/store';
import { userViews } from '../../core/achievements/views';
import { errors } from '../../http/errors';
import { route, type RouteSpec } from '../../http/route';

const short = { kind: 'tenant', signed: false } as const;
const long = { kind: 'tenant', signed: true } as const;

/** At most this many active achievements are listed for a user (the tenant's oldest first). */
export const USER_LIST_MAX = 1000;

export function userRoutes(deps: { sql: Sql; clock: Clock }): RouteSpec[] {
  const { sql, clock } = deps;
  const forms = (path: string) => [
    { path: `/v1/tenants/:tenant_id${path.replace(/^\/v1/, '')}`, auth: long },
    { path, auth: short },
  ];
  return [
    ...forms('/v1/achievements/user/:user_id').map(({ path, auth }) =>
      route({
        gateway: 'query',
        method: 'GET',
        path,
        auth,
        tag: 'Achievements',
        summary: "A user's active achievements: completion, progress and rarity (filter completed)",
        query: 'achievement.user.query',
        response: 'achievement.user.list.view',
        handler: async ({ tenant, params, query: q }) => {
          const { achievements } = await listAchievements(sql, tenant.id, {
            active: true,
            limit: USER_LIST_MAX,
            offset: 0,
          });
          const views = (await userViews(sql, tenant.id, params.user_id, achievements, clock.now())).filter(
            (v) => q.completed === undefined || v.completed === q.completed,
          );
          return { tenant_id: tenant.id, user_id: params.user_id, achievements: views, total: views.length };
        },
      }),
    ),
    ...forms('/v1/achievements/user/:user_id/:achievement_id').map(({ path, auth }) =>
      route({
        gateway: 'query',
        method: 'GET',
        path,
        auth,
        tag: 'Achievements',
        summary: "A user's completion, progress and rarity of one achievement (deactivated ones too)",
        response: 'achievement.user.view',
        handler: async ({ tenant, params }) => {
          const a = await getAchievement(sql, tenant.id, params.achievement_id);
          if (!a) throw errors.notFound(`Achievement ${params.achievement_id} not found`);
          return (await userViews(sql, tenant.id, params.user_id, [a], clock.now()))[0]!;
        },
      }),
    ),
  ];
}
