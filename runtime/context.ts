import type { MountDeps } from '../http/route';
import type { ClosingDeps } from '../core/leaderboards/closing';
import type { Clock } from '../core/clock';
import type { Random } from '../core/random';
import type { Adapters } from './compose';
import type { Config } from './config';
import type { Logger } from '../shared/logger';
import type { Metrics } from '../shared/metrics';
import type { Services } from './services';

/** What the composition root hands to every role: built once, passed explicitly. */
export interface AppContext {
  config: Config;
  log: Logger;
  metrics: Metrics;
  clock: Clock;
  /** The random source beside the clock (core/random.ts): ids now, wheel spins later. */
  random: Random;
  adapters: Adapters;
  services: Services;
  /** The product version (package.json), shown in OpenAPI documents. */
  version: string;
}

/** What the route chain of one gateway needs: the authenticator and that gateway's rate limits. */
export function mountDeps(ctx: AppContext, gateway: 'ingest' | 'admin' | 'query'): MountDeps {
  return {
    auth: ctx.services.auth,
    rateLimiter: ctx.services.rateLimiter,
    rateLimit: ctx.config.rateLimits[gateway],
    clock: ctx.clock,
    sql: ctx.adapters.sql,
  };
}

/** What closing a leaderboard window needs: stores and the fact bus (the reward payout reacts). */
export function closingDeps(ctx: AppContext): ClosingDeps {
  return {
    ...ctx.adapters,
    facts: ctx.services.facts,
    cache: ctx.services.leaderboards,
    log: ctx.log,
    metrics: ctx.metrics,
  };
}
