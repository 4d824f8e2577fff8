import type { Analytics } from '../../adapters/analytics/types';
import type { Consumer, EventLog } from '../../adapters/eventlog/types';
import type { Sql } from '../../adapters/sql/types';
import { EVENTS_TOPIC } from '../../schemas/topics';
import type { Logger } from '../../runtime/logger';
import type { Metrics } from '../../runtime/metrics';
import { readOffsets, storeOffset } from '../offsets';

export const ANALYTICS_GROUP = 'ludus.analytics-sink';

/**
 * The analytics sink: copies accepted events to the analytics store in batches. Inserts are
 * idempotent (the store dedupes on tenant and event_id), and the offset is stored in SQL only
 * after the insert, so a crash between the two redelivers a batch that changes nothing.
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
        await deps.analytics.insertEvents(
          batch.records.map(({ value: e }) => ({
            tenant_id: e.tenant_id,
            event_id: e.event_id,
            type: e.type,
            user_id: e.user_id,
            occurred_at: e.occurred_at,
            received_at: e.received_at,
            attrs_json: e.attrs_json,
          })),
        );
        await storeOffset(deps.sql, ANALYTICS_GROUP, topic, batch.partition, batch.nextOffset);
        deps.metrics.consumerRecords.inc(
          { group: ANALYTICS_GROUP, topic, outcome: 'ok' },
          batch.records.length,
        );
        end();
      },
      onAssignment: (partitions) =>
        deps.log.info({ group: ANALYTICS_GROUP, partitions }, 'partitions assigned'),
    },
  );
}
