import { createGateway, type Gateway } from '../http/gateway';
import type { AppContext } from '../runtime/context';
import { mountDeps } from '../runtime/context';
import type { RouteSpec } from '../http/route';

/** The Query Gateway: end-user reads and actions. */
export function buildQueryGateway(ctx: AppContext, routes: RouteSpec[]): Gateway {
  return createGateway('query', {
    log: ctx.log,
    metrics: ctx.metrics,
    routes,
    version: ctx.version,
    mount: mountDeps(ctx, 'query'),
    checks: [
      { name: 'database', check: () => ctx.adapters.sql.ping() },
      { name: 'rank_index', check: () => ctx.adapters.ranks.ping() },
    ],
  });
}
