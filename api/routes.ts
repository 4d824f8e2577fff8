/**
 * Every route of every gateway, in one list: the gateways mount it, the OpenAPI document is built
 * from it, and the tenant-isolation test enumerates it. Features add their route lists here.
 */
import type { Services } from '../runtime/services';
import type { RouteSpec } from './http/route';
import { authRoutes } from './auth/routes';
import { operatorRoutes } from './operator/routes';

export function allRoutes(svc: Services): RouteSpec[] {
  return [...operatorRoutes(svc), ...authRoutes()];
}
