/**
 * Query routes of spin wheels (tenant from the JWT; SPEC.md names only these short forms, like the
 * leaderboard queries): the wheels a user can spin now, a spin, and a user's spin history. An
 * end-user token spins and reads only for itself (the route chain); `user_id` defaults to it.
 */
import { spin, spinHistory } from '../../core/wheels/spin';
import { availableWheels, withThemes } from '../../core/wheels/wheels';
import { errors } from '../../http/errors';
import { route, type RouteSpec } from '../../http/route';
import type { WheelDeps } from './common';

const auth = { kind: 'tenant', signed: false } as const;
const common = { gateway: 'query', tag: 'Wheels', auth } as const;

export function wheelQueryRoutes(deps: WheelDeps): RouteSpec[] {
  const { sql, clock } = deps;
  return [
    route({
      ...common,
      method: 'GET',
      path: '/v1/wheels',
      summary: "The token tenant's active wheels inside their availability range",
      response: 'wheel.available.view',
      handler: async ({ tenant }) => ({
        wheels: await withThemes(sql, tenant.id, await availableWheels(sql, tenant.id, clock.now())),
      }),
    }),
    route({
      ...common,
      method: 'POST',
      path: '/v1/wheels/:wheel_id/spin',
      summary: 'Spin a wheel (400 with the reason when the user may not; 402 when the cost is not covered)',
      response: 'wheel.spin.view',
      body: 'wheel.spin',
      errors: [402],
      handler: async ({ tenant, params, body, principal }) => {
        const user = body.user_id ?? (principal?.kind === 'user' ? principal.userId : undefined);
        if (!user) throw errors.validation('body.user_id is required');
        return sql.tx((q) => spin(q, deps, tenant.id, params.wheel_id, user, clock.now()));
      },
    }),
    route({
      ...common,
      method: 'GET',
      path: '/v1/wheels/user/:user_id/history',
      summary: "A user's spins, newest first (wheel_id filter; default 100, max 1000)",
      response: 'wheel.history.view',
      query: 'wheel.history.query',
      handler: async ({ tenant, params, query: q }) =>
        spinHistory(sql, tenant.id, { ...q, user_id: params.user_id }),
    }),
  ];
}
