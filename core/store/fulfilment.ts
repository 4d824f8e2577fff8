/**
 * Fulfilment of orders in state fulfilling (docs/store.md "Fulfilment"):
 * - wallet: the xp credit or the badge goes through the one granting service (idempotent on
 *   `order:<order>:<version>`), then the order is completed (failed when the wallet refuses);
 * - manual: nothing here; the admin PUTs the status;
 * - api: the dispatcher role calls the tenant's endpoint (`config.url`), signed like webhooks and
 *   under the same address rules (core/webhooks/sender.ts), retried per `retry.max_attempts` and
 *   `backoff_seconds`. At least once: an attempt's result is recorded after the call, under a
 *   lease; a dispatcher killed mid-call leaves the lease to expire and the call is made again with
 *   the same `Idempotency-Key` (the order id).
 */
import type { Queryable, Sql } from '../../adapters/sql/types';
import type { Granter } from '../rewards/grant';
import type { RewardItem } from '../rewards/items';
import { signatureHeaders } from '../webhooks/signing';
import type { WebhookSender } from '../webhooks/sender';
import type { OrderRow, OrderStore } from './orders';

export const DEFAULT_MAX_ATTEMPTS = 3;
export const DEFAULT_BACKOFF_SECONDS = [5, 30, 120];

const iso = (ms: number) => new Date(ms).toISOString();

export class Fulfiller {
  constructor(
    private readonly granter: Granter,
    private readonly orders: OrderStore,
  ) {}

  /**
   * Starts the fulfilment of an order that just entered `fulfilling`, in its transaction: a wallet
   * order is delivered at once; api orders wait for the dispatcher (next_attempt_at); manual for
   * the admin.
   */
  async start(q: Queryable, o: OrderRow, now: number): Promise<OrderRow> {
    if (o.state !== 'fulfilling' || o.fulfillment.type !== 'wallet') return o;
    return this.deliverWallet(q, o, now);
  }

  /** Credits the xp or records the badge through the granting service, then completes (or fails). */
  async deliverWallet(q: Queryable, o: OrderRow, now: number): Promise<OrderRow> {
    const f = o.fulfillment;
    const base = {
      tenant_id: o.tenant_id,
      name: o.reward_name,
      description: null,
      created_at: '',
      updated_at: '',
    };
    const item: RewardItem =
      f.item_type === 'badge'
        ? { ...base, item_id: f.item_id ?? 'badge', reward_type: 'badge', payload: { badge_id: f.item_id } }
        : { ...base, item_id: 'xp', reward_type: 'xp', payload: { amount: f.amount } };
    const [g] = await this.granter.grant(q, {
      tenant_id: o.tenant_id,
      user_id: o.user_id,
      items: [item],
      source_type: 'reward_order',
      source_ref: o.id,
      grant_key: `order:${o.id}:${o.version}`,
      now,
    });
    if (g && (g.status === 'credited' || g.status === 'owned'))
      return this.orders.apply(
        q,
        o,
        'complete',
        { status: { completed_at: iso(now), data: { type: 'wallet', external_id: g.transaction_id } } },
        now,
      );
    return this.orders.apply(
      q,
      o,
      'fail',
      {
        status: {
          reason:
            f.item_type === 'badge'
              ? 'the badge could not be recorded'
              : 'the wallet refused the xp credit (does the currency xp exist and is it active?)',
        },
      },
      now,
    );
  }
}

/** Orders whose automatic fulfilment is due, leased to `owner` for `leaseMs`. */
export async function leaseDue(
  sql: Sql,
  owner: string,
  now: number,
  leaseMs: number,
  limit: number,
): Promise<OrderRow[]> {
  const r = await sql.query<OrderRow>(
    `UPDATE reward_orders o SET lease_owner = $1, lease_until = $2
     FROM (SELECT tenant_id, id FROM reward_orders
           WHERE state = 'fulfilling' AND next_attempt_at IS NOT NULL AND next_attempt_at <= $3
             AND (lease_until IS NULL OR lease_until < $3)
           ORDER BY next_attempt_at LIMIT $4 FOR UPDATE SKIP LOCKED) d
     WHERE o.tenant_id = d.tenant_id AND o.id = d.id RETURNING o.*`,
    [owner, now + leaseMs, now, limit],
  );
  return r.rows;
}

/** The body of an api fulfilment call (docs/store.md "api fulfilment: the exchange"). */
export function apiRequestBody(o: OrderRow, attempt: number, now: number): string {
  const { url: _url, ...config } = o.config;
  return JSON.stringify({
    event_type: 'order.fulfill',
    tenant_id: o.tenant_id,
    timestamp: iso(now),
    order_id: o.id,
    user_id: o.user_id,
    reward_id: o.reward_id,
    reward_slug: o.reward_slug,
    variant_id: o.variant_id,
    source_type: o.source_type,
    source_ref: o.source_ref,
    fields: o.fields,
    config,
    attempt,
  });
}

