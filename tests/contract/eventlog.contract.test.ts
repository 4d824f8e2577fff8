/**
 * The EventLog contract (adapters/eventlog/types.ts), run against every adapter on the real stack:
 * the local log on PGlite, the local log on Postgres, the file log (the embedded default, consumers'
 * state on PGlite) and Kafka (with the schema registry).
 *
 * The consumers under test behave like the processors: they store their effects (one row per applied
 * record) and `batch.nextOffset` (consumer_offsets, migration 001) in ONE SQL transaction, and answer
 * `resumeFrom` from that table. Exactly-once is then checked on the applied rows.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Type } from 'avsc';
import { Kafka, logLevel, type ISocketFactory } from 'kafkajs';
import { PlainAvroCodec, RegistryAvroCodec, type SchemaCodec } from '../../adapters/eventlog/codec';
import { KafkaEventLog } from '../../adapters/eventlog/kafka';
import { FileEventLog } from '../../adapters/eventlog/file';
import { LocalEventLog } from '../../adapters/eventlog/local';
import { DataDirInUse } from '../../adapters/sql/dirlock';
import type { LogLevel } from '../../adapters/eventlog/common';
import { partitionForKey } from '../../adapters/eventlog/partitioner';
import type { Batch, Consumer, ConsumerHandlers, EventLog } from '../../adapters/eventlog/types';
import type { PgSql } from '../../adapters/sql/pg';
import type { Queryable, Sql } from '../../adapters/sql/types';
import { EVENTS_TOPIC, eventKey, type EventRecord, type Topic } from '../../schemas/topics';
import { groupBy } from '../../shared/group-by';
import { dropTestPg, openTestPg, openTestPglite, stack, uniqueName } from '../support/stack';
import { waitFor } from '../support/wait';

/** The events topic with fewer partitions: enough to split between members, cheap to create. */
const TOPIC: Topic<EventRecord> = { ...EVENTS_TOPIC, partitions: 4 };

// ---------------------------------------------------------------------------------------------
// Adapters under test

/** Log lines of the adapters, kept quiet and shown when a wait times out. */
const logLines: string[] = [];
const testLog = (level: LogLevel, message: string, fields?: Record<string, unknown>): void => {
  if (level === 'debug') return;
  logLines.push(`${level} ${message} ${fields ? JSON.stringify(fields) : ''}`);
  if (logLines.length > 200) logLines.shift();
};
const recentLogs = (): string => `recent adapter log:\n  ${logLines.slice(-15).join('\n  ')}`;

/** Wraps the real codec and keeps every value handed to decode: the bytes as they came off the log. */
class WireCapture implements SchemaCodec {
  readonly decoded: Buffer[] = [];
  constructor(readonly inner: SchemaCodec) {}
  encode<T>(topic: Topic<T>, values: readonly T[]): Promise<Buffer[]> {
    return this.inner.encode(topic, values);
  }
  decode<T>(topic: Topic<T>, bytes: Buffer, writerVersion?: number): Promise<T> {
    this.decoded.push(Buffer.from(bytes));
    return this.inner.decode(topic, bytes, writerVersion);
  }
  writerVersion(topic: Topic<unknown>): number {
    return this.inner.writerVersion(topic);
  }
}

interface Env {
  /** The consumers' state store. */
  sql: Sql;
  /** A new log instance (a new process, as far as the log can tell) over the same stores. */
  newLog(prefix: string, opts?: { capture?: (codec: SchemaCodec) => SchemaCodec }): EventLog;
  /**
   * One instance per store at a time (the file log locks its directory): a second instance is
   * refused while the first is open, so "another process appends" cannot happen.
   */
  exclusive?: boolean;
  /** Kafka only: checks that `bytes` (a record value off the wire) is in the Confluent format. */
  checkWire?(bytes: Buffer, prefix: string, codec: SchemaCodec): Promise<void>;
  teardown(): Promise<void>;
}

const localTuning = { pollIntervalMs: 100, retryBackoff: { initialMs: 50, maxMs: 400 }, log: testLog };

