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
 * Consumer groups live in this process (one LocalEventLog instance): members of a group split the
 * topic's partitions round-robin in join order; every join or leave rebalances. A rebalance first
 * revokes moved partitions and waits for their in-flight batch, then hands them to the new owner,
 * which asks `resumeFrom` before delivering anything. Two LocalEventLog instances (or processes) on
 * one database do not coordinate groups: the embedded shape runs every role in one process.
 *
 * Delivery: one loop per assigned partition reads `offset >= position ORDER BY offset LIMIT
 * maxBatchSize`; an idle loop sleeps until an append of this instance notifies it (EventEmitter) or
 * the member's poll (one cheap query of the partition heads every pollIntervalMs) sees new records
 * appended by another process or instance.
 *
 * Retention: none yet; event_log_records grows with every event (see the migration and the
 * RETENTION note in the class for the plan).
 */
import { EventEmitter } from 'node:events';
import { Mutex } from '../../shared/mutex';
import type { Sql } from '../sql/types';
import type { Topic } from '../../schemas/topics';
import type {
  AppendRecord,
  Batch,
  Consumer,
  ConsumerHandlers,
  ConsumerOptions,
  EventLog,
  LogRecord,
} from './types';
import { PlainAvroCodec, type SchemaCodec } from './codec';
import {
  backoffDelay,
  chunk,
  defaultLogger,
  errorMessage,
  partitionForKey,
  Semaphore,
  Signal,
  sleepUnless,
  type BackoffOptions,
  type EventLogLogger,
} from './common';

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
}

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
  private readonly groups = new Map<string, LocalGroup>();
  private readonly members = new Set<LocalMember<unknown>>();
  private closed = false;

  /** `sql`: the SQL store, migrated (002_event_log). Not owned: close() leaves it open. */
  constructor(
    sql: Sql,
    private readonly opts: LocalEventLogOptions = {},
  ) {
    this.sql = sql;
    this.codec = opts.codec ?? new PlainAvroCodec();
    this.prefix = opts.topicPrefix ?? '';
    this.log = opts.log ?? defaultLogger;
    this.appended.setMaxListeners(0);
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
    for (const r of records) {
      if (typeof r.key !== 'string') throw new Error(`append to ${name}: every record needs a string key`);
      const value = await this.codec.encode(topic, r.value);
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
    const groupKey = `${name}\u0000${opts.group}`;
    let group = this.groups.get(groupKey);
    if (!group) {
      group = new LocalGroup(topic.partitions, this.log, `${name}/${opts.group}`);
      this.groups.set(groupKey, group);
    }
    const member = new LocalMember<T>({
      sql: this.sql,
      codec: this.codec,
      topic,
      physicalName: name,
      group,
      opts,
      handlers,
      notifier: this.appended,
      pollIntervalMs: this.opts.pollIntervalMs ?? 200,
      backoff: this.opts.retryBackoff ?? {},
      log: this.log,
      onStopped: (m) => this.members.delete(m as LocalMember<unknown>),
    });
    this.members.add(member as LocalMember<unknown>);
    await group.join(member as LocalMember<unknown>);
    return member;
  }

  async endOffsets(topic: Topic<unknown>): Promise<Map<number, number>> {
    const { rows } = await this.sql.query<{ partition: number; next_offset: number }>(
      'SELECT partition, next_offset FROM event_log_partitions WHERE topic = $1 ORDER BY partition',
      [this.physicalName(topic)],
    );
    if (rows.length === 0) throw new Error(`topic ${this.physicalName(topic)} does not exist`);
    return new Map(rows.map((r) => [Number(r.partition), Number(r.next_offset)]));
  }

  partitionFor(topic: Topic<unknown>, key: string): number {
    return partitionForKey(key, topic.partitions);
  }

  async ping(): Promise<void> {
    await this.sql.ping();
  }

  // RETENTION (not implemented): event_log_records grows with every event. The job belongs here,
  // e.g. `retain(olderThanMs)`: per (topic, partition), DELETE records with "offset" below the
  // smallest next_offset any group stored in consumer_offsets AND appended before now - olderThanMs,
  // in small batches; the scheduler role would run it. See 002_event_log.sql.

  /** Stops every consumer of this instance (in-flight batches finish). Leaves the SQL store open. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.members].map((m) => m.stop()));
    this.appended.removeAllListeners();
  }

  private assertOpen(): void {
    if (this.closed) throw new Error('the event log is closed');
  }
}

/** The members of one group of one topic, in join order, and who owns which partition. */
class LocalGroup {
  readonly members: LocalMember<unknown>[] = [];
  private readonly lock = new Mutex();

  constructor(
    private readonly partitions: number,
    private readonly log: EventLogLogger,
    private readonly label: string,
  ) {}

  join(m: LocalMember<unknown>): Promise<void> {
    return this.lock.run(async () => {
      this.members.push(m);
      await this.rebalance();
    });
  }

  leave(m: LocalMember<unknown>): Promise<void> {
    return this.lock.run(async () => {
      await m.revoke(m.assignment());
      const i = this.members.indexOf(m);
      if (i >= 0) this.members.splice(i, 1);
      await this.rebalance();
    });
  }

  /** Round-robin in join order: partition p goes to member p mod n. Revoke first, then assign. */
  private async rebalance(): Promise<void> {
    const n = this.members.length;
    if (n === 0) return;
    const target = new Map<LocalMember<unknown>, number[]>(this.members.map((m) => [m, []]));
    for (let p = 0; p < this.partitions; p++) target.get(this.members[p % n])!.push(p);
    await Promise.all(
      this.members.map((m) => m.revoke(m.assignment().filter((p) => !target.get(m)!.includes(p)))),
    );
    for (const m of this.members) m.assign(target.get(m)!);
    this.log('debug', 'local consumer group rebalanced', {
      group: this.label,
      assignment: this.members.map((m) => m.assignment()),
    });
  }
}

interface MemberDeps<T> {
  sql: Sql;
  codec: SchemaCodec;
  topic: Topic<T>;
  physicalName: string;
  group: LocalGroup;
  opts: ConsumerOptions;
  handlers: ConsumerHandlers<T>;
  notifier: EventEmitter;
  pollIntervalMs: number;
  backoff: BackoffOptions;
  log: EventLogLogger;
  onStopped: (m: LocalMember<T>) => void;
}

/** One partition's delivery loop of one member. */
class PartitionLoop {
  /** Next offset to deliver; undefined until resumeFrom answered. */
  position: number | undefined;
  /** Fired when the partition is revoked or the member stops. */
  readonly stopped = new Signal();
  /** Set by a wake-up that arrives while the loop is busy, so it is not lost. */
  dirty = false;
  private waiter: (() => void) | undefined;
  done: Promise<void> = Promise.resolve();

  constructor(readonly partition: number) {}

  wake(): void {
    this.dirty = true;
    const w = this.waiter;
    this.waiter = undefined;
    w?.();
  }

  /** Waits for a wake-up or a stop; returns at once when one came since the last check. */
  idle(): Promise<void> {
    if (this.dirty || this.stopped.fired) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const off = this.stopped.on(() => {
        this.waiter = undefined;
        resolve();
      });
      this.waiter = () => {
        off();
        resolve();
      };
    });
  }
}

