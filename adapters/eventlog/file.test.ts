/**
 * FileEventLog beyond the shared contract (tests/contract/eventlog.contract.test.ts): what its files
 * hold after concurrent appends (group commit), a torn tail after a crash, damage that is not a
 * torn tail, stored offsets beyond the end, segments and their retention, and the one-time
 * carry-over of an older SQL log.
 */
import {
  appendFileSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { open as openFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LocalEventLog, sqlLogImporter } from './local';
import { FileEventLog, frameRecord, MAX_GROUP_BYTES, segmentFileName } from './file';
import type { Batch, EventLog, LogRecord } from './types';
import { EVENTS_TOPIC, eventKey, type EventRecord, type Topic } from '../../schemas/topics';
import type { LogLevel } from './common';
import { openTestPglite } from '../../tests/support/stack';
import { waitFor } from '../../tests/support/wait';

const TOPIC: Topic<EventRecord> = { ...EVENTS_TOPIC, partitions: 3 };

function event(user: string, seq: number): EventRecord {
  return {
    tenant_id: 'ten',
    event_id: `${user}#${seq}`,
    type: 'test.happened',
    user_id: user,
    occurred_at: 1_700_000_000_000 + seq,
    received_at: 1_700_000_000_500 + seq,
    attrs_json: JSON.stringify({ seq, pad: 'x'.repeat(seq % 50) }),
    actor_metadata_json: null,
    subject_json: null,
  };
}

const records = (n: number, users = 7, from = 0) =>
  Array.from({ length: n }, (_, i) => {
    const user = `u${(from + i) % users}`;
    return { key: eventKey('ten', user), value: event(user, from + i) };
  });

let dir: string;
const open: EventLog[] = [];
const warnings: string[] = [];
const log = (level: LogLevel, message: string, fields?: Record<string, unknown>) => {
  if (level === 'warn' || level === 'error')
    warnings.push(`${level} ${message} ${JSON.stringify(fields ?? {})}`);
};
const newLog = (extra: Partial<ConstructorParameters<typeof FileEventLog>[0]> = {}) => {
  const l = new FileEventLog({
    dir,
    log,
    pollIntervalMs: 50,
    retryBackoff: { initialMs: 20, maxMs: 100 },
    ...extra,
  });
  open.push(l);
  return l;
};

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'ludus-filelog-test-'));
  warnings.length = 0;
});

afterEach(async () => {
  for (const l of open.splice(0)) await l.close().catch(() => undefined);
  rmSync(dir, { recursive: true, force: true });
});

/** Every record of the topic, per partition, read by a consumer from offset 0 (`pick` of each). */
async function readAll<R = { offset: number; id: string }>(
  l: EventLog,
  expected: number,
  pick: (r: LogRecord<EventRecord>) => R = (r) => ({ offset: r.offset, id: r.value.event_id }) as R,
): Promise<Map<number, R[]>> {
  const got = new Map<number, R[]>();
  let n = 0;
  const c = await l.consume(
    TOPIC,
    { group: `g${Math.random()}`, maxBatchSize: 37 },
    {
      resumeFrom: async () => new Map(),
      handleBatch: async (b: Batch<EventRecord>) => {
        const list = got.get(b.partition) ?? [];
        for (const r of b.records) list.push(pick(r));
        got.set(b.partition, list);
        n += b.records.length;
      },
    },
  );
  await waitFor(() => n >= expected, { what: `${expected} records`, describe: () => `read ${n}` });
  await c.stop();
  return got;
}

const partitionFile = (p: number) => join(dir, TOPIC.name, `${p}.log`);

