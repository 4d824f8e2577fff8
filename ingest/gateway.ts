import { createGateway, type Gateway } from '../http/gateway';
import type { AppContext } from '../runtime/context';
import { mountDeps } from '../runtime/context';
import type { RouteSpec } from '../http/route';

/** The Ingestion Gateway: accepts events and appends them to the event log. */
export function buildIngestGateway(ctx: AppContext, routes: RouteSpec[]): Gateway {
  return createGateway('ingest', {
    log: ctx.log,
    metrics: ctx.metrics,
    routes,
    version: ctx.version,
    mount: mountDeps(ctx, 'ingest'),
    checks: [
      { name: 'database', check: () => ctx.adapters.sql.ping() },
      { name: 'message_queue', check: () => ctx.adapters.eventLog.ping() },
    ],
  });
}
