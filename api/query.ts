import { createGateway, type Gateway } from './http/gateway';
import type { AppContext } from '../runtime/context';

/** The Query Gateway: end-user reads and actions. */
export function buildQueryGateway(ctx: AppContext): Gateway {
  return createGateway('query', {
    log: ctx.log,
    metrics: ctx.metrics,
    checks: [
      { name: 'database', check: () => ctx.adapters.sql.ping() },
      { name: 'rank_index', check: () => ctx.adapters.ranks.ping() },
    ],
  });
}