const variants: Array<[string, () => Promise<Env>]> = [
  [
    'local on PGlite',
    async () => {
      const sql = await openTestPglite();
      return {
        sql,
        newLog: (prefix, o) =>
          new LocalEventLog(sql, {
            ...localTuning,
            topicPrefix: prefix,
            ...(o?.capture ? { codec: o.capture(defaultPlain()) } : {}),
          }),
        teardown: () => sql.close(),
      };
    },
  ],
  [
    'local on Postgres',
    async () => {
      const schema = uniqueName('evlog');
      const sql = await openTestPg(schema);
      return {
        sql,
        newLog: (prefix, o) =>
          new LocalEventLog(sql, {
            ...localTuning,
            topicPrefix: prefix,
            ...(o?.capture ? { codec: o.capture(defaultPlain()) } : {}),
          }),
        teardown: () => dropTestPg(sql, schema),
      };
    },
  ],
  [
    'file',
    async () => {
      const sql = await openTestPglite();
      const base = mkdtempSync(join(tmpdir(), 'ludus-filelog-'));
      return {
        sql,
        exclusive: true,
        newLog: (prefix, o) =>
          new FileEventLog({
            ...localTuning,
            dir: join(base, prefix),
            topicPrefix: prefix,
            ...(o?.capture ? { codec: o.capture(defaultPlain()) } : {}),
          }),
        teardown: async () => {
          await sql.close();
          rmSync(base, { recursive: true, force: true });
        },
      };
    },
  ],
  [
    'kafka',
    async () => {
      const schema = uniqueName('evlog');
      const sql = await openTestPg(schema);
      const prefixes = new Set<string>();
      return {
        sql,
        newLog: (prefix, o) => {
          prefixes.add(prefix);
          const registry = new RegistryAvroCodec({ url: stack.schemaRegistryUrl, subjectPrefix: prefix });
          return new KafkaEventLog({
            brokers: stack.kafkaBrokers,
            clientId: 'ludus-contract-test',
            schemaRegistryUrl: stack.schemaRegistryUrl,
            codec: o?.capture ? o.capture(registry) : registry,
            topicPrefix: prefix,
            replicationFactor: 1,
            connectTimeoutMs: 5000,
            consumer: {
              sessionTimeoutMs: 6000,
              heartbeatIntervalMs: 500,
              rebalanceTimeoutMs: 5000,
              maxWaitTimeMs: 100,
            },
            retryBackoff: { initialMs: 50, maxMs: 400 },
            log: testLog,
          });
        },
        checkWire: async (bytes, prefix, codec) => {
          expect(bytes.readUInt8(0)).toBe(0); // magic byte
          const id = bytes.readInt32BE(1);
          const registry = (codec as WireCapture).inner as RegistryAvroCodec;
          const subject = `${prefix}${TOPIC.name}-value`;
          expect(registry.subject(TOPIC)).toBe(subject);
          // The id in the record is the one the registry holds for the topic's subject ...
          const latest = (await (
            await fetch(`${stack.schemaRegistryUrl}/subjects/${subject}/versions/latest`)
          ).json()) as {
            id: number;
            schema: string;
          };
          expect(id).toBe(latest.id);
          // ... whose schema is the topic's writer schema, and the rest is plain Avro binary of it.
          const byId = (await (await fetch(`${stack.schemaRegistryUrl}/schemas/ids/${id}`)).json()) as {
            schema: string;
          };
          const registered = Type.forSchema(JSON.parse(byId.schema));
          const writer = Type.forSchema(TOPIC.schemas[TOPIC.schemas.length - 1] as never);
          expect(registered.equals(writer)).toBe(true);
          expect(() => writer.fromBuffer(bytes.subarray(5))).not.toThrow();
        },
        teardown: async () => {
          await cleanupKafka([...prefixes]);
          await dropTestPg(sql, schema);
        },
      };
    },
  ],
];

/** The local log's default codec, made explicit so that it can be wrapped. */
const defaultPlain = (): SchemaCodec => new PlainAvroCodec();

// ---------------------------------------------------------------------------------------------
// Records and a consumer that stores its effects and offsets in one transaction

function event(key: string, seq: number, extra: Partial<EventRecord> = {}): EventRecord {
  const [tenant, user] = key.split(':');
  return {
    tenant_id: tenant,
    event_id: `${key}#${seq}`,
    type: 'test.happened',
    user_id: user,
    occurred_at: 1_700_000_000_000 + seq,
    received_at: 1_700_000_000_500 + seq,
    attrs_json: JSON.stringify({ seq }),
    actor_metadata_json: null,
    subject_json: null,
    ...extra,
  };
}

/**
 * Keys spread evenly over the partitions: key i lands in partition i mod TOPIC.partitions, so that
 * every partition gets records (the tests split partitions and store offsets per partition).
 */
const balancedKeys: string[] = (() => {
  const perPartition: string[][] = Array.from({ length: TOPIC.partitions }, () => []);
  for (let u = 0; perPartition.some((l) => l.length < 16); u++) {
    const key = eventKey('ten', `u${u}`);
    const list = perPartition[partitionForKey(key, TOPIC.partitions)];
    if (list.length < 16) list.push(key);
  }
  return Array.from(
    { length: 16 * TOPIC.partitions },
    (_, i) => perPartition[i % TOPIC.partitions][Math.floor(i / TOPIC.partitions)],
  );
})();

/** `n` records over `keys` keys, numbered per key from `from[key]` (so later waves continue). */
function makeRecords(
  n: number,
  keys: number,
  from = new Map<string, number>(),
): Array<{ key: string; value: EventRecord }> {
  const out: Array<{ key: string; value: EventRecord }> = [];
  for (let i = 0; i < n; i++) {
    const key = balancedKeys[i % keys];
    const seq = from.get(key) ?? 0;
    from.set(key, seq + 1);
    out.push({ key, value: event(key, seq) });
  }
  return out;
}

