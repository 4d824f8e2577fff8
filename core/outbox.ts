/**
 * The outbox: outbound events (webhooks) written in the same transaction as the change that caused
 * them, so a committed change always has its event and a rolled-back one never does. The
 * dispatcher (dispatcher/, docs/webhooks.md) fans every row out to the tenant's matching webhook
 * endpoints and delivers it. `dedupe_key` makes enqueueing idempotent per tenant (for as long as
 * the row is kept: LUDUS_WEBHOOK_RETENTION_DAYS after its fan-out).
 *
 * `enqueue` is THE call a feature uses to emit a webhook event:
 *
 *   await enqueue(q, {                       // q: the feature's own transaction
 *     tenant_id, event_type: 'coupon.redeemed', created_at: now,
 *     dedupe_key: `coupon.redeemed:${couponId}:${n}`,
 *     payload: { user_id, code, reward_item },  // the SPEC.md fields of the event type
 *   });
 *
 * The payload IS the delivered body. Its envelope (`event_type`, `tenant_id`, and `timestamp`, the
 * ISO time of `created_at`) is filled in when absent; a payload that names another event type or
 * tenant than the event is a programming error and throws. Payload shapes: core/webhooks/events.ts.
 *
 * Webhooks follow facts: the outbox is one subscriber of the fact bus (core/facts.ts),
 * `outboxReactions` below, registered first, which turns each fact that has a webhook into its
 * event, in the fact's transaction. A feature whose change has a webhook emits the fact and adds
 * its rendering here; `enqueue` itself stays for events that are no fact of a feature (tests).
 */
import type { Queryable } from '../adapters/sql/types';
import { mayHave } from './definitions/presence';
import type { OrderMoved, Reactions, WalletMoved } from './facts';

export interface OutboxEvent {
  tenant_id: string;
  event_type: string;
  /** Unique per tenant for one logical event, e.g. `leaderboard.window_completed:<lb>:<window>`. */
  dedupe_key: string;
  payload: Record<string, unknown>;
  created_at: number;
}

/** Enqueues an event; a second call with the same dedupe key changes nothing. Returns true when new. */
export async function enqueue(q: Queryable, e: OutboxEvent): Promise<boolean> {
  return (await enqueueMany(q, [e])) > 0;
}

/**
 * Enqueues events in one statement, in their order; returns how many were new. An event of a
 * tenant that the transaction read has no webhook endpoint (core/definitions/presence.ts: the
 * pipeline's batches) is not written: no endpoint could receive it (docs/webhooks.md "Which
 * events are recorded").
 */
export async function enqueueMany(q: Queryable, all: OutboxEvent[]): Promise<number> {
  const es = all.filter((e) => mayHave(q, e.tenant_id, 'webhooks'));
  if (es.length === 0) return 0;
  const r = await q.query(
    `INSERT INTO outbox (tenant_id, event_type, dedupe_key, payload, created_at)
     SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::jsonb[], $5::bigint[])
     ON CONFLICT (tenant_id, dedupe_key) DO NOTHING`,
    [
      es.map((e) => e.tenant_id),
      es.map((e) => e.event_type),
      es.map((e) => e.dedupe_key),
      es.map((e) => JSON.stringify(withEnvelope(e))),
      es.map((e) => e.created_at),
    ],
  );
  return r.rowCount;
}

/** The payload with `event_type`, `tenant_id` and `timestamp` filled in (and checked). */
export function withEnvelope(e: OutboxEvent): Record<string, unknown> {
  const p = e.payload;
  if (p.event_type !== undefined && p.event_type !== e.event_type)
    throw new Error(`outbox payload event_type ${String(p.event_type)} differs from ${e.event_type}`);
  if (p.tenant_id !== undefined && p.tenant_id !== e.tenant_id)
    throw new Error(`outbox payload tenant_id differs from the event's tenant`);
  return {
    event_type: e.event_type,
    tenant_id: e.tenant_id,
    timestamp: typeof p.timestamp === 'string' ? p.timestamp : new Date(e.created_at).toISOString(),
    ...p,
  };
}

const iso = (ms: number) => new Date(ms).toISOString();

