/**
 * Query routes of the store (SPEC.md "Query: catalog and orders") in their three path forms: long
 * (`/v1/rewards/{tenant_id}/...`: tenant JWT or signed request), short (`/v1/rewards/...`: tenant
 * from the JWT) and store (`/v1/rewards-store`, `/v1/orders/...`). An end-user token reaches only
 * its own user (the route chain checks every user_id of the request).
 */
import { getRewardBySlug, listRewards } from '../../core/store/catalog';
import { getOrder, listOrders, recentFields } from '../../core/store/orders';
import { errors } from '../../http/errors';
import { route, type RouteRequest, type RouteSpec } from '../../http/route';
import { orderItem, orderView, storeView, type StoreDeps } from './common';

const short = { kind: 'tenant', signed: false } as const;
const long = { kind: 'tenant', signed: true } as const;
const common = { gateway: 'query', tag: 'Store' } as const;

/** One route in each form it has: [path, auth] pairs. */
function forms(spec: RouteSpec, paths: Array<[string, typeof short | typeof long]>): RouteSpec[] {
  return paths.map(([path, auth]) => ({ ...spec, path, auth }));
}

export function storeQueryRoutes(deps: StoreDeps): RouteSpec[] {
  const { sql, clock, store } = deps;
  const ownUser = (req: RouteRequest<unknown, { user_id?: string }>) => {
    const u = req.query.user_id ?? (req.principal?.kind === 'user' ? req.principal.userId : undefined);
    if (!u) throw errors.validation('query.user_id is required');
    return u;
  };
  return [
    ...forms(
      route({
        ...common,
        method: 'GET',
        path: '/v1/rewards/catalog',
        summary: 'The store: active rewards, with affordable and points_needed when a balance is given',
        response: 'store_catalog.view',
        auth: short,
        query: 'store_catalog.query',
        handler: async ({ tenant, query: q }) => {
          // Filtered after reading: purchasable depends on prices and stock of the reward and its variants.
          const all = await listRewards(sql, tenant.id, { active: true, limit: 10_000, offset: 0 });
          const views = all.rewards
            .map((r) => storeView(r, q.balance))
            .filter((v) => {
              if (q.purchasable === undefined) return true;
              const priced =
                Boolean(v.purchase?.prices.length) || v.variants.some((x) => x.purchase?.prices.length);
              return (priced && v.in_stock) === q.purchasable;
            });
          return { rewards: views.slice(q.offset, q.offset + q.limit) };
        },
      }),
      [
        ['/v1/rewards/catalog', short],
        ['/v1/rewards/:tenant_id/catalog', long],
        ['/v1/rewards-store', short],
      ],
    ),
    ...forms(
      route({
        ...common,
        method: 'GET',
        path: '/v1/rewards/catalog/:slug',
        summary: 'One reward of the store, by slug',
        response: 'store_reward.view',
        auth: short,
        handler: async ({ tenant, params }) => {
          const r = await getRewardBySlug(sql, tenant.id, params.slug);
          if (!r || !r.active) throw errors.notFound(`Reward ${params.slug} not found`);
          return storeView(r, undefined);
        },
      }),
      [
        ['/v1/rewards/catalog/:slug', short],
        ['/v1/rewards/:tenant_id/catalog/:slug', long],
        ['/v1/rewards-store/:slug', short],
      ],
    ),
    ...forms(
      route({
        ...common,
        method: 'POST',
        path: '/v1/rewards/purchase/:slug',
        summary:
          'Buy a reward: the price debited, a unit of stock taken, the order created (a repeated idempotency_key answers the first order, was_cached true)',
        response: 'purchase.view',
        auth: short,
        body: 'purchase.create',
        status: 201,
        alsoAnswers: { 200: 'purchase.view' },
        errors: [402, 409],
        handler: async ({ tenant, params, body: b, ctx }) => {
          const r = await store.purchase(tenant.id, params.slug, b, clock.now());
          if (r.was_cached) ctx.status = 200;
          return { order: orderView(r.order), was_cached: r.was_cached };
        },
      }),
      [
        ['/v1/rewards/purchase/:slug', short],
        ['/v1/rewards/:tenant_id/purchase/:slug', long],
        ['/v1/rewards-store/:slug/purchase', short],
      ],
    ),
    ...forms(
      route({
        ...common,
        method: 'GET',
        path: '/v1/rewards/orders/:user_id',
        summary: "A user's orders, newest first (status filter; 20 a page)",
        response: 'order.list.view',
        auth: short,
        query: 'orders.query',
        handler: async ({ tenant, params, query: q }) => {
          const r = await listOrders(sql, tenant.id, {
            user_id: params.user_id,
            status: q.status,
            limit: q.limit,
            offset: q.offset,
          });
          return { orders: r.rows.map(orderItem), total: r.total, limit: q.limit, offset: q.offset };
        },
      }),
      [
        ['/v1/rewards/orders/:user_id', short],
        ['/v1/rewards/:tenant_id/orders/:user_id', long],
        ['/v1/orders/user/:user_id', short],
      ],
    ),
    route({
      ...common,
      method: 'GET',
      path: '/v1/rewards/orders/:user_id/:order_id',
      summary: "One of a user's orders, in full",
      response: 'order.view',
      auth: short,
      handler: async ({ tenant, params }) => {
        const o = await getOrder(sql, tenant.id, params.order_id);
        if (!o || o.user_id !== params.user_id)
          throw errors.notFound(`Order ${params.order_id} not found for user ${params.user_id}`);
        return orderView(o);
      },
    }),
    ...forms(
      route({
        ...common,
        method: 'POST',
        path: '/v1/rewards/orders/:order_id/claim',
        summary:
          "Claim an order waiting for the user's fields (checked against the reward's field definitions)",
        response: 'claim.view',
        auth: short,
        body: 'claim.create',
        errors: [409],
        handler: async ({ tenant, params, body: b }) => {
          const o = await store.claim(tenant.id, params.order_id, b.user_id, b.fields, clock.now());
          return { order: { id: o.id, status: orderView(o).status } };
        },
      }),
      [
        ['/v1/rewards/orders/:order_id/claim', short],
        ['/v1/rewards/:tenant_id/orders/:order_id/claim', long],
        ['/v1/orders/:order_id/claim', short],
      ],
    ),
    ...forms(
      route({
        ...common,
        method: 'GET',
        path: '/v1/rewards/recent-fields',
        summary: 'The last value the user submitted for each field name (to prefill forms)',
        response: 'recent_fields.view',
        auth: short,
        query: 'recent_fields.query',
        handler: async (req) => ({ fields: await recentFields(sql, req.tenant.id, ownUser(req)) }),
      }),
      [
        ['/v1/rewards/recent-fields', short],
        ['/v1/rewards/:tenant_id/recent-fields', long],
      ],
    ),
  ];
}