interface AppliedRow {
  id: number;
  member: string;
  partition: number;
  offset: number;
  key: string;
  event_id: string;
  seq: number;
}

class StoreConsumer implements ConsumerHandlers<EventRecord> {
  readonly resumeCalls: Array<{ at: number; partitions: number[]; answer: Map<number, number> }> = [];
  readonly assignments: number[][] = [];
  /** event_id → how many times it was handed to handleBatch (committed or not). */
  readonly seen = new Map<string, number>();
  /** Throws inside the transaction (rolled back) the first time one of these event ids comes. */
  failBeforeCommitOnce = new Set<string>();
  /** Throws after the commit the first time one of these event ids comes. */
  failAfterCommitOnce = new Set<string>();
  /** Called after each commit; may set `dead`. */
  afterCommit?: (c: StoreConsumer) => void;
  /** A dead consumer (simulated crash) has no effects any more: every call fails. */
  dead = false;
  failures: Array<{ at: number; partition: number; kind: string }> = [];
  batches = 0;
  /** Simulated work per batch (ms), so that a batch can be in flight when a member stops. */
  workMs = 0;
  /** partition → nextOffset of this consumer's last committed batch. */
  readonly lastCommitted = new Map<number, number>();

  /** Offsets are keyed by the topic's name in the log (with its prefix), as processors do. */
  readonly topicName: string;

  constructor(
    readonly sql: Sql,
    log: EventLog,
    readonly group: string,
    readonly member = 'm',
  ) {
    this.topicName = log.physicalName(TOPIC);
  }

  async resumeFrom(partitions: number[]): Promise<Map<number, number>> {
    if (this.dead) throw new Error('consumer is dead');
    const { rows } = await this.sql.query<{ partition: number; next_offset: number }>(
      'SELECT partition, next_offset FROM consumer_offsets WHERE group_id = $1 AND topic = $2',
      [this.group, this.topicName],
    );
    const answer = new Map(
      rows.filter((r) => partitions.includes(r.partition)).map((r) => [r.partition, Number(r.next_offset)]),
    );
    this.resumeCalls.push({ at: Date.now(), partitions: [...partitions], answer });
    return answer;
  }

  onAssignment(partitions: number[]): void {
    this.assignments.push(partitions);
  }

  async handleBatch(batch: Batch<EventRecord>): Promise<void> {
    if (this.dead) throw new Error('consumer is dead');
    if (this.workMs > 0) await new Promise((r) => setTimeout(r, this.workMs));
    this.batches++;
    for (const r of batch.records)
      this.seen.set(r.value.event_id, (this.seen.get(r.value.event_id) ?? 0) + 1);
    const failBefore = batch.records.find((r) => this.failBeforeCommitOnce.delete(r.value.event_id));
    await this.sql.tx(async (q) => {
      await insertApplied(q, this.group, this.member, batch);
      if (failBefore) {
        this.failures.push({ at: Date.now(), partition: batch.partition, kind: 'before-commit' });
        throw new Error(`injected failure before commit (${failBefore.value.event_id})`);
      }
      await q.query(
        `INSERT INTO consumer_offsets (group_id, topic, partition, next_offset) VALUES ($1, $2, $3, $4)
         ON CONFLICT (group_id, topic, partition) DO UPDATE SET next_offset = EXCLUDED.next_offset, updated_at = now()`,
        [this.group, this.topicName, batch.partition, batch.nextOffset],
      );
    });
    this.lastCommitted.set(batch.partition, batch.nextOffset);
    this.afterCommit?.(this);
    const failAfter = batch.records.find((r) => this.failAfterCommitOnce.delete(r.value.event_id));
    if (failAfter) {
      this.failures.push({ at: Date.now(), partition: batch.partition, kind: 'after-commit' });
      throw new Error(`injected failure after commit (${failAfter.value.event_id})`);
    }
  }
}

async function insertApplied(
  q: Queryable,
  group: string,
  member: string,
  batch: Batch<EventRecord>,
): Promise<void> {
  const params: unknown[] = [group, member, batch.topic, batch.partition];
  const tuples = batch.records.map((r) => {
    params.push(r.offset, r.key, r.value.event_id, (JSON.parse(r.value.attrs_json) as { seq: number }).seq);
    const i = params.length - 3;
    return `($1, $2, $3, $4, $${i}, $${i + 1}, $${i + 2}, $${i + 3})`;
  });
  await q.query(
    `INSERT INTO test_applied (group_id, member, topic, partition, "offset", key, event_id, seq) VALUES ${tuples.join(', ')}`,
    params,
  );
}

async function applied(sql: Sql, group: string): Promise<AppliedRow[]> {
  const { rows } = await sql.query<AppliedRow>(
    'SELECT id, member, partition, "offset", key, event_id, seq FROM test_applied WHERE group_id = $1 ORDER BY id',
    [group],
  );
  return rows.map((r) => ({
    ...r,
    id: Number(r.id),
    offset: Number(r.offset),
    partition: Number(r.partition),
  }));
}

