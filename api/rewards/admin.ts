/**
 * Routes of rewards (scope rewards:read / rewards:write), one file per resource: reward items
 * (./items.ts), reward configs (./configs.ts), grants (./grants.ts, with the query gateway's).
 */
import type { RouteSpec } from '../../http/route';
import type { RewardAdminDeps } from './common';
import { rewardConfigRoutes } from './configs';
import { rewardGrantRoutes } from './grants';
import { rewardItemRoutes } from './items';

export { rewardQueryRoutes } from './grants';

export function rewardAdminRoutes(deps: RewardAdminDeps): RouteSpec[] {
  return [...rewardItemRoutes(deps), ...rewardConfigRoutes(deps), ...rewardGrantRoutes(deps)];
}
