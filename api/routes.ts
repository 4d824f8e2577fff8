/**
 * Every route of every gateway, in one list: the gateways mount it, the OpenAPI document is built
 * from it, and the tenant-isolation test enumerates it. Features add their route lists here.
 */
import { LeaderboardQueries } from '../core/leaderboards/queries';
import { ingestRoutes } from '../ingest/routes';
import type { AppContext } from '../runtime/context';
import { authRoutes } from './auth/routes';
import type { RouteSpec } from './http/route';
import { leaderboardAdminRoutes } from './leaderboards/admin';
import { leaderboardQueryRoutes } from './leaderboards/query';
import { operatorRoutes } from './operator/routes';

export function allRoutes(ctx: AppContext): RouteSpec[] {
  const { services, adapters, clock } = ctx;
  const queries = new LeaderboardQueries({ sql: adapters.sql, ranks: adapters.ranks, clock });
  return [
    ...operatorRoutes(services),
    ...authRoutes(),
    ...ingestRoutes({ eventLog: adapters.eventLog, clock }),
    ...leaderboardAdminRoutes({ ...adapters, clock }),
    ...leaderboardQueryRoutes({ sql: adapters.sql, analytics: adapters.analytics, queries }),
  ];
}