async function appliedCount(sql: Sql, group: string): Promise<number> {
  const { rows } = await sql.query<{ n: number }>(
    'SELECT count(*)::integer AS n FROM test_applied WHERE group_id = $1',
    [group],
  );
  return Number(rows[0].n);
}

/**
 * Every appended record applied exactly once (as a set: no duplicate, none missing), and within
 * each key in append order; each key in one partition, the one partitionFor names.
 */
function expectExactlyOnceInKeyOrder(
  rows: AppliedRow[],
  appended: Array<{ key: string; value: EventRecord }>,
  log: EventLog,
): void {
  const ids = rows.map((r) => r.event_id);
  const dupes = ids.filter((id, i) => ids.indexOf(id) !== i);
  expect(dupes).toEqual([]);
  expect([...ids].sort()).toEqual(appended.map((r) => r.value.event_id).sort());
  const byKey = new Map<string, AppliedRow[]>();
  for (const r of rows) byKey.set(r.key, [...(byKey.get(r.key) ?? []), r]);
  for (const [key, list] of byKey) {
    expect(list.map((r) => r.seq)).toEqual(list.map((_, i) => i));
    expect(new Set(list.map((r) => r.partition))).toEqual(new Set([log.partitionFor(TOPIC, key)]));
  }
}

// ---------------------------------------------------------------------------------------------

