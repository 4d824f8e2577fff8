/**
 * KafkaEventLog: the distributed shape's event log, on Apache Kafka through kafkajs.
 *
 * Producer: idempotent (`idempotent: true, maxInFlightRequests: 1`, acks = all), keyed records,
 * partitioned by murmur2 of the key as Kafka's Java client and kafkajs's DefaultPartitioner do
 * (partitioner.ts; `partitionFor` runs the same function). Values are Avro in the Confluent wire
 * format (codec.ts, RegistryAvroCodec). Appends go through a group commit (group-commit.ts): the
 * appends that arrive while a produce request is in flight go together in the next one (up to
 * MAX_GROUP_BYTES), and each resolves only when that request is acknowledged by every in-sync
 * replica; a failed request rejects every append it carried (the callers answer 503, retry, and
 * the pipeline's dedupe makes a repeated event harmless), as a failed single append always did.
 *
 * Consumer: one kafkajs consumer per `consume` call, in group `opts.group`, `eachBatch` with
 * `eachBatchAutoResolve: false` and `autoCommit: false`. The consumer's own store is the truth for
 * offsets (types.ts): kafkajs has no rebalance listener, so on every GROUP_JOIN (the first join
 * included) the member
 *   1. pauses every assigned partition and marks it "not ready" for this join (a generation counter),
 *   2. asks `resumeFrom` for them (retrying with backoff),
 *   3. `seek`s each to its stored offset, marks it ready, resumes it.
 * A batch is handed to `handleBatch` only when its partition is ready in the current generation,
 * no seek is pending for it (kafkajs `isStale`), and only records at or after the position we
 * sought to (or advanced to) are kept: a batch fetched before the seek never reaches the handler.
 * After each successful batch the offset is also committed to Kafka, for lag monitoring only.
 *
 * Handler errors: pause the partition, back off (exponential, capped), ask `resumeFrom` again, seek,
 * resume. Nothing blocks inside `eachBatch` while waiting, so other partitions keep flowing.
 *
 * Crashes: kafkajs restarts a crashed consumer by itself when the error is retriable (broker
 * restarts, lost connections: KafkaJSNumberOfRetriesExceeded and friends). When it would not
 * restart (`restart: false` in the CRASH event) this adapter runs the consumer again after a
 * backoff, so a consumer never dies silently while it has not been stopped.
 */
import {
  Kafka,
  logLevel as KafkaLogLevel,
  type Admin,
  type Consumer as KafkaConsumer,
  type EachBatchPayload,
  type ISocketFactory,
  type LogEntry,
  type Producer,
} from 'kafkajs';
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
import { RegistryAvroCodec, encodeRecords, type SchemaCodec } from './codec';
import {
  backoffDelay,
  chunk,
  defaultLogger,
  errorMessage,
  Signal,
  sleepUnless,
  type BackoffOptions,
  type EventLogLogger,
} from './common';
import { createKeyPartitioner, partitionForKey } from './partitioner';
import { GroupCommit } from './group-commit';
import { groupBy } from '../../shared/group-by';

/**
 * Bytes (keys and values) of the appends one produce request carries at most. Appends are merged
 * only up to this, well below the broker's default limit of about 1 MiB per partition's batch; a
 * larger single append is sent alone, as before.
 */
const MAX_GROUP_BYTES = 256 * 1024;

/** An append waiting for its produce request (KafkaEventLog.append). */
interface PendingAppend {
  topic: string;
  messages: Array<{ key: string; value: Buffer }>;
}

export interface KafkaConsumerTuning {
  /** Group session timeout. Default 10000 ms (the broker's minimum is usually 6000). */
  sessionTimeoutMs?: number;
  /** How long the coordinator waits for members to rejoin during a rebalance. Default 30000 ms. */
  rebalanceTimeoutMs?: number;
  /** Default 1000 ms; must be below the session timeout (a third of it is usual). */
  heartbeatIntervalMs?: number;
  /** Longest a fetch waits for data (also the idle sleep while every partition is paused). Default 500 ms. */
  maxWaitTimeMs?: number;
}

