/**
 * Every topic of the event log, one entry each, with the Avro schema of its records.
 * A topic lists its schema versions, newest last: writers use the newest; readers resolve any
 * listed version (Avro schema evolution), so old records stay readable after a change.
 */
import eventV1 from './avro/event.v1.avsc.json';

export interface Topic<T> {
  /** Logical name; adapters may prefix it (LUDUS_TOPIC_PREFIX) for isolation. */
  readonly name: string;
  readonly partitions: number;
  /** Avro record schemas, oldest first; the last one is the writer schema. */
  readonly schemas: readonly object[];
  /**
   * Kafka: the topic's `retention.ms` when ensureTopic creates it (default: the broker's). The
   * embedded logs keep every topic for their own retention (LUDUS_EVENT_LOG_RETENTION_HOURS).
   */
  readonly retentionMs?: number;
  /** Type witness only: never read at run time. */
  readonly _type?: T;
}

/** An accepted event as it travels through the log (schemas/avro/event.v1.avsc.json). */
export interface EventRecord {
  tenant_id: string;
  event_id: string;
  type: string;
  user_id: string;
  /** Unix milliseconds. */
  occurred_at: number;
  /** Unix milliseconds, stamped by the ingestion gateway. */
  received_at: number;
  attrs_json: string;
  actor_metadata_json: string | null;
  subject_json: string | null;
}

export const EVENTS_TOPIC: Topic<EventRecord> = {
  name: 'ludus.events',
  partitions: 8,
  schemas: [eventV1],
};

/**
 * The synthetic events of the ingest gateway's warm-up (ingest/warm-up.ts): the events' schema and
 * partitions, no consumer, kept an hour on Kafka.
 */
export const WARM_UP_TOPIC: Topic<EventRecord> = {
  name: 'ludus.warm-up',
  partitions: EVENTS_TOPIC.partitions,
  schemas: EVENTS_TOPIC.schemas,
  retentionMs: 3600_000,
};

/** The partition key of an event: every event of one user of one tenant stays in order. */
export function eventKey(tenantId: string, userId: string): string {
  return `${tenantId}:${userId}`;
}
