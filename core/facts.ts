/**
 * Facts: how features react to each other inside the transaction (ARCHITECTURE.md "Features react
 * to each other through facts"). A feature that changed something emits a typed fact on this
 * in-process bus, with the SQL handle of the transaction that made the change; every subscriber of
 * that fact runs at once, in that transaction, in a defined order, so a reaction commits exactly
 * when its cause does and rolls back with it. No feature calls another feature's store to react,
 * and there are no hooks between two features.
 *
 * - The facts and their shapes are listed below (`FactTypes`); a shape is plain data (ids,
 *   numbers, the time of the change), never a feature's own types.
 * - Each feature declares what it listens to in one place, a `Reactions` value (for example
 *   `tierReactions` in core/wallet/tiers.ts); the composition root registers the features in one
 *   list (runtime/services.ts). The subscribers of a fact run in that list's order, the outbox
 *   (webhooks) first.
 * - Facts are emitted in batches (one statement per batch, as the wallet writes its ledger): a
 *   subscriber receives every fact of one `emit`, in order. An empty batch calls nobody.
 * - A fact emitted by a subscriber (or by anything it calls) is one level deeper than the fact
 *   that subscriber is reacting to; past `maxDepth` the emit throws `FactDepthError`, which rolls
 *   the transaction back (a loop such as achievement -> reward -> xp -> achievement stops there).
 * - A subscriber's error is not caught: it rolls the emitter's transaction back.
 * - A fact may declare a reply: what its subscribers tell the emitter back, for the emitter's own
 *   record only (the leaderboard close puts the payout's distribution in its webhook). `emit`
 *   answers the replies in subscriber order.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { Queryable } from '../adapters/sql/types';

/** A catalogue entry: the shape of one fact and, when its emitter reads one, its subscribers' reply. */
export interface FactSpec<F, R = never> {
  fact: F;
  reply: R;
}

/** A balance movement, for wallet.credited and wallet.debited (one per ledger row). */
export interface WalletMoved {
  tenant_id: string;
  user_id: string;
  currency_id: string;
  /** Positive, in minor units: the amount earned or spent. */
  amount: number;
  balance_after: number;
  /** The balance's lifetime earnings after the movement (a debit leaves them as they were). */
  lifetime_earned: number;
  source_type: string;
  /** The ledger row. */
  transaction_id: string;
  now: number;
}

export interface TierBrief {
  tier_id: string;
  tier_name: string;
  tier_level: number;
}

/** A user's loyalty tier of a currency moved (up, down, or to none). */
export interface TierChanged {
  tenant_id: string;
  user_id: string;
  currency_id: string;
  /** The tier the user had, as stored (it may have been deleted since: then previous_tier is null). */
  previous_tier_id: string | null;
  previous_tier: TierBrief | null;
  new_tier: TierBrief | null;
  lifetime_points: number;
  now: number;
}

/** A user reached a level of a level system for the first time. */
export interface LevelReached {
  tenant_id: string;
  user_id: string;
  level_system_id: string;
  currency_id: string;
  level: number;
  /** The system's reward config when the level was reached, or null. */
  reward_config_id: string | null;
  now: number;
}

/** A user's final rank in a closed leaderboard window. */
export interface RankFinalized {
  tenant_id: string;
  leaderboard_id: string;
  window_key: string;
  /** The board's reward config, or null. */
  reward_config_id: string | null;
  user_id: string;
  rank: number;
  score: number;
  now: number;
}

/** One winner's line of a window's reward distribution (the webhook's `reward_distribution`). */
export interface RewardDistributionLine {
  user_id: string;
  rank: number;
  score: number;
  items: Array<{ item_id: string; name: string; reward_type: string; payload: Record<string, unknown> }>;
}

/**
 * What paying final ranks did: the distribution, and why it could not pay in full (its reward
 * config or items are missing, a grant failed), or null.
 */
export interface PayoutReport {
  distribution: RewardDistributionLine[];
  error: string | null;
}

/** A leaderboard window closed with entries, and what its payout distributed. */
export interface WindowCompleted {
  tenant_id: string;
  leaderboard_id: string;
  window_key: string;
  reward_distribution: RewardDistributionLine[];
  now: number;
}

/**
 * A user's streak reached a milestone threshold (once per run of the streak, or once ever when not
 * repeatable). The optional fields are always set by streaks (optional so that tests of subscribers
 * need not build them).
 */
export interface StreakMilestoneReached {
  tenant_id: string;
  user_id: string;
  streak_id: string;
  /** The milestone's threshold, in periods. */
  threshold: number;
  /** The streak's current count when the milestone was reached. */
  streak_days: number;
  /** The milestone's reward item, or null. */
  reward_item_id: string | null;
  /** The definition's reward config (tiers with `milestone` conditions), or null. */
  reward_config_id: string | null;
  /** The run of the streak for a repeatable milestone (a break starts the next run); 0 for a once-ever one. */
  run?: number;
  /** What the milestone granted (its reward item and the config's milestone tiers), for the webhook. */
  items?: Array<{ item_id: string; name: string; reward_type: string; payload: Record<string, unknown> }>;
  now: number;
}