export interface KafkaEventLogOptions {
  /** host:port of one or more brokers. */
  brokers: string[];
  clientId?: string;
  /** Confluent-API schema registry URL (Apicurio: http://host:port/apis/ccompat/v7). Needed unless `codec` is given. */
  schemaRegistryUrl?: string;
  /** Replaces the registry codec (same Avro schemas). */
  codec?: SchemaCodec;
  /** Prepended to topic names, consumer group ids and registry subjects (isolation; tests use a unique one). */
  topicPrefix?: string;
  /** Replication factor of topics that ensureTopic creates. Default -1: the broker's default.replication.factor. */
  replicationFactor?: number;
  /** Deadline of the first connection to the brokers. Default 5000 ms. */
  connectTimeoutMs?: number;
  /** Per-request timeout. Default 30000 ms. */
  requestTimeoutMs?: number;
  consumer?: KafkaConsumerTuning;
  /** Backoff after a handler error before redelivery. Default 100 ms doubling up to 5 s. */
  retryBackoff?: BackoffOptions;
  /** Commit offsets to Kafka after each handled batch, for lag monitoring only. Default true. */
  commitOffsetsForMonitoring?: boolean;
  /** Diagnostics of the adapter and of kafkajs (routed, with levels mapped). Default: errors to stderr. */
  log?: EventLogLogger;
  /** kafkajs socket factory, for fault-injection tests (cut connections). Default: plain TCP. */
  socketFactory?: ISocketFactory;
}

export class KafkaEventLog implements EventLog {
  readonly kind = 'kafka' as const;
  private readonly kafka: Kafka;
  private readonly admin: Admin;
  private readonly producer: Producer;
  private readonly codec: SchemaCodec;
  private readonly prefix: string;
  private readonly log: EventLogLogger;
  private readonly members = new Set<KafkaMember<unknown>>();
  private connecting: Promise<void> | undefined;
  private closed = false;
  /** The last connection error kafkajs reported (it retries by itself): the reason of a timeout. */
  private lastConnectionError: string | undefined;
  private readonly appends = new GroupCommit<PendingAppend>({
    maxBytes: MAX_GROUP_BYTES,
    flush: (group) => this.sendGroup(group),
  });

  constructor(private readonly opts: KafkaEventLogOptions) {
    if (!opts.brokers?.length) throw new Error('KafkaEventLog: at least one broker is required');
    this.prefix = opts.topicPrefix ?? '';
    this.log = opts.log ?? defaultLogger;
    if (opts.codec) this.codec = opts.codec;
    else if (opts.schemaRegistryUrl) {
      this.codec = new RegistryAvroCodec({ url: opts.schemaRegistryUrl, subjectPrefix: this.prefix });
    } else throw new Error('KafkaEventLog: schemaRegistryUrl (or a codec) is required');
    this.kafka = new Kafka({
      clientId: opts.clientId ?? 'ludus',
      brokers: opts.brokers,
      connectionTimeout: Math.min(opts.connectTimeoutMs ?? 5000, 3000),
      requestTimeout: opts.requestTimeoutMs ?? 30000,
      logLevel: KafkaLogLevel.WARN,
      logCreator: () => (entry) => this.routeKafkaLog(entry),
      ...(opts.socketFactory ? { socketFactory: opts.socketFactory } : {}),
    });
    this.admin = this.kafka.admin();
    this.producer = this.kafka.producer({
      idempotent: true,
      maxInFlightRequests: 1,
      allowAutoTopicCreation: false,
      createPartitioner: createKeyPartitioner,
    });
  }

  /** The Kafka topic of a logical topic. */
  physicalName(topic: Topic<unknown>): string {
    return this.prefix + topic.name;
  }

  /** The Kafka consumer group id of a logical group. */
  groupId(group: string): string {
    return this.prefix + group;
  }

  /**
   * Connects the admin client and the producer, within connectTimeoutMs. Called by every other
   * method; call it (or ping) at start to fail fast with `cannot reach Kafka at <brokers>: <reason>`.
   */
  connect(): Promise<void> {
    if (this.closed) return Promise.reject(new Error('the event log is closed'));
    if (!this.connecting) {
      this.lastConnectionError = undefined;
      const attempt = withDeadline(
        Promise.all([this.admin.connect(), this.producer.connect()]).then(() => undefined),
        this.opts.connectTimeoutMs ?? 5000,
        () => this.lastConnectionError ?? 'no answer',
      ).catch(async (err: unknown) => {
        this.connecting = undefined;
        await Promise.allSettled([this.admin.disconnect(), this.producer.disconnect()]);
        throw new Error(`cannot reach Kafka at ${this.opts.brokers.join(',')}: ${errorMessage(err)}`);
      });
      this.connecting = attempt;
    }
    return this.connecting;
  }

