/**
 * LocalEventLog: the embedded shape's event log, a partitioned log kept in the SQL store
 * (adapters/sql/migrations/002_event_log.sql), on PGlite or on a real Postgres.
 *
 * Appends: one SQL transaction per call. Each touched partition row is locked with
 * `UPDATE ... SET next_offset = next_offset + n RETURNING next_offset` (in partition order, so two
 * appends never deadlock), which hands out contiguous offsets; the records are inserted in the same
 * transaction and the call resolves after COMMIT. Because the partition lock is held to COMMIT, the
 * records of a partition become visible in offset order: a reader never sees offset n+1 before n.
 *
 * Consumer groups live in this process (one LocalEventLog instance; groups.ts, shared with the
 * FileEventLog): two LocalEventLog instances (or processes) on one database do not coordinate
 * groups. Delivery: one loop per assigned partition reads `offset >= position ORDER BY offset LIMIT
 * maxBatchSize`; an idle loop sleeps until an append of this instance notifies it (EventEmitter) or
 * the member's poll (one cheap query of the partition heads every pollIntervalMs) sees new records
 * appended by another process or instance.
 *
 * Where it is used: a SQL store without Kafka on a real Postgres (LUDUS_SQL=pg, LUDUS_EVENT_LOG=local).
 * The embedded default (PGlite) keeps its log in files instead (file.ts, issue 19).
 *
 * Retention (`retentionMs`, LUDUS_EVENT_LOG_RETENTION_HOURS as for the file log): `enforceRetention`
 * (once at start, then every `retentionCheckMs`) deletes each partition's oldest records appended
 * before now - retentionMs, in chunks along the primary key, never a partition's last record (its
 * offset is the end the next append continues from), as Kafka's time retention and the file log
 * do. A consumer whose position lies below the oldest record left goes on at that record.
 */
import { EventEmitter } from 'node:events';
import type { Sql } from '../sql/types';
import type { Topic } from '../../schemas/topics';
import type { AppendRecord, Consumer, ConsumerHandlers, ConsumerOptions, EventLog, LogRecord } from './types';
import { PlainAvroCodec, encodeRecords, type SchemaCodec } from './codec';
import { chunk, defaultLogger, type BackoffOptions, type EventLogLogger } from './common';
import { partitionForKey } from './partitioner';
import { LocalGroups, type PartitionSource } from './groups';
import type { FileEventLogOptions } from './file';

export interface LocalEventLogOptions {
  /** Bare Avro (avsc) by default. */
  codec?: SchemaCodec;
  /** Prepended to topic names in the tables (tests isolate themselves with a unique prefix). */
  topicPrefix?: string;
  /** How often an idle consumer looks for records appended by another process. Default 200 ms. */
  pollIntervalMs?: number;
  /** Backoff after a handler (or read) error. Default 100 ms doubling up to 5 s. */
  retryBackoff?: BackoffOptions;
  /** Diagnostics (errors of handlers, retries). Default: errors to stderr. */
  log?: EventLogLogger;
  /** Records appended longer ago than this are deleted (never a partition's last). Default: kept. */
  retentionMs?: number;
  /** How often retention is enforced. Default: a tenth of retentionMs, at most every 5 minutes. */
  retentionCheckMs?: number;
  /** The clock of retention (tests). Default Date.now. */
  now?: () => number;
}

/** Records deleted per statement by retention (short transactions beside the appends). */
const RETENTION_CHUNK = 5000;

/** Rows per INSERT statement (5 parameters each, far below Postgres's 65535 parameter limit). */
const INSERT_CHUNK = 500;

interface RecordRow {
  offset: number;
  key: string;
  schema_version: number;
  value: Uint8Array;
  ts: number;
}

export class LocalEventLog implements EventLog {
  readonly kind = 'local' as const;
  private readonly sql: Sql;
  private readonly codec: SchemaCodec;
  private readonly prefix: string;
  private readonly log: EventLogLogger;
  /** Emits the physical topic name after every committed append. */
  private readonly appended = new EventEmitter();
  private readonly consumers: LocalGroups;
  private closed = false;
  private readonly retentionMs: number;
  private readonly now: () => number;
  private readonly retentionTimer: NodeJS.Timeout | undefined;
  private pruning: Promise<number> | undefined;

  /** `sql`: the SQL store, migrated (002_event_log). Not owned: close() leaves it open. */
  constructor(sql: Sql, opts: LocalEventLogOptions = {}) {
    this.sql = sql;
    this.codec = opts.codec ?? new PlainAvroCodec();
    this.prefix = opts.topicPrefix ?? '';
    this.log = opts.log ?? defaultLogger;
    this.appended.setMaxListeners(0);
    this.consumers = new LocalGroups({
      notifier: this.appended,
      pollIntervalMs: opts.pollIntervalMs ?? 200,
      backoff: opts.retryBackoff ?? {},
      log: this.log,
    });
    this.retentionMs = opts.retentionMs ?? 0;
    this.now = opts.now ?? Date.now;
    if (this.retentionMs > 0) {
      const prune = () =>
        void this.enforceRetention().catch((err: unknown) =>
          this.log('warn', 'event log retention failed; retrying at the next check', {
            err: (err as Error).message,
          }),
        );
      this.retentionTimer = setInterval(
        prune,
        opts.retentionCheckMs ?? Math.min(this.retentionMs / 10, 5 * 60 * 1000),
      );
      this.retentionTimer.unref();
      prune();
    }
  }