class LocalMember<T> implements Consumer {
  private readonly loops = new Map<number, PartitionLoop>();
  private readonly limiter: Semaphore;
  private readonly maxBatchSize: number;
  private readonly onAppend = (): void => this.wakeAll();
  private pollTimer: NodeJS.Timeout | undefined;
  private stopping: Promise<void> | undefined;
  private polling = false;

  constructor(private readonly d: MemberDeps<T>) {
    this.maxBatchSize = d.opts.maxBatchSize ?? 500;
    if (!(this.maxBatchSize >= 1)) throw new Error(`invalid maxBatchSize: ${d.opts.maxBatchSize}`);
    this.limiter = new Semaphore(d.opts.concurrency ?? d.topic.partitions);
    d.notifier.on(d.physicalName, this.onAppend);
    this.schedulePoll();
  }

  assignment(): number[] {
    return [...this.loops.keys()].sort((a, b) => a - b);
  }

  stop(): Promise<void> {
    if (!this.stopping) {
      this.stopping = (async () => {
        this.d.notifier.off(this.d.physicalName, this.onAppend);
        if (this.pollTimer) clearTimeout(this.pollTimer);
        this.pollTimer = undefined;
        await this.d.group.leave(this as LocalMember<unknown>);
        this.d.onStopped(this);
      })();
    }
    return this.stopping;
  }

  /** Stops the loops of `partitions` and waits for their in-flight batch. Called under the group lock. */
  async revoke(partitions: number[]): Promise<void> {
    const loops = partitions.map((p) => this.loops.get(p)).filter((l): l is PartitionLoop => !!l);
    for (const l of loops) {
      l.stopped.fire();
      this.loops.delete(l.partition);
    }
    await Promise.all(loops.map((l) => l.done));
  }

  /** Takes `partitions` (the member's full new assignment). Called under the group lock. */
  assign(partitions: number[]): void {
    const added = partitions.filter((p) => !this.loops.has(p));
    const fresh = added.map((p) => new PartitionLoop(p));
    for (const l of fresh) this.loops.set(l.partition, l);
    try {
      this.d.handlers.onAssignment?.(this.assignment());
    } catch (err) {
      this.d.log('warn', 'onAssignment threw', { error: errorMessage(err) });
    }
    if (fresh.length > 0) void this.start(fresh);
  }

