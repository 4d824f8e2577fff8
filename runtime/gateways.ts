/**
 * The three gateways, assembled from the HTTP kit (http/gateway.ts), the route list
 * (runtime/routes.ts) and the readiness checks of the stores each one uses.
 */
import { createGateway, type Gateway, type GatewayName } from '../http/gateway';
import type { ReadinessCheck } from '../http/gateway';
import type { RouteSpec } from '../http/route';
import { mountDeps, type AppContext } from './context';

/** What /ready checks per gateway: the stores its routes use. */
function checks(name: GatewayName, ctx: AppContext): ReadinessCheck[] {
  const database = { name: 'database', check: () => ctx.adapters.sql.ping() };
  switch (name) {
    case 'ingest': // accepts events and appends them to the event log
      return [database, { name: 'message_queue', check: () => ctx.adapters.eventLog.ping() }];
    case 'admin': // definitions, grants and operator routes
      return [database];
    case 'query': // end-user reads and actions
      return [database, { name: 'rank_index', check: () => ctx.adapters.ranks.ping() }];
  }
}

export function buildGateway(name: GatewayName, ctx: AppContext, routes: RouteSpec[]): Gateway {
  return createGateway(name, {
    log: ctx.log,
    metrics: ctx.metrics,
    routes,
    version: ctx.version,
    mount: mountDeps(ctx, name),
    checks: checks(name, ctx),
  });
}