/** currency.earned / currency.spent of a wallet movement (docs/webhooks.md). */
function currencyEvent(eventType: 'currency.earned' | 'currency.spent', f: WalletMoved): OutboxEvent {
  return {
    tenant_id: f.tenant_id,
    event_type: eventType,
    dedupe_key: `${eventType}:${f.transaction_id}`,
    created_at: f.now,
    payload: {
      event_type: eventType,
      tenant_id: f.tenant_id,
      timestamp: iso(f.now),
      user_id: f.user_id,
      data: {
        currency_id: f.currency_id,
        amount: f.amount,
        new_balance: f.balance_after,
        source_type: f.source_type,
        transaction_id: f.transaction_id,
      },
    },
  };
}

/** order.<event> of an order's move (docs/webhooks.md, docs/store.md). */
function orderEvent(f: OrderMoved): OutboxEvent {
  const eventType = `order.${f.event}`;
  return {
    tenant_id: f.tenant_id,
    event_type: eventType,
    dedupe_key: `${eventType}:${f.order_id}:${f.version}`,
    created_at: f.now,
    payload: {
      event_type: eventType,
      tenant_id: f.tenant_id,
      timestamp: iso(f.now),
      data: {
        order_id: f.order_id,
        user_id: f.user_id,
        reward_id: f.reward_id,
        reward_slug: f.reward_slug,
        variant_id: f.variant_id,
        source_type: f.source_type,
        fulfillment_type: f.fulfillment_type,
        fulfillment_data: f.fulfillment_data,
      },
    },
  };
}

/**
 * The outbox's subscriptions: every fact with a webhook becomes its outbox event, one statement
 * per batch, in the facts' order.
 */
