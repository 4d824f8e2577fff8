/**
 * The operations listener (LUDUS_OPS_PORT, default 8083; docs/operations.md "Health, readiness and
 * metrics"): /health, /ready and /metrics for any process, including one that runs only
 * background roles (processors, analytics, scheduler, dispatcher) and so opens no gateway. It is
 * the gateways' own plumbing (http/gateway.ts) with no API routes; /ready checks the stores
 * the process's roles use.
 */
import { createListenerApp, type ReadinessCheck } from '../http/gateway';
import type { Role } from './config';
import type { AppContext } from './context';

type Store = 'database' | 'message_queue' | 'rank_index' | 'analytics' | 'rate_limiter';

/** The stores each role reads or writes (the gateways' /ready lists the same for their role). */
const STORES_OF_ROLE: Record<Role, Store[]> = {
  ingest: ['database', 'message_queue', 'rate_limiter'],
  api: ['database', 'rank_index', 'rate_limiter'],
  processors: ['database', 'message_queue', 'rank_index'],
  analytics: ['database', 'message_queue', 'analytics'],
  // Closing a window reads the rank index and exports its snapshot to analytics.
  scheduler: ['database', 'rank_index', 'analytics'],
  dispatcher: ['database'],
};

/** The readiness checks of the stores the given roles use, each once. */
export function storeChecks(ctx: AppContext, roles: Role[]): ReadinessCheck[] {
  const ping: Record<Store, () => Promise<void>> = {
    database: () => ctx.adapters.sql.ping(),
    message_queue: () => ctx.adapters.eventLog.ping(),
    rank_index: () => ctx.adapters.ranks.ping(),
    analytics: () => ctx.adapters.analytics.ping(),
    rate_limiter: () => ctx.services.rateLimiter.ping(),
  };
  const stores = [...new Set(roles.flatMap((r) => STORES_OF_ROLE[r]))];
  return stores.map((name) => ({ name, check: ping[name] }));
}

/** The operations listener's app (not listening: runtime/roles.ts binds it). */
export function buildOpsListener(ctx: AppContext, roles: Role[]) {
  const { app, router } = createListenerApp('ops', {
    log: ctx.log,
    metrics: ctx.metrics,
    checks: storeChecks(ctx, roles),
  });
  return { name: 'ops' as const, app, router };
}