  async ensureTopic(topic: Topic<unknown>): Promise<void> {
    await this.connect();
    const name = this.physicalName(topic);
    await this.admin.createTopics({
      topics: [
        {
          topic: name,
          numPartitions: topic.partitions,
          replicationFactor: this.opts.replicationFactor ?? -1,
          ...(topic.retentionMs !== undefined
            ? { configEntries: [{ name: 'retention.ms', value: String(topic.retentionMs) }] }
            : {}),
        },
      ],
      // Not kafkajs's own wait: it gives up on UNKNOWN_TOPIC_OR_PARTITION, which a KRaft broker
      // answers until its metadata has caught up with the controller (seen on a fresh stack).
      waitForLeaders: false,
    });
    const count = await this.waitForLeaders(name);
    if (count !== topic.partitions) {
      throw new Error(
        `topic ${name} exists with ${count} partitions, the code expects ${topic.partitions}: ` +
          'changing the count would move keys to other partitions',
      );
    }
    // Register the writer schema now rather than on the first append.
    if (this.codec instanceof RegistryAvroCodec) await this.codec.writerSchemaId(topic);
  }

  /**
   * Waits until every partition of a topic has a leader (the broker hosts it), retrying while the
   * broker does not know the topic yet; returns the partition count. Gives up after requestTimeoutMs.
   */
  private async waitForLeaders(name: string): Promise<number> {
    const deadline = Date.now() + (this.opts.requestTimeoutMs ?? 30000);
    for (let attempt = 0; ; attempt++) {
      let reason: string;
      try {
        const { topics } = await this.admin.fetchTopicMetadata({ topics: [name] });
        const partitions = topics[0]?.partitions ?? [];
        const leaderless = partitions.filter((p) => !(p.leader >= 0) || p.partitionErrorCode !== 0);
        if (partitions.length > 0 && leaderless.length === 0) return partitions.length;
        reason = `${leaderless.length} of ${partitions.length} partitions have no leader yet`;
      } catch (err) {
        const type = (err as { type?: string }).type;
        if (type !== 'UNKNOWN_TOPIC_OR_PARTITION' && type !== 'LEADER_NOT_AVAILABLE') throw err;
        reason = errorMessage(err);
      }
      if (Date.now() >= deadline)
        throw new Error(`topic ${name} has no leader for every partition: ${reason}`);
      await new Promise((r) => setTimeout(r, Math.min(50 * 2 ** attempt, 500)));
    }
  }

  /**
   * Runs an admin request again while Kafka answers with a retriable error, for up to
   * requestTimeoutMs. Right after a topic is created, its metadata may already name a leader that
   * has not taken the partition over yet: a ListOffsets then fails with "This server is not the
   * leader for that topic-partition" (seen in the contract tests); a leader election after a
   * broker restart does the same for a moment.
   */
  private async untilAnswered<R>(request: () => Promise<R>): Promise<R> {
    const deadline = Date.now() + (this.opts.requestTimeoutMs ?? 30000);
    for (let attempt = 0; ; attempt++) {
      try {
        return await request();
      } catch (err) {
        if (!(err as { retriable?: boolean }).retriable || Date.now() >= deadline) throw err;
        await new Promise((r) => setTimeout(r, Math.min(50 * 2 ** attempt, 500)));
      }
    }
  }

  async append<T>(topic: Topic<T>, records: AppendRecord<T>[]): Promise<void> {
    if (records.length === 0) return;
    await this.connect();
    const values = await encodeRecords(this.codec, topic, topic.name, records);
    let bytes = 0;
    const messages = records.map((r, i) => {
      bytes += values[i].length + r.key.length;
      return { key: r.key, value: values[i] };
    });
    await this.appends.submit({ topic: this.physicalName(topic), messages }, bytes);
  }

  /** One produce request for a group of appends (group-commit.ts), in the order they came. */
  private async sendGroup(group: PendingAppend[]): Promise<void> {
    const byTopic = groupBy(group, (a) => a.topic);
    // acks -1: every in-sync replica has it; kafkajs rejects (never drops) on failure.
    await this.producer.sendBatch({
      acks: -1,
      topicMessages: [...byTopic].map(([topic, as]) => ({
        topic,
        messages: as.length === 1 ? as[0].messages : as.flatMap((a) => a.messages),
      })),
    });
  }

