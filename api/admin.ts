import { createGateway, type Gateway } from '../http/gateway';
import type { AppContext } from '../runtime/context';
import { mountDeps } from '../runtime/context';
import type { RouteSpec } from '../http/route';

/** The Admin Gateway: definitions, grants and operator routes. */
export function buildAdminGateway(ctx: AppContext, routes: RouteSpec[]): Gateway {
  return createGateway('admin', {
    log: ctx.log,
    metrics: ctx.metrics,
    routes,
    version: ctx.version,
    mount: mountDeps(ctx, 'admin'),
    checks: [{ name: 'database', check: () => ctx.adapters.sql.ping() }],
  });
}
