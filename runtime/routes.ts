/**
 * Every route of every gateway, in one list: the gateways mount it, the OpenAPI document is built
 * from it, and the tenant-isolation test enumerates it. Features add their route lists here.
 */
import { LeaderboardQueries } from '../core/leaderboards/queries';
import { getConfig, rankTiersView } from '../core/rewards/configs';
import { ingestRoutes } from '../ingest/routes';
import { closingDeps, type AppContext } from './context';
import { achievementRoutes } from '../api/achievements/admin';
import { authRoutes } from '../api/auth/routes';
import type { RouteSpec } from '../http/route';
import { leaderboardAdminRoutes } from '../api/leaderboards/admin';
import { leaderboardQueryRoutes } from '../api/leaderboards/query';
import { levelRoutes } from '../api/levels/routes';
import { operatorRoutes } from '../api/operator/routes';
import { rewardAdminRoutes, rewardQueryRoutes } from '../api/rewards/admin';
import { catalogOps, storeAdminRoutes, storeQueryRoutes, type StoreDeps } from '../api/store/admin';
import { walletAdminRoutes } from '../api/wallet/admin';
import { walletQueryRoutes } from '../api/wallet/query';
import { webhookAdminRoutes } from '../api/webhooks/admin';
import { wheelAdminRoutes, wheelQueryRoutes } from '../api/wheels/admin';
import { couponRoutes } from '../api/coupons/admin';
import { streakAdminRoutes } from '../api/streaks/admin';
import { streakQueryRoutes } from '../api/streaks/query';

export function allRoutes(ctx: AppContext): RouteSpec[] {
  const { services, adapters, clock } = ctx;
  const { sql } = adapters;
  const wheelDeps = { sql, clock, random: ctx.random, wallet: services.wallet, granter: services.granter };
  const queries = new LeaderboardQueries({ sql, ranks: adapters.ranks, clock, cache: services.leaderboards });
  const store: StoreDeps = {
    sql,
    clock,
    random: ctx.random,
    wallet: services.wallet,
    store: services.store,
    allowPrivate: ctx.config.webhooks.allowPrivate,
  };
  return [
    ...operatorRoutes(services, { sql }),
    ...authRoutes(),
    ...ingestRoutes({ eventLog: adapters.eventLog, clock }),
    ...leaderboardAdminRoutes({ ...closingDeps(ctx), clock }),
    ...leaderboardQueryRoutes({
      sql,
      analytics: adapters.analytics,
      queries,
      cache: services.leaderboards,
      rewardConfig: async (board) => {
        const c = board.reward_config_id
          ? await getConfig(sql, board.tenant_id, board.reward_config_id)
          : null;
        return c ? rankTiersView(sql, c) : null;
      },
    }),
    ...walletAdminRoutes({ sql, wallet: services.wallet, clock }),
    ...walletQueryRoutes({ sql }),
    ...rewardAdminRoutes({ sql, clock, catalog: catalogOps(store) }),
    ...rewardQueryRoutes({ sql }),
    ...levelRoutes({ sql, clock, wallet: services.wallet }),
    ...couponRoutes({
      sql,
      clock,
      random: ctx.random,
      granter: services.granter,
      facts: services.facts,
      rateLimiter: services.rateLimiter,
      guessLimits: ctx.config.couponGuessLimits,
    }),
    ...storeAdminRoutes(store),
    ...storeQueryRoutes(store),
    ...streakAdminRoutes({ sql, clock, random: ctx.random }),
    ...streakQueryRoutes({ sql, clock }),
    ...achievementRoutes({ sql, clock, random: ctx.random, backfills: services.backfills }),
    ...webhookAdminRoutes({
      sql,
      clock,
      store: services.webhooks,
      config: ctx.config.webhooks,
      version: ctx.version,
    }),
    ...wheelAdminRoutes(wheelDeps),
    ...wheelQueryRoutes(wheelDeps),
  ];
}

/**
 * The route list for describing it only (the OpenAPI documents without a running service, e.g.
 * `ludus openapi`): built over an inert context. Building a route captures its dependencies and
 * calls none; any call through the inert context throws, so a handler of this list never runs.
 */
export function describeRoutes(): RouteSpec[] {
  const inert: unknown = new Proxy(function inert() {}, {
    get: (_t, p) => (p === 'then' ? undefined : p === Symbol.toPrimitive ? () => 'inert' : inert),
    apply: () => {
      throw new Error('describeRoutes(): a route built for description was run');
    },
  });
  return allRoutes(inert as AppContext);
}
