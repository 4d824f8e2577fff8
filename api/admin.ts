import { createGateway, type Gateway } from './http/gateway';
import type { AppContext } from '../runtime/context';

/** The Admin Gateway: definitions, grants and operator routes. */
export function buildAdminGateway(ctx: AppContext): Gateway {
  return createGateway('admin', {
    log: ctx.log,
    metrics: ctx.metrics,
    checks: [{ name: 'database', check: () => ctx.adapters.sql.ping() }],
  });
}