  /** The table name of a topic (its logical name with the prefix). */
  physicalName(topic: Topic<unknown>): string {
    return this.prefix + topic.name;
  }

  async ensureTopic(topic: Topic<unknown>): Promise<void> {
    const name = this.physicalName(topic);
    await this.sql.tx(async (q) => {
      await q.query(
        'INSERT INTO event_log_topics (topic, partitions) VALUES ($1, $2) ON CONFLICT (topic) DO NOTHING',
        [name, topic.partitions],
      );
      const { rows } = await q.query<{ partitions: number }>(
        'SELECT partitions FROM event_log_topics WHERE topic = $1',
        [name],
      );
      if (rows[0].partitions !== topic.partitions) {
        throw new Error(
          `topic ${name} exists with ${rows[0].partitions} partitions, the code expects ${topic.partitions}: ` +
            'changing the count would move keys to other partitions',
        );
      }
      await q.query(
        `INSERT INTO event_log_partitions (topic, partition)
         SELECT $1, p FROM generate_series(0, $2::integer - 1) AS p
         ON CONFLICT (topic, partition) DO NOTHING`,
        [name, topic.partitions],
      );
    });
  }

  async append<T>(topic: Topic<T>, records: AppendRecord<T>[]): Promise<void> {
    this.assertOpen();
    if (records.length === 0) return;
    const name = this.physicalName(topic);
    const version = this.codec.writerVersion(topic);
    // Encode outside the transaction: a record that does not fit the schema fails the whole call.
    const byPartition = new Map<number, Array<{ key: string; value: Buffer }>>();
    const values = await encodeRecords(this.codec, topic, name, records);
    for (let i = 0; i < records.length; i++) {
      const r = records[i]!;
      const value = values[i]!;
      const p = this.partitionFor(topic, r.key);
      let list = byPartition.get(p);
      if (!list) byPartition.set(p, (list = []));
      list.push({ key: r.key, value });
    }
    const partitions = [...byPartition.keys()].sort((a, b) => a - b);
    await this.sql.tx(async (q) => {
      for (const p of partitions) {
        const list = byPartition.get(p)!;
        const { rows } = await q.query<{ next_offset: number }>(
          `UPDATE event_log_partitions SET next_offset = next_offset + $3
           WHERE topic = $1 AND partition = $2 RETURNING next_offset`,
          [name, p, list.length],
        );
        if (rows.length === 0)
          throw new Error(`topic ${name} (partition ${p}) does not exist: call ensureTopic first`);
        let offset = Number(rows[0].next_offset) - list.length;
        for (const part of chunk(list, INSERT_CHUNK)) {
          // $1 topic, $2 partition, $3 schema version; then offset, key, value per record.
          const params: unknown[] = [name, p, version];
          const tuples = part.map((r) => {
            params.push(offset++, r.key, r.value);
            const i = params.length - 2;
            return `($1, $2, $${i}, $${i + 1}, $3, $${i + 2})`;
          });
          await q.query(
            `INSERT INTO event_log_records (topic, partition, "offset", key, schema_version, value) VALUES ${tuples.join(', ')}`,
            params,
          );
        }
      }
    });
    this.appended.emit(name);
  }

  async consume<T>(topic: Topic<T>, opts: ConsumerOptions, handlers: ConsumerHandlers<T>): Promise<Consumer> {
    this.assertOpen();
    if (!opts.group) throw new Error('consume: a consumer group is required');
    const name = this.physicalName(topic);
    const { rows } = await this.sql.query<{ partitions: number }>(
      'SELECT partitions FROM event_log_topics WHERE topic = $1',
      [name],
    );
    if (rows.length === 0) throw new Error(`topic ${name} does not exist: call ensureTopic first`);
    return this.consumers.join(name, topic, opts, handlers, this.source(topic, name));
  }

  async endOffsets(topic: Topic<unknown>): Promise<Map<number, number>> {
    const { rows } = await this.sql.query<{ partition: number; next_offset: number }>(
      'SELECT partition, next_offset FROM event_log_partitions WHERE topic = $1 ORDER BY partition',
      [this.physicalName(topic)],
    );
    if (rows.length === 0) throw new Error(`topic ${this.physicalName(topic)} does not exist`);
    return new Map(rows.map((r) => [Number(r.partition), Number(r.next_offset)]));
  }