  async consume<T>(topic: Topic<T>, opts: ConsumerOptions, handlers: ConsumerHandlers<T>): Promise<Consumer> {
    await this.connect();
    if (!opts.group) throw new Error('consume: a consumer group is required');
    const member = new KafkaMember<T>({
      kafka: this.kafka,
      codec: this.codec,
      topic,
      physicalName: this.physicalName(topic),
      groupId: this.groupId(opts.group),
      opts,
      handlers,
      tuning: this.opts.consumer ?? {},
      backoff: this.opts.retryBackoff ?? {},
      commitForMonitoring: this.opts.commitOffsetsForMonitoring ?? true,
      connectTimeoutMs: this.opts.connectTimeoutMs ?? 5000,
      brokers: this.opts.brokers,
      log: this.log,
      onStopped: (m) => this.members.delete(m as KafkaMember<unknown>),
    });
    this.members.add(member as KafkaMember<unknown>);
    try {
      await member.start();
    } catch (err) {
      await member.stop().catch(() => undefined);
      throw err;
    }
    return member;
  }

  async endOffsets(topic: Topic<unknown>): Promise<Map<number, number>> {
    await this.connect();
    const name = this.physicalName(topic);
    const offsets = await this.untilAnswered(() => this.admin.fetchTopicOffsets(name));
    return new Map(offsets.map((o) => [o.partition, Number(o.high)] as const).sort((a, b) => a[0] - b[0]));
  }

  partitionFor(topic: Topic<unknown>, key: string): number {
    return partitionForKey(key, topic.partitions);
  }

  async ping(): Promise<void> {
    await this.connect();
    await this.admin.describeCluster();
  }

  /** Checks that the schema registry answers (GET /schemas/types). */
  async pingRegistry(): Promise<void> {
    const url = this.opts.schemaRegistryUrl;
    if (!url) return;
    let res: Response;
    try {
      res = await fetch(`${url.replace(/\/+$/, '')}/schemas/types`, {
        signal: AbortSignal.timeout(this.opts.connectTimeoutMs ?? 5000),
      });
    } catch (err) {
      const cause = (err as { cause?: unknown }).cause;
      throw new Error(`cannot reach the schema registry at ${url}: ${errorMessage(cause ?? err)}`);
    }
    if (!res.ok) throw new Error(`the schema registry at ${url} answered HTTP ${res.status}`);
    await res.arrayBuffer();
  }

  /** Stops every consumer (in-flight batches finish, members leave their groups), then disconnects. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.allSettled([...this.members].map((m) => m.stop()));
    const connecting = this.connecting;
    this.connecting = undefined;
    if (connecting) await connecting.catch(() => undefined);
    await Promise.allSettled([this.producer.disconnect(), this.admin.disconnect()]);
  }

  /**
   * kafkajs logs into ours: its INFO is our debug; connection and protocol errors, which it retries
   * by itself, become warnings (the adapter logs an error when something is really lost: a crash).
   */
  private routeKafkaLog(entry: LogEntry): void {
    const { namespace, level, log } = entry;
    const { message, ...fields } = log;
    const transport = namespace === 'Connection' || namespace === 'BrokerPool';
    if (transport && level <= KafkaLogLevel.WARN) {
      this.lastConnectionError = String(message).replace(
        /^Failed to connect to seed broker, trying another broker from the list: /,
        '',
      );
    }
    const text = `kafkajs ${namespace}: ${message}`;
    if (level === KafkaLogLevel.ERROR) this.log(transport ? 'warn' : 'error', text, fields);
    else if (level === KafkaLogLevel.WARN) this.log('warn', text, fields);
    else if (level === KafkaLogLevel.INFO) this.log('debug', text, fields);
    else this.log('debug', text, fields);
  }
}

const DEFAULT_REBALANCE_TIMEOUT_MS = 30000;
/** Heartbeat errors after which kafkajs rejoins the group (its isRebalancing, and a lost member id). */
const REJOIN_ERRORS = new Set([
  'REBALANCE_IN_PROGRESS',
  'NOT_COORDINATOR_FOR_GROUP',
  'ILLEGAL_GENERATION',
  'UNKNOWN_MEMBER_ID',
]);