/** A user's streak broke: a period ended unqualified with no freeze to use. */
export interface StreakBroken {
  tenant_id: string;
  user_id: string;
  streak_id: string;
  /** The count the streak had before it broke. */
  previous_count: number;
  longest_count: number;
  /** The run that ended (0 for the first run of the user's streak). */
  run?: number;
  /** The period that ended unqualified (Unix ms). */
  period_start?: number;
  period_end?: number;
  now: number;
}

/** A freeze was used instead of a break. */
export interface StreakFreezeUsed {
  tenant_id: string;
  user_id: string;
  streak_id: string;
  /** The count the freeze kept alive. */
  current_count: number;
  freezes_left: number;
  /** The period the freeze kept (Unix ms). */
  period_start?: number;
  period_end?: number;
  now: number;
}

/** A running streak's period is not yet qualified and ends within the definition's at_risk_seconds. */
export interface StreakAtRisk {
  tenant_id: string;
  user_id: string;
  streak_id: string;
  current_count: number;
  /** The period to qualify (Unix ms) and the progress toward the condition's min in it. */
  period_start: number;
  period_end: number;
  value: number;
  min: number;
  now: number;
}

/** A user completed an achievement (once per user and achievement, ever). */
export interface AchievementCompleted {
  tenant_id: string;
  user_id: string;
  achievement_id: string;
  name: string;
  /** The achievement's reward config, or null. */
  reward_config_id: string | null;
  /** The reward items the completion granted (through the reward config), in grant order; empty when none. */
  items: Array<{ item_id: string; name: string; reward_type: string; payload: Record<string, unknown> }>;
  now: number;
}

/** A user redeemed a coupon. */
export interface CouponRedeemed {
  tenant_id: string;
  user_id: string;
  definition_id: string;
  coupon_id: string;
  /** The redemption's journal row (the webhook's dedupe key). */
  redemption_id: string;
  code: string;
  reward_item_id: string;
  /** The reward item as granted (the webhook's `reward_item`). */
  reward_item: { item_id: string; name: string; reward_type: string; payload: Record<string, unknown> };
  now: number;
}

/** A coupon was generated automatically for a user's outcome (coupons' auto_generate). */
export interface CouponGenerated {
  tenant_id: string;
  user_id: string;
  definition_id: string;
  coupon_id: string;
  code: string;
  /** achievement_completed, streak_milestone or leaderboard_rank. */
  trigger: string;
  /** The outcome's unique key (for example `leaderboard:<board>:<window>:<user>`). */
  source_key: string;
  expires_at: string | null;
  now: number;
}

/** An order was created or moved (core/store/orders.ts): one fact per move, its webhook `order.<event>`. */
export interface OrderMoved {
  tenant_id: string;
  order_id: string;
  user_id: string;
  reward_id: string;
  /** null for an implicit order of a reward item that names no catalog reward. */
  reward_slug: string | null;
  variant_id: string;
  source_type: string;
  fulfillment_type: string;
  /** The order's status after the move: state, started_at, data {type, external_id}, tracking, reason, ... */
  fulfillment_data: Record<string, unknown>;
  event: 'created' | 'claimed' | 'fulfilling' | 'completed' | 'failed' | 'expired' | 'refunded';
  /** The order's version after the move (unique per order and move). */
  version: number;
  now: number;
}

/** Every fact of the service. A feature adding one adds its entry (and its webhook, if any, in core/outbox.ts). */
export interface FactTypes {
  /** Emitted by the wallet (core/wallet/wallet.ts) for every credit, in ledger order. */
  'wallet.credited': FactSpec<WalletMoved>;
  /** Emitted by the wallet for every debit. */
  'wallet.debited': FactSpec<WalletMoved>;
  /** Emitted by tiers (core/wallet/tiers.ts). */
  'tier.changed': FactSpec<TierChanged>;
  /** Emitted by levels (core/levels/levels.ts), lowest level first. */
  'level.reached': FactSpec<LevelReached>;
  /** Emitted by window closing (core/leaderboards/closing.ts), the window's standings in rank order. */
  'leaderboard.rank_finalized': FactSpec<RankFinalized, PayoutReport>;
  /** Emitted by window closing after the ranks' reactions ran. */
  'leaderboard.window_completed': FactSpec<WindowCompleted>;
  /** Emitted by streaks (core/streaks/) when a milestone is reached. */
  'streak.milestone_reached': FactSpec<StreakMilestoneReached>;
  /** Emitted by streaks when a streak breaks (the scheduler's deadline sweep, or a late event's period). */
  'streak.broken': FactSpec<StreakBroken>;
  /** Emitted by streaks when a freeze is used instead of a break. */
  'streak.freeze_used': FactSpec<StreakFreezeUsed>;
  /** Emitted by streaks (the deadline sweep) once per period a running streak is at risk in. */
  'streak.at_risk': FactSpec<StreakAtRisk>;
  /** Emitted by achievements (core/achievements/) when a user completes one. */
  'achievement.completed': FactSpec<AchievementCompleted>;
  /** Emitted by coupons (core/coupons/) for every redemption. */
  'coupon.redeemed': FactSpec<CouponRedeemed>;
  /** Emitted by coupons' automatic generation (core/coupons/auto.ts), one per coupon generated. */
  'coupon.generated': FactSpec<CouponGenerated>;
  /** Emitted by the store (core/store/orders.ts) for every order created or moved. */
  'order.moved': FactSpec<OrderMoved>;
}

