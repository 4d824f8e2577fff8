/**
 * Webhook event types and their payloads (SPEC.md "Outbound webhooks"; docs/webhooks.md has the
 * table). A feature emits an event with `enqueue` (core/outbox.ts) inside the transaction of the
 * change; the payload it enqueues IS the delivered JSON body: the dispatcher adds nothing and
 * changes nothing, except that the envelope keys `event_type`, `tenant_id`, `timestamp` come first.
 */

/** Every event type of SPEC.md's table; an endpoint subscribes to some of them or to `*`. */
export const EVENT_TYPES = [
  'order.created',
  'order.claimed',
  'order.fulfilling',
  'order.completed',
  'order.failed',
  'currency.earned',
  'currency.spent',
  'tier.changed',
  'leaderboard.window_completed',
  'streak.milestone_reached',
  'streak.at_risk',
  'streak.broken',
  'streak.freeze_used',
  'coupon.redeemed',
  'achievement.completed',
  'coupon.generated',
  'order.expired',
  'order.refunded',
] as const;

export type EventType = (typeof EVENT_TYPES)[number];

/** Sent by the test-ping route only; every endpoint receives it whatever its event_types. */
export const PING = 'ping';

/** The keys every body starts with. */
export interface Envelope {
  event_type: string;
  tenant_id: string;
  /** ISO 8601 UTC time of the change. */
  timestamp: string;
}

export interface RewardItemView {
  item_id: string;
  name: string;
  reward_type: string;
  payload: Record<string, unknown>;
}

/**
 * order.created, order.claimed, order.fulfilling, order.completed, order.failed, and (not in
 * SPEC.md; docs/store.md) order.expired, order.refunded. `fulfillment_data` is the order's status
 * after the move (state, started_at, data {type, external_id}, tracking_number, reason, ...);
 * `reward_slug` is null for an implicit order of a reward item; variant_id and source_type added.
 */
export interface OrderEvent extends Envelope {
  data: {
    order_id: string;
    user_id: string;
    reward_id: string;
    reward_slug: string | null;
    variant_id: string;
    source_type: string;
    fulfillment_type: string;
    fulfillment_data: Record<string, unknown> | null;
  };
}

/** currency.earned, currency.spent */
export interface CurrencyEvent extends Envelope {
  user_id: string;
  data: {
    currency_id: string;
    /** Positive: the amount earned or spent. */
    amount: number;
    new_balance: number;
    source_type: string;
    transaction_id: string;
  };
}

export interface TierBrief {
  tier_id: string;
  tier_name: string;
  tier_level: number;
}

/** tier.changed (SPEC.md: not shown; defined here and in docs/webhooks.md) */
export interface TierChangedEvent extends Envelope {
  user_id: string;
  data: {
    currency_id: string;
    /** null when the user had no tier before. */
    previous_tier: TierBrief | null;
    /** null when the user no longer reaches any tier. */
    new_tier: TierBrief | null;
    lifetime_points: number;
  };
}

/** leaderboard.window_completed */
export interface WindowCompletedEvent extends Envelope {
  leaderboard_id: string;
  window_key: string;
  completed_at: string;
  reward_distribution: Array<{ user_id: string; rank: number; score: number; items: RewardItemView[] }>;
}

/** streak.milestone_reached (`threshold` beyond SPEC.md: the milestone reached) */
export interface StreakMilestoneEvent extends Envelope {
  streak_id: string;
  user_id: string;
  streak_days: number;
  threshold: number;
  items: RewardItemView[];
}

/** streak.at_risk (not in SPEC.md; docs/webhooks.md, docs/streaks.md) */
export interface StreakAtRiskEvent extends Envelope {
  streak_id: string;
  user_id: string;
  current_count: number;
  period_ends_at: string;
  period_progress: { value: number; min: number };
}

/** streak.broken (not in SPEC.md; docs/webhooks.md, docs/streaks.md) */
export interface StreakBrokenEvent extends Envelope {
  streak_id: string;
  user_id: string;
  previous_count: number;
  longest_count: number;
  period_ended_at: string;
}

/** streak.freeze_used (not in SPEC.md; docs/webhooks.md, docs/streaks.md) */
export interface StreakFreezeUsedEvent extends Envelope {
  streak_id: string;
  user_id: string;
  current_count: number;
  freezes_left: number;
  period_ended_at: string;
}

/** coupon.redeemed */
export interface CouponRedeemedEvent extends Envelope {
  user_id: string;
  code: string;
  reward_item: RewardItemView | null;
  /** Beyond SPEC.md's fields: the definition and the user coupon redeemed. */
  definition_id: string;
  coupon_id: string;
}

/** coupon.generated (not in SPEC.md's table; defined here and in docs/webhooks.md): automatic generation */
export interface CouponGeneratedEvent extends Envelope {
  user_id: string;
  code: string;
  definition_id: string;
  coupon_id: string;
  /** achievement_completed, streak_milestone or leaderboard_rank */
  trigger: string;
  expires_at: string | null;
}

/** achievement.completed (SPEC.md: not shown; defined here and in docs/webhooks.md) */
export interface AchievementCompletedEvent extends Envelope {
  user_id: string;
  achievement_id: string;
  achievement_name: string;
  completed_at: string;
  /** Reward items granted through the achievement's reward config; empty when none. */
  items: RewardItemView[];
}

/** ping (the test-ping route) */
export interface PingEvent extends Envelope {
  webhook_id: string;
  message: string;
}

const ENVELOPE_KEYS = ['event_type', 'tenant_id', 'timestamp'];

/**
 * The delivered body of a payload: the same object, serialised with the envelope keys first (the
 * outbox stores payloads as jsonb, which does not keep key order).
 */
export function bodyOf(payload: Record<string, unknown>): string {
  const ordered: Record<string, unknown> = {};
  for (const k of ENVELOPE_KEYS) if (k in payload) ordered[k] = payload[k];
  for (const [k, v] of Object.entries(payload)) if (!ENVELOPE_KEYS.includes(k)) ordered[k] = v;
  return JSON.stringify(ordered);
}
