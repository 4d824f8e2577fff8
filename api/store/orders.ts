/**
 * Admin routes of grants and reward orders (SPEC.md "Admin: grants and reward orders"), each in
 * both forms (`?tenant_id` and `/v1/tenants/{tenant_id}/...`).
 */
import { getOrder, listOrders } from '../../core/store/orders';
import { errors } from '../../http/errors';
import { route, type RouteSpec } from '../../http/route';
import { bothForms } from '../forms';
import { adminCommon, orderItem, orderView, ordersRead, ordersWrite, type StoreDeps } from './common';

export function orderAdminRoutes(deps: StoreDeps): RouteSpec[] {
  const { sql, clock, store } = deps;
  return [
    ...bothForms(
      route({
        ...adminCommon,
        method: 'POST',
        path: '/v1/grants',
        summary:
          'Grant a catalog reward: an order without payment (pending_claim when the reward requires a claim)',
        response: 'order.wrapped.view',
        auth: ordersWrite,
        body: 'order_grant.create',
        status: 201,
        errors: [409],
        handler: async ({ tenant, body: b }) => ({
          order: orderView(await store.grant(tenant.id, b, clock.now())),
        }),
      }),
    ),
    ...bothForms(
      route({
        ...adminCommon,
        method: 'GET',
        path: '/v1/reward-orders',
        summary: 'List orders, newest first, filtered by status, user_id, reward_id, source_type',
        response: 'order.list.view',
        auth: ordersRead,
        query: 'orders.admin.query',
        handler: async ({ tenant, query: q }) => {
          const r = await listOrders(sql, tenant.id, q);
          return { orders: r.rows.map(orderItem), total: r.total, limit: q.limit, offset: q.offset };
        },
      }),
    ),
    ...bothForms(
      route({
        ...adminCommon,
        method: 'GET',
        path: '/v1/reward-orders/:order_id',
        summary: 'Get an order',
        response: 'order.view',
        auth: ordersRead,
        handler: async ({ tenant, params }) => {
          const o = await getOrder(sql, tenant.id, params.order_id);
          if (!o) throw errors.notFound(`Order ${params.order_id} not found`);
          return orderView(o);
        },
      }),
    ),
    ...bothForms(
      route({
        ...adminCommon,
        method: 'PUT',
        path: '/v1/reward-orders/:order_id',
        summary:
          'Set the status of a manual order: completed (tracking_number, shipped_at, notes) or failed (reason)',
        response: 'order.view',
        auth: ordersWrite,
        body: 'order_status.update',
        errors: [409],
        handler: async ({ tenant, params, body: b }) => {
          const s = b.status;
          if (s.state === 'failed') {
            if (s.reason === undefined)
              throw errors.validation('body.status.reason is required when state is failed');
            for (const k of ['tracking_number', 'shipped_at', 'notes'] as const)
              if (s[k] !== undefined) throw errors.validation(`body.status.${k} is only for state completed`);
          } else if (s.reason !== undefined)
            throw errors.validation('body.status.reason is only for state failed');
          return orderView(await store.setStatus(tenant.id, params.order_id, s, clock.now()));
        },
      }),
    ),
    ...bothForms(
      route({
        ...adminCommon,
        method: 'POST',
        path: '/v1/reward-orders/:order_id/retry',
        summary: 'Retry a failed order (back to fulfilling; api fulfilment starts its attempts again)',
        response: 'order.view',
        auth: ordersWrite,
        errors: [409],
        handler: async ({ tenant, params }) =>
          orderView(await store.retry(tenant.id, params.order_id, clock.now())),
      }),
    ),
    ...bothForms(
      route({
        ...adminCommon,
        method: 'POST',
        path: '/v1/reward-orders/:order_id/refund',
        summary: 'Refund a purchase order once: the price credited back, the stock returned, state refunded',
        response: 'order.view',
        auth: ordersWrite,
        body: 'order_refund.create',
        errors: [409],
        handler: async ({ tenant, params, body: b }) =>
          orderView(await store.refund(tenant.id, params.order_id, b.reason, clock.now())),
      }),
    ),
  ];
}
