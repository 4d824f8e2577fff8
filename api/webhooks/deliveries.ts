/**
 * Admin routes of an endpoint's deliveries: the delivery log, one delivery, replaying dead letters,
 * sending a past delivery again.
 */
import { errors } from '../../http/errors';
import { route, type RouteSpec } from '../../http/route';
import { bothForms } from '../forms';
import {
  inactive,
  mustGetWebhook,
  noBody,
  presentDelivery,
  read,
  TAG,
  time,
  write,
  type WebhookAdminDeps,
} from './common';

export function webhookDeliveryRoutes(deps: WebhookAdminDeps): RouteSpec[] {
  const { store } = deps;
  const mustGet = (tenantId: string, id: string) => mustGetWebhook(store, tenantId, id);

  const requeue = async (tenantId: string, webhookId: string, id: string, onlyDead: boolean) => {
    const w = await mustGet(tenantId, webhookId);
    if (!w.active) throw inactive(w);
    const r = await store.requeue(tenantId, webhookId, id, onlyDead);
    if (r === 'not_found') throw errors.notFound(`Delivery ${id} not found`);
    if (r === 'not_dead')
      throw errors.conflict(`Delivery ${id} is not dead-lettered; use .../redeliver to send it again`);
    return presentDelivery(r);
  };

  return [
    ...bothForms(
      route({
        gateway: 'admin',
        method: 'GET',
        path: '/v1/webhooks/:webhook_id/deliveries',
        summary:
          'The delivery log of an endpoint, newest first: each delivery with its attempts (time, status code, duration, error)',
        tag: TAG,
        auth: read,
        query: 'webhook.deliveries.query',
        response: 'delivery.list.view',
        handler: async ({ params, query: q, tenant }) => {
          await mustGet(tenant.id, params.webhook_id);
          const { items, total } = await store.listDeliveries(tenant.id, params.webhook_id, {
            status: q.status,
            event_type: q.event_type,
            since: time(q.since),
            until: time(q.until),
            limit: q.limit,
            offset: q.offset,
          });
          return {
            deliveries: items.map((d) => presentDelivery(d)),
            total,
            limit: q.limit,
            offset: q.offset,
          };
        },
      }),
    ),
    ...bothForms(
      route({
        gateway: 'admin',
        method: 'GET',
        path: '/v1/webhooks/:webhook_id/deliveries/:delivery_id',
        summary: 'One delivery with its attempts and its payload',
        tag: TAG,
        auth: read,
        response: 'delivery.view',
        handler: async ({ params, tenant }) => {
          const d = await store.getDelivery(tenant.id, params.webhook_id, params.delivery_id);
          if (!d) throw errors.notFound(`Delivery ${params.delivery_id} not found`);
          return presentDelivery(d, true);
        },
      }),
    ),
    ...bothForms(
      route({
        gateway: 'admin',
        method: 'POST',
        path: '/v1/webhooks/:webhook_id/deliveries/replay',
        summary: 'Replay every dead-lettered delivery of the endpoint (optionally by event_type and time)',
        tag: TAG,
        auth: write,
        query: 'webhook.replay.query',
        response: 'delivery.replay.view',
        handler: async ({ params, query: q, body, tenant }) => {
          noBody(body);
          const w = await mustGet(tenant.id, params.webhook_id);
          if (!w.active) throw inactive(w);
          const replayed = await store.replayDead(tenant.id, w.id, {
            event_type: q.event_type,
            since: time(q.since),
            until: time(q.until),
          });
          return { webhook_id: w.id, replayed };
        },
      }),
    ),
    ...bothForms(
      route({
        gateway: 'admin',
        method: 'POST',
        path: '/v1/webhooks/:webhook_id/deliveries/:delivery_id/replay',
        summary: 'Replay one dead-lettered delivery: same id, a fresh retry schedule',
        tag: TAG,
        auth: write,
        response: 'delivery.view',
        handler: async ({ params, body, tenant }) => {
          noBody(body);
          return requeue(tenant.id, params.webhook_id, params.delivery_id, true);
        },
      }),
    ),
    ...bothForms(
      route({
        gateway: 'admin',
        method: 'POST',
        path: '/v1/webhooks/:webhook_id/deliveries/:delivery_id/redeliver',
        summary: 'Send any past delivery again (same id, so receivers can drop what they already have)',
        tag: TAG,
        auth: write,
        response: 'delivery.view',
        handler: async ({ params, body, tenant }) => {
          noBody(body);
          return requeue(tenant.id, params.webhook_id, params.delivery_id, false);
        },
      }),
    ),
  ];
}