export const outboxReactions: Reactions = {
  feature: 'outbox',
  on: {
    'wallet.credited': async (q, facts) => {
      await enqueueMany(
        q,
        facts.map((f) => currencyEvent('currency.earned', f)),
      );
    },
    'wallet.debited': async (q, facts) => {
      await enqueueMany(
        q,
        facts.map((f) => currencyEvent('currency.spent', f)),
      );
    },
    'tier.changed': async (q, facts) => {
      await enqueueMany(
        q,
        facts.map((f) => ({
          tenant_id: f.tenant_id,
          event_type: 'tier.changed',
          dedupe_key: `tier.changed:${f.user_id}:${f.currency_id}:${f.previous_tier_id ?? '-'}:${f.new_tier?.tier_id ?? '-'}:${f.lifetime_points}`,
          created_at: f.now,
          payload: {
            event_type: 'tier.changed',
            tenant_id: f.tenant_id,
            timestamp: iso(f.now),
            user_id: f.user_id,
            data: {
              currency_id: f.currency_id,
              previous_tier: f.previous_tier,
              new_tier: f.new_tier,
              lifetime_points: f.lifetime_points,
            },
          },
        })),
      );
    },
    // Streaks (docs/streaks.md): SPEC.md's streak.milestone_reached, and the three of docs/webhooks.md.
    'streak.milestone_reached': async (q, facts) => {
      await enqueueMany(
        q,
        facts.map((f) => ({
          tenant_id: f.tenant_id,
          event_type: 'streak.milestone_reached',
          dedupe_key: `streak.milestone_reached:${f.streak_id}:${f.user_id}:${f.threshold}:${f.run ?? 0}`,
          created_at: f.now,
          payload: {
            event_type: 'streak.milestone_reached',
            tenant_id: f.tenant_id,
            timestamp: iso(f.now),
            streak_id: f.streak_id,
            user_id: f.user_id,
            streak_days: f.streak_days,
            threshold: f.threshold,
            items: f.items ?? [],
          },
        })),
      );
    },
    'streak.at_risk': async (q, facts) => {
      await enqueueMany(
        q,
        facts.map((f) => ({
          tenant_id: f.tenant_id,
          event_type: 'streak.at_risk',
          dedupe_key: `streak.at_risk:${f.streak_id}:${f.user_id}:${f.period_start}`,
          created_at: f.now,
          payload: {
            event_type: 'streak.at_risk',
            tenant_id: f.tenant_id,
            timestamp: iso(f.now),
            streak_id: f.streak_id,
            user_id: f.user_id,
            current_count: f.current_count,
            period_ends_at: iso(f.period_end),
            period_progress: { value: f.value, min: f.min },
          },
        })),
      );
    },
    'streak.broken': async (q, facts) => {
      await enqueueMany(
        q,
        facts.map((f) => ({
          tenant_id: f.tenant_id,
          event_type: 'streak.broken',
          dedupe_key: `streak.broken:${f.streak_id}:${f.user_id}:${f.run ?? f.now}`,
          created_at: f.now,
          payload: {
            event_type: 'streak.broken',
            tenant_id: f.tenant_id,
            timestamp: iso(f.now),
            streak_id: f.streak_id,
            user_id: f.user_id,
            previous_count: f.previous_count,
            longest_count: f.longest_count,
            period_ended_at: iso(f.period_end ?? f.now),
          },
        })),
      );
    },
    'streak.freeze_used': async (q, facts) => {
      await enqueueMany(
        q,
        facts.map((f) => ({
          tenant_id: f.tenant_id,
          event_type: 'streak.freeze_used',
          dedupe_key: `streak.freeze_used:${f.streak_id}:${f.user_id}:${f.period_start ?? f.now}`,
          created_at: f.now,
          payload: {
            event_type: 'streak.freeze_used',
            tenant_id: f.tenant_id,
            timestamp: iso(f.now),
            streak_id: f.streak_id,
            user_id: f.user_id,
            current_count: f.current_count,
            freezes_left: f.freezes_left,
            period_ended_at: iso(f.period_end ?? f.now),
          },
        })),
      );
    },
    'achievement.completed': async (q, facts) => {
      // AchievementCompletedEvent (core/webhooks/events.ts); once per user and achievement.
      await enqueueMany(
        q,
        facts.map((f) => ({
          tenant_id: f.tenant_id,
          event_type: 'achievement.completed',
          dedupe_key: `achievement.completed:${f.achievement_id}:${f.user_id}`,
          created_at: f.now,
          payload: {
            event_type: 'achievement.completed',
            tenant_id: f.tenant_id,
            timestamp: iso(f.now),
            user_id: f.user_id,
            achievement_id: f.achievement_id,
            achievement_name: f.name,
            completed_at: iso(f.now),
            items: f.items,
          },
        })),
      );
    },
    'coupon.redeemed': async (q, facts) => {
      await enqueueMany(
        q,
        facts.map((f) => ({
          tenant_id: f.tenant_id,
          event_type: 'coupon.redeemed',
          dedupe_key: `coupon.redeemed:${f.redemption_id}`,
          created_at: f.now,
          payload: {
            event_type: 'coupon.redeemed',
            tenant_id: f.tenant_id,
            timestamp: iso(f.now),
            user_id: f.user_id,
            code: f.code,
            reward_item: f.reward_item,
            definition_id: f.definition_id,
            coupon_id: f.coupon_id,
          },
        })),
      );
    },
    'coupon.generated': async (q, facts) => {
      await enqueueMany(
        q,
        facts.map((f) => ({
          tenant_id: f.tenant_id,
          event_type: 'coupon.generated',
          dedupe_key: `coupon.generated:${f.coupon_id}`,
          created_at: f.now,
          payload: {
            event_type: 'coupon.generated',
            tenant_id: f.tenant_id,
            timestamp: iso(f.now),
            user_id: f.user_id,
            code: f.code,
            definition_id: f.definition_id,
            coupon_id: f.coupon_id,
            trigger: f.trigger,
            expires_at: f.expires_at,
          },
        })),
      );
    },
    'order.moved': async (q, facts) => {
      await enqueueMany(q, facts.map(orderEvent));
    },
    'leaderboard.window_completed': async (q, facts) => {
      await enqueueMany(
        q,
        facts.map((f) => ({
          tenant_id: f.tenant_id,
          event_type: 'leaderboard.window_completed',
          dedupe_key: `leaderboard.window_completed:${f.leaderboard_id}:${f.window_key}`,
          created_at: f.now,
          payload: {
            event_type: 'leaderboard.window_completed',
            tenant_id: f.tenant_id,
            timestamp: iso(f.now),
            leaderboard_id: f.leaderboard_id,
            window_key: f.window_key,
            completed_at: iso(f.now),
            reward_distribution: f.reward_distribution,
          },
        })),
      );
    },
  },
};
