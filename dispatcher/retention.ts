/**
 * The scheduler job that enforces the delivery-log retention (LUDUS_WEBHOOK_RETENTION_DAYS,
 * docs/webhooks.md): finished deliveries (succeeded, dead, failed) and their attempts are deleted
 * once they finished longer ago than the retention, and so are outbox rows fanned out that long
 * ago. Pending deliveries are never deleted. Idempotent; runs at most once a minute.
 */
import type { Sql } from '../adapters/sql/types';
import { purgeBefore } from '../core/webhooks/queue';
import type { Logger } from '../shared/logger';
import type { ScheduledJob } from '../core/jobs';

export function webhookRetentionJob(
  deps: { sql: Sql; log: Logger },
  retentionMs: number,
  everyMs = 60_000,
): ScheduledJob {
  let last = -Infinity;
  return {
    name: 'purge-webhook-deliveries',
    async run(now) {
      if (now - last < everyMs) return;
      last = now;
      const r = await purgeBefore(deps.sql, now - retentionMs);
      if (r.deliveries || r.events) deps.log.info({ ...r }, 'webhook delivery log purged');
    },
  };
}
