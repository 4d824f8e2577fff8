/**
 * Admin routes of webhook endpoints: register, list, get, change, delete, rotate the signing
 * secret, ping.
 */
import { randomUUID } from 'node:crypto';
import { checkRegistrableName, checkUrl } from '../../core/webhooks/address';
import { PING } from '../../core/webhooks/events';
import { pingBody, recordPing } from '../../core/webhooks/queue';
import { signatureHeaders } from '../../core/webhooks/signing';
import { deliveryHeaders, systemResolver, WebhookSender } from '../../core/webhooks/sender';
import { errors } from '../../http/errors';
import { route, type RouteSpec } from '../../http/route';
import { bothForms } from '../forms';
import {
  mustGetWebhook,
  noBody,
  presentDelivery,
  presentWebhook,
  read,
  TAG,
  write,
  type WebhookAdminDeps,
} from './common';

export function webhookEndpointRoutes(deps: WebhookAdminDeps): RouteSpec[] {
  const { store, clock, config } = deps;
  const resolve = deps.resolve ?? systemResolver;
  const sender = new WebhookSender({
    allowPrivate: config.allowPrivate,
    timeoutMs: config.timeoutMs,
    userAgent: `Ludus-Webhooks/${deps.version}`,
  });
  const mustGet = (tenantId: string, id: string) => mustGetWebhook(store, tenantId, id);

  /** The registration check: syntax and literal addresses, then the name's current DNS answers. */
  const checkRegistrable = async (url: string) => {
    const v = checkUrl(url, config.allowPrivate);
    if (!v.ok) throw errors.validation(`body.url: ${v.reason}`);
    if (v.ip || config.allowPrivate) return;
    // A name that does not exist (yet) is accepted; every delivery checks again. A refused address
    // answers 400, a check that could not finish 503 (http/domain-errors.ts).
    await checkRegistrableName(v.hostname, resolve, deps.resolveTimeoutMs);
  };

  return [
    ...bothForms(
      route({
        gateway: 'admin',
        method: 'POST',
        path: '/v1/webhooks',
        summary: 'Register a webhook endpoint; its signing secret (whsec_...) is shown only in this answer',
        tag: TAG,
        auth: write,
        body: 'webhook.create',
        status: 201,
        response: 'webhook.secret.view',
        errors: [503],
        handler: async ({ body: b, tenant }) => {
          await checkRegistrable(b.url);
          const { webhook, secret } = await store.create(tenant.id, b);
          return { ...presentWebhook(webhook), secret };
        },
      }),
    ),
    ...bothForms(
      route({
        gateway: 'admin',
        method: 'GET',
        path: '/v1/webhooks',
        summary: 'List webhook endpoints (no secrets)',
        tag: TAG,
        auth: read,
        query: 'webhook.list.query',
        response: 'webhook.list.view',
        handler: async ({ query: q, tenant }) => {
          const { items, total } = await store.list(tenant.id, q);
          return { webhooks: items.map(presentWebhook), total, limit: q.limit, offset: q.offset };
        },
      }),
    ),
    ...bothForms(
      route({
        gateway: 'admin',
        method: 'GET',
        path: '/v1/webhooks/:webhook_id',
        summary: 'Get a webhook endpoint, with why it was disabled, if it was',
        tag: TAG,
        auth: read,
        response: 'webhook.view',
        handler: async ({ params, tenant }) => presentWebhook(await mustGet(tenant.id, params.webhook_id)),
      }),
    ),
    ...bothForms(
      route({
        gateway: 'admin',
        method: 'PUT',
        path: '/v1/webhooks/:webhook_id',
        summary: 'Change a webhook endpoint; {"active": true} turns a disabled one back on',
        tag: TAG,
        auth: write,
        body: 'webhook.update',
        response: 'webhook.view',
        errors: [503],
        handler: async ({ params, body: patch, tenant }) => {
          if (patch.url !== undefined) await checkRegistrable(patch.url);
          const w = await store.update(tenant.id, params.webhook_id, patch);
          if (!w) throw errors.notFound(`Webhook ${params.webhook_id} not found`);
          return presentWebhook(w);
        },
      }),
    ),
    ...bothForms(
      route({
        gateway: 'admin',
        method: 'DELETE',
        path: '/v1/webhooks/:webhook_id',
        summary: 'Delete a webhook endpoint with its pending deliveries and delivery log',
        tag: TAG,
        auth: write,
        status: 204,
        handler: async ({ params, tenant }) => {
          if (!(await store.delete(tenant.id, params.webhook_id)))
            throw errors.notFound(`Webhook ${params.webhook_id} not found`);
        },
      }),
    ),
    ...bothForms(
      route({
        gateway: 'admin',
        method: 'POST',
        path: '/v1/webhooks/:webhook_id/rotate-secret',
        summary:
          'New signing secret (shown once); the current one keeps signing beside it for overlap_seconds (default 24 h)',
        tag: TAG,
        auth: write,
        query: 'webhook.rotate.query',
        response: 'webhook.secret.view',
        handler: async ({ params, query: q, body, tenant }) => {
          noBody(body);
          const r = await store.rotateSecret(tenant.id, params.webhook_id, q.overlap_seconds * 1000);
          if (!r) throw errors.notFound(`Webhook ${params.webhook_id} not found`);
          return { ...presentWebhook(r.webhook), secret: r.secret };
        },
      }),
    ),
    ...bothForms(
      route({
        gateway: 'admin',
        method: 'POST',
        path: '/v1/webhooks/:webhook_id/ping',
        summary:
          'Send a signed ping event to the endpoint now (also when it is off) and answer with the delivery and its attempt',
        tag: TAG,
        auth: write,
        response: 'delivery.view',
        handler: async ({ params, body, tenant }) => {
          noBody(body);
          const w = await mustGet(tenant.id, params.webhook_id);
          const id = randomUUID();
          const startedAt = clock.now();
          const payload = pingBody(tenant.id, w.id, startedAt);
          const headers = {
            ...signatureHeaders(store.signingSecrets(w, startedAt), id, startedAt / 1000, payload),
            ...deliveryHeaders(PING, 1),
          };
          const result = await sender.send(w.url, headers, payload);
          await recordPing(
            deps.sql,
            { id, tenant_id: tenant.id, webhook_id: w.id, body: payload },
            result,
            startedAt,
            clock.now(),
          );
          return presentDelivery((await store.getDelivery(tenant.id, w.id, id))!, true);
        },
      }),
    ),
  ];
}