  /** Reads of one topic's records and partition heads, for the members' loops and polls. */
  private source<T>(topic: Topic<T>, physicalName: string): PartitionSource<T> {
    const { sql, codec } = this;
    return {
      read: async (partition, position, max) => {
        const { rows } = await sql.query<RecordRow>(
          `SELECT "offset", key, schema_version, value,
                  (extract(epoch FROM appended_at) * 1000)::bigint AS ts
           FROM event_log_records
           WHERE topic = $1 AND partition = $2 AND "offset" >= $3
           ORDER BY "offset" LIMIT $4`,
          [physicalName, partition, position, max],
        );
        const records: LogRecord<T>[] = [];
        for (const r of rows) {
          records.push({
            topic: topic.name,
            partition,
            offset: Number(r.offset),
            key: r.key,
            value: await codec.decode(topic, Buffer.from(r.value), Number(r.schema_version)),
            timestamp: Number(r.ts),
          });
        }
        return records;
      },
      heads: async () => {
        const { rows } = await sql.query<{ partition: number; next_offset: number }>(
          'SELECT partition, next_offset FROM event_log_partitions WHERE topic = $1',
          [physicalName],
        );
        return new Map(rows.map((r) => [Number(r.partition), Number(r.next_offset)]));
      },
    };
  }

  partitionFor(topic: Topic<unknown>, key: string): number {
    return partitionForKey(key, topic.partitions);
  }

  async ping(): Promise<void> {
    await this.sql.ping();
  }

  /**
   * Deletes the records of this instance's topics appended before now - retentionMs, oldest first
   * along the primary key, never a partition's last record; resolves with how many. One run at a
   * time (a call during a run shares it).
   */
  enforceRetention(): Promise<number> {
    if (this.closed || this.retentionMs <= 0) return Promise.resolve(0);
    this.pruning ??= (async () => {
      try {
        const cutoff = new Date(this.now() - this.retentionMs).toISOString();
        const { rows } = await this.sql.query<{ topic: string; partition: number; next_offset: number }>(
          `SELECT topic, partition, next_offset FROM event_log_partitions
           WHERE left(topic, length($1)) = $1 ORDER BY topic, partition`,
          [this.prefix],
        );
        let deleted = 0;
        for (const p of rows) {
          // Records of a partition are appended in offset order, so its old ones are its first ones:
          // each statement looks at the next chunk by offset and stops at the first one kept.
          for (;;) {
            if (this.closed) return deleted;
            // The last old offset among the partition's next chunk, then a range delete by key.
            const chunk = await this.sql.query<{ last: string | number | null; n: string | number }>(
              `SELECT max("offset") AS last, count(*) AS n FROM (
                 SELECT "offset", appended_at FROM event_log_records
                 WHERE topic = $1 AND partition = $2 AND "offset" < $3 ORDER BY "offset" LIMIT $4) x
               WHERE appended_at < $5::timestamptz`,
              [p.topic, p.partition, Number(p.next_offset) - 1, RETENTION_CHUNK, cutoff],
            );
            const last = chunk.rows[0]?.last;
            if (last === null || last === undefined) break;
            const r = await this.sql.query(
              `DELETE FROM event_log_records
               WHERE topic = $1 AND partition = $2 AND "offset" <= $3 AND appended_at < $4::timestamptz`,
              [p.topic, p.partition, Number(last), cutoff],
            );
            deleted += r.rowCount;
            if (Number(chunk.rows[0]!.n) < RETENTION_CHUNK) break;
          }
        }
        if (deleted > 0)
          this.log('info', 'event log retention: records deleted', { deleted, before: cutoff });
        return deleted;
      } finally {
        this.pruning = undefined;
      }
    })();
    return this.pruning;
  }

  /** Stops every consumer of this instance (in-flight batches finish). Leaves the SQL store open. */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.retentionTimer);
    await this.pruning?.catch(() => undefined);
    await this.consumers.stopAll();
    this.appended.removeAllListeners();
  }

  private assertOpen(): void {
    if (this.closed) throw new Error('the event log is closed');
  }
}

/**
 * Reads the SQL log's records for the FileEventLog's one-time carry-over (a data directory made
 * before the embedded log moved to files). Empty heads when the tables hold nothing of the topic.
 */
export function sqlLogImporter(sql: Sql): NonNullable<FileEventLogOptions['importer']> {
  return {
    heads: async (topic) => {
      const { rows } = await sql.query<{ partition: number; next_offset: number }>(
        'SELECT partition, next_offset FROM event_log_partitions WHERE topic = $1 AND next_offset > 0',
        [topic],
      );
      return new Map(rows.map((r) => [Number(r.partition), Number(r.next_offset)]));
    },
    page: async (topic, partition, from, limit) => {
      const { rows } = await sql.query<RecordRow>(
        `SELECT "offset", key, schema_version, value,
                (extract(epoch FROM appended_at) * 1000)::bigint AS ts
         FROM event_log_records
         WHERE topic = $1 AND partition = $2 AND "offset" >= $3
         ORDER BY "offset" LIMIT $4`,
        [topic, partition, from, limit],
      );
      return rows.map((r) => ({
        offset: Number(r.offset),
        key: r.key,
        schemaVersion: Number(r.schema_version),
        value: Buffer.from(r.value),
        timestamp: Number(r.ts),
      }));
    },
  };
}