  /** Asks resumeFrom for the new partitions (one call, retried with backoff), then runs their loops. */
  private async start(fresh: PartitionLoop[]): Promise<void> {
    const live = () => fresh.filter((l) => !l.stopped.fired);
    let positions: Map<number, number> | undefined;
    const startingDone = new Signal();
    // revoke() must be able to wait for this phase too.
    for (const l of fresh) l.done = new Promise<void>((r) => startingDone.on(r));
    for (let attempt = 1; !positions; attempt++) {
      const pending = live();
      if (pending.length === 0) break;
      try {
        positions = await this.d.handlers.resumeFrom(pending.map((l) => l.partition));
      } catch (err) {
        this.d.log('error', 'resumeFrom failed; retrying', {
          topic: this.d.topic.name,
          error: errorMessage(err),
        });
        await sleepUnless(
          backoffDelay(attempt, this.d.backoff),
          pending.map((l) => l.stopped),
        );
      }
    }
    for (const l of live()) {
      l.position = positions?.get(l.partition) ?? 0;
      l.done = this.run(l);
    }
    startingDone.fire();
  }

  private async run(l: PartitionLoop): Promise<void> {
    const { sql, codec, topic, physicalName, handlers, log } = this.d;
    let failures = 0;
    let needsResume = false;
    while (!l.stopped.fired) {
      if (needsResume) {
        try {
          const m = await handlers.resumeFrom([l.partition]);
          l.position = m.get(l.partition) ?? 0;
          needsResume = false;
        } catch (err) {
          failures++;
          log('error', 'resumeFrom failed; retrying', {
            topic: topic.name,
            partition: l.partition,
            error: errorMessage(err),
          });
          await sleepUnless(backoffDelay(failures, this.d.backoff), l.stopped);
          continue;
        }
      }
      l.dirty = false;
      let delivered = false;
      try {
        delivered = await this.limiter.run(async () => {
          if (l.stopped.fired) return false;
          const { rows } = await sql.query<RecordRow>(
            `SELECT "offset", key, schema_version, value,
                    (extract(epoch FROM appended_at) * 1000)::bigint AS ts
             FROM event_log_records
             WHERE topic = $1 AND partition = $2 AND "offset" >= $3
             ORDER BY "offset" LIMIT $4`,
            [physicalName, l.partition, l.position, this.maxBatchSize],
          );
          if (rows.length === 0) return false;
          const records: LogRecord<T>[] = [];
          for (const r of rows) {
            records.push({
              topic: topic.name,
              partition: l.partition,
              offset: Number(r.offset),
              key: r.key,
              value: await codec.decode(topic, Buffer.from(r.value), Number(r.schema_version)),
              timestamp: Number(r.ts),
            });
          }
          const batch: Batch<T> = {
            topic: topic.name,
            partition: l.partition,
            records,
            nextOffset: records[records.length - 1].offset + 1,
          };
          await handlers.handleBatch(batch);
          l.position = batch.nextOffset;
          return true;
        });
        failures = 0;
      } catch (err) {
        failures++;
        const wait = backoffDelay(failures, this.d.backoff);
        log('error', 'batch failed; redelivering from the stored offset', {
          topic: topic.name,
          partition: l.partition,
          position: l.position,
          attempt: failures,
          retryInMs: wait,
          error: errorMessage(err),
        });
        await sleepUnless(wait, l.stopped);
        needsResume = true;
        continue;
      }
      if (!delivered) await l.idle();
    }
  }

  private wakeAll(): void {
    for (const l of this.loops.values()) l.wake();
  }

  /** Fallback for appends this instance did not make: compare partition heads with positions. */
  private schedulePoll(): void {
    this.pollTimer = setTimeout(() => void this.poll(), this.d.pollIntervalMs);
    this.pollTimer.unref();
  }

  private async poll(): Promise<void> {
    if (this.stopping || this.polling) return;
    this.polling = true;
    try {
      const started = [...this.loops.values()].filter((l) => l.position !== undefined);
      if (started.length > 0) {
        const { rows } = await this.d.sql.query<{ partition: number; next_offset: number }>(
          'SELECT partition, next_offset FROM event_log_partitions WHERE topic = $1',
          [this.d.physicalName],
        );
        for (const r of rows) {
          const l = this.loops.get(Number(r.partition));
          if (l && l.position !== undefined && Number(r.next_offset) > l.position) l.wake();
        }
      }
    } catch (err) {
      this.d.log('warn', 'event log poll failed', { topic: this.d.topic.name, error: errorMessage(err) });
    } finally {
      this.polling = false;
      if (!this.stopping) this.schedulePoll();
    }
  }
}
