/**
 * Services built once from configuration and adapters, shared by every role: the tenant store,
 * the authenticator and the rate limiter.
 */
import type { RateLimiter } from '../adapters/ratelimit/types';
import { Authenticator } from '../http/auth/authenticator';
import type { Clock } from '../core/clock';
import { systemRandom, type Random } from '../core/random';
import { LeaderboardCache } from '../core/leaderboards/cache';
import { SecretBox } from '../core/tenancy/secrets';
import { TenantStore } from '../core/tenancy/store';
import { FactBus, type Reactions } from '../core/facts';
import { couponReactions } from '../core/coupons/auto';
import { AchievementEngine, achievementReactions } from '../core/achievements/progress';
import { Backfills } from '../core/achievements/backfill';
import { ANALYTICS_GROUP } from '../processors/analytics-sink/sink';
import { PIPELINE_GROUP } from '../processors/pipeline/pipeline';
import { EVENTS_TOPIC } from '../schemas/topics';
import { payoutReactions } from '../core/leaderboards/payout';
import { levelReactions } from '../core/levels/levels';
import { outboxReactions } from '../core/outbox';
import { Granter } from '../core/rewards/grant';
import { Fulfiller } from '../core/store/fulfilment';
import { OrderStore } from '../core/store/orders';
import { StoreService } from '../core/store/store';
import { streakFreezeHolder } from '../core/streaks/freezes';
import { tierReactions } from '../core/wallet/tiers';
import { Wallet } from '../core/wallet/wallet';
import { WebhookStore } from '../core/webhooks/store';
import { closeQuietly, connect, redact, type Adapters } from './compose';
import type { Config } from './config';

export interface Services {
  tenants: TenantStore;
  auth: Authenticator;
  rateLimiter: RateLimiter;
  /**
   * The fact bus (core/facts.ts): every feature's reactions, registered once here, in the order
   * they run.
   */
  facts: FactBus;
  /** Balances and the ledger; its facts move tiers and levels and fill the outbox. */
  wallet: Wallet;
  /** The one reward-granting service. */
  granter: Granter;
  /** Orders of the store (and of granted rewards awaiting fulfilment), their moves and facts. */
  orders: OrderStore;
  /** Wallet fulfilment of orders (through the granter). */
  fulfiller: Fulfiller;
  /** Purchases, grants, claims, refunds: the store's transactions. */
  store: StoreService;
  /** Webhook endpoints (secrets encrypted with the server key) and their delivery log. */
  webhooks: WebhookStore;
  /** Board definitions and window rows of the query routes, cached like tenant credentials. */
  leaderboards: LeaderboardCache;
  /** Achievement progress and completion, for the pipeline step and backfill. */
  achievements: AchievementEngine;
  /** Achievement backfill jobs (started by the admin API, run by the scheduler role). */
  backfills: Backfills;
}

export async function openRateLimiter(config: Config): Promise<RateLimiter> {
  if (config.adapters.rateLimiter === 'redis') {
    const { RedisRateLimiter } = await import('../adapters/ratelimit/redis');
    const url = config.redis.url as string;
    const limiter = new RedisRateLimiter({ url, prefix: config.redis.prefix });
    await connect(`Redis at ${redact(url)}`, 'LUDUS_REDIS_URL', config.connectTimeoutMs, () =>
      limiter.ping(),
    ).catch(async (err) => {
      await closeQuietly(limiter);
      throw err;
    });
    return limiter;
  }
  const { MemoryRateLimiter } = await import('../adapters/ratelimit/memory');
  return new MemoryRateLimiter();
}

/**
 * Every feature's reactions to facts (core/facts.ts), in the order the subscribers of one fact run.
 * The outbox goes first: a fact's webhook is enqueued before those of the reactions it causes (the
 * outbox order is the delivery order). A new feature adds its `Reactions` here.
 */
export function featureReactions(
  facts: FactBus,
  granter: Granter,
  random: Random = systemRandom,
): Reactions[] {
  return [
    outboxReactions,
    tierReactions(facts),
    levelReactions(facts, granter),
    payoutReactions(granter),
    couponReactions(facts, random),
    achievementReactions(new AchievementEngine(facts, granter)),
  ];
}

export function buildServices(
  config: Config,
  adapters: Adapters,
  clock: Clock,
  keys: { secretKey: Buffer; rootKey: string | null },
  rateLimiter: RateLimiter,
  random: Random,
): Services {
  const box = new SecretBox(keys.secretKey);
  const tenants = new TenantStore(adapters.sql, box, clock);
  const auth = new Authenticator({
    tenants,
    clock,
    rootKey: keys.rootKey,
    signatureSkewSeconds: config.signatureSkewSeconds,
    tenantCacheMs: config.tenantCacheMs,
    tokenCacheMs: config.tokenCacheMs,
    replay: rateLimiter,
  });
  const facts = new FactBus();
  const wallet = new Wallet(facts, random);
  const orders = new OrderStore(facts, random);
  // Reward items of type streak_freeze are held by streaks (the granting service's holder port).
  const granter = new Granter(wallet, random, orders).holdWith('streak_freeze', streakFreezeHolder);
  const fulfiller = new Fulfiller(granter, orders);
  const store = new StoreService({ sql: adapters.sql, wallet, orders, fulfiller });
  facts.register(...featureReactions(facts, granter, random));
  const webhooks = new WebhookStore(adapters.sql, box, clock);
  const leaderboards = new LeaderboardCache({ clock, ttlMs: config.tenantCacheMs });
  const achievements = new AchievementEngine(facts, granter);
  const backfills = new Backfills({
    sql: adapters.sql,
    analytics: adapters.analytics,
    engine: achievements,
    random,
    offsets: {
      topic: adapters.eventLog.physicalName(EVENTS_TOPIC),
      pipelineGroup: PIPELINE_GROUP,
      sinkGroup: ANALYTICS_GROUP,
    },
    chunkUsers: config.achievementBackfillChunkUsers,
  });
  return {
    tenants,
    auth,
    rateLimiter,
    facts,
    wallet,
    granter,
    orders,
    fulfiller,
    store,
    webhooks,
    leaderboards,
    achievements,
    backfills,
  };
}
