/** Routes of the store: catalog rewards (admin), grants and orders (admin), the store (query). */
import type { RouteSpec } from '../../http/route';
import { catalogRoutes } from './catalog';
import type { StoreDeps } from './common';
import { orderAdminRoutes } from './orders';

export { catalogOps } from './catalog';
export { storeQueryRoutes } from './query';
export type { StoreDeps } from './common';

export function storeAdminRoutes(deps: StoreDeps): RouteSpec[] {
  return [...catalogRoutes(deps), ...orderAdminRoutes(deps)];
}
