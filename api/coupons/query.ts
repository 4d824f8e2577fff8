/**
 * Query routes of coupons (SPEC.md "Query: coupons"), the tenant from the JWT; an end-user token
 * reaches only its own user (the route chain refuses another user_id).
 */
import { listDefinitions } from '../../core/coupons/definitions';
import { CouponError } from '../../core/coupons/errors';
import { redeemCode, redemptions, userCoupon, userCoupons, validateCode } from '../../core/coupons/redeem';
import { errors } from '../../http/errors';
import { route, type RouteSpec } from '../../http/route';
import { query, type CouponDeps } from './common';
import { guarded } from './guess';

const q = { gateway: 'query', tag: 'Coupons', auth: query } as const;

export function couponQueryRoutes(deps: CouponDeps): RouteSpec[] {
  const { sql, clock } = deps;
  return [
    route({
      ...q,
      method: 'GET',
      path: '/v1/coupons/definitions',
      summary: "The tenant's active coupon definitions",
      query: 'coupon.redemptions.query',
      response: 'coupon.list.view',
      handler: async ({ tenant, query: p }) =>
        listDefinitions(sql, [tenant.id], { status: 'active', limit: p.limit, offset: p.offset }),
    }),
    // Before /v1/coupons/user/:user_id/:coupon_id: the literal segment wins.
    route({
      ...q,
      method: 'GET',
      path: '/v1/coupons/user/:user_id/redemptions',
      summary: "A user's redemptions, newest first (limit default 20)",
      query: 'coupon.redemptions.query',
      response: 'coupon.redemption.list.view',
      handler: async ({ tenant, params, query: p }) =>
        redemptions(sql, tenant.id, params.user_id, p.limit, p.offset),
    }),
    route({
      ...q,
      method: 'GET',
      path: '/v1/coupons/user/:user_id',
      summary: "A user's coupons, newest first",
      query: 'list.query',
      response: 'user_coupon.list.view',
      handler: async ({ tenant, params, query: p }) =>
        userCoupons(sql, tenant.id, params.user_id, p.limit, p.offset),
    }),
    route({
      ...q,
      method: 'GET',
      path: '/v1/coupons/user/:user_id/:coupon_id',
      summary: "One of a user's coupons",
      response: 'user_coupon.view',
      handler: async ({ tenant, params }) => {
        const c = await userCoupon(sql, tenant.id, params.user_id, params.coupon_id);
        if (!c) throw errors.notFound(`Coupon ${params.coupon_id} of user ${params.user_id} not found`);
        return c;
      },
    }),
    route({
      ...q,
      method: 'GET',
      path: '/v1/coupons/validate/:code',
      summary:
        'Whether a code can be redeemed now (by user_id when given); failed checks count against guessing',
      query: 'coupon.validate.query',
      response: 'coupon.validation.view',
      handler: async ({ tenant, params, query: p, principal, ctx }) => {
        const user = p.user_id ?? (principal?.kind === 'user' ? principal.userId : undefined);
        try {
          return await guarded(deps, ctx, tenant.id, user, () =>
            validateCode(sql, tenant.id, params.code, user, clock.now()),
          );
        } catch (err) {
          if (!(err instanceof CouponError)) throw err;
          return { valid: false, coupon: null, definition: null, error: err.message };
        }
      },
    }),
    route({
      ...q,
      method: 'POST',
      path: '/v1/coupons/redeem/:code',
      summary: "Redeem a code for a user: grants the definition's reward item, in one transaction",
      body: 'coupon.redeem',
      response: 'coupon.redeemed.view',
      handler: async ({ tenant, params, body: b, ctx }) =>
        guarded(deps, ctx, tenant.id, b.user_id, () =>
          sql.tx((tx) => redeemCode(tx, deps, tenant.id, params.code, b.user_id, clock.now())),
        ),
    }),
  ];
}
