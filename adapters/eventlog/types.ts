import type { Topic } from '../../schemas/topics';

/**
 * The event-log port: a partitioned, durable, ordered log with consumer groups.
 * Three adapters: Kafka (kafkajs, Avro in the Confluent wire format), a local log kept in the SQL
 * store, and a log in files of the data directory (the embedded default). Records with the same key always land in the same partition, in append order.
 *
 * Offsets are NOT committed by the log on the consumer's behalf as the source of truth: a consumer
 * stores `batch.nextOffset` together with the state the batch produced (one SQL transaction, or one
 * Redis Lua script), and tells the log where to resume through `resumeFrom`, which the adapter calls
 * on start and on every (re)assignment of partitions (ARCHITECTURE.md invariant 2).
 */
export interface LogRecord<T> {
  topic: string;
  partition: number;
  offset: number;
  key: string;
  value: T;
  /** Append time, Unix milliseconds. */
  timestamp: number;
}

export interface Batch<T> {
  topic: string;
  partition: number;
  /** Non-empty, in offset order, all from `partition`. */
  records: LogRecord<T>[];
  /** Offset of the last record + 1: what the consumer stores with its state. */
  nextOffset: number;
}

export interface ConsumerHandlers<T> {
  /**
   * Where to resume each of `partitions` (the next offset to read), from the consumer's own store.
   * A partition missing from the map starts at the beginning of the log. Called on start and on
   * every group join / reassignment, before any batch of those partitions is delivered.
   */
  resumeFrom(partitions: number[]): Promise<Map<number, number>>;
  /**
   * Applies one batch. It must store `batch.nextOffset` atomically with its effects. Batches of one
   * partition are delivered one at a time, in order; different partitions may run concurrently.
   * When it throws, the adapter waits (backoff), asks `resumeFrom` again for that partition and
   * redelivers from there; it never skips ahead on its own.
   */
  handleBatch(batch: Batch<T>): Promise<void>;
  /** Informational: the partitions this member now owns (after every rebalance). */
  onAssignment?(partitions: number[]): void;
}

export interface ConsumerOptions {
  /** Consumer group id: members of one group share the topic's partitions. */
  group: string;
  /** Upper bound of records per batch (backpressure). Default 500. */
  maxBatchSize?: number;
  /** How many partitions may be handled at the same time by this member. Default: all. */
  concurrency?: number;
}

export interface Consumer {
  /** Partitions currently assigned to this member. */
  assignment(): number[];
  /** Lets the in-flight batches finish, then leaves the group. Idempotent. */
  stop(): Promise<void>;
}

export interface AppendRecord<T> {
  key: string;
  value: T;
}

export interface EventLog {
  /** Which adapter this is, for logs and /ready only: no module may branch on it. */
  readonly kind: 'kafka' | 'local' | 'file';
  /** Creates the topic with `topic.partitions` partitions when it does not exist. Idempotent. */
  ensureTopic(topic: Topic<unknown>): Promise<void>;
  /**
   * Appends records; resolves only when every record is durable (Kafka: acks=all with the
   * idempotent producer; local: committed to SQL; file: written and fsynced). Order is kept per key. Rejects on failure:
   * never swallows an error.
   */
  append<T>(topic: Topic<T>, records: AppendRecord<T>[]): Promise<void>;
  /** Joins `opts.group` and starts delivering batches. */
  consume<T>(topic: Topic<T>, opts: ConsumerOptions, handlers: ConsumerHandlers<T>): Promise<Consumer>;
  /** Next offset to be written, per partition (for lag: end offset - stored offset). */
  endOffsets(topic: Topic<unknown>): Promise<Map<number, number>>;
  /** The partition a key maps to. */
  partitionFor(topic: Topic<unknown>, key: string): number;
  /**
   * The topic's name in this log (its logical name with the deployment's prefix). Consumers key
   * their stored offsets by it, so two deployments sharing one SQL store never mix offsets.
   */
  physicalName(topic: Topic<unknown>): string;
  ping(): Promise<void>;
  close(): Promise<void>;
}