describe.each(variants)('EventLog contract [%s]', (_name, open) => {
  let env: Env;
  /** Everything a test opened, closed in afterEach even when the test fails. */
  const opened: Array<{ close(): Promise<void> } | { stop(): Promise<void> }> = [];

  beforeAll(async () => {
    env = await open();
    await env.sql.exec(`CREATE TABLE test_applied (
      id bigserial PRIMARY KEY, group_id text NOT NULL, member text NOT NULL, topic text NOT NULL,
      partition integer NOT NULL, "offset" bigint NOT NULL, key text NOT NULL, event_id text NOT NULL, seq integer NOT NULL
    )`);
  });

  afterEach(async () => {
    for (const x of opened.splice(0).reverse()) {
      await ('stop' in x ? x.stop() : x.close()).catch(() => undefined);
    }
    logLines.length = 0;
  });

  afterAll(async () => {
    await env?.teardown();
  });

  function newLog(prefix: string, opts?: Parameters<Env['newLog']>[1]): EventLog {
    const log = env.newLog(prefix, opts);
    opened.push(log);
    return log;
  }

  async function consume(
    log: EventLog,
    group: string,
    c: ConsumerHandlers<EventRecord>,
    maxBatchSize = 50,
  ): Promise<Consumer> {
    const consumer = await log.consume(TOPIC, { group, maxBatchSize }, c);
    opened.push(consumer);
    return consumer;
  }

  async function setup(): Promise<{ prefix: string; group: string; log: EventLog }> {
    const prefix = `${uniqueName('ct')}.`;
    const log = newLog(prefix);
    expect(log.physicalName(TOPIC)).toBe(`${prefix}${TOPIC.name}`);
    await log.ensureTopic(TOPIC);
    return { prefix, group: uniqueName('g'), log };
  }

  const allApplied = (group: string, n: number) =>
    waitFor(async () => (await appliedCount(env.sql, group)) >= n, {
      what: `${n} applied records`,
      describe: async () => `applied: ${await appliedCount(env.sql, group)}\n${recentLogs()}`,
    });

  it('delivers every appended record exactly once, in per-key order, each key in one partition', async () => {
    const { log, group } = await setup();
    const records = makeRecords(300, 25);
    // Several appends, two of them concurrent: order per key holds across calls of one caller.
    await log.append(TOPIC, records.slice(0, 100));
    await Promise.all([log.append(TOPIC, records.slice(100, 101)), log.append(TOPIC, [])]);
    await log.append(TOPIC, records.slice(101));
    const c = new StoreConsumer(env.sql, log, group);
    await consume(log, group, c, 40);
    await allApplied(group, records.length);
    const rows = await applied(env.sql, group);
    expectExactlyOnceInKeyOrder(rows, records, log);
    // Offsets of a partition are contiguous from 0 and were delivered in order.
    for (let p = 0; p < TOPIC.partitions; p++) {
      const offsets = rows.filter((r) => r.partition === p).map((r) => r.offset);
      expect(offsets).toEqual(offsets.map((_, i) => i));
    }
    expect(c.resumeCalls[0].partitions.sort()).toEqual([0, 1, 2, 3]);
  });

  it('takes many concurrent appends (one per request, merged by the log), each record once and each append in order', async () => {
    const { log, group } = await setup();
    const records = makeRecords(600, 60);
    // One append per key, all at once: the logs with group commit (file, Kafka) merge them.
    await Promise.all([...groupBy(records, (r) => r.key).values()].map((list) => log.append(TOPIC, list)));
    const c = new StoreConsumer(env.sql, log, group);
    await consume(log, group, c, 100);
    await allApplied(group, records.length);
    expectExactlyOnceInKeyOrder(await applied(env.sql, group), records, log);
  });

  it('endOffsets and partitionFor agree with where the records landed', async () => {
    const { log, group } = await setup();
    expect([...(await log.endOffsets(TOPIC)).entries()]).toEqual([
      [0, 0],
      [1, 0],
      [2, 0],
      [3, 0],
    ]);
    const records = makeRecords(60, 13);
    await log.append(TOPIC, records);
    const expected = new Map<number, number>([0, 1, 2, 3].map((p) => [p, 0]));
    for (const r of records) {
      const p = log.partitionFor(TOPIC, r.key);
      expect(p).toBe(log.partitionFor(TOPIC, r.key)); // stable
      expected.set(p, expected.get(p)! + 1);
    }
    expect(new Map(await log.endOffsets(TOPIC))).toEqual(expected);
    await consume(log, group, new StoreConsumer(env.sql, log, group));
    await allApplied(group, records.length);
    for (const r of await applied(env.sql, group)) expect(r.partition).toBe(log.partitionFor(TOPIC, r.key));
    // The partitioner is murmur2 like Kafka's Java client: fixed values for fixed keys and counts
    // (kafkajs's DefaultPartitioner puts these keys in partitions 2 and 0 of 8; partitioner.test.ts
    // holds the function to Kafka's own test vectors and to kafkajs on random keys).
    expect([
      log.partitionFor(EVENTS_TOPIC, 'acme:alice'),
      log.partitionFor(EVENTS_TOPIC, 'acme:bob'),
    ]).toEqual([2, 0]);
  });

  it('starts each partition where resumeFrom says, never before', async () => {
    const { log, group } = await setup();
    const records = makeRecords(80, 12);
    await log.append(TOPIC, records);
    // Records of a partition got offsets 0, 1, 2... in append order (fresh topic, one append).
    const offsetOf = new Map<string, number>();
    const next = new Map<number, number>();
    for (const r of records) {
      const p = log.partitionFor(TOPIC, r.key);
      offsetOf.set(r.value.event_id, next.get(p) ?? 0);
      next.set(p, (next.get(p) ?? 0) + 1);
    }
    // The store says partitions 0 and 2 are done up to offset 5; 1 and 3 have no entry (start at 0).
    for (const p of [0, 2]) {
      await env.sql.query(
        'INSERT INTO consumer_offsets (group_id, topic, partition, next_offset) VALUES ($1, $2, $3, 5)',
        [group, log.physicalName(TOPIC), p],
      );
    }
    const want = records.filter((r) => {
      const p = log.partitionFor(TOPIC, r.key);
      return !([0, 2].includes(p) && offsetOf.get(r.value.event_id)! < 5);
    });
    await consume(log, group, new StoreConsumer(env.sql, log, group), 7);
    await allApplied(group, want.length);
    // Wait until the consumer has caught up everywhere, then nothing below the stored offsets came.
    await waitFor(async () => {
      const { rows } = await env.sql.query<{ partition: number; next_offset: number }>(
        'SELECT partition, next_offset FROM consumer_offsets WHERE group_id = $1',
        [group],
      );
      const end = await log.endOffsets(TOPIC);
      return rows.length === 4 && rows.every((r) => Number(r.next_offset) === end.get(r.partition));
    });
    const rows = await applied(env.sql, group);
    expect(rows.map((r) => r.event_id).sort()).toEqual(want.map((r) => r.value.event_id).sort());
    expect(rows.filter((r) => [0, 2].includes(r.partition) && r.offset < 5)).toEqual([]);
  });

  it('splits partitions between two members of a group; when one stops the other resumes its partitions from the stored offsets', async () => {
    const { log, group } = await setup();
    const a = new StoreConsumer(env.sql, log, group, 'a');
    const b = new StoreConsumer(env.sql, log, group, 'b');
    const ca = await consume(log, group, a, 10);
    const cb = await consume(log, group, b, 10);
    await waitFor(
      () => {
        const [pa, pb] = [ca.assignment(), cb.assignment()];
        return pa.length > 0 && pb.length > 0 && [...pa, ...pb].sort().join() === '0,1,2,3';
      },
      {
        what: 'a split assignment',
        describe: () => `a: ${ca.assignment()} b: ${cb.assignment()}\n${recentLogs()}`,
      },
    );
    const ownedByA = ca.assignment();
    const ownedByB = cb.assignment();
    const seqs = new Map<string, number>();
    const wave1 = makeRecords(120, 16, seqs);
    await log.append(TOPIC, wave1);
    await allApplied(group, wave1.length);
    const rows1 = await applied(env.sql, group);
    expectExactlyOnceInKeyOrder(rows1, wave1, log);
    for (const r of rows1) expect(r.member === 'a' ? ownedByA : ownedByB).toContain(r.partition);
    expect(new Set(rows1.map((r) => r.member))).toEqual(new Set(['a', 'b']));
    expect(a.assignments.at(-1)).toEqual(ownedByA);

    // a leaves while busy with a second wave: its in-flight batch finishes, then b takes a's
    // partitions over, asking resumeFrom, which answers what a stored last.
    a.workMs = 20;
    const wave2 = makeRecords(200, 16, seqs);
    await log.append(TOPIC, wave2);
    const batchesBefore = a.batches;
    await waitFor(() => a.batches > batchesBefore, { what: 'a to work on the second wave' });
    const resumeCallsBefore = b.resumeCalls.length;
    await ca.stop();
    const rowsOfA = async () => (await applied(env.sql, group)).filter((r) => r.member === 'a').length;
    const aRowsAtStop = await rowsOfA();
    const aStored = new Map(a.lastCommitted);
    await waitFor(() => cb.assignment().join() === '0,1,2,3', {
      what: 'b to own every partition',
      describe: () => `b: ${cb.assignment()}\n${recentLogs()}`,
    });
    const takeover = await waitFor(
      () =>
        b.resumeCalls.slice(resumeCallsBefore).find((c) => ownedByA.every((p) => c.partitions.includes(p))),
      { what: "b's resumeFrom for a's partitions" },
    );
    for (const p of ownedByA) expect(takeover.answer.get(p)).toBe(aStored.get(p));
    await allApplied(group, wave1.length + wave2.length);
    const rows2 = await applied(env.sql, group);
    expectExactlyOnceInKeyOrder(rows2, [...wave1, ...wave2], log);
    // a did part of the second wave, and nothing after stop() resolved.
    expect(aRowsAtStop).toBeGreaterThan(rows1.filter((r) => r.member === 'a').length);
    expect(await rowsOfA()).toBe(aRowsAtStop);
  });

  it('delivers records appended through another instance of the log (another process)', async () => {
    const { prefix, log, group } = await setup();
    if (env.exclusive) {
      // One process per directory: a second instance is refused while the first holds the lock.
      expect(() => env.newLog(prefix)).toThrow(DataDirInUse);
      return;
    }
    const writer = newLog(prefix); // shares nothing in memory with `log`, only the stores
    await consume(log, group, new StoreConsumer(env.sql, log, group));
    const records = makeRecords(40, 8);
    await writer.append(TOPIC, records.slice(0, 20));
    await allApplied(group, 20);
    await writer.append(TOPIC, records.slice(20));
    await allApplied(group, records.length);
    expectExactlyOnceInKeyOrder(await applied(env.sql, group), records, log);
  });

  it('gives every group all the records', async () => {
    const { log, group } = await setup();
    const other = `${group}_other`;
    const records = makeRecords(90, 9);
    await Promise.all([
      consume(log, group, new StoreConsumer(env.sql, log, group)),
      consume(log, other, new StoreConsumer(env.sql, log, other)),
    ]);
    await log.append(TOPIC, records);
    await allApplied(group, records.length);
    await allApplied(other, records.length);
    expectExactlyOnceInKeyOrder(await applied(env.sql, group), records, log);
    expectExactlyOnceInKeyOrder(await applied(env.sql, other), records, log);
  });

  it('offsets stored with state: after a crash right after a commit, a new process resumes without repeating or skipping', async () => {
    const { prefix, log, group } = await setup();
    const records = makeRecords(150, 20);
    await log.append(TOPIC, records);
    const first = new StoreConsumer(env.sql, log, group, 'first');
    first.afterCommit = (c) => {
      // Crash after the 8th committed batch (of at most 5 records).
      if (c.batches >= 8) {
        // The process dies right here: its commit is durable, nothing else it would do happens.
        c.dead = true;
        throw new Error('simulated crash after commit');
      }
    };
    await consume(log, group, first, 5);
    await waitFor(() => first.dead, { what: 'the simulated crash', describe: recentLogs });
    await log.close(); // the process goes away: no further commit of any kind
    const afterCrash = await appliedCount(env.sql, group);
    expect(afterCrash).toBeGreaterThan(0);
    expect(afterCrash).toBeLessThan(records.length);
    const { rows: stored } = await env.sql.query<{ partition: number; next_offset: number }>(
      'SELECT partition, next_offset FROM consumer_offsets WHERE group_id = $1',
      [group],
    );

    const log2 = newLog(prefix);
    const second = new StoreConsumer(env.sql, log, group, 'second');
    await consume(log2, group, second, 5);
    await allApplied(group, records.length);
    expectExactlyOnceInKeyOrder(await applied(env.sql, group), records, log2);
    // The new process resumed exactly at the offsets stored with the state.
    const firstCall = second.resumeCalls[0];
    for (const s of stored) expect(firstCall.answer.get(s.partition)).toBe(Number(s.next_offset));
  });

  it('redelivers from the stored offset after a handler error, with no duplicate effects', async () => {
    const { log, group } = await setup();
    const records = makeRecords(60, 6);
    const c = new StoreConsumer(env.sql, log, group);
    const rolledBack = records[13].value.event_id; // fails inside its transaction: nothing of it stays
    const committed = records[40].value.event_id; // fails after its transaction committed
    c.failBeforeCommitOnce.add(rolledBack);
    c.failAfterCommitOnce.add(committed);
    await log.append(TOPIC, records);
    await consume(log, group, c, 4);
    await allApplied(group, records.length);
    // Each failure was followed by resumeFrom for its partition (the adapter never skips ahead itself).
    await waitFor(
      () =>
        c.failures.length === 2 &&
        c.failures.every((f) =>
          c.resumeCalls.some((r) => r.at >= f.at && r.partitions.includes(f.partition)),
        ),
      {
        what: 'recovery from both failures',
        describe: () => JSON.stringify({ failures: c.failures, resumes: c.resumeCalls.length }),
      },
    );
    // A record behind each failure, on the same keys: anything redelivered twice would come before it.
    const seqs = new Map<string, number>();
    for (const r of records) seqs.set(r.key, (seqs.get(r.key) ?? 0) + 1);
    const tail = [records[13].key, records[40].key].map((key) => {
      const seq = seqs.get(key)!;
      seqs.set(key, seq + 1);
      return { key, value: event(key, seq) };
    });
    await log.append(TOPIC, tail);
    await allApplied(group, records.length + tail.length);
    expectExactlyOnceInKeyOrder(await applied(env.sql, group), [...records, ...tail], log);
    expect(c.seen.get(rolledBack)).toBeGreaterThanOrEqual(2); // redelivered
    expect(c.seen.get(committed)).toBe(1); // its batch was stored: resumed after it
  });

  it('round-trips every EventRecord field through Avro, nulls and unicode included', async () => {
    const prefix = `${uniqueName('ct')}.`;
    let capture: SchemaCodec | undefined;
    const log = newLog(prefix, { capture: (codec) => (capture = new WireCapture(codec)) });
    await log.ensureTopic(TOPIC);
    const values: EventRecord[] = [
      event('ten:u1', 0),
      {
        tenant_id: 'tënant-😀',
        event_id: '0b8c2f1e-ünïcødé-事件',
        type: 'purchase.完成',
        user_id: 'ユーザー',
        occurred_at: 0,
        received_at: 8_640_000_000_000_000 / 1000, // far future, still exact
        attrs_json: JSON.stringify({ emoji: '🎉', nested: { a: [1, 2, 3] }, quote: '"\\' }),
        actor_metadata_json: JSON.stringify({ ip: '::1' }),
        subject_json: '',
      },
      { ...event('ten:u2', 0), attrs_json: '{}', actor_metadata_json: null, subject_json: '{"id":"s"}' },
    ];
    const before = Date.now();
    await log.append(
      TOPIC,
      values.map((value) => ({ key: eventKey(value.tenant_id, value.user_id), value })),
    );
    const got: Array<{ key: string; value: EventRecord; timestamp: number; topic: string }> = [];
    await consume(log, uniqueName('g'), {
      resumeFrom: async () => new Map(),
      handleBatch: async (b) => {
        for (const r of b.records)
          got.push({ key: r.key, value: r.value, timestamp: r.timestamp, topic: r.topic });
      },
    });
    await waitFor(() => got.length >= values.length, { what: 'the records', describe: recentLogs });
    const byId = new Map(got.map((g) => [g.value.event_id, g]));
    for (const v of values) {
      const g = byId.get(v.event_id)!;
      expect({ ...g.value }).toEqual(v);
      expect(g.key).toBe(eventKey(v.tenant_id, v.user_id));
      expect(g.topic).toBe(TOPIC.name);
      expect(g.timestamp).toBeGreaterThanOrEqual(before - 5000);
      expect(g.timestamp).toBeLessThanOrEqual(Date.now() + 5000);
    }
    // A value that does not fit the schema is refused, and nothing is appended.
    const end = await log.endOffsets(TOPIC);
    await expect(
      log.append(TOPIC, [
        { key: 'ten:u9', value: { ...event('ten:u9', 0), user_id: undefined } as unknown as EventRecord },
      ]),
    ).rejects.toThrow(/user_id/);
    expect(await log.endOffsets(TOPIC)).toEqual(end);
    const wire = (capture as WireCapture).decoded;
    expect(wire.length).toBeGreaterThanOrEqual(values.length);
    if (env.checkWire) for (const bytes of wire) await env.checkWire(bytes, prefix, capture!);
  });
});

