import { createGateway, type Gateway } from '../api/http/gateway';
import type { AppContext } from '../runtime/context';

/** The Ingestion Gateway: accepts events and appends them to the event log. */
export function buildIngestGateway(ctx: AppContext): Gateway {
  return createGateway('ingest', {
    log: ctx.log,
    metrics: ctx.metrics,
    checks: [
      { name: 'database', check: () => ctx.adapters.sql.ping() },
      { name: 'message_queue', check: () => ctx.adapters.eventLog.ping() },
    ],
  });
}