interface MemberDeps<T> {
  kafka: Kafka;
  codec: SchemaCodec;
  topic: Topic<T>;
  physicalName: string;
  groupId: string;
  opts: ConsumerOptions;
  handlers: ConsumerHandlers<T>;
  tuning: KafkaConsumerTuning;
  backoff: BackoffOptions;
  commitForMonitoring: boolean;
  connectTimeoutMs: number;
  brokers: string[];
  log: EventLogLogger;
  onStopped: (m: KafkaMember<T>) => void;
}

/** What this member knows of one assigned partition, for one generation (one GROUP_JOIN). */
interface PartitionState {
  generation: number;
  /** resumeFrom answered and the seek was issued: batches may be delivered. */
  ready: boolean;
  /** A handler error paused the partition; recovery (backoff, resumeFrom, seek, resume) is under way. */
  failed: boolean;
  /** Next offset to deliver: records below it are dropped (fetched before a seek). */
  position: number;
  /** Consecutive failures, for the backoff. */
  attempts: number;
  /** Fired when this state is replaced (new generation) or the member stops. */
  readonly retired: Signal;
}

class KafkaMember<T> implements Consumer {
  private readonly consumer: KafkaConsumer;
  private readonly maxBatchSize: number;
  private generation = 0;
  private parts = new Map<number, PartitionState>();
  private readonly stopped = new Signal();
  private stopping: Promise<void> | undefined;
  private restartTimer: NodeJS.Timeout | undefined;
  private restarts = 0;
  /**
   * Until when (ms) a heartbeat's rebalance error holds further chunks back, so that kafkajs can
   * rejoin within the rebalance timeout. Reset by the next GROUP_JOIN; expires by itself anyway.
   */
  private rejoiningUntil = 0;

  constructor(private readonly d: MemberDeps<T>) {
    this.maxBatchSize = d.opts.maxBatchSize ?? 500;
    if (!(this.maxBatchSize >= 1)) throw new Error(`invalid maxBatchSize: ${d.opts.maxBatchSize}`);
    const t = d.tuning;
    this.consumer = d.kafka.consumer({
      groupId: d.groupId,
      sessionTimeout: t.sessionTimeoutMs ?? 10000,
      rebalanceTimeout: t.rebalanceTimeoutMs ?? DEFAULT_REBALANCE_TIMEOUT_MS,
      heartbeatInterval: t.heartbeatIntervalMs ?? 1000,
      maxWaitTimeInMs: t.maxWaitTimeMs ?? 500,
      allowAutoTopicCreation: false,
      readUncommitted: false,
    });
    this.consumer.on(this.consumer.events.GROUP_JOIN, (e) =>
      this.onJoin(e.payload.memberAssignment[d.physicalName] ?? []),
    );
    this.consumer.on(this.consumer.events.CRASH, (e) => this.onCrash(e.payload.error, e.payload.restart));
  }

  assignment(): number[] {
    return [...this.parts.keys()].sort((a, b) => a - b);
  }

  async start(): Promise<void> {
    try {
      await withDeadline(this.consumer.connect(), this.d.connectTimeoutMs, () => 'no answer');
    } catch (err) {
      throw new Error(`cannot reach Kafka at ${this.d.brokers.join(',')}: ${errorMessage(err)}`);
    }
    try {
      await this.consumer.subscribe({ topics: [this.d.physicalName], fromBeginning: true });
    } catch (err) {
      if ((err as { type?: string }).type === 'UNKNOWN_TOPIC_OR_PARTITION') {
        throw new Error(`topic ${this.d.physicalName} does not exist: call ensureTopic first`);
      }
      throw err;
    }
    await this.run();
  }