/** Any catalogue: fact names to their specs (tests use their own). */
export type Catalogue<C> = { [K in keyof C]: FactSpec<unknown, unknown> };

export type FactName<C = FactTypes> = keyof C & string;
export type Fact<K extends FactName<C>, C extends Catalogue<C> = FactTypes> = C[K]['fact'];
export type Reply<K extends FactName<C>, C extends Catalogue<C> = FactTypes> = C[K]['reply'];

/**
 * A reaction to a batch of facts of one name, run in the emitter's transaction (`q`). It may
 * answer the fact's reply; it may emit further facts (one level deeper).
 */
export type Subscriber<K extends FactName<C>, C extends Catalogue<C> = FactTypes> = (
  q: Queryable,
  facts: ReadonlyArray<Fact<K, C>>,
) => Promise<Reply<K, C> | void>;

/** What one feature listens to: at most one subscriber per fact. */
export interface Reactions<C extends Catalogue<C> = FactTypes> {
  /** The feature's name, in errors and in `subscribersOf`. */
  feature: string;
  on: { [K in FactName<C>]?: Subscriber<K, C> };
}

/**
 * The default depth limit. Today's chains and how deep they go: docs/architecture.md "Facts inside
 * the transaction".
 */
export const MAX_FACT_DEPTH = 32;

export class FactDepthError extends Error {
  constructor(
    readonly chain: readonly string[],
    readonly maxDepth: number,
  ) {
    super(
      `fact depth limit ${maxDepth} exceeded (a loop between reactions?): ${chain.slice(-8).join(' -> ')}`,
    );
    this.name = 'FactDepthError';
  }
}

/** A subscriber as the bus stores it (its fact name is the map key). */
type Stored = (q: Queryable, facts: readonly unknown[]) => Promise<unknown>;

/** The chain of facts whose subscribers are running in this async context (outermost first). */
interface Running {
  chain: readonly string[];
}

export class FactBus<C extends Catalogue<C> = FactTypes> {
  private readonly subs = new Map<string, Array<{ feature: string; fn: Stored }>>();
  private readonly running = new AsyncLocalStorage<Running>();
  private readonly maxDepth: number;

  constructor(opts: { maxDepth?: number } = {}) {
    this.maxDepth = opts.maxDepth ?? MAX_FACT_DEPTH;
  }

  /**
   * Registers features' reactions; the subscribers of a fact run in registration order. Called by
   * the composition root once, before the first emit.
   */
  register(...features: Array<Reactions<C>>): this {
    for (const r of features) {
      for (const [name, fn] of Object.entries(r.on) as Array<[string, Stored | undefined]>) {
        if (!fn) continue;
        const list = this.subs.get(name) ?? [];
        if (list.some((s) => s.feature === r.feature))
          throw new Error(`feature ${r.feature} subscribes to ${name} twice`);
        list.push({ feature: r.feature, fn });
        this.subs.set(name, list);
      }
    }
    return this;
  }

  /** The features subscribed to a fact, in the order they run. */
  subscribersOf(name: FactName<C>): string[] {
    return (this.subs.get(name) ?? []).map((s) => s.feature);
  }

  /**
   * The depth of the fact whose subscriber is running here: 0 outside any subscriber, 1 in a
   * subscriber of a fact emitted at top level, and so on. An emit made here has depth + 1.
   */
  depth(): number {
    return this.running.getStore()?.chain.length ?? 0;
  }

  /**
   * Emits a batch of facts of one name in the transaction `q`: runs every subscriber, in order,
   * each with the whole batch, and answers their replies (in the same order; a subscriber that
   * answers nothing adds none). Throws what a subscriber throws, or `FactDepthError`.
   */
  async emit<K extends FactName<C>>(
    q: Queryable,
    name: K,
    facts: ReadonlyArray<Fact<K, C>>,
  ): Promise<Array<Reply<K, C>>> {
    const chain = [...(this.running.getStore()?.chain ?? []), name];
    if (chain.length > this.maxDepth) throw new FactDepthError(chain, this.maxDepth);
    const replies: Array<Reply<K, C>> = [];
    if (facts.length === 0) return replies;
    for (const s of this.subs.get(name) ?? []) {
      const r = await this.running.run({ chain }, () => s.fn(q, facts));
      if (r !== undefined) replies.push(r as Reply<K, C>);
    }
    return replies;
  }
}
