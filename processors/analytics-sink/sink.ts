import { checkEvent } from '../../core/history/rows';
import type { Analytics, AnalyticsEvent } from '../../adapters/analytics/types';
import type { Consumer, EventLog } from '../../adapters/eventlog/types';
import type { Sql } from '../../adapters/sql/types';
import { EVENTS_TOPIC } from '../../schemas/topics';
import type { Logger } from '../../shared/logger';
import type { Metrics } from '../../shared/metrics';
import { readOffsets, storeOffset } from '../offsets';
import { reportRefused, splitRefused } from '../../core/refused';

export const ANALYTICS_GROUP = 'ludus.analytics-sink';

/**
 * The analytics sink: copies accepted events to the analytics store in batches. Inserts are
 * idempotent (the store dedupes on tenant and event_id), and the offset is stored in SQL only
 * after the insert, so a crash between the two redelivers a batch that changes nothing. An event
 * the analytics store refuses (core/history/rows.ts) is skipped with a log line and
 * `ludus_skipped_rows_total{stage="analytics_events"}`: one bad record never stops a partition.
 */
export async function startAnalyticsSink(deps: {
  sql: Sql;
  eventLog: EventLog;
  analytics: Analytics;
  log: Logger;
  metrics: Metrics;
}): Promise<Consumer> {
  const topic = deps.eventLog.physicalName(EVENTS_TOPIC);
  await deps.eventLog.ensureTopic(EVENTS_TOPIC);
  return deps.eventLog.consume(
    EVENTS_TOPIC,
    { group: ANALYTICS_GROUP, maxBatchSize: 1000 },
    {
      resumeFrom: (partitions) => readOffsets(deps.sql, ANALYTICS_GROUP, topic, partitions),
      handleBatch: async (batch) => {
        const end = deps.metrics.consumerBatchSeconds.startTimer({ group: ANALYTICS_GROUP, topic });
        const rows: AnalyticsEvent[] = batch.records.map(({ value: e }) => ({
          tenant_id: e.tenant_id,
          event_id: e.event_id,
          type: e.type,
          user_id: e.user_id,
          occurred_at: e.occurred_at,
          received_at: e.received_at,
          attrs_json: e.attrs_json,
        }));
        const { accepted, refused } = splitRefused(rows, checkEvent);
        reportRefused(deps, 'analytics_events', refused, (e) => ({
          partition: batch.partition,
          tenant_id: e.tenant_id,
          event_id: e.event_id,
        }));
        if (accepted.length) await deps.analytics.insertEvents(accepted);
        await storeOffset(deps.sql, ANALYTICS_GROUP, topic, batch.partition, batch.nextOffset);
        if (accepted.length)
          deps.metrics.consumerRecords.inc({ group: ANALYTICS_GROUP, topic, outcome: 'ok' }, accepted.length);
        if (refused.length)
          deps.metrics.consumerRecords.inc(
            { group: ANALYTICS_GROUP, topic, outcome: 'skip' },
            refused.length,
          );
        end();
      },
      onAssignment: (partitions) =>
        deps.log.info({ group: ANALYTICS_GROUP, partitions }, 'partitions assigned'),
    },
  );
}
