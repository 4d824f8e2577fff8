/**
 * Retention of the SQL-table event log (adapters/eventlog/local.ts), on PGlite and on Postgres:
 * records appended before the retention period are deleted, oldest first and in chunks, never a
 * partition's last record; recent records, the end offsets and other prefixes' topics stay; a
 * consumer that starts below the oldest record left goes on at it; appends continue the offsets.
 */
import type { Sql } from '../sql/types';
import { EVENTS_TOPIC, type EventRecord, type Topic } from '../../schemas/topics';
import { dropTestPg, openTestPg, openTestPglite, uniqueName } from '../../tests/support/stack';
import { LocalEventLog } from './local';
import type { LogRecord } from './types';

const TOPIC: Topic<EventRecord> = { ...EVENTS_TOPIC, name: 'ret.events', partitions: 2 };
const HOUR = 3_600_000;

const event = (id: string, user: string): EventRecord => ({
  tenant_id: 't1',
  event_id: id,
  type: 'match',
  user_id: user,
  occurred_at: 0,
  received_at: 0,
  attrs_json: '{}',
  actor_metadata_json: null,
  subject_json: null,
});

describe.each([
  ['PGlite', async () => ({ sql: (await openTestPglite()) as Sql, done: (s: Sql) => s.close() })],
  [
    'Postgres',
    async () => {
      const schema = uniqueName('ret');
      const sql = await openTestPg(schema);
      return { sql: sql as Sql, done: () => dropTestPg(sql, schema) };
    },
  ],
])('event log retention [local on %s]', (_, open) => {
  let sql: Sql;
  let done: (s: Sql) => Promise<void>;
  const logs: LocalEventLog[] = [];

  beforeAll(async () => {
    ({ sql, done } = await open());
  });
  afterAll(async () => {
    for (const l of logs) await l.close();
    await done(sql);
  });

  const newLog = (prefix: string) => {
    const log = new LocalEventLog(sql, {
      topicPrefix: prefix,
      pollIntervalMs: 50,
      retentionMs: HOUR,
      // Checked by the test only (the start-up check finds nothing old yet).
      retentionCheckMs: 10 * HOUR,
      log: () => undefined,
    });
    logs.push(log);
    return log;
  };

  /** `n` events of `users` users (7: spread over both partitions; 1: all in one partition). */
  const appendN = (log: LocalEventLog, n: number, tag: string, users = 7) =>
    log.append(
      TOPIC,
      Array.from({ length: n }, (_, i) => ({
        key: `t1:u${i % users}`,
        value: event(`${tag}-${i}`, `u${i % users}`),
      })),
    );

  /** Makes every record of the log's topic look appended two hours ago. */
  const age = (log: LocalEventLog) =>
    sql.query(`UPDATE event_log_records SET appended_at = now() - interval '2 hours' WHERE topic = $1`, [
      log.physicalName(TOPIC),
    ]);

  const offsetsLeft = async (log: LocalEventLog) => {
    const r = await sql.query<{ partition: number; offset: string | number }>(
      `SELECT partition, "offset" FROM event_log_records WHERE topic = $1 ORDER BY partition, "offset"`,
      [log.physicalName(TOPIC)],
    );
    const out = new Map<number, number[]>();
    for (const row of r.rows)
      out.set(Number(row.partition), [...(out.get(Number(row.partition)) ?? []), Number(row.offset)]);
    return out;
  };

  it('deletes old records in chunks, keeps recent ones and the end; a consumer goes on at the oldest left', async () => {
    const log = newLog(`${uniqueName('a')}.`);
    const other = newLog(`${uniqueName('b')}.`);
    for (const l of [log, other]) await l.ensureTopic(TOPIC);
    // More old records in one partition than one chunk of the delete (5,000), and some in both.
    await appendN(log, 6000, 'old', 1);
    await appendN(log, 100, 'old-spread');
    await appendN(other, 50, 'other');
    await age(log);
    await age(other);
    await appendN(log, 14, 'new');
    const ends = await log.endOffsets(TOPIC);

    // Only this log's prefix: the other log's old records stay until it prunes its own.
    expect(await log.enforceRetention()).toBe(6100);
    const left = await offsetsLeft(log);
    for (let p = 0; p < TOPIC.partitions; p++) {
      const list = left.get(p)!;
      // Contiguous up to the end: the recent records of the partition.
      expect(list).toEqual(list.map((_, i) => ends.get(p)! - list.length + i));
    }
    expect([...left.values()].flat()).toHaveLength(14);
    expect(await log.endOffsets(TOPIC)).toEqual(ends);
    expect([...(await offsetsLeft(other)).values()].flat()).toHaveLength(50);

    // A group that never read (starts at 0) goes on at the oldest record left, in order.
    const got: LogRecord<EventRecord>[] = [];
    const consumer = await log.consume(
      TOPIC,
      { group: uniqueName('g'), maxBatchSize: 100 },
      {
        resumeFrom: async () => new Map(),
        handleBatch: async (b) => {
          got.push(...b.records);
        },
      },
    );
    const deadline = Date.now() + 10_000;
    while (got.length < 14 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    await consumer.stop();
    expect(got.map((r) => r.value.event_id).sort()).toEqual(
      Array.from({ length: 14 }, (_, i) => `new-${i}`).sort(),
    );

    // Nothing more is old: a second run deletes nothing.
    expect(await log.enforceRetention()).toBe(0);
  });

  it("never deletes a partition's last record, and appends continue the offsets", async () => {
    const log = newLog(`${uniqueName('c')}.`);
    await log.ensureTopic(TOPIC);
    await appendN(log, 40, 'old');
    await age(log);
    const ends = await log.endOffsets(TOPIC);
    expect(await log.enforceRetention()).toBe(40 - TOPIC.partitions);
    const left = await offsetsLeft(log);
    for (let p = 0; p < TOPIC.partitions; p++) expect(left.get(p)).toEqual([ends.get(p)! - 1]);
    await appendN(log, 7, 'more');
    const after = await log.endOffsets(TOPIC);
    const sum = (m: Map<number, number>) => [...m.values()].reduce((a, b) => a + b, 0);
    expect(sum(after)).toBe(sum(ends) + 7);
    const again = await offsetsLeft(log);
    for (let p = 0; p < TOPIC.partitions; p++)
      expect(again.get(p)).toEqual(
        Array.from({ length: after.get(p)! - ends.get(p)! + 1 }, (_, i) => ends.get(p)! - 1 + i),
      );
  });
});
