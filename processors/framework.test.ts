/**
 * The consumer framework (processors/framework.ts) against real components: PGlite and the local
 * event log. A test processor records one effect row per applied record (no unique key, so a
 * second application would show as a second row) and turns records into outcomes by their type:
 * `ok` applies, `skip` does nothing, `poison` is a dead letter.
 */
import { LocalEventLog } from '../adapters/eventlog/local';
import type { EventLog } from '../adapters/eventlog/types';
import type { Sql } from '../adapters/sql/types';
import { createLogger } from '../shared/logger';
import { Metrics } from '../shared/metrics';
import { EVENTS_TOPIC, type EventRecord, type Topic } from '../schemas/topics';
import { openTestPglite, uniqueName } from '../tests/support/stack';
import { waitFor } from '../tests/support/wait';
import {
  deadLetter,
  ok,
  skip,
  startProcessor,
  type ApplyResult,
  type FrameworkOptions,
  type Processor,
  type RunningProcessor,
} from './framework';
import { readOffsets } from './offsets';

const TOPIC: Topic<EventRecord> = { ...EVENTS_TOPIC, name: 'fw.events', partitions: 2 };
const PARTITIONS = [0, 1];

interface Call {
  partition: number;
  fresh: number[];
  replayed: number[];
  nextOffset: number;
}

type Apply = Processor<EventRecord>['apply'];