  /** consumer.run; resolves after the first group join (seek only works once run was called). */
  private run(): Promise<void> {
    return this.consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: this.d.opts.concurrency ?? this.d.topic.partitions,
      eachBatch: (payload) => this.eachBatch(payload),
    });
  }

  stop(): Promise<void> {
    if (!this.stopping) {
      this.stopping = (async () => {
        this.stopped.fire();
        if (this.restartTimer) clearTimeout(this.restartTimer);
        for (const st of this.parts.values()) st.retired.fire();
        // Waits for the in-flight batches, leaves the group (the others rebalance), disconnects.
        await this.consumer.disconnect();
        this.parts = new Map();
        this.d.onStopped(this);
      })();
    }
    return this.stopping;
  }

  /** GROUP_JOIN (emitted synchronously inside kafkajs's join, before any fetch of the new generation). */
  private onJoin(partitions: number[]): void {
    if (this.stopped.fired) return;
    const generation = ++this.generation;
    this.restarts = 0;
    this.rejoiningUntil = 0;
    for (const st of this.parts.values()) st.retired.fire();
    this.parts = new Map(
      partitions.map((p) => [
        p,
        { generation, ready: false, failed: false, position: 0, attempts: 0, retired: new Signal() },
      ]),
    );
    if (partitions.length > 0)
      this.safely('pause', () => this.consumer.pause([{ topic: this.d.physicalName, partitions }]));
    this.d.log('debug', 'kafka consumer joined its group', { group: this.d.groupId, generation, partitions });
    this.notifyAssignment();
    if (partitions.length > 0) void this.prepare(generation, partitions);
  }

  private notifyAssignment(): void {
    try {
      this.d.handlers.onAssignment?.(this.assignment());
    } catch (err) {
      this.d.log('warn', 'onAssignment threw', { error: errorMessage(err) });
    }
  }

  /** resumeFrom (retried), then seek every partition of this generation and let it be fetched. */
  private async prepare(generation: number, partitions: number[]): Promise<void> {
    let positions: Map<number, number> | undefined;
    for (let attempt = 1; !positions; attempt++) {
      if (generation !== this.generation || this.stopped.fired) return;
      try {
        positions = await this.d.handlers.resumeFrom(partitions);
      } catch (err) {
        const wait = backoffDelay(attempt, this.d.backoff);
        this.d.log('error', 'resumeFrom failed; retrying', {
          topic: this.d.topic.name,
          error: errorMessage(err),
          retryInMs: wait,
        });
        await sleepUnless(wait, this.stopped);
      }
    }
    if (generation !== this.generation || this.stopped.fired) return;
    const ok = this.safely('seek', () => {
      for (const p of partitions) {
        const st = this.parts.get(p)!;
        st.position = positions.get(p) ?? 0;
        this.consumer.seek({ topic: this.d.physicalName, partition: p, offset: String(st.position) });
      }
    });
    // When seek failed the consumer is restarting: the next GROUP_JOIN prepares again.
    if (!ok) return;
    for (const p of partitions) this.parts.get(p)!.ready = true;
    this.safely('resume', () => this.consumer.resume([{ topic: this.d.physicalName, partitions }]));
  }

  private async eachBatch(payload: EachBatchPayload): Promise<void> {
    const { batch } = payload;
    const p = batch.partition;
    const st = this.parts.get(p);
    // Gate: only a partition that is sought in the current generation, with no seek pending.
    if (!st || !st.ready || st.failed || this.stopped.fired || payload.isStale()) return;
    const all = batch.messages;
    const messages = all.filter((m) => Number(m.offset) >= st.position);
    if (messages.length === 0) {
      // Everything predates our position: let kafkajs move on without delivering anything.
      if (all.length > 0) payload.resolveOffset(all[all.length - 1].offset);
      return;
    }
    const fetched = Number(
      (batch as unknown as { fetchedOffset?: string }).fetchedOffset ?? messages[0].offset,
    );
    if (Number(messages[0].offset) > st.position && fetched > st.position) {
      this.d.log('warn', 'kafka skipped records below the fetch position (deleted by retention?)', {
        topic: this.d.physicalName,
        partition: p,
        position: st.position,
        firstAvailable: messages[0].offset,
      });
    }
    let handled = false;
    for (const part of chunk(messages, this.maxBatchSize)) {
      if (
        !payload.isRunning() ||
        payload.isStale() ||
        Date.now() < this.rejoiningUntil ||
        this.parts.get(p) !== st ||
        st.failed ||
        this.stopped.fired
      ) {
        break;
      }
      let delivered: Batch<T>;
      try {
        const records: LogRecord<T>[] = [];
        for (const m of part) {
          if (!m.value) throw new Error(`record ${this.d.physicalName}/${p}@${m.offset} has no value`);
          records.push({
            topic: this.d.topic.name,
            partition: p,
            offset: Number(m.offset),
            key: m.key ? m.key.toString('utf8') : '',
            value: await this.d.codec.decode(this.d.topic, m.value),
            timestamp: Number(m.timestamp),
          });
        }
        delivered = {
          topic: this.d.topic.name,
          partition: p,
          records,
          nextOffset: records[records.length - 1].offset + 1,
        };
        await this.d.handlers.handleBatch(delivered);
      } catch (err) {
        this.fail(st, p, err, payload);
        break;
      }
      st.position = delivered.nextOffset;
      st.attempts = 0;
      handled = true;
      payload.resolveOffset(part[part.length - 1].offset);
      try {
        await payload.heartbeat();
      } catch (err) {
        // A rebalance: the other partitions stop after their current chunk, so that this member
        // rejoins within the rebalance timeout. kafkajs handles the error (it rejoins).
        if (REJOIN_ERRORS.has((err as { type?: string }).type ?? '')) {
          this.rejoiningUntil =
            Date.now() + (this.d.tuning.rebalanceTimeoutMs ?? DEFAULT_REBALANCE_TIMEOUT_MS);
        }
        throw err;
      }
    }
    if (handled && this.d.commitForMonitoring && this.parts.get(p) === st) {
      // Lag monitoring only: the consumer's own store is the truth. Failures are harmless.
      await payload
        .commitOffsetsIfNecessary({
          topics: [
            { topic: this.d.physicalName, partitions: [{ partition: p, offset: String(st.position) }] },
          ],
        })
        .catch((err: unknown) =>
          this.d.log('debug', 'offset commit for monitoring failed', { error: errorMessage(err) }),
        );
    }
  }

  /** Handler error: pause the partition now, recover out of band (never block eachBatch). */
  private fail(st: PartitionState, p: number, err: unknown, payload: EachBatchPayload): void {
    st.failed = true;
    st.attempts++;
    this.safely('pause', () => payload.pause());
    const wait = backoffDelay(st.attempts, this.d.backoff);
    this.d.log('error', 'batch failed; redelivering from the stored offset', {
      topic: this.d.topic.name,
      partition: p,
      position: st.position,
      attempt: st.attempts,
      retryInMs: wait,
      error: errorMessage(err),
    });
    void (async () => {
      await sleepUnless(wait, st.retired);
      let position: number | undefined;
      while (position === undefined) {
        if (this.parts.get(p) !== st || this.stopped.fired) return;
        try {
          position = (await this.d.handlers.resumeFrom([p])).get(p) ?? 0;
        } catch (e) {
          st.attempts++;
          this.d.log('error', 'resumeFrom failed; retrying', {
            topic: this.d.topic.name,
            partition: p,
            error: errorMessage(e),
          });
          await sleepUnless(backoffDelay(st.attempts, this.d.backoff), st.retired);
        }
      }
      if (this.parts.get(p) !== st || this.stopped.fired) return;
      const sought = this.safely('seek', () =>
        this.consumer.seek({ topic: this.d.physicalName, partition: p, offset: String(position) }),
      );
      if (!sought) return; // restarting: the next GROUP_JOIN takes over
      st.position = position;
      st.failed = false;
      this.safely('resume', () => this.consumer.resume([{ topic: this.d.physicalName, partitions: [p] }]));
    })();
  }

  private onCrash(error: Error, restart: boolean): void {
    for (const st of this.parts.values()) st.retired.fire();
    const owned = this.parts.size > 0;
    this.parts = new Map();
    if (this.stopped.fired) return;
    if (owned) this.notifyAssignment();
    this.d.log('error', `kafka consumer crashed (${restart ? 'kafkajs restarts it' : 'restarting it'})`, {
      group: this.d.groupId,
      error: `${error.name}: ${error.message}`,
    });
    if (restart) return;
    // kafkajs gave up (a non-retriable error) and disconnected: run it again after a backoff.
    const wait = backoffDelay(++this.restarts, { initialMs: 1000, maxMs: 30000 });
    this.restartTimer = setTimeout(() => {
      if (this.stopped.fired) return;
      this.run().catch((err: unknown) =>
        this.onCrash(err instanceof Error ? err : new Error(String(err)), false),
      );
    }, wait);
  }

  /** Runs a kafkajs call that throws when the consumer is not running (mid-restart); false then. */
  private safely(what: string, fn: () => void): boolean {
    try {
      fn();
      return true;
    } catch (err) {
      this.d.log('debug', `kafka consumer ${what} skipped`, { error: errorMessage(err) });
      return false;
    }
  }
}

/** Rejects with `<reason()> (no connection within <ms> ms)` when `p` has not settled in time. */
function withDeadline<T>(p: Promise<T>, ms: number, reason: () => string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${reason()} (no connection within ${ms} ms)`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
