/**
 * Every route of every gateway, in one list: the gateways mount it, the OpenAPI document is built
 * from it, and the tenant-isolation test enumerates it. Features add their route lists here.
 */
import { ingestRoutes } from '../ingest/routes';
import type { AppContext } from '../runtime/context';
import type { RouteSpec } from './http/route';
import { authRoutes } from './auth/routes';
import { operatorRoutes } from './operator/routes';

export function allRoutes(ctx: AppContext): RouteSpec[] {
  const { services, adapters, clock } = ctx;
  return [...operatorRoutes(services), ...authRoutes(), ...ingestRoutes({ eventLog: adapters.eventLog, clock })];
}
