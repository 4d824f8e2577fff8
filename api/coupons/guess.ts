/**
 * Guessing codes is not free (docs/coupons.md "Guessing codes"): failed validations and
 * redemptions are counted per user and per tenant on the rate-limit port; once a budget is spent
 * every further attempt of that user (or of the tenant) answers 429 before the code is looked at,
 * so a spent budget tells nothing about the codes tried, until the window resets.
 */
import type Koa from 'koa';
import type { RateDecision, RateWindow } from '../../adapters/ratelimit/types';
import { CouponError } from '../../core/coupons/errors';
import { errors } from '../../http/errors';
import type { CouponDeps } from './common';

const keysOf = (tenantId: string, userId: string | undefined) => ({
  tenant: `coupon-guess:${tenantId}`,
  user: userId === undefined ? null : `coupon-guess:${tenantId}:u:${userId}`,
});

function refuse(ctx: Koa.Context, d: RateDecision, now: number, who: string): never {
  ctx.set('X-RateLimit-Limit', String(d.limit));
  ctx.set('X-RateLimit-Remaining', '0');
  ctx.set('X-RateLimit-Reset', String(Math.ceil(d.resetAt / 1000)));
  ctx.set('Retry-After', String(Math.max(1, Math.ceil((d.resetAt - now) / 1000))));
  throw errors.rateLimited(
    `Too many failed coupon attempts ${who} (${d.limit} per window); retry after ${new Date(d.resetAt).toISOString()}`,
  );
}

/**
 * Runs one validation or redemption attempt under the guess budgets: refused with 429 while
 * either budget is spent; a failure (a CouponError) counts against both.
 */
export async function guarded<T>(
  deps: CouponDeps,
  ctx: Koa.Context,
  tenantId: string,
  userId: string | undefined,
  attempt: () => Promise<T>,
): Promise<T> {
  const { rateLimiter: rl, clock } = deps;
  const now = clock.now();
  const keys = keysOf(tenantId, userId);
  const budgets: Array<[string, RateWindow[], string]> = [];
  if (keys.user && deps.guessLimits.user.length)
    budgets.push([keys.user, deps.guessLimits.user, 'for this user']);
  if (deps.guessLimits.tenant.length) budgets.push([keys.tenant, deps.guessLimits.tenant, 'in this tenant']);
  for (const [key, windows, who] of budgets) {
    const d = await rl.peek(key, windows, now);
    if (!d.allowed) refuse(ctx, d, now, who);
  }
  try {
    return await attempt();
  } catch (err) {
    if (err instanceof CouponError)
      for (const [key, windows] of budgets) await rl.hit(key, windows, clock.now());
    throw err;
  }
}
