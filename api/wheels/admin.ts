/** Routes of spin wheels (scope wheels:read / wheels:write): wheels, then themes. */
import type { RouteSpec } from '../../http/route';
import type { WheelDeps } from './common';
import { wheelThemeRoutes } from './themes';
import { wheelAdminRoutes as wheels } from './wheels';

export { wheelQueryRoutes } from './query';

export function wheelAdminRoutes(deps: WheelDeps): RouteSpec[] {
  return [...wheels(deps), ...wheelThemeRoutes(deps)];
}