export interface ApiCallDeps {
  sql: Sql;
  orders: OrderStore;
  fulfiller: Fulfiller;
  sender: Pick<WebhookSender, 'send'>;
  /** The tenant's signing secret (its hmac_secret), or null when the tenant is gone. */
  secret(tenantId: string): Promise<string | null>;
  now(): number;
}

/**
 * One due order, leased by `owner`: a wallet order is delivered; an api order's endpoint is called
 * once and the result recorded (completed, failed after the last attempt, or the next attempt
 * scheduled). Nothing is recorded when the lease was lost meanwhile.
 */
export async function runDue(deps: ApiCallDeps, owner: string, o: OrderRow): Promise<string> {
  const mine = async (q: Queryable) => {
    const cur = await deps.orders.lock(q, o.tenant_id, o.id);
    return cur && cur.state === 'fulfilling' && cur.lease_owner === owner ? cur : null;
  };
  if (o.fulfillment.type === 'wallet') {
    return deps.sql.tx(async (q) => {
      const cur = await mine(q);
      if (!cur) return 'lease lost';
      return (await deps.fulfiller.deliverWallet(q, cur, deps.now())).state;
    });
  }
  if (o.fulfillment.type !== 'api') {
    await deps.sql.query(
      'UPDATE reward_orders SET next_attempt_at = NULL, lease_owner = NULL, lease_until = NULL WHERE tenant_id = $1 AND id = $2',
      [o.tenant_id, o.id],
    );
    return 'manual';
  }
  const attempt = o.attempts + 1;
  const url = typeof o.config.url === 'string' ? o.config.url : '';
  const secret = await deps.secret(o.tenant_id);
  const startedAt = deps.now();
  const body = apiRequestBody(o, attempt, startedAt);
  const result = secret
    ? await deps.sender.send(
        url,
        {
          ...signatureHeaders([secret], `order_${o.id}`, startedAt / 1000, body),
          'Idempotency-Key': o.id,
          'X-Ludus-Order-Id': o.id,
          'X-Ludus-Attempt': String(attempt),
        },
        body,
      )
    : {
        ok: false,
        statusCode: null,
        error: 'the tenant no longer exists',
        responseBody: null,
        durationMs: 0,
      };
  return deps.sql.tx(async (q) => {
    const cur = await mine(q);
    if (!cur) return 'lease lost';
    const now = deps.now();
    if (result.ok) {
      let answer: { type?: unknown; external_id?: unknown } = {};
      try {
        answer = JSON.parse(result.responseBody ?? '{}') ?? {};
      } catch {
        /* a 2xx without a JSON body still completes the order */
      }
      const data = {
        type: typeof answer.type === 'string' ? answer.type.slice(0, 100) : 'api',
        external_id:
          typeof answer.external_id === 'string' || typeof answer.external_id === 'number'
            ? String(answer.external_id).slice(0, 200)
            : null,
      };
      await deps.orders.apply(
        q,
        cur,
        'complete',
        {
          status: { completed_at: iso(now), data, attempts: attempt },
          clear: ['last_error'],
          attempts: attempt,
        },
        now,
      );
      return 'completed';
    }
    const error = (result.error ?? `the endpoint answered ${result.statusCode}`).slice(0, 500);
    const retry = cur.fulfillment.retry ?? {};
    const max = retry.max_attempts ?? DEFAULT_MAX_ATTEMPTS;
    if (attempt >= max) {
      await deps.orders.apply(
        q,
        cur,
        'fail',
        {
          status: {
            reason: `api fulfilment failed after ${attempt} attempts: ${error}`,
            attempts: attempt,
            last_error: error,
          },
          attempts: attempt,
        },
        now,
      );
      return 'failed';
    }
    const backoff = retry.backoff_seconds?.length ? retry.backoff_seconds : DEFAULT_BACKOFF_SECONDS;
    const delay = backoff[Math.min(attempt - 1, backoff.length - 1)]! * 1000;
    await q.query(
      `UPDATE reward_orders SET attempts = $3, next_attempt_at = $4, lease_owner = NULL, lease_until = NULL,
         status = status || $5::jsonb, updated_at = $6 WHERE tenant_id = $1 AND id = $2`,
      [
        cur.tenant_id,
        cur.id,
        attempt,
        now + delay,
        JSON.stringify({ attempts: attempt, last_error: error }),
        now,
      ],
    );
    return 'retry';
  });
}
