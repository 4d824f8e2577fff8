/** What the coupon route files share: dependencies, auth rules, the guess limiter. */
import type { RateLimiter, RateWindow } from '../../adapters/ratelimit/types';
import type { Sql } from '../../adapters/sql/types';
import type { Clock } from '../../core/clock';
import type { FactBus } from '../../core/facts';
import type { Random } from '../../core/random';
import type { Granter } from '../../core/rewards/grant';
import { scope } from '../../http/auth/scopes';

export interface CouponDeps {
  sql: Sql;
  clock: Clock;
  random: Random;
  granter: Granter;
  facts: FactBus;
  rateLimiter: RateLimiter;
  /** Failed validations and redemptions allowed per user and per tenant (docs/coupons.md). */
  guessLimits: { user: RateWindow[]; tenant: RateWindow[] };
}

export const read = { kind: 'admin', scope: scope.read('coupons'), tenant: true } as const;
export const write = { kind: 'admin', scope: scope.write('coupons'), tenant: true } as const;
export const query = { kind: 'tenant', signed: false } as const;
export const common = { gateway: 'admin', tag: 'Coupons' } as const;
