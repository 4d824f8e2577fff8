/** Every coupon route: the admin gateway's definitions, then the query gateway's reads and actions. */
import type { RouteSpec } from '../../http/route';
import type { CouponDeps } from './common';
import { couponDefinitionRoutes } from './definitions';
import { couponQueryRoutes } from './query';

export function couponRoutes(deps: CouponDeps): RouteSpec[] {
  return [...couponDefinitionRoutes(deps), ...couponQueryRoutes(deps)];
}