/**
 * Kafka only: lost connections (a broker restart as the client sees it) must not kill a consumer.
 * Every socket of one client is cut and new ones are refused for a while, through kafkajs's socket
 * factory; a second, healthy client appends meanwhile. The real broker is never touched, so this
 * runs next to other suites.
 */
describe('KafkaEventLog [kafka]: connection loss', () => {
  let sql: PgSql;
  const schema = uniqueName('evlog');
  const closeables: Array<{ close(): Promise<void> }> = [];
  const prefixes: string[] = [];

  beforeAll(async () => {
    sql = await openTestPg(schema);
    await sql.exec(`CREATE TABLE test_applied (
      id bigserial PRIMARY KEY, group_id text NOT NULL, member text NOT NULL, topic text NOT NULL,
      partition integer NOT NULL, "offset" bigint NOT NULL, key text NOT NULL, event_id text NOT NULL, seq integer NOT NULL
    )`);
  });

  afterAll(async () => {
    for (const c of closeables.reverse()) await c.close().catch(() => undefined);
    await cleanupKafka(prefixes);
    await dropTestPg(sql, schema);
  });

  it('keeps consuming after every connection was cut for a few seconds, exactly once', async () => {
    const sockets = new Set<Socket>();
    let down = false;
    let refused = 0;
    const socketFactory: ISocketFactory = ({ host, port, onConnect }) => {
      const socket = connect({ host, port }, onConnect);
      socket.setKeepAlive(true, 30_000);
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      if (down) {
        refused++;
        process.nextTick(() => socket.destroy(new Error('simulated outage')));
      }
      return socket;
    };
    const prefix = `${uniqueName('ct')}.`;
    prefixes.push(prefix);
    const opts = {
      brokers: stack.kafkaBrokers,
      schemaRegistryUrl: stack.schemaRegistryUrl,
      topicPrefix: prefix,
      replicationFactor: 1,
      consumer: {
        sessionTimeoutMs: 6000,
        heartbeatIntervalMs: 500,
        rebalanceTimeoutMs: 5000,
        maxWaitTimeMs: 100,
      },
      retryBackoff: { initialMs: 50, maxMs: 400 },
      log: testLog,
    };
    const flaky = new KafkaEventLog({ ...opts, socketFactory });
    const healthy = new KafkaEventLog(opts);
    closeables.push(healthy, flaky);
    await healthy.ensureTopic(TOPIC);
    const group = uniqueName('g');
    const c = new StoreConsumer(sql, healthy, group);
    await flaky.consume(TOPIC, { group, maxBatchSize: 20 }, c);
    const seqs = new Map<string, number>();
    const before = makeRecords(60, 12, seqs);
    await healthy.append(TOPIC, before);
    const appliedAtLeast = (n: number) =>
      waitFor(async () => (await appliedCount(sql, group)) >= n, {
        timeoutMs: 40_000,
        what: `${n} applied records`,
        describe: async () => `applied: ${await appliedCount(sql, group)}\n${recentLogs()}`,
      });
    await appliedAtLeast(before.length);

    down = true;
    const cut = sockets.size;
    for (const s of sockets) s.destroy(new Error('simulated outage'));
    const during = makeRecords(40, 12, seqs);
    await healthy.append(TOPIC, during);
    await new Promise((r) => setTimeout(r, 3000)); // the outage itself: nothing to wait for
    down = false;
    expect(cut).toBeGreaterThan(0);
    expect(refused).toBeGreaterThan(0); // the client did try to reconnect during the outage
    const after = makeRecords(40, 12, seqs);
    await healthy.append(TOPIC, after);
    await appliedAtLeast(before.length + during.length + after.length);
    expectExactlyOnceInKeyOrder(await applied(sql, group), [...before, ...during, ...after], healthy);
  }, 60_000);
});

