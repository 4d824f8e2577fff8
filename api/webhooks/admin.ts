/**
 * Admin routes of outbound webhooks (scope webhooks:read / webhooks:write), under
 * `/v1/webhooks?tenant_id=` and `/v1/tenants/{tenant_id}/webhooks` (docs/webhooks.md).
 */
import { randomUUID } from 'node:crypto';
import type { Sql } from '../../adapters/sql/types';
import type { Clock } from '../../core/clock';
import { checkRegistrableName, checkUrl, type Resolver } from '../../core/webhooks/address';
import { PING } from '../../core/webhooks/events';
import { pingBody, recordPing } from '../../core/webhooks/queue';
import { signatureHeaders } from '../../core/webhooks/signing';
import type { Delivery, WebhookRow, WebhookStore } from '../../core/webhooks/store';
import { deliveryHeaders, systemResolver, WebhookSender } from '../../core/webhooks/sender';
import type { WebhookConfig } from '../../shared/settings';
import { scope } from '../../http/auth/scopes';
import { errors } from '../../http/errors';
import { route, type RouteSpec } from '../../http/route';
import { validateOrThrow } from '../../http/validate';
import { bothForms } from '../leaderboards/admin';

export interface WebhookAdminDeps {
  sql: Sql;
  clock: Clock;
  store: WebhookStore;
  config: WebhookConfig;
  version: string;
  /** DNS resolution for the registration check; the system resolver by default. */
  resolve?: Resolver;
  /** How long the registration check waits for DNS; 2 s by default. */
  resolveTimeoutMs?: number;
}

const read = { kind: 'admin', scope: scope.read('webhooks'), tenant: true } as const;
const write = { kind: 'admin', scope: scope.write('webhooks'), tenant: true } as const;
const TAG = 'Webhooks';

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

export function presentWebhook(w: WebhookRow) {
  return {
    id: w.id,
    tenant_id: w.tenant_id,
    url: w.url,
    description: w.description,
    event_types: w.event_types,
    active: w.active,
    disabled_reason: w.disabled_reason,
    disabled_at: iso(w.disabled_at),
    failing_since: iso(w.failing_since),
    last_success_at: iso(w.last_success_at),
    secret_rotated_at: iso(w.secret_rotated_at),
    previous_secret_expires_at: iso(w.previous_secret_expires_at),
    created_at: iso(w.created_at),
    updated_at: iso(w.updated_at),
  };
}

export function presentDelivery(d: Delivery, withPayload = false) {
  return {
    id: d.id,
    webhook_id: d.webhook_id,
    event_type: d.event_type,
    status: d.status,
    attempt_count: d.attempts,
    next_attempt_at: iso(d.next_attempt_at),
    last_status_code: d.last_status_code,
    last_error: d.last_error,
    created_at: iso(d.created_at),
    updated_at: iso(d.updated_at),
    completed_at: iso(d.completed_at),
    attempts: d.log.map((a) => ({
      attempt: a.attempt,
      attempted_at: iso(a.attempted_at),
      succeeded: a.succeeded,
      status_code: a.status_code,
      duration_ms: a.duration_ms,
      error: a.error,
      response_body: a.response_body,
    })),
    ...(withPayload ? { payload: JSON.parse(d.body) as unknown } : {}),
  };
}

/** Routes without parameters in their body accept none: an absent body or `{}`. */
function noBody(body: unknown): void {
  if (body !== undefined) validateOrThrow('empty', body, 'body');
}

const time = (v: string | undefined) => (v === undefined ? undefined : Date.parse(v));

export function webhookAdminRoutes(deps: WebhookAdminDeps): RouteSpec[] {
  const { store, clock, config } = deps;
  const resolve = deps.resolve ?? systemResolver;
  const sender = new WebhookSender({
    allowPrivate: config.allowPrivate,
    timeoutMs: config.timeoutMs,
    userAgent: `Ludus-Webhooks/${deps.version}`,
  });

  const mustGet = async (tenantId: string, id: string) => {
    const w = await store.get(tenantId, id);
    if (!w) throw errors.notFound(`Webhook ${id} not found`);
    return w;
  };

  /** The registration check: syntax and literal addresses, then the name's current DNS answers. */
  const checkRegistrable = async (url: string) => {
    const v = checkUrl(url, config.allowPrivate);
    if (!v.ok) throw errors.validation(`body.url: ${v.reason}`);
    if (v.ip || config.allowPrivate) return;
    // A name that does not exist (yet) is accepted; every delivery checks again. A refused address
    // answers 400, a check that could not finish 503 (http/domain-errors.ts).
    await checkRegistrableName(v.hostname, resolve, deps.resolveTimeoutMs);
  };

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

function inactive(w: WebhookRow) {
  return errors.conflict(
    `Webhook ${w.id} is off${w.disabled_reason ? ` (${w.disabled_reason})` : ''}; turn it on with PUT {"active": true} first`,
  );
}
