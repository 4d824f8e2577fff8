/** The store's scheduler job: unclaimed orders past expires_at move to expired, once (docs/store.md). */
import type { Sql } from '../adapters/sql/types';
import { expiredClaims } from '../core/store/orders';
import type { StoreService } from '../core/store/store';
import type { Logger } from '../shared/logger';
import type { ScheduledJob } from '../core/jobs';

export function expireOrdersJob(
  deps: { sql: Sql; store: StoreService; log: Logger },
  batch = 100,
): ScheduledJob {
  return {
    name: 'expire-orders',
    async run(now) {
      for (const o of await expiredClaims(deps.sql, now, batch)) {
        try {
          // The state machine makes it once: an order already moved is left alone.
          if (await deps.store.expire(o.tenant_id, o.id, now))
            deps.log.info({ tenant_id: o.tenant_id, order_id: o.id }, 'order expired');
        } catch (err) {
          deps.log.error(
            { err, tenant_id: o.tenant_id, order_id: o.id },
            'expiring an order failed; retried next tick',
          );
        }
      }
    },
  };
}
