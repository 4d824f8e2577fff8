/**
 * What the webhooks' admin route files share: the dependencies, the auth rules, the presenters,
 * and the checks of an endpoint the routes act on.
 */
import type { Sql } from '../../adapters/sql/types';
import type { Clock } from '../../core/clock';
import type { Resolver } from '../../core/webhooks/address';
import type { Delivery, WebhookRow, WebhookStore } from '../../core/webhooks/store';
import type { WebhookConfig } from '../../shared/settings';
import { scope } from '../../http/auth/scopes';
import { errors } from '../../http/errors';
import { validateOrThrow } from '../../http/validate';

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

export const read = { kind: 'admin', scope: scope.read('webhooks'), tenant: true } as const;
export const write = { kind: 'admin', scope: scope.write('webhooks'), tenant: true } as const;
export const TAG = 'Webhooks';

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
export function noBody(body: unknown): void {
  if (body !== undefined) validateOrThrow('empty', body, 'body');
}

export const time = (v: string | undefined) => (v === undefined ? undefined : Date.parse(v));

/** The tenant's endpoint, or 404. */
export async function mustGetWebhook(store: WebhookStore, tenantId: string, id: string): Promise<WebhookRow> {
  const w = await store.get(tenantId, id);
  if (!w) throw errors.notFound(`Webhook ${id} not found`);
  return w;
}

/** 409 for an action on an endpoint that is off. */
export function inactive(w: WebhookRow) {
  return errors.conflict(
    `Webhook ${w.id} is off${w.disabled_reason ? ` (${w.disabled_reason})` : ''}; turn it on with PUT {"active": true} first`,
  );
}
