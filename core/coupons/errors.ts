/** Why a code cannot be validated or redeemed, with the message the API answers. */
export type CouponFailure =
  | 'unknown'
  | 'not_started'
  | 'expired'
  | 'paused'
  | 'archived'
  | 'limit_reached'
  | 'already_redeemed'
  | 'not_yours'
  | 'reward_failed'
  | 'code_taken'
  | 'codes_exhausted';

export class CouponError extends Error {
  constructor(
    readonly reason: CouponFailure,
    message: string,
  ) {
    super(message);
    this.name = 'CouponError';
  }
}

export const couponErrors = {
  unknown: () => new CouponError('unknown', 'Coupon code not found'),
  notStarted: (at: string) => new CouponError('not_started', `Coupon is not valid before ${at}`),
  expired: (at: string) => new CouponError('expired', `Coupon expired at ${at}`),
  paused: () => new CouponError('paused', 'Coupon definition is paused; the code cannot be redeemed now'),
  archived: () =>
    new CouponError('archived', 'Coupon definition is archived; the code can no longer be redeemed'),
  globalLimit: (max: number) =>
    new CouponError('limit_reached', `Usage limit reached: the coupon may be redeemed ${max} times in all`),
  userLimit: (max: number) =>
    new CouponError('limit_reached', `Usage limit reached: each user may redeem this coupon ${max} time(s)`),
  redeemed: () => new CouponError('already_redeemed', 'Coupon already redeemed'),
  notYours: () => new CouponError('not_yours', "Coupon not found for this user: the code is another user's"),
  rewardFailed: (why: string) =>
    new CouponError(
      'reward_failed',
      `The coupon's reward could not be granted (${why}); nothing was redeemed`,
    ),
};