describe('FileEventLog', () => {
  it('keeps every record of concurrent appends, in call order per key, across a reopen', async () => {
    const a = newLog();
    await a.ensureTopic(TOPIC);
    const all = records(2000, 11);
    // 100 appends of 20 records at once: they are written in groups, each resolved after its sync.
    await Promise.all(Array.from({ length: 100 }, (_, i) => a.append(TOPIC, all.slice(i * 20, i * 20 + 20))));
    const ends = await a.endOffsets(TOPIC);
    expect([...ends.values()].reduce((x, y) => x + y, 0)).toBe(all.length);
    await a.close();

    const b = newLog();
    expect(await b.endOffsets(TOPIC)).toEqual(ends);
    const got = await readAll(b, all.length);
    const ids = [...got.values()].flat().map((r) => r.id);
    expect(ids.sort()).toEqual(all.map((r) => r.value.event_id).sort());
    for (const [p, list] of got) {
      expect(list.map((r) => r.offset)).toEqual(list.map((_, i) => i));
      // Within a key, the order of the calls (each call's records are consecutive seqs of the key).
      const perUser = new Map<string, number[]>();
      for (const r of list) {
        const [user, seq] = r.id.split('#');
        perUser.set(user, [...(perUser.get(user) ?? []), Number(seq)]);
      }
      for (const seqs of perUser.values()) expect(seqs).toEqual([...seqs].sort((x, y) => x - y));
      expect(p).toBeLessThan(TOPIC.partitions);
    }
  });

  it.each([
    ['one segment per partition: the tail trimmed to its 256 KiB, the rest from the file', undefined],
    ['segments of 512 KiB: the ones before the last forget their tails', 512 * 1024],
  ])(
    'gives the latest records from memory exactly as the files give them after a reopen (%s)',
    async (_, segmentBytes) => {
      const a = newLog({ segmentBytes });
      await a.ensureTopic(TOPIC);
      // About 1.9 MB per partition: more than the tail a segment keeps in memory.
      const all = records(12_000, 50).map((r) => ({
        ...r,
        value: { ...r.value, attrs_json: JSON.stringify({ pad: 'x'.repeat(300) }) },
      }));
      for (let i = 0; i < all.length; i += 400) await a.append(TOPIC, all.slice(i, i + 400));
      const fromMemory = await readAll(a, all.length, (r) => r);
      await a.close();
      const files = readdirSync(join(dir, TOPIC.name)).filter((n) => n.endsWith('.log'));
      if (segmentBytes) expect(files.length).toBeGreaterThan(2 * TOPIC.partitions);
      else expect(files.length).toBe(TOPIC.partitions);
      const b = newLog({ segmentBytes });
      const fromFiles = await readAll(b, all.length, (r) => r);
      expect(fromMemory).toEqual(fromFiles);
      expect([...fromFiles.values()].flat()).toHaveLength(all.length);
    },
  );

  it('cuts a torn last record off on open and appends after it', async () => {
    const a = newLog();
    await a.ensureTopic(TOPIC);
    const first = records(300);
    await a.append(TOPIC, first);
    const ends = await a.endOffsets(TOPIC);
    await a.close();
    // A crash in the middle of writing a record: its first half reached the file.
    const p = [...ends.entries()].find(([, n]) => n > 0)![0];
    const goodSize = statSync(partitionFile(p)).size;
    const torn = frameRecord(Date.now(), 1, 'ten:u0', Buffer.from('x'.repeat(200)));
    appendFileSync(partitionFile(p), torn.subarray(0, 100));

    const b = newLog();
    expect(await b.endOffsets(TOPIC)).toEqual(ends);
    expect(statSync(partitionFile(p)).size).toBe(goodSize);
    expect(warnings.some((w) => /unfinished write/.test(w))).toBe(true);
    const more = records(50, 7, 300);
    await b.append(TOPIC, more);
    const got = await readAll(b, first.length + more.length);
    expect([...got.values()].flat().length).toBe(first.length + more.length);
  });

  it('cuts a complete last record with a wrong checksum off (a write whose end never reached the disk)', async () => {
    const a = newLog();
    await a.ensureTopic(TOPIC);
    await a.append(TOPIC, records(40));
    const ends = await a.endOffsets(TOPIC);
    await a.close();
    const frame = frameRecord(Date.now(), 1, 'ten:u0', Buffer.from('y'.repeat(64)));
    frame.fill(0, frame.length - 20); // the last bytes stayed zero
    appendFileSync(partitionFile(0), frame);
    const b = newLog();
    expect(await b.endOffsets(TOPIC)).toEqual(ends);
  });

  it('refuses to open a file damaged before more data than one write could leave unfinished', async () => {
    const a = newLog();
    await a.ensureTopic(TOPIC);
    await a.append(TOPIC, records(30));
    await a.close();
    const path = partitionFile(0);
    const bytes = readFileSync(path);
    bytes[bytes.length - 3] ^= 0xff; // damage inside the last acknowledged record ...
    writeFileSync(path, bytes);
    appendFileSync(path, Buffer.alloc(MAX_GROUP_BYTES + 1024, 7)); // ... followed by lots more
    const b = newLog();
    await expect(b.endOffsets(TOPIC)).rejects.toThrow(/refusing to cut acknowledged records off/);
    expect(statSync(path).size).toBe(bytes.length + MAX_GROUP_BYTES + 1024); // nothing was cut
  });

  it('a stored offset beyond the end of the log is an error, never a skip', async () => {
    const a = newLog();
    await a.ensureTopic(TOPIC);
    await a.append(TOPIC, records(10));
    let handled = 0;
    const c = await a.consume(
      TOPIC,
      { group: 'g' },
      {
        resumeFrom: async (ps) => new Map(ps.map((p) => [p, 1000])),
        handleBatch: async () => {
          handled++;
        },
      },
    );
    await waitFor(() => warnings.some((w) => /beyond the end of the log/.test(w)), {
      what: 'the error',
      describe: () => warnings.join('\n'),
    });
    await a.append(TOPIC, records(100, 7, 10)); // still below 1000 in every partition
    await new Promise((r) => setTimeout(r, 200)); // the loops keep refusing; nothing to wait for
    expect(handled).toBe(0);
    await c.stop();
  });

  describe('segments and retention', () => {
    /** A partition's segment files in offset order. */
    const segments = (p: number) =>
      readdirSync(join(dir, TOPIC.name))
        .filter((n) => n === `${p}.log` || n.startsWith(`${p}-`))
        .sort((x, y) => (x === `${p}.log` ? -1 : y === `${p}.log` ? 1 : x < y ? -1 : 1));
    /** Appends `groups` calls of 20 records one after the other (each a group of its own). */
    const appendGroups = async (l: EventLog, groups: number, from = 0) => {
      for (let i = 0; i < groups; i++) await l.append(TOPIC, records(20, 7, from + i * 20));
    };

    it('starts a new segment when the last one is full, and reads across them after a reopen', async () => {
      const a = newLog({ segmentBytes: 2048 });
      await a.ensureTopic(TOPIC);
      await appendGroups(a, 30);
      const ends = await a.endOffsets(TOPIC);
      await a.close();
      for (let p = 0; p < TOPIC.partitions; p++) {
        const names = segments(p);
        expect(names.length).toBeGreaterThan(2);
        expect(names[0]).toBe(`${p}.log`);
      }

      const b = newLog({ segmentBytes: 2048 });
      expect(await b.endOffsets(TOPIC)).toEqual(ends);
      await appendGroups(b, 5, 600);
      const got = await readAll(b, 700);
      const ids = [...got.values()].flat().map((r) => r.id);
      expect(ids.sort()).toEqual(
        records(700)
          .map((r) => r.value.event_id)
          .sort(),
      );
      for (const list of got.values()) expect(list.map((r) => r.offset)).toEqual(list.map((_, i) => i));
    });

    it('deletes old segments past the retention, never the last; consumers go on at the new start', async () => {
      let now = 1_800_000_000_000;
      const opts = {
        segmentBytes: 2048,
        retentionMs: 3_600_000,
        retentionCheckMs: 3_600_000,
        now: () => now,
      };
      const a = newLog(opts);
      await a.ensureTopic(TOPIC);
      await appendGroups(a, 20); // old
      const before = segments(0).length;
      now += 2 * 3_600_000;
      await appendGroups(a, 3, 400); // recent: in the last segment (or two)
      await a.enforceRetention();
      const ends = await a.endOffsets(TOPIC);
      for (let p = 0; p < TOPIC.partitions; p++) {
        expect(segments(p).length).toBeLessThan(before);
        expect(segments(p)).not.toContain(`${p}.log`);
      }
      expect(warnings).toEqual([]);

      // A group that had read nothing (stored offset 0) goes on at the oldest record left.
      const got = await readAll(a, 60);
      for (const [p, list] of got) {
        expect(list[0].offset).toBeGreaterThan(0);
        expect(list[list.length - 1].offset).toBe(ends.get(p)! - 1);
        expect(list.map((r) => r.offset)).toEqual(list.map((_, i) => list[0].offset + i));
      }
      expect(warnings.some((w) => /deleted by retention/.test(w))).toBe(true);
      expect([...got.values()].flat().map((r) => r.id)).toEqual(
        expect.arrayContaining(records(60, 7, 400).map((r) => r.value.event_id)),
      );

      // Everything old is gone but each partition's last segment stays, and a reopen agrees.
      now += 10 * 3_600_000;
      await a.enforceRetention();
      for (let p = 0; p < TOPIC.partitions; p++) expect(segments(p)).toHaveLength(1);
      await a.close();
      const b = newLog(opts);
      expect(await b.endOffsets(TOPIC)).toEqual(ends);
      await b.append(TOPIC, records(10, 7, 1000));
      const after = await b.endOffsets(TOPIC);
      expect([...after.values()].reduce((x, y) => x + y, 0)).toBe(
        [...ends.values()].reduce((x, y) => x + y, 0) + 10,
      );
    });

    it('refuses to open when a segment before the last is damaged or one is missing', async () => {
      const a = newLog({ segmentBytes: 2048 });
      await a.ensureTopic(TOPIC);
      await appendGroups(a, 30);
      await a.close();
      const names = segments(0);
      const path = join(dir, TOPIC.name, names[1]);
      const size = statSync(path).size;
      truncateSync(path, size - 5); // a torn tail, but not in the last segment
      await expect(newLog({ segmentBytes: 2048 }).endOffsets(TOPIC)).rejects.toThrow(
        /a later one follows .*refusing to cut acknowledged records off/,
      );
      expect(statSync(path).size).toBe(size - 5); // nothing was cut
      for (const l of open.splice(0)) await l.close();

      unlinkSync(path); // a gap in the offsets
      await expect(newLog({ segmentBytes: 2048 }).endOffsets(TOPIC)).rejects.toThrow(
        /but the segment before it ends at/,
      );
    });

    it('names segments by base offset, the first one as before', () => {
      expect(segmentFileName(3, 0)).toBe('3.log');
      expect(segmentFileName(3, 1234)).toBe('3-00000000000000001234.log');
    });
  });

  it('refuses appends larger than one group, and values that do not fit the schema, appending nothing', async () => {
    const a = newLog();
    await a.ensureTopic(TOPIC);
    const big = { key: 'ten:u1', value: { ...event('u1', 0), attrs_json: 'z'.repeat(MAX_GROUP_BYTES) } };
    await expect(a.append(TOPIC, [big])).rejects.toThrow(/more than/);
    await expect(
      a.append(TOPIC, [
        { key: 'ten:u1', value: { ...event('u1', 0), user_id: 3 } as unknown as EventRecord },
      ]),
    ).rejects.toThrow(/user_id/);
    expect([...(await a.endOffsets(TOPIC)).values()]).toEqual([0, 0, 0]);
  });

  it('a failed write refuses every append of its group, cuts the file back, and the next append goes on', async () => {
    const a = newLog();
    await a.ensureTopic(TOPIC);
    await a.append(TOPIC, records(30, 1)); // one user: every record in one partition
    const [p] = [...(await a.endOffsets(TOPIC))].find(([, n]) => n > 0)!;
    const sizeBefore = statSync(partitionFile(p)).size;
    // Every FileHandle shares one prototype. The next positional write writes all but its last
    // byte, then fails, as a full disk would leave it.
    const probe = await openFile(join(dir, 'probe'), 'w');
    const proto = Object.getPrototypeOf(probe) as { write: (...args: unknown[]) => Promise<unknown> };
    await probe.close();
    const realWrite = proto.write;
    let failures = 1;
    proto.write = async function (this: unknown, ...args: unknown[]) {
      if (failures-- <= 0) return realWrite.apply(this, args);
      const [buf, offset, length, position] = args as [Buffer, number, number, number];
      await realWrite.call(this, buf, offset, length - 1, position);
      throw new Error('ENOSPC: no space left on device');
    };
    let settled: PromiseSettledResult<void>[];
    try {
      // Queued together: the first flushes alone and fails; the other two form the next group.
      settled = await Promise.allSettled([
        a.append(TOPIC, records(50, 1, 30)),
        a.append(TOPIC, records(5, 1, 80)),
        a.append(TOPIC, records(5, 1, 85)),
      ]);
    } finally {
      proto.write = realWrite;
    }
    expect(settled.map((r) => r.status)).toEqual(['rejected', 'fulfilled', 'fulfilled']);
    expect(String((settled[0] as PromiseRejectedResult).reason)).toMatch(/event log write failed: ENOSPC/);
    expect(warnings.filter((w) => w.startsWith('error '))).toEqual([
      expect.stringMatching(/^error event log write failed; the appends of this group are refused/),
    ]);
    expect((await a.endOffsets(TOPIC)).get(p)).toBe(40);
    await a.close();
    // The refused bytes were cut off before the next group was written: the file holds exactly the
    // 40 accepted records, and a reopen finds no torn tail to repair.
    expect(statSync(partitionFile(p)).size).toBeLessThan(sizeBefore * 2);
    warnings.length = 0;
    const b = newLog();
    expect((await b.endOffsets(TOPIC)).get(p)).toBe(40);
    const ids = (await readAll(b, 40)).get(p)!.map((r) => r.id);
    expect(ids).toEqual([...records(30, 1), ...records(10, 1, 80)].map((r) => r.value.event_id));
    expect(warnings).toEqual([]);
  });

  it('a second instance on the same directory is refused; after close it opens', async () => {
    const a = newLog();
    expect(() => new FileEventLog({ dir })).toThrow(/in use by process/);
    await a.close();
    newLog();
  });

  it('carries the records of an older SQL log over once, with their offsets', async () => {
    const sql = await openTestPglite();
    try {
      const old = new LocalEventLog(sql);
      await old.ensureTopic(TOPIC);
      const before = records(500, 13);
      await old.append(TOPIC, before);
      const ends = await old.endOffsets(TOPIC);
      await old.close();

      const a = newLog({ importer: sqlLogImporter(sql) });
      await a.ensureTopic(TOPIC);
      expect(await a.endOffsets(TOPIC)).toEqual(ends);
      const after = records(20, 13, 500);
      await a.append(TOPIC, after);
      const got = await readAll(a, before.length + after.length);
      // Same partition and offset for every old record as in the SQL log.
      const fromSql = await sql.query<{ partition: number; offset: number; key: string }>(
        `SELECT partition, "offset", key FROM event_log_records WHERE topic = $1`,
        [TOPIC.name],
      );
      expect(fromSql.rows.length).toBe(before.length);
      const byPos = new Map([...got].flatMap(([p, list]) => list.map((r) => [`${p}/${r.offset}`, r.id])));
      const oldIds = new Map(before.map((r) => [r.value.event_id, r.key]));
      for (const r of fromSql.rows) {
        const id = byPos.get(`${r.partition}/${Number(r.offset)}`)!;
        expect(oldIds.get(id)).toBe(r.key);
      }
      expect(byPos.size).toBe(before.length + after.length);
      await a.close();
      // A second start does not import again (the topic's files exist).
      const b = newLog({ importer: sqlLogImporter(sql) });
      await b.ensureTopic(TOPIC);
      expect([...(await b.endOffsets(TOPIC)).values()].reduce((x, y) => x + y, 0)).toBe(520);
    } finally {
      await sql.close();
    }
  }, 240_000);

  it('a failed topic creation leaves no half-made topic behind', async () => {
    const a = newLog({
      importer: {
        heads: async () => new Map([[0, 5]]),
        page: async () => [], // claims 5 records, has none
      },
    });
    await expect(a.ensureTopic(TOPIC)).rejects.toThrow(/no record at offset 0/);
    await expect(a.endOffsets(TOPIC)).rejects.toThrow(/does not exist/);
  });
});