describe('consumer framework [local log on PGlite]', () => {
  let sql: Sql;
  let log: EventLog;
  const running: RunningProcessor[] = [];
  const logLines: string[] = [];
  let n = 0;

  beforeAll(async () => {
    sql = await openTestPglite();
    await sql.exec(
      'CREATE TABLE fw_effects (group_id text NOT NULL, event_id text NOT NULL, "offset" bigint NOT NULL)',
    );
  });
  beforeEach(async () => {
    // A fresh prefix per test: its own topic tables, offsets and groups.
    log = new LocalEventLog(sql, {
      topicPrefix: `${uniqueName('fw')}.`,
      pollIntervalMs: 50,
      retryBackoff: { initialMs: 20, maxMs: 200 },
      log: (level, message, fields) => logLines.push(`${level} ${message} ${JSON.stringify(fields ?? {})}`),
    });
    await log.ensureTopic(TOPIC);
  });
  afterEach(async () => {
    for (const p of running.splice(0)) await p.stop().catch(() => undefined);
    await log.close();
  });
  afterAll(() => sql.close());

  const deps = () => ({ sql, eventLog: log, log: createLogger('silent'), metrics: new Metrics(false) });

  function record(type: 'ok' | 'skip' | 'poison', user = 'u1'): EventRecord {
    const id = `e${++n}`;
    return {
      tenant_id: 't1',
      event_id: id,
      type,
      user_id: user,
      occurred_at: 1_700_000_000_000 + n,
      received_at: 1_700_000_000_000 + n,
      attrs_json: JSON.stringify({ n }),
      actor_metadata_json: null,
      subject_json: null,
    };
  }

  async function append(records: EventRecord[]) {
    await log.append(
      TOPIC,
      records.map((r) => ({ key: `${r.tenant_id}:${r.user_id}`, value: r })),
    );
  }

  /** The default apply: one effect row per fresh ok record, outcomes by type. */
  function applyByType(group: string): Apply {
    return async (q, batch) => {
      const outcomes = [];
      for (const r of batch.fresh) {
        if (r.value.type === 'poison') outcomes.push(deadLetter(`poison record ${r.value.event_id}`));
        else if (r.value.type === 'skip') outcomes.push(skip('nothing to do'));
        else {
          await q.query('INSERT INTO fw_effects (group_id, event_id, "offset") VALUES ($1, $2, $3)', [
            group,
            r.value.event_id,
            r.offset,
          ]);
          outcomes.push(ok);
        }
      }
      return { outcomes };
    };
  }

  /** Starts a processor whose apply is `apply` (default: by type), recording every call. */
  async function start(
    group: string,
    opts: FrameworkOptions & {
      apply?: Apply;
      maxBatchSize?: number;
      resumeFrom?: Processor<EventRecord>['resumeFrom'];
    } = {},
  ) {
    const calls: Call[] = [];
    const apply = opts.apply ?? applyByType(group);
    const p: Processor<EventRecord> = {
      group,
      topic: TOPIC,
      maxBatchSize: opts.maxBatchSize,
      resumeFrom: opts.resumeFrom,
      async apply(q, batch): Promise<ApplyResult> {
        for (const part of batch.parts) {
          const own = (rs: typeof batch.fresh) =>
            rs.filter((r) => r.partition === part.partition).map((r) => r.offset);
          calls.push({
            partition: part.partition,
            fresh: own(batch.fresh),
            replayed: own(batch.replayed),
            nextOffset: part.nextOffset,
          });
        }
        return apply(q, batch);
      },
    };
    const r = await startProcessor(deps(), p, opts);
    running.push(r);
    return { running: r, calls };
  }

  async function stored(group: string): Promise<Map<number, number>> {
    return readOffsets(sql, group, log.physicalName(TOPIC), PARTITIONS);
  }

  async function ends(): Promise<Map<number, number>> {
    return log.endOffsets(TOPIC);
  }

  /** Waits until the group's stored offsets reach the end of every partition. */
  async function drained(group: string) {
    await waitFor(
      async () => {
        const [s, e] = [await stored(group), await ends()];
        return PARTITIONS.every((p) => (s.get(p) ?? 0) === (e.get(p) ?? 0));
      },
      {
        what: `group ${group} to reach the end of the log`,
        describe: async () =>
          `stored ${JSON.stringify([...(await stored(group))])}, ends ${JSON.stringify([...(await ends())])}\n${logLines.slice(-5).join('\n')}`,
      },
    );
  }

  async function effects(group: string): Promise<Array<{ event_id: string; offset: number }>> {
    const r = await sql.query<{ event_id: string; offset: string }>(
      'SELECT event_id, "offset" FROM fw_effects WHERE group_id = $1 ORDER BY event_id',
      [group],
    );
    return r.rows.map((x) => ({ event_id: x.event_id, offset: Number(x.offset) }));
  }

  async function deadLetters(group: string) {
    const r = await sql.query<{
      partition: number;
      offset: string;
      key: string;
      reason: string;
      payload: string;
      topic: string;
    }>(
      'SELECT topic, partition, "offset", key, reason, payload FROM dead_letters WHERE group_id = $1 ORDER BY partition, "offset"',
      [group],
    );
    return r.rows.map((x) => ({ ...x, offset: Number(x.offset), payload: JSON.parse(x.payload) }));
  }

  const sortIds = (rs: EventRecord[]) => rs.map((r) => r.event_id).sort();

  it('keeps dead letters with reason and payload, advances offsets, and applies ok records once', async () => {
    const group = uniqueName('g');
    const a = [record('ok', 'ann'), record('poison', 'ann'), record('ok', 'ann'), record('skip', 'ann')];
    const b = [record('poison', 'bob'), record('ok', 'bob'), record('ok', 'bob')];
    await append([...a, ...b]);
    const { running: p } = await start(group);
    await drained(group);

    const okIds = sortIds([...a, ...b].filter((r) => r.type === 'ok'));
    expect((await effects(group)).map((e) => e.event_id)).toEqual(okIds);
    const dead = await deadLetters(group);
    const poison = [...a, ...b].filter((r) => r.type === 'poison');
    expect(dead).toHaveLength(2);
    for (const r of poison) {
      const row = dead.find((d) => d.payload.event_id === r.event_id);
      expect(row).toMatchObject({
        topic: log.physicalName(TOPIC),
        partition: log.partitionFor(TOPIC, `t1:${r.user_id}`),
        key: `t1:${r.user_id}`,
        reason: `poison record ${r.event_id}`,
        payload: r,
      });
    }
    // Offsets: the stored offset of each partition is its end, dead letters included.
    expect(await stored(group)).toEqual(await ends());
    expect(p.stoppedBecause()).toBeNull();

    // More records later, then a restart: nothing applied twice, the new ones once.
    const c = [record('ok', 'ann'), record('poison', 'bob')];
    await append(c);
    await drained(group);
    await p.stop();
    const again = await start(group);
    await append([record('ok', 'cid')]);
    await drained(group);
    const all = await effects(group);
    expect(all).toHaveLength(okIds.length + 2);
    expect(new Set(all.map((e) => e.event_id)).size).toBe(all.length);
    expect(await deadLetters(group)).toHaveLength(3);
    expect(again.calls.flatMap((c) => c.replayed)).toEqual([]);
  });

  it('stops the consumer when dead letters pass the limit, instead of dead-lettering everything', async () => {
    const group = uniqueName('g');
    // One partition, one append: the poison run arrives in one batch together with ok records.
    const before = [record('ok'), record('ok')];
    const poison = Array.from({ length: 10 }, () => record('poison'));
    const after = [record('ok'), record('ok')];
    await append([...before, ...poison, ...after]);
    const { running: p } = await start(group, { maxDeadLetters: 3 });
    await waitFor(() => p.stoppedBecause(), { what: 'the processor to stop' });
    expect(p.stoppedBecause()).toMatch(/dead letters within 60000 ms \(limit 3\)/);
    await waitFor(() => p.consumer.assignment().length === 0, {
      what: 'the consumer to leave its partitions',
    });

    // At most the limit was dead-lettered, and nothing after the poison run was applied.
    const dead = await deadLetters(group);
    expect(dead.length).toBeLessThanOrEqual(3);
    const applied = (await effects(group)).map((e) => e.event_id);
    expect(applied).not.toEqual(expect.arrayContaining(after.map((r) => r.event_id)));
    const partition = log.partitionFor(TOPIC, 't1:u1');
    const end = (await ends()).get(partition)!;
    expect((await stored(group)).get(partition) ?? 0).toBeLessThan(end);

    // After the fix (here: a processor that applies every record), a restart loses nothing.
    const fixed = await start(group, {
      apply: async (q, batch) => {
        for (const r of batch.fresh)
          await q.query('INSERT INTO fw_effects (group_id, event_id, "offset") VALUES ($1, $2, $3)', [
            group,
            r.value.event_id,
            r.offset,
          ]);
        return { outcomes: batch.fresh.map(() => ok) };
      },
    });
    await drained(group);
    const final = await effects(group);
    const deadIds = new Set(dead.map((d) => d.payload.event_id as string));
    // Every record is either applied exactly once or was dead-lettered before the stop.
    expect(final.map((e) => e.event_id).sort()).toEqual(
      sortIds([...before, ...poison, ...after].filter((r) => !deadIds.has(r.event_id))),
    );
    expect(fixed.running.stoppedBecause()).toBeNull();
  });

  it('dead-letters up to the limit one batch at a time, then stops before the next one', async () => {
    const group = uniqueName('g');
    const records = [
      record('ok'),
      record('poison'),
      record('poison'),
      record('ok'),
      record('poison'),
      record('poison'),
      record('ok'),
    ];
    await append(records);
    const { running: p } = await start(group, { maxDeadLetters: 3, maxBatchSize: 1 });
    await waitFor(() => p.stoppedBecause(), { what: 'the processor to stop' });
    await waitFor(() => p.consumer.assignment().length === 0, { what: 'the consumer to leave' });
    // The first three poison records are dead letters; the fourth stopped the consumer unapplied.
    expect((await deadLetters(group)).map((d) => d.payload.event_id)).toEqual(
      [records[1], records[2], records[4]].map((r) => r!.event_id),
    );
    expect((await effects(group)).map((e) => e.event_id)).toEqual(sortIds([records[0]!, records[3]!]));
    expect((await stored(group)).get(log.partitionFor(TOPIC, 't1:u1'))).toBe(5);
  });

  it('forgets dead letters older than the window', async () => {
    const group = uniqueName('g');
    const { running: p } = await start(group, { maxDeadLetters: 1, deadLetterWindowMs: 300 });
    await append([record('poison')]);
    await drained(group);
    // Real time, not the injected clock: the window is an operational guard of the process.
    await new Promise((r) => setTimeout(r, 400));
    await append([record('poison')]);
    await drained(group);
    expect(p.stoppedBecause()).toBeNull();
    expect(await deadLetters(group)).toHaveLength(2);
    await append([record('poison')]);
    await waitFor(() => p.stoppedBecause(), { what: 'two dead letters within 300 ms to stop it' });
  });

  it('retries a batch whose apply threw record by record, with its effects exactly once', async () => {
    const group = uniqueName('g');
    let attempts = 0;
    const byType = applyByType(group);
    const { calls } = await start(group, {
      apply: async (q, batch) => {
        attempts++;
        const res = await byType(q, batch);
        // Effects written, then a failure: the transaction must roll them back.
        if (attempts === 1) throw new Error('transient failure after writing');
        return res;
      },
    });
    const records = [record('ok'), record('ok'), record('poison'), record('ok')];
    await append(records);
    await drained(group);
    expect(attempts).toBeGreaterThanOrEqual(2);
    expect((await effects(group)).map((e) => e.event_id)).toEqual(
      sortIds(records.filter((r) => r.type === 'ok')),
    );
    expect(await deadLetters(group)).toHaveLength(1);
    // The failed attempt applied nothing; the retry takes the records one transaction each.
    expect(calls[0]).toMatchObject({ fresh: [0, 1, 2, 3], replayed: [] });
    expect(calls.slice(1, 5)).toEqual([
      { partition: calls[0]!.partition, fresh: [0], replayed: [], nextOffset: 1 },
      { partition: calls[0]!.partition, fresh: [1], replayed: [], nextOffset: 2 },
      { partition: calls[0]!.partition, fresh: [2], replayed: [], nextOffset: 3 },
      { partition: calls[0]!.partition, fresh: [3], replayed: [], nextOffset: 4 },
    ]);
  });

  it('dead-letters a record whose apply throws, with the error as reason, and applies the rest of its batch', async () => {
    const group = uniqueName('g');
    const metrics = new Metrics(false);
    // A processor step that throws for a marked record (type "throws"), after writing effects.
    const byType = applyByType(group);
    const p: Processor<EventRecord> = {
      group,
      topic: TOPIC,
      async apply(q, batch) {
        const res = await byType(q, batch);
        const bad = batch.fresh.find((r) => r.value.type === 'throws');
        if (bad) throw new TypeError(`cannot apply ${bad.value.event_id}`);
        return res;
      },
    };
    const r = await startProcessor({ ...deps(), metrics }, p);
    running.push(r);
    const records = [
      record('ok'),
      record('ok'),
      { ...record('ok'), type: 'throws' },
      record('ok'),
      record('skip'),
    ];
    await append(records);
    await drained(group);

    // Every other record applied exactly once; the throwing one is a dead letter, once.
    expect((await effects(group)).map((e) => e.event_id)).toEqual(
      sortIds(records.filter((x) => x.type === 'ok')),
    );
    const dead = await deadLetters(group);
    expect(dead).toEqual([
      expect.objectContaining({
        offset: 2,
        key: 't1:u1',
        reason: `TypeError: cannot apply ${records[2]!.event_id}`,
        payload: records[2],
      }),
    ]);
    expect((await stored(group)).get(log.partitionFor(TOPIC, 't1:u1'))).toBe(5);
    expect(r.stoppedBecause()).toBeNull();
    const counted = await metrics.deadLetters.get();
    expect(counted.values).toEqual([
      expect.objectContaining({ labels: { group, reason_class: 'TypeError' }, value: 1 }),
    ]);

    // The partition goes on: later records apply in ordinary batches, the dead letter stays once.
    const later = [record('ok'), record('ok')];
    await append(later);
    await drained(group);
    expect(await effects(group)).toHaveLength(5);
    expect(await deadLetters(group)).toHaveLength(1);
  });

  it('retries a batch whole, dead-lettering nothing, when the store itself fails', async () => {
    const group = uniqueName('g');
    let failures = 0;
    const byType = applyByType(group);
    const { calls } = await start(group, {
      apply: async (q, batch) => {
        if (failures < 2) {
          failures++;
          // What a Postgres restart looks like to a transaction (SQLSTATE 57P01).
          throw Object.assign(new Error('terminating connection due to administrator command'), {
            code: '57P01',
          });
        }
        return byType(q, batch);
      },
    });
    const records = [record('ok'), record('poison'), record('ok')];
    await append(records);
    await drained(group);
    expect(await deadLetters(group)).toHaveLength(1); // the typed poison record only
    expect((await effects(group)).map((e) => e.event_id)).toEqual(
      sortIds(records.filter((x) => x.type === 'ok')),
    );
    // Every attempt took the whole batch: no record-by-record fallback.
    expect(calls.every((c) => c.fresh.length === 3)).toBe(true);
  });

  it('applies a round too large for the lock table (SQLSTATE 53200) in smaller transactions, each record once', async () => {
    const group = uniqueName('g');
    const byType = applyByType(group);
    const LOCKS_PER_RECORD = 100; // like a tenant with many earning rules on one event type
    const sizes: number[] = []; // records per transaction attempted
    await start(group, {
      transactions: 1,
      maxBatchSize: 1000,
      apply: async (q, batch) => {
        sizes.push(batch.fresh.length);
        // Real locks in the one statement, as the wallet takes one per idempotency key: a round of
        // 1,000 records takes 100,000, more than PGlite's lock table holds (about 16,000–32,000).
        const keys = batch.fresh.flatMap((r) =>
          Array.from({ length: LOCKS_PER_RECORD }, (_, j) => r.partition * 10_000_000 + r.offset * 1000 + j),
        );
        await q.query(
          'SELECT count(*) FROM (SELECT pg_advisory_xact_lock(k) FROM unnest($1::bigint[]) k) s',
          [keys],
        );
        return byType(q, batch);
      },
    });
    const records = Array.from({ length: 1000 }, (_, i) => record('ok', `u${i % 50}`));
    await append(records);
    await drained(group);
    // Every record applied exactly once, none dead-lettered (the size is not a record's fault).
    expect((await effects(group)).map((e) => e.event_id)).toEqual(sortIds(records));
    expect(await deadLetters(group)).toHaveLength(0);
    // The first transaction took a whole batch (about 500 records: 50,000 locks) and failed; it
    // was applied in halves and smaller.
    expect(sizes[0]).toBeGreaterThan(300);
    expect(Math.min(...sizes)).toBeLessThanOrEqual(sizes[0]! / 2);
  });

  it('dead-letters one record that alone needs more locks than the table holds, after pauses, and applies the rest', async () => {
    const group = uniqueName('g');
    const byType = applyByType(group);
    const attempts: string[] = [];
    await start(group, {
      apply: async (q, batch) => {
        // The record of user `huge` takes 40,000 locks (PGlite's table holds 16,000–32,000).
        const keys = batch.fresh.flatMap((r) =>
          Array.from({ length: r.value.user_id === 'huge' ? 40_000 : 1 }, (_, j) => r.offset * 100_000 + j),
        );
        if (batch.fresh.some((r) => r.value.user_id === 'huge')) attempts.push(`${batch.fresh.length}`);
        await q.query(
          'SELECT count(*) FROM (SELECT pg_advisory_xact_lock(k) FROM unnest($1::bigint[]) k) s',
          [keys],
        );
        return byType(q, batch);
      },
    });
    const records = [record('ok', 'u1'), record('ok', 'huge'), record('ok', 'u1')];
    await append(records);
    await drained(group);
    const dead = await deadLetters(group);
    expect(dead).toHaveLength(1);
    expect(dead[0]).toMatchObject({
      payload: { user_id: 'huge' },
      reason: expect.stringMatching(/^sql_53200: /),
    });
    expect((await effects(group)).map((e) => e.event_id)).toEqual(
      sortIds(records.filter((r) => r.user_id !== 'huge')),
    );
    // The record alone: once as its own batch (or half of one), then five times, with pauses, in
    // the record-by-record fallback before it is dead-lettered.
    expect(attempts.filter((a) => a === '1')).toHaveLength(6);
  });

  it('stops the consumer when thrown records pass the dead-letter limit', async () => {
    const group = uniqueName('g');
    // A poison deployment: every record throws.
    const { running: p } = await start(group, {
      maxDeadLetters: 2,
      apply: async () => {
        throw new Error('bad deployment');
      },
    });
    await append([record('ok'), record('ok'), record('ok'), record('ok')]);
    await waitFor(() => p.stoppedBecause(), { what: 'the processor to stop' });
    expect(p.stoppedBecause()).toMatch(/limit 2/);
    expect((await deadLetters(group)).map((d) => d.offset)).toEqual([0, 1]);
    expect((await stored(group)).get(log.partitionFor(TOPIC, 't1:u1'))).toBe(2);
  });

  it('redelivers a batch whose afterCommit threw as replayed, never as fresh', async () => {
    const group = uniqueName('g');
    let first = true;
    const byType = applyByType(group);
    const { calls } = await start(group, {
      apply: async (q, batch) => {
        const res = await byType(q, batch);
        return {
          ...res,
          afterCommit: async () => {
            if (first) {
              first = false;
              throw new Error('derived index unavailable');
            }
          },
        };
      },
    });
    const records = [record('ok'), record('ok'), record('ok')];
    await append(records);
    await drained(group);
    await waitFor(() => calls.length >= 2, { what: 'the redelivery' });
    expect(calls[0]).toMatchObject({ fresh: [0, 1, 2], replayed: [] });
    expect(calls[1]).toMatchObject({ fresh: [], replayed: [0, 1, 2] });
    expect((await effects(group)).map((e) => e.event_id)).toEqual(sortIds(records));
  });

  describe('in rounds (a limit on transactions)', () => {
    interface Update {
      fresh: Array<[number, number]>;
      replayed: Array<[number, number]>;
    }
    /** An apply by type whose afterCommit is `index` of the batch's [partition, offset] pairs. */
    const withIndex =
      (group: string, index: (u: Update) => Promise<void>): Apply =>
      async (q, batch) => {
        const res = await applyByType(group)(q, batch);
        const pairs = (rs: typeof batch.fresh) => rs.map((r): [number, number] => [r.partition, r.offset]);
        const u = { fresh: pairs(batch.fresh), replayed: pairs(batch.replayed) };
        return { ...res, afterCommit: () => index(u) };
      };
    /** Per partition, the offsets in the order the updates saw them. */
    const perPartition = (pairs: Array<[number, number]>) => {
      const out = new Map<number, number[]>();
      for (const [part, offset] of pairs) out.set(part, [...(out.get(part) ?? []), offset]);
      return out;
    };
    const upTo = (n: number) => Array.from({ length: n }, (_, i) => i);

    it('ends a batch at its commit: later rounds commit while an index update runs, and the updates run in commit order', async () => {
      const group = uniqueName('g');
      const updates: Update[] = [];
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      const { running: p } = await start(group, {
        transactions: 1,
        apply: withIndex(group, async (u) => {
          updates.push(u);
          if (updates.length === 1) await held;
        }),
      });
      const first = [record('ok', 'ann')];
      await append(first);
      await waitFor(() => updates.length === 1, { what: 'the first index update to start' });
      // The first update is held: later records still commit (their effects and offsets are
      // stored), and their updates wait behind it.
      const later = [record('ok', 'ann'), record('ok', 'bob'), record('ok', 'ann'), record('ok', 'bob')];
      for (const r of later) await append([r]);
      await drained(group);
      expect((await effects(group)).map((e) => e.event_id)).toEqual(sortIds([...first, ...later]));
      expect(updates).toHaveLength(1);
      release();
      await waitFor(() => updates.flatMap((u) => u.fresh).length === 5, { what: 'the held updates' });
      const seen = perPartition(updates.flatMap((u) => u.fresh));
      const ends = await log.endOffsets(TOPIC);
      for (const [part, offsets] of seen) expect(offsets).toEqual(upTo(ends.get(part)!));
      expect(updates.flatMap((u) => u.replayed)).toEqual([]);
      expect(p.stoppedBecause()).toBeNull();
    });

    it('applies the records of a failed index update again as replayed, with no new record to carry it', async () => {
      const group = uniqueName('g');
      const updates: Update[] = [];
      let failures = 2;
      await start(group, {
        transactions: 1,
        apply: withIndex(group, async (u) => {
          updates.push(u);
          if (u.fresh.length > 0 && failures-- > 0) throw new Error('derived index unavailable');
        }),
      });
      const records = [record('ok', 'ann'), record('ok', 'ann'), record('ok', 'bob')];
      await append(records);
      await drained(group);
      // Nothing more is appended: the repair alone brings the index up to date.
      await waitFor(() => updates.some((u) => u.replayed.length > 0 && u.fresh.length === 0), {
        what: 'the replay of the missed records',
      });
      const fresh = perPartition(updates.flatMap((u) => u.fresh));
      const replayed = perPartition(updates.flatMap((u) => u.replayed));
      const ends = await log.endOffsets(TOPIC);
      for (const [part, n] of ends) {
        if (n === 0) continue;
        // Each record applied once (fresh); those whose update failed come back as replayed.
        expect(fresh.get(part)).toEqual(upTo(n));
        for (const o of replayed.get(part) ?? []) expect(o).toBeLessThan(n);
      }
      expect((await effects(group)).map((e) => e.event_id)).toEqual(sortIds(records));
    });

    it('applies no new record of a partition whose index is behind until the repair succeeded', async () => {
      const group = uniqueName('g');
      const updates: Update[] = [];
      let failing = true;
      await start(group, {
        transactions: 1,
        apply: withIndex(group, async (u) => {
          updates.push(u);
          if (failing) throw new Error('derived index unavailable');
        }),
      });
      const first = record('ok', 'ann');
      await append([first]);
      await waitFor(() => updates.length >= 2, { what: 'a failed update and a failed repair' });
      const second = record('ok', 'ann');
      await append([second]);
      await new Promise((r) => setTimeout(r, 300));
      expect((await effects(group)).map((e) => e.event_id)).toEqual([first.event_id]);
      failing = false;
      await drained(group);
      await waitFor(async () => (await effects(group)).length === 2, { what: 'the second record' });
      const part = log.partitionFor(TOPIC, 't1:ann');
      const seq = updates.map((u) => ({
        fresh: u.fresh.filter(([p]) => p === part).map(([, o]) => o),
        replayed: u.replayed.filter(([p]) => p === part).map(([, o]) => o),
      }));
      // Fresh 0 (its update failed), replays of 0 until one succeeded, then fresh 1.
      expect(seq[0]).toEqual({ fresh: [0], replayed: [] });
      expect(seq.at(-1)).toEqual({ fresh: [1], replayed: [] });
      const between = seq.slice(1, -1);
      expect(between.length).toBeGreaterThan(0);
      for (const u of between) expect(u).toEqual({ fresh: [], replayed: [0] });
      expect((await effects(group)).map((e) => e.event_id)).toEqual(sortIds([first, second]));
    });

    it('stops while its index is behind', async () => {
      const group = uniqueName('g');
      let updates = 0;
      const { running: p } = await start(group, {
        transactions: 1,
        apply: withIndex(group, async () => {
          updates++;
          throw new Error('derived index unavailable');
        }),
      });
      await append([record('ok', 'ann'), record('ok', 'bob')]);
      await drained(group);
      await waitFor(() => updates >= 2, { what: 'a failed update and a failed repair' });
      await append([record('ok', 'ann')]);
      await p.stop();
      expect(p.stoppedBecause()).toBeNull();
    });
  });

  it('passes records below the stored offset as replayed when a processor resumes earlier', async () => {
    const group = uniqueName('g');
    const first = [record('ok'), record('ok'), record('ok')];
    await append(first);
    const one = await start(group);
    await drained(group);
    await one.running.stop();

    // A processor with a derived index resumes from the beginning (like rank-sync's watermark).
    const resumes: Array<Map<number, number>> = [];
    const two = await start(group, {
      resumeFrom: async (partitions, storedOffsets) => {
        resumes.push(new Map(storedOffsets));
        return new Map(partitions.map((p) => [p, 0]));
      },
    });
    const later = [record('ok'), record('ok')];
    await waitFor(() => two.calls.some((c) => c.replayed.length > 0), { what: 'the replay' });
    await append(later);
    await drained(group);
    await waitFor(() => two.calls.flatMap((c) => c.fresh).length === 2, { what: 'the new records' });
    const partition = log.partitionFor(TOPIC, 't1:u1');
    expect(resumes[0]!.get(partition)).toBe(3);
    expect(two.calls.flatMap((c) => c.replayed).sort()).toEqual([0, 1, 2]);
    expect(two.calls.flatMap((c) => c.fresh).sort()).toEqual([3, 4]);
    for (const c of two.calls) {
      for (const o of c.fresh) expect(o).toBeGreaterThanOrEqual(3);
      for (const o of c.replayed) expect(o).toBeLessThan(3);
    }
    expect((await effects(group)).map((e) => e.event_id)).toEqual(sortIds([...first, ...later]));
    expect((await stored(group)).get(partition)).toBe(5);
  });

  it('applies again, as replayed, what another member committed between two of its batches', async () => {
    const group = uniqueName('g');
    const first = [record('ok'), record('ok')];
    await append(first);
    const one = await start(group);
    await drained(group);
    const partition = log.partitionFor(TOPIC, 't1:u1');
    expect((await stored(group)).get(partition)).toBe(2);

    // Another member (after a rebalance this one did not see) applied the next record: the stored
    // offset moved past it, and its effect is that member's.
    const later = [record('ok'), record('ok')];
    await sql.query(
      `UPDATE consumer_offsets SET next_offset = 3 WHERE group_id = $1 AND topic = $2 AND partition = $3`,
      [group, log.physicalName(TOPIC), partition],
    );
    await append(later);
    await drained(group);

    // This member's batch [2, 3] went out before the offsets' answer, all of it fresh; the answer
    // (3) rolled that transaction back, and the batch was applied again with 2 as replayed.
    const calls = one.calls.filter((c) => c.partition === partition && c.nextOffset === 4);
    expect(calls.map((c) => [c.fresh, c.replayed])).toEqual([
      [[2, 3], []],
      [[3], [2]],
    ]);
    expect((await effects(group)).map((e) => e.event_id)).toEqual(sortIds([...first, later[1]!]));
    expect((await stored(group)).get(partition)).toBe(4);
  });

  it('calls maintain with the owned partitions and their applied offsets, and survives its failures', async () => {
    const group = uniqueName('g');
    const seen: Array<{ partitions: number[]; applied: Array<[number, number]> }> = [];
    let failures = 0;
    const p: Processor<EventRecord> = {
      group,
      topic: TOPIC,
      apply: applyByType(group),
      async maintain(partitions, applied) {
        seen.push({ partitions, applied: [...applied].sort((a, b) => a[0] - b[0]) });
        if (failures++ < 2) throw new Error('index unavailable');
      },
    };
    const r = await startProcessor(deps(), p, { lagIntervalMs: 30 });
    running.push(r);
    await append([record('ok', 'ann'), record('ok', 'bob'), record('ok', 'ann')]);
    await drained(group);
    const want = [...(await stored(group))].sort((a, b) => a[0] - b[0]);
    await waitFor(() => seen.some((c) => JSON.stringify(c.applied) === JSON.stringify(want)), {
      what: 'maintain with the applied offsets',
      describe: () => JSON.stringify(seen.slice(-3)),
    });
    expect(seen.every((c) => JSON.stringify(c.partitions) === JSON.stringify(PARTITIONS))).toBe(true);
    await waitFor(() => failures > 2, { what: 'maintain to be called again after it failed' });
    expect(r.stoppedBecause()).toBeNull();
    await append([record('ok', 'cid')]);
    await drained(group);
    expect(await effects(group)).toHaveLength(4);
  });

  it('refuses an apply that returns the wrong number of outcomes (and applies nothing)', async () => {
    const group = uniqueName('g');
    let calls = 0;
    await start(group, {
      apply: async (q, batch) => {
        calls++;
        await q.query('INSERT INTO fw_effects (group_id, event_id, "offset") VALUES ($1, $2, $3)', [
          group,
          'bogus',
          0,
        ]);
        return { outcomes: batch.fresh.slice(1).map(() => ok) };
      },
    });
    await append([record('ok'), record('ok')]);
    await waitFor(() => calls >= 2, { what: 'a retry' });
    expect(await effects(group)).toEqual([]);
    expect((await stored(group)).get(log.partitionFor(TOPIC, 't1:u1')) ?? 0).toBe(0);
  });

  describe('rounds (one transaction in flight)', () => {
    const WIDE: Topic<EventRecord> = { ...EVENTS_TOPIC, name: 'fw.wide', partitions: 4 };
    const ALL = [0, 1, 2, 3];

    /** A user of each partition of WIDE, and records of every type for each. */
    const usersByPartition = () => {
      const users = new Map<number, string>();
      for (let i = 0; users.size < WIDE.partitions; i++) {
        const part = log.partitionFor(WIDE, `t1:w${i}`);
        if (!users.has(part)) users.set(part, `w${i}`);
      }
      return users;
    };
    const appendWide = (rs: EventRecord[]) =>
      log.append(
        WIDE,
        rs.map((r) => ({ key: `${r.tenant_id}:${r.user_id}`, value: r })),
      );
    const storedWide = (group: string) => readOffsets(sql, group, log.physicalName(WIDE), ALL);
    const drainedWide = (group: string) =>
      waitFor(
        async () => {
          const [st, e] = [await storedWide(group), await log.endOffsets(WIDE)];
          return ALL.every((p) => (st.get(p) ?? 0) === (e.get(p) ?? 0));
        },
        { what: `group ${group} to reach the end of fw.wide`, describe: () => logLines.slice(-5).join('\n') },
      );

    /**
     * Starts a processor on WIDE with one transaction in flight, whose first transaction waits
     * 300 ms (so that the other partitions' batches queue behind it) and which records the
     * partitions of every apply.
     */
    async function startWide(
      group: string,
      apply: Apply = applyByType(group),
      o: { gatherMs?: number; maxBatchSize?: number; maxRoundMs?: number } = {},
    ) {
      const rounds: number[][] = [];
      const p: Processor<EventRecord> = {
        group,
        topic: WIDE,
        maxBatchSize: o.maxBatchSize,
        async apply(q, batch) {
          rounds.push(batch.parts.map((x) => x.partition));
          if (rounds.length === 1) await new Promise((r) => setTimeout(r, 300));
          // Each part's range matches its records.
          for (const part of batch.parts) {
            const own = [...batch.replayed, ...batch.fresh].filter((r) => r.partition === part.partition);
            if (own.length && own.at(-1)!.offset + 1 !== part.nextOffset) throw new Error('range mismatch');
          }
          return apply(q, batch);
        },
      };
      await log.ensureTopic(WIDE);
      const r = await startProcessor(deps(), p, {
        transactions: 1,
        gatherMs: o.gatherMs,
        maxRoundMs: o.maxRoundMs,
      });
      running.push(r);
      return { rounds, running: r };
    }

    it('applies the batches of the partitions that waited in one transaction, each exactly once', async () => {
      const group = uniqueName('g');
      await log.ensureTopic(WIDE);
      const users = usersByPartition();
      const records = ALL.flatMap((part) => [record('ok', users.get(part)), record('ok', users.get(part))]);
      await appendWide(records);
      const { rounds } = await startWide(group);
      await drainedWide(group);
      expect((await effects(group)).map((e) => e.event_id)).toEqual(sortIds(records));
      // The first transaction held one partition; the three others waited and went in one round.
      expect(rounds[0]).toHaveLength(1);
      expect(rounds[1]).toEqual(ALL.filter((p) => p !== rounds[0]![0]));
      expect([...(await storedWide(group))].sort((a, b) => a[0] - b[0])).toEqual(ALL.map((p) => [p, 2]));
    });

    it.each([
      ['starts a round with what waits', 0, 1, 3],
      ['waits for a batch of every partition not in flight, with a gather time', 1000, 4, 4],
    ])('%s', async (_, gatherMs, firstRound, secondRound) => {
      const group = uniqueName('g');
      await log.ensureTopic(WIDE);
      const users = usersByPartition();
      // Batches of one record: the first round's partition has a second batch to deliver after it.
      const records = ALL.flatMap((part) => [record('ok', users.get(part)), record('ok', users.get(part))]);
      await appendWide(records);
      const { rounds } = await startWide(group, applyByType(group), { gatherMs, maxBatchSize: 1 });
      await drainedWide(group);
      expect((await effects(group)).map((e) => e.event_id)).toEqual(sortIds(records));
      expect(rounds[0]).toHaveLength(firstRound);
      expect(rounds[1]).toHaveLength(secondRound);
      if (gatherMs) expect(rounds.slice(0, 2)).toEqual([ALL, ALL]);
      expect([...(await storedWide(group))].sort((a, b) => a[0] - b[0])).toEqual(ALL.map((p) => [p, 2]));
    });

    it.each([
      ['takes every waiting partition without a time bound', undefined, 3],
      ['takes fewer records after a slow round, with a time bound', 100, 1],
    ])('%s', async (_, maxRoundMs, secondRound) => {
      const group = uniqueName('g');
      await log.ensureTopic(WIDE);
      const users = usersByPartition();
      const records = ALL.flatMap((part) => [record('ok', users.get(part)), record('ok', users.get(part))]);
      await appendWide(records);
      // Batches of one record: the first round (one record, 300 ms) sets the time per record.
      const { rounds } = await startWide(group, applyByType(group), { maxBatchSize: 1, maxRoundMs });
      await drainedWide(group);
      expect((await effects(group)).map((e) => e.event_id)).toEqual(sortIds(records));
      expect(rounds[0]).toHaveLength(1);
      expect(rounds[1]).toHaveLength(secondRound);
      expect([...(await storedWide(group))].sort((a, b) => a[0] - b[0])).toEqual(ALL.map((p) => [p, 2]));
    });

    it('retries the batches of a round alone when it throws, dead-lettering only the record at fault', async () => {
      const group = uniqueName('g');
      await log.ensureTopic(WIDE);
      const users = usersByPartition();
      const records = ALL.flatMap((part) => [record('ok', users.get(part)), record('ok', users.get(part))]);
      // The last partition's second record makes every transaction that holds it throw.
      const bad = records.at(-1)!;
      bad.type = 'throws';
      await appendWide(records);
      const byType = applyByType(group);
      const { rounds } = await startWide(group, async (q, batch) => {
        const res = await byType(q, batch);
        if (batch.fresh.some((r) => r.value.type === 'throws')) throw new TypeError('cannot apply');
        return res;
      });
      await drainedWide(group);
      // Every other record applied exactly once, whichever round or retry applied it.
      expect((await effects(group)).map((e) => e.event_id)).toEqual(
        sortIds(records.filter((r) => r !== bad)),
      );
      expect((await deadLetters(group)).map((d) => d.payload.event_id)).toEqual([bad.event_id]);
      expect(rounds.some((r) => r.length > 1)).toBe(true);
      expect([...(await storedWide(group))].sort((a, b) => a[0] - b[0])).toEqual(ALL.map((p) => [p, 2]));
    });
  });
});