/**
 * Deletes what the Kafka tests made under `prefixes`: topics, consumer groups, registry subjects.
 * One broker serves every suite of the project: thousands of leftover partitions would slow it down.
 */
async function cleanupKafka(prefixes: string[]): Promise<void> {
  if (prefixes.length === 0) return;
  // Also sweeps what an interrupted earlier run left: names made by uniqueName('ct') > 10 minutes ago.
  const stale = (name: string) => {
    const m = /^ct_([0-9a-z]+)_[0-9a-f]{6}\./.exec(name);
    return !!m && parseInt(m[1], 36) < Date.now() - 600_000;
  };
  const mine = (name: string) => prefixes.some((p) => name.startsWith(p)) || stale(name);
  const admin = new Kafka({ brokers: stack.kafkaBrokers, logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  try {
    const groups = (await admin.listGroups()).groups.map((g) => g.groupId).filter(mine);
    for (const g of groups) await admin.deleteGroups([g]).catch(() => undefined);
    const topics = (await admin.listTopics()).filter(mine);
    if (topics.length > 0) await admin.deleteTopics({ topics, timeout: 10_000 });
  } finally {
    await admin.disconnect();
  }
  for (const p of prefixes) {
    const subject = encodeURIComponent(`${p}${TOPIC.name}-value`);
    const base = `${stack.schemaRegistryUrl}/subjects/${subject}`;
    const soft = await fetch(base, { method: 'DELETE' });
    await soft.arrayBuffer();
    if (soft.ok) await (await fetch(`${base}?permanent=true`, { method: 'DELETE' })).arrayBuffer();
  }
}
