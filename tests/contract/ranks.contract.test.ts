/**
 * RankIndex contract: the same suite against Redis (real server, db 15, a unique key prefix per
 * run, deleted afterwards) and the in-memory order-statistic index.
 *
 * Expected orders are written out by hand or computed with an independent reference
 * (Buffer.compare on UTF-8 bytes), never with the adapters' own comparator.
 */
import Redis from 'ioredis';
import { MemoryRankIndex } from '../../adapters/ranks/memory';
import { encodeMember, rankKeys, RedisRankIndex, unpack } from '../../adapters/ranks/redis';
import type { RankEntry, RankIndex, RankUpdate } from '../../adapters/ranks/types';
import { stack, uniqueName } from '../support/stack';

const prefix = `${uniqueName('rk')}:`;

const adapters: Array<[string, () => RankIndex]> = [
  ['redis', () => new RedisRankIndex({ redis: stack.redisUrl, prefix })],
  ['memory', () => new MemoryRankIndex()],
];

afterAll(async () => {
  // Leave nothing behind in the test Redis: every key of this run is under `prefix`.
  const r = new Redis(stack.redisUrl);
  try {
    let cursor = '0';
    do {
      const [next, keys] = await r.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      if (keys.length > 0) await r.del(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    await r.quit();
  }
});

/** Reference order: score desc, tiebreak asc, member asc by UTF-8 bytes. */
function refCompare(a: RankEntry, b: RankEntry): number {
  if (a.score !== b.score) return b.score - a.score > 0 ? 1 : -1;
  if (a.tiebreak !== b.tiebreak) return a.tiebreak < b.tiebreak ? -1 : 1;
  return Buffer.compare(Buffer.from(a.member, 'utf8'), Buffer.from(b.member, 'utf8'));
}

function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe.each(adapters)('RankIndex contract [%s]', (name, make) => {
  let idx: RankIndex;
  let n = 0;
  /** A fresh board name per test, so tests never see each other's data. */
  const board = () => `t1:lb${++n}:w`;
  /** A fresh stream per test. */
  const stream = () => `g${++n}:events`;
  const up = (b: string, member: string, score: number, tiebreak = 0): RankUpdate => ({
    board: b,
    member,
    score,
    tiebreak,
  });
  const members = async (b: string) => (await idx.range(b, 0, 1000)).map((e) => e.member);

  beforeAll(() => {
    idx = make();
  });
  afterAll(async () => {
    await idx.close();
  });

  it('counts members above a score (shared ranks), zero on an absent board', async () => {
    const b = board();
    await idx.apply([up(b, 'a', 10), up(b, 'b', 7), up(b, 'c', 7), up(b, 'd', 3)], {
      stream: stream(),
      partition: 0,
      nextOffset: 1,
    });
    expect(await idx.countAbove(b, 7)).toBe(1);
    expect(await idx.countAbove(b, 3)).toBe(3);
    expect(await idx.countAbove(b, 10)).toBe(0);
    expect(await idx.countAbove(b, 2.5)).toBe(4);
    expect(await idx.countAbove(board(), 1)).toBe(0);
  });

  it(`reports its kind (${name}) and answers ping`, async () => {
    expect(idx.kind).toBe(name);
    await expect(idx.ping()).resolves.toBeUndefined();
  });

  it('orders by score desc, then tiebreak asc, then member asc by bytes', async () => {
    const b = board();
    const s = stream();
    await idx.apply(
      [
        up(b, 'carol', 10, 5),
        up(b, 'bob', 10, 5),
        up(b, 'alice', 10, 7),
        up(b, 'dave', 20, 99),
        up(b, 'erin', 10, 1),
        up(b, 'ab', 10, 5),
        up(b, 'a', 10, 5),
        up(b, 'B', 10, 5),
        up(b, 'frank', -3, 0),
        up(b, 'gina', 0, -5),
      ],
      { stream: s, partition: 0, nextOffset: 1 },
    );
    // 'B' (0x42) < 'a' (0x61) < 'ab' < 'bob' < 'carol' by bytes; a prefix comes first.
    expect(await idx.range(b, 0, 100)).toEqual([
      { member: 'dave', score: 20, tiebreak: 99, position: 0 },
      { member: 'erin', score: 10, tiebreak: 1, position: 1 },
      { member: 'B', score: 10, tiebreak: 5, position: 2 },
      { member: 'a', score: 10, tiebreak: 5, position: 3 },
      { member: 'ab', score: 10, tiebreak: 5, position: 4 },
      { member: 'bob', score: 10, tiebreak: 5, position: 5 },
      { member: 'carol', score: 10, tiebreak: 5, position: 6 },
      { member: 'alice', score: 10, tiebreak: 7, position: 7 },
      { member: 'gina', score: 0, tiebreak: -5, position: 8 },
      { member: 'frank', score: -3, tiebreak: 0, position: 9 },
    ]);
    expect(await idx.count(b)).toBe(10);
    expect(await idx.get(b, 'ab')).toEqual({ member: 'ab', score: 10, tiebreak: 5, position: 4 });
    expect(await idx.get(b, 'frank')).toEqual({ member: 'frank', score: -3, tiebreak: 0, position: 9 });
    expect(await idx.get(b, 'dave')).toEqual({ member: 'dave', score: 20, tiebreak: 99, position: 0 });
  });

  it('orders negative tiebreaks and the extreme tiebreaks correctly', async () => {
    const b = board();
    const max = Number.MAX_SAFE_INTEGER;
    await idx.apply(
      [
        up(b, 'm0', 1, 0),
        up(b, 'max', 1, max),
        up(b, 'min', 1, -max),
        up(b, 'm-1', 1, -1),
        up(b, 'm1', 1, 1),
        up(b, 'big', 1, 2 ** 52 + 1),
      ],
      { stream: stream(), partition: 0, nextOffset: 1 },
    );
    expect(await members(b)).toEqual(['min', 'm-1', 'm0', 'm1', 'big', 'max']);
    expect(await idx.get(b, 'max')).toEqual({ member: 'max', score: 1, tiebreak: max, position: 5 });
    expect(await idx.get(b, 'min')).toEqual({ member: 'min', score: 1, tiebreak: -max, position: 0 });
    expect((await idx.get(b, 'big'))?.tiebreak).toBe(2 ** 52 + 1);
  });

  it('pages with range and answers absent members, boards and pages', async () => {
    const b = board();
    await idx.apply(
      Array.from({ length: 25 }, (_, i) => up(b, `u${String(i).padStart(2, '0')}`, 100 - i)),
      { stream: stream(), partition: 0, nextOffset: 1 },
    );
    const page = await idx.range(b, 10, 5);
    expect(page.map((e) => [e.member, e.position, e.score])).toEqual([
      ['u10', 10, 90],
      ['u11', 11, 89],
      ['u12', 12, 88],
      ['u13', 13, 87],
      ['u14', 14, 86],
    ]);
    expect((await idx.range(b, 23, 10)).map((e) => e.member)).toEqual(['u23', 'u24']);
    expect(await idx.range(b, 25, 10)).toEqual([]);
    expect(await idx.range(b, 3, 0)).toEqual([]);
    expect(await idx.get(b, 'nobody')).toBeNull();
    expect(await idx.get('t1:no-such-board', 'u01')).toBeNull();
    expect(await idx.range('t1:no-such-board', 0, 10)).toEqual([]);
    expect(await idx.count('t1:no-such-board')).toBe(0);
    await expect(idx.range(b, -1, 5)).rejects.toThrow(/offset/);
    await expect(idx.range(b, 0, -5)).rejects.toThrow(/limit/);
    await expect(idx.range(b, 0.5, 5)).rejects.toThrow(/offset/);
  });

  it('reads a page with the board size, and the page centred on a member, as range, count and get do', async () => {
    const b = board();
    await idx.apply(
      Array.from({ length: 25 }, (_, i) => up(b, `u${String(i).padStart(2, '0')}`, 100 - i)),
      { stream: stream(), partition: 0, nextOffset: 1 },
    );
    const members = (es: Array<{ member: string; position: number }>) =>
      es.map((e) => `${e.position}:${e.member}`);
    for (const [offset, limit] of [
      [0, 10],
      [20, 10],
      [25, 3],
      [7, 0],
    ] as const) {
      const p = await idx.page(b, offset, limit);
      expect(p.total).toBe(25);
      expect(p.offset).toBe(offset);
      expect(members(p.entries)).toEqual(members(await idx.range(b, offset, limit)));
    }
    // Centred: the member in the middle (the lower middle for an even limit), a full page near
    // either end, the top when the member is absent; offsets written out by hand.
    for (const [member, limit, offset] of [
      ['u12', 5, 10],
      ['u12', 4, 10],
      ['u00', 5, 0],
      ['u01', 5, 0],
      ['u24', 5, 20],
      ['u23', 21, 4],
      ['u10', 30, 0],
      ['nobody', 5, 0],
    ] as const) {
      const p = await idx.around(b, member, limit);
      expect([member, p.offset]).toEqual([member, offset]);
      expect(p.total).toBe(25);
      expect(p.me).toEqual(await idx.get(b, member));
      expect(members(p.entries)).toEqual(members(await idx.range(b, offset, limit)));
    }
    const u12 = await idx.around(b, 'u12', 5);
    expect(u12.me).toEqual({ member: 'u12', score: 88, tiebreak: 0, position: 12 });
    expect(u12.entries.map((e) => e.score)).toEqual([90, 89, 88, 87, 86]);
    expect(await idx.page('t1:no-such-board', 0, 10)).toEqual({ entries: [], total: 0, offset: 0 });
    expect(await idx.around('t1:no-such-board', 'u01', 10)).toEqual({
      me: null,
      entries: [],
      total: 0,
      offset: 0,
    });
    await expect(idx.page(b, -1, 5)).rejects.toThrow(/offset/);
    await expect(idx.around(b, 'u01', -5)).rejects.toThrow(/limit/);
    await expect(idx.around(b, '', 5)).rejects.toThrow();
  });

  it('answers many reads issued in the same turn each with its own result (Redis: auto-pipelined)', async () => {
    const boards = Array.from({ length: 5 }, () => board());
    for (const [k, b] of boards.entries())
      await idx.apply(
        Array.from({ length: 10 }, (_, i) => up(b, `m${i}`, (k + 1) * 100 - i)),
        { stream: stream(), partition: 0, nextOffset: 1 },
      );
    // All issued before any answer arrives; one of them fails validation, the others must not.
    const gets = boards.flatMap((b) => Array.from({ length: 10 }, (_, i) => idx.get(b, `m${i}`)));
    const pages = boards.map((b) => idx.page(b, 2, 3));
    const arounds = boards.map((b, k) => idx.around(b, `m${k}`, 3));
    const bad = idx.range(boards[0]!, -1, 3).then(
      () => 'answered',
      (err: Error) => err.message,
    );
    const counts = boards.map((b) => idx.count(b));
    const [g, p, a, c] = await Promise.all([
      Promise.all(gets),
      Promise.all(pages),
      Promise.all(arounds),
      Promise.all(counts),
    ]);
    expect(await bad).toMatch(/offset/);
    for (const [k] of boards.entries()) {
      for (let i = 0; i < 10; i++)
        expect(g[k * 10 + i]).toEqual({
          member: `m${i}`,
          score: (k + 1) * 100 - i,
          tiebreak: 0,
          position: i,
        });
      expect(p[k]!.entries.map((e) => e.score)).toEqual([
        (k + 1) * 100 - 2,
        (k + 1) * 100 - 3,
        (k + 1) * 100 - 4,
      ]);
      expect(a[k]!.me?.position).toBe(k);
      expect(a[k]!.offset).toBe(Math.max(0, k - 1));
      expect(c[k]).toBe(10);
    }
  });

  it('upserts: a new score or tiebreak moves the member, count stays', async () => {
    const b = board();
    const s = stream();
    await idx.apply([up(b, 'a', 3), up(b, 'b', 2), up(b, 'c', 1)], {
      stream: s,
      partition: 0,
      nextOffset: 1,
    });
    await idx.apply([up(b, 'c', 5)], { stream: s, partition: 0, nextOffset: 2 });
    expect(await members(b)).toEqual(['c', 'a', 'b']);
    await idx.apply([up(b, 'c', 0)], { stream: s, partition: 0, nextOffset: 3 });
    expect(await members(b)).toEqual(['a', 'b', 'c']);
    // Same score as 'a', earlier tiebreak: ahead of it.
    await idx.apply([up(b, 'a', 3, 10), up(b, 'b', 3, 4)], { stream: s, partition: 0, nextOffset: 4 });
    expect(await members(b)).toEqual(['b', 'a', 'c']);
    // Only the tiebreak changes.
    await idx.apply([up(b, 'b', 3, 11)], { stream: s, partition: 0, nextOffset: 5 });
    expect(await idx.range(b, 0, 10)).toEqual([
      { member: 'a', score: 3, tiebreak: 10, position: 0 },
      { member: 'b', score: 3, tiebreak: 11, position: 1 },
      { member: 'c', score: 0, tiebreak: 0, position: 2 },
    ]);
    expect(await idx.count(b)).toBe(3);
  });

  it('applies the same member twice in one batch as the last one, across several boards', async () => {
    const b1 = board();
    const b2 = board();
    await idx.apply(
      [up(b1, 'x', 1, 1), up(b2, 'x', 7, 7), up(b1, 'y', 2), up(b1, 'x', 9, 3), up(b2, 'z', 8)],
      {
        stream: stream(),
        partition: 0,
        nextOffset: 1,
      },
    );
    expect(await idx.range(b1, 0, 10)).toEqual([
      { member: 'x', score: 9, tiebreak: 3, position: 0 },
      { member: 'y', score: 2, tiebreak: 0, position: 1 },
    ]);
    expect(await idx.range(b2, 0, 10)).toEqual([
      { member: 'z', score: 8, tiebreak: 0, position: 0 },
      { member: 'x', score: 7, tiebreak: 7, position: 1 },
    ]);
  });

  it('applies with the watermark: a replay returns false and changes nothing; a newer offset applies', async () => {
    const b = board();
    const s = stream();
    expect(await idx.watermark(s, 0)).toBeNull();
    expect(await idx.apply([up(b, 'a', 1), up(b, 'b', 2)], { stream: s, partition: 0, nextOffset: 10 })).toBe(
      true,
    );
    expect(await idx.watermark(s, 0)).toBe(10);
    // Same offset: a replay, even with different content.
    expect(
      await idx.apply([up(b, 'a', 50), up(b, 'c', 3)], { stream: s, partition: 0, nextOffset: 10 }),
    ).toBe(false);
    // Older offset: also a replay.
    expect(await idx.apply([up(b, 'a', 60)], { stream: s, partition: 0, nextOffset: 4 })).toBe(false);
    expect(await idx.range(b, 0, 10)).toEqual([
      { member: 'b', score: 2, tiebreak: 0, position: 0 },
      { member: 'a', score: 1, tiebreak: 0, position: 1 },
    ]);
    expect(await idx.watermark(s, 0)).toBe(10);
    expect(await idx.apply([up(b, 'a', 50)], { stream: s, partition: 0, nextOffset: 11 })).toBe(true);
    expect(await idx.watermark(s, 0)).toBe(11);
    expect(await idx.get(b, 'a')).toEqual({ member: 'a', score: 50, tiebreak: 0, position: 0 });
    // An empty batch still moves the watermark (a batch with nothing to rank).
    expect(await idx.apply([], { stream: s, partition: 0, nextOffset: 20 })).toBe(true);
    expect(await idx.watermark(s, 0)).toBe(20);
    expect(await idx.apply([], { stream: s, partition: 0, nextOffset: 20 })).toBe(false);
    // Offsets up to 2^53 - 1 are kept exactly.
    expect(await idx.apply([], { stream: s, partition: 0, nextOffset: Number.MAX_SAFE_INTEGER })).toBe(true);
    expect(await idx.watermark(s, 0)).toBe(Number.MAX_SAFE_INTEGER);
    expect(
      await idx.apply([up(b, 'a', 1)], { stream: s, partition: 0, nextOffset: Number.MAX_SAFE_INTEGER - 1 }),
    ).toBe(false);
  });

  it('applyAfter: applies nothing and answers lost without a watermark; else as apply (replay, applied)', async () => {
    const b = board();
    const s = stream();
    // No watermark (the index lost the partition's state, or never had it): nothing is applied.
    expect(await idx.applyAfter([up(b, 'a', 1)], { stream: s, partition: 2, nextOffset: 10 })).toBe('lost');
    expect(await idx.watermark(s, 2)).toBeNull();
    expect(await idx.count(b)).toBe(0);
    expect(await idx.apply([up(b, 'a', 1)], { stream: s, partition: 2, nextOffset: 10 })).toBe(true);
    // Another partition's watermark does not count.
    expect(await idx.applyAfter([up(b, 'x', 9)], { stream: s, partition: 3, nextOffset: 11 })).toBe('lost');
    expect(await idx.applyAfter([up(b, 'a', 7)], { stream: s, partition: 2, nextOffset: 10 })).toBe('replay');
    expect(
      await idx.applyAfter([up(b, 'a', 5), up(b, 'c', 3)], { stream: s, partition: 2, nextOffset: 12 }),
    ).toBe('applied');
    expect(await idx.watermark(s, 2)).toBe(12);
    expect(await idx.range(b, 0, 10)).toEqual([
      { member: 'a', score: 5, tiebreak: 0, position: 0 },
      { member: 'c', score: 3, tiebreak: 0, position: 1 },
    ]);
    // Invalid input is refused before anything runs, as in apply.
    await expect(
      idx.applyAfter([up(b, 'a', Number.NaN)], { stream: s, partition: 2, nextOffset: 13 }),
    ).rejects.toThrow();
    expect(await idx.watermark(s, 2)).toBe(12);
  });

  it('keeps one watermark per (stream, partition), independent of the others', async () => {
    const b = board();
    const s = stream();
    const other = `${s}:other`;
    await idx.apply([up(b, 'a', 1)], { stream: s, partition: 0, nextOffset: 100 });
    expect(await idx.watermark(s, 1)).toBeNull();
    expect(await idx.watermark(other, 0)).toBeNull();
    expect(await idx.apply([up(b, 'b', 2)], { stream: s, partition: 1, nextOffset: 5 })).toBe(true);
    expect(await idx.apply([up(b, 'c', 3)], { stream: other, partition: 0, nextOffset: 7 })).toBe(true);
    // Streams whose names would collide if keys were joined naively with ':'.
    expect(await idx.apply([up(b, 'd', 4)], { stream: '1:x', partition: 2, nextOffset: 3 })).toBe(true);
    expect(await idx.watermark('2:1:x', 0)).toBeNull();
    expect(await idx.watermark('x', 12)).toBeNull();
    expect(await idx.watermark(s, 0)).toBe(100);
    expect(await idx.watermark(s, 1)).toBe(5);
    expect(await idx.watermark(other, 0)).toBe(7);
    expect(await idx.watermark('1:x', 2)).toBe(3);
    expect(await members(b)).toEqual(['d', 'c', 'b', 'a']);
  });

  it('lets exactly one of many concurrent applies of the same offset win', async () => {
    const b = board();
    const s = stream();
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        idx.apply([up(b, `m${i}`, i)], { stream: s, partition: 3, nextOffset: 42 }),
      ),
    );
    expect(results.filter(Boolean)).toHaveLength(1);
    const winner = results.indexOf(true);
    expect(await members(b)).toEqual([`m${winner}`]);
    expect(await idx.watermark(s, 3)).toBe(42);
  });

  it('rejects a batch with any invalid update and changes nothing (all or none)', async () => {
    const b = board();
    const s = stream();
    await idx.apply([up(b, 'a', 1)], { stream: s, partition: 0, nextOffset: 1 });
    const bad: Array<[RankUpdate, RegExp]> = [
      [up(b, 'x', NaN), /score/],
      [up(b, 'x', Infinity), /score/],
      [up(b, 'x', 1, 1.5), /tiebreak/],
      [up(b, 'x', 1, 2 ** 53), /tiebreak/],
      [up(b, 'x', 1, -(2 ** 53)), /tiebreak/],
      [up(b, '', 1), /member/],
      [up(b, '\uD800x', 1), /member/],
      [up(b, 'é'.repeat(257), 1), /member/],
      [up('', 'x', 1), /board/],
      [{ board: b, member: 7, score: 1, tiebreak: 0 } as unknown as RankUpdate, /member/],
      [{ board: b, member: 'x', score: '1', tiebreak: 0 } as unknown as RankUpdate, /score/],
    ];
    for (const [u, msg] of bad) {
      await expect(idx.apply([up(b, 'y', 5), u], { stream: s, partition: 0, nextOffset: 2 })).rejects.toThrow(
        msg,
      );
    }
    await expect(idx.apply([up(b, 'y', 5)], { stream: s, partition: -1, nextOffset: 2 })).rejects.toThrow(
      /partition/,
    );
    await expect(idx.apply([up(b, 'y', 5)], { stream: s, partition: 0, nextOffset: 2.5 })).rejects.toThrow(
      /nextOffset/,
    );
    await expect(idx.apply([up(b, 'y', 5)], { stream: '', partition: 0, nextOffset: 2 })).rejects.toThrow(
      /stream/,
    );
    expect(await idx.range(b, 0, 10)).toEqual([{ member: 'a', score: 1, tiebreak: 0, position: 0 }]);
    expect(await idx.watermark(s, 0)).toBe(1);
    // The longest allowed member (512 UTF-8 bytes) is accepted.
    const longest = 'é'.repeat(256);
    expect(await idx.apply([up(b, longest, 2)], { stream: s, partition: 0, nextOffset: 2 })).toBe(true);
    expect(await idx.get(b, longest)).toEqual({ member: longest, score: 2, tiebreak: 0, position: 0 });
  });

  it('keeps negative, fractional, huge and tiny scores exact', async () => {
    const b = board();
    const scores: Record<string, number> = {
      big: 2 ** 53,
      bigMinus: 2 ** 53 - 1,
      neg: -(2 ** 53),
      third: 1 / 3,
      sum: 0.1 + 0.2,
      tenth: 0.3,
      negFrac: -2.5,
      zero: -0,
      huge: 1.7976931348623157e308,
      negHuge: -1.7976931348623157e308,
      tiny: 5e-324,
      negTiny: -5e-324,
    };
    await idx.apply(
      Object.entries(scores).map(([m, sc]) => up(b, m, sc)),
      { stream: stream(), partition: 0, nextOffset: 1 },
    );
    const got = await idx.range(b, 0, 100);
    expect(got.map((e) => e.member)).toEqual([
      'huge',
      'big',
      'bigMinus',
      'third',
      'sum',
      'tenth',
      'tiny',
      'zero',
      'negTiny',
      'negFrac',
      'neg',
      'negHuge',
    ]);
    for (const e of got) expect(Object.is(e.score, scores[e.member] === 0 ? 0 : scores[e.member])).toBe(true);
    // Pages (on Redis packed into one string per page) read the same scores, bit for bit.
    const page = await idx.page(b, 0, 100);
    expect(page.entries).toEqual(got);
    for (const e of page.entries) expect(Object.is(e.score, got[e.position]!.score)).toBe(true);
    expect((await idx.around(b, 'zero', 3)).entries).toEqual(got.slice(6, 9));
    expect(Object.is((await idx.get(b, 'zero'))?.score, 0)).toBe(true);
    expect((await idx.get(b, 'sum'))?.score).toBe(0.30000000000000004);
    expect((await idx.get(b, 'bigMinus'))?.score).toBe(9007199254740991);
  });

  it('removes members (absent ones ignored) and drops boards', async () => {
    const b = board();
    const other = board();
    const s = stream();
    await idx.apply([up(b, 'a', 5), up(b, 'b', 4), up(b, 'c', 3), up(b, 'd', 2), up(other, 'a', 1)], {
      stream: s,
      partition: 0,
      nextOffset: 1,
    });
    await idx.remove(b, ['b', 'nobody', 'd']);
    expect(await idx.range(b, 0, 10)).toEqual([
      { member: 'a', score: 5, tiebreak: 0, position: 0 },
      { member: 'c', score: 3, tiebreak: 0, position: 1 },
    ]);
    expect(await idx.get(b, 'b')).toBeNull();
    expect(await idx.count(b)).toBe(2);
    await idx.remove(b, []);
    await idx.remove('t1:no-such-board', ['a']);
    // A removed member comes back as new.
    await idx.apply([up(b, 'b', 10)], { stream: s, partition: 0, nextOffset: 2 });
    expect(await members(b)).toEqual(['b', 'a', 'c']);
    await idx.remove(b, ['a', 'b', 'c']);
    expect(await idx.count(b)).toBe(0);
    expect(await idx.range(b, 0, 10)).toEqual([]);
    await idx.apply([up(b, 'z', 1)], { stream: s, partition: 0, nextOffset: 3 });
    await idx.dropBoard(b);
    expect(await idx.count(b)).toBe(0);
    expect(await idx.get(b, 'z')).toBeNull();
    await idx.dropBoard(b);
    // Other boards and the watermark are untouched.
    expect(await idx.range(other, 0, 10)).toEqual([{ member: 'a', score: 1, tiebreak: 0, position: 0 }]);
    expect(await idx.watermark(s, 0)).toBe(3);
    await expect(idx.remove(b, [''])).rejects.toThrow(/member/);
  });

  it('loads a board: replaces the content, later duplicates win, empty load empties it', async () => {
    const b = board();
    const s = stream();
    await idx.apply([up(b, 'old1', 100), up(b, 'old2', 50)], { stream: s, partition: 0, nextOffset: 1 });
    await idx.load(b, [
      { member: 'p', score: 3, tiebreak: 2 },
      { member: 'q', score: 3, tiebreak: 1 },
      { member: 'r', score: 9, tiebreak: 0 },
      { member: 'p', score: 1, tiebreak: 0 },
    ]);
    expect(await idx.range(b, 0, 10)).toEqual([
      { member: 'r', score: 9, tiebreak: 0, position: 0 },
      { member: 'q', score: 3, tiebreak: 1, position: 1 },
      { member: 'p', score: 1, tiebreak: 0, position: 2 },
    ]);
    expect(await idx.get(b, 'old1')).toBeNull();
    expect(await idx.count(b)).toBe(3);
    // Keeps working as a normal board after a load; the watermark is not part of a load.
    expect(await idx.watermark(s, 0)).toBe(1);
    await idx.apply([up(b, 'p', 10)], { stream: s, partition: 0, nextOffset: 2 });
    expect(await members(b)).toEqual(['p', 'r', 'q']);
    await idx.load(b, []);
    expect(await idx.count(b)).toBe(0);
    expect(await idx.range(b, 0, 10)).toEqual([]);
    // Invalid input changes nothing.
    await idx.load(b, [{ member: 'k', score: 1, tiebreak: 0 }]);
    await expect(
      idx.load(b, [
        { member: 'j', score: 2, tiebreak: 0 },
        { member: 'bad', score: NaN, tiebreak: 0 },
      ]),
    ).rejects.toThrow(/score/);
    expect(await members(b)).toEqual(['k']);
  });

  it('round-trips hostile member ids and orders them by UTF-8 bytes', async () => {
    const b = board();
    const hostile = [
      ':',
      '::',
      'a:b',
      '{',
      '}',
      '{x}',
      '\u0000',
      'a\u0000b',
      'a',
      '\n',
      ' ',
      "'; DROP TABLE x; --",
      '\\',
      '0000000000000000:x',
      '20000000000000:evil',
      '\uFFFD',
      '\uE000',
      '\u{1F600}',
      '\u{10FFFF}',
      'é',
      'e\u0301',
      'ÿ',
      '*',
      '?',
      '[a-z]',
    ];
    await idx.apply(
      hostile.map((m) => up(b, m, 7, 3)),
      { stream: stream(), partition: 0, nextOffset: 1 },
    );
    const expected = [...hostile].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)));
    // Spot checks of the reference itself: U+FFFD (EF BF BD) sorts before U+1F600 (F0 9F ...),
    // although JavaScript's code-unit order says the opposite.
    expect(expected.indexOf('\uFFFD')).toBeLessThan(expected.indexOf('\u{1F600}'));
    expect('\u{1F600}' < '\uFFFD').toBe(true);
    expect(await members(b)).toEqual(expected);
    for (const [i, m] of expected.entries())
      expect(await idx.get(b, m)).toEqual({ member: m, score: 7, tiebreak: 3, position: i });
    // Pages and around-user pages (on Redis packed with byte lengths: spaces, NUL, multi-byte ids).
    const all = await idx.range(b, 0, hostile.length);
    expect((await idx.page(b, 0, hostile.length)).entries).toEqual(all);
    for (const [off, lim] of [
      [1, 3],
      [5, 10],
      [hostile.length - 2, 5],
    ] as const)
      expect((await idx.page(b, off, lim)).entries).toEqual(all.slice(off, off + lim));
    for (const m of ['\u0000', ' ', '\n', '\u{1F600}', 'e\u0301', '0000000000000000:x']) {
      const a = await idx.around(b, m, 5);
      expect(a.me).toEqual(await idx.get(b, m));
      expect(a.entries).toEqual(all.slice(a.offset, a.offset + 5));
    }
    await idx.remove(b, ['\u0000', '}', '\u{1F600}']);
    expect(await members(b)).toEqual(expected.filter((m) => !['\u0000', '}', '\u{1F600}'].includes(m)));
  });

  it('keeps hostile board names apart', async () => {
    const s = stream();
    const boards = [
      't9:{x}',
      't9:{x',
      't9:x}',
      't9:x}:z',
      't9:x',
      't9:x:h',
      't9:x}:h',
      't9:\u{1F600}',
      't9:a b',
    ];
    await idx.apply(
      boards.map((bd, i) => up(bd, 'm', i)),
      { stream: s, partition: 0, nextOffset: 1 },
    );
    for (const [i, bd] of boards.entries()) {
      expect(await idx.range(bd, 0, 10)).toEqual([{ member: 'm', score: i, tiebreak: 0, position: 0 }]);
      expect(await idx.count(bd)).toBe(1);
    }
    await idx.dropBoard('t9:x');
    expect(await idx.count('t9:x')).toBe(0);
    expect(await idx.count('t9:x}')).toBe(1);
    expect(await idx.count('t9:x:h')).toBe(1);
    for (const bd of boards) await idx.dropBoard(bd);
  });

  it('matches a sorted reference at every position on a 20k-member board', async () => {
    const b = board();
    const s = stream();
    const r = rng(20_000);
    const ref = new Map<string, RankEntry>();
    const alphabet = ['a', 'b', 'é', '\u{1F600}', ':', 'Z', '0', '\uFFFD'];
    const randomMember = () => {
      let m = '';
      const len = 1 + Math.floor(r() * 6);
      for (let i = 0; i < len; i++) m += alphabet[Math.floor(r() * alphabet.length)];
      return m;
    };
    // Few distinct scores and tiebreaks: many ties on both, so the member rule does real work.
    const randomEntry = (member: string): RankEntry => ({
      member,
      score: Math.floor(r() * 40) - 10 + (r() < 0.2 ? 0.5 : 0),
      tiebreak: Math.floor(r() * 5),
    });
    let offset = 0;
    const applyBatch = async (ups: RankUpdate[]) => {
      for (let i = 0; i < ups.length; i += 2000) {
        expect(
          await idx.apply(ups.slice(i, i + 2000), { stream: s, partition: 0, nextOffset: ++offset }),
        ).toBe(true);
      }
    };
    const check = async () => {
      const sorted = [...ref.values()].sort(refCompare);
      expect(await idx.count(b)).toBe(sorted.length);
      const got: RankEntry[] = [];
      for (let off = 0; off < sorted.length; off += 5000) {
        const page = await idx.range(b, off, 5000);
        page.forEach((e, i) => {
          if (e.position !== off + i) throw new Error(`position ${e.position} at ${off + i}`);
        });
        got.push(...page.map(({ member, score, tiebreak }) => ({ member, score, tiebreak })));
      }
      expect(got.length).toBe(sorted.length);
      const firstDiff = got.findIndex(
        (e, i) =>
          e.member !== sorted[i].member || e.score !== sorted[i].score || e.tiebreak !== sorted[i].tiebreak,
      );
      expect(firstDiff).toBe(-1);
      // Pages (packed on Redis) agree with range at a few offsets, the last one past the end.
      for (const off of [0, 4_321, sorted.length - 50])
        expect((await idx.page(b, off, 100)).entries).toEqual(await idx.range(b, off, 100));
      // get() of a sample agrees with the reference position.
      const sample = Array.from({ length: 300 }, () => Math.floor(r() * sorted.length));
      const gets = await Promise.all(sample.map((i) => idx.get(b, sorted[i].member)));
      gets.forEach((g, k) => expect(g).toEqual({ ...sorted[sample[k]], position: sample[k] }));
      // countAbove: members with a strictly greater score, for present, absent and extreme scores.
      const probes = [...new Set(sorted.map((e) => e.score))].concat([-1e9, 1e9, 0.25, -10.5]);
      const counts = await Promise.all(probes.map((p) => idx.countAbove(b, p)));
      probes.forEach((p, k) => expect([p, counts[k]]).toEqual([p, sorted.filter((e) => e.score > p).length]));
    };

    const ups: RankUpdate[] = [];
    while (ref.size < 20_000) {
      const e = randomEntry(randomMember() + String(ref.size % 97));
      ref.set(e.member, e);
      ups.push({ board: b, ...e });
    }
    await applyBatch(ups);
    await check();

    // Move 3000 existing members, add 500 new ones, remove 1000.
    const keys = [...ref.keys()];
    const moves: RankUpdate[] = [];
    for (let i = 0; i < 3000; i++) {
      const e = randomEntry(keys[Math.floor(r() * keys.length)]);
      ref.set(e.member, e);
      moves.push({ board: b, ...e });
    }
    for (let i = 0; i < 500; i++) {
      const e = randomEntry(`new-${i}-${randomMember()}`);
      ref.set(e.member, e);
      moves.push({ board: b, ...e });
    }
    await applyBatch(moves);
    const gone = [...ref.keys()].filter(() => r() < 0.05);
    await idx.remove(b, gone);
    for (const m of gone) ref.delete(m);
    await check();

    // The same content through load() gives the same board.
    const b2 = board();
    await idx.load(b2, [...ref.values()].reverse());
    const a1 = await idx.range(b, 0, 30_000);
    const a2 = await idx.range(b2, 0, 30_000);
    expect(a2.length).toBe(a1.length);
    expect(a2.findIndex((e, i) => e.member !== a1[i].member || e.position !== a1[i].position)).toBe(-1);
  });
});

describe('RedisRankIndex: packed pages', () => {
  /** One entry as the scripts' PACK frames it: two bytes of length (or `len`), then the bytes. */
  const framed = (body: string, len = Buffer.byteLength(body)) =>
    Buffer.concat([Buffer.from([len >> 8, len & 255]), Buffer.from(body)]);
  /** A page as PACK makes it: the encoded members framed, back to back. */
  const pack = (encoded: string[]) => Buffer.concat(encoded.map((e) => framed(e)));

  it('reads entries back from their byte lengths, whatever bytes a member id holds', () => {
    const es = [
      { member: 'a b', score: 7, tiebreak: 3 },
      { member: '\u0000 \u{1F600} 5 x', score: -0.5, tiebreak: -(2 ** 53 - 1) },
      { member: 'é', score: -1e300, tiebreak: 0 },
      { member: ':', score: 2 ** 53, tiebreak: 2 ** 53 - 1 },
      { member: 'x', score: 0, tiebreak: -1 },
    ];
    const packed = pack(es.map((e) => encodeMember(e.score, e.tiebreak, e.member)));
    expect(unpack(packed, 10)).toEqual(es.map((e, i) => ({ ...e, position: 10 + i })));
    expect(unpack(Buffer.alloc(0), 0)).toEqual([]);
  });

  it('reads 10,000 random tiebreaks and scores back exactly', () => {
    const r = rng(53);
    const tbs = Array.from({ length: 10_000 }, (_, i) => {
      const v = Math.floor(r() * 2 ** 26) * 2 ** 27 + Math.floor(r() * 2 ** 27);
      return i % 2 ? -v : v;
    });
    // Scores of every magnitude and sign, fractions included (the bits go through hex, not text).
    const scores = tbs.map((tb, i) => (i % 3 ? tb / 3 : (r() - 0.5) * 10 ** Math.floor(r() * 600 - 300)));
    const back = unpack(pack(tbs.map((tb, i) => encodeMember(scores[i]!, tb, 'm'))), 0);
    expect(back.map((e) => e.tiebreak)).toEqual(tbs.map((tb) => (tb === 0 ? 0 : tb)));
    expect(back.map((e) => e.score)).toEqual(scores.map((s) => (s === 0 ? 0 : s)));
  });

  it('stores -0 as 0, so equal scores always share the member prefix that orders them', () => {
    expect(encodeMember(-0, 5, 'm')).toBe(encodeMember(0, 5, 'm'));
    expect(Object.is(unpack(pack([encodeMember(-0, 0, 'm')]), 0)[0]!.score, 0)).toBe(true);
  });

  it('refuses a malformed packed page instead of misreading it', () => {
    const good = encodeMember(1, 0, 'a'); // 16 + 14 + ':' + 'a'
    expect(unpack(framed(good), 0)).toEqual([{ member: 'a', score: 1, tiebreak: 0, position: 0 }]);
    for (const bad of [
      Buffer.from([0]), // a length cut short
      framed(good, good.length + 1), // longer than the page
      framed(good.slice(0, 30)), // shorter than the prefix
      framed(good.replace(':', ';')),
      framed('g' + good.slice(1)), // not hex
      framed(good.slice(0, 16).toUpperCase() + good.slice(16)),
      framed('7ff0000000000000' + good.slice(16)), // an infinite score
      framed('7ff8000000000000' + good.slice(16)), // NaN
      Buffer.concat([framed(good), Buffer.from([0])]), // a trailing byte
    ])
      expect(() => unpack(bad, 0)).toThrow(/malformed/);
  });
});

describe('RedisRankIndex: key layout 2', () => {
  it('reads nothing of layout 1, so an upgraded deployment rebuilds from SQL', async () => {
    const r = new Redis(stack.redisUrl);
    const idx = new RedisRankIndex({ redis: stack.redisUrl, prefix });
    try {
      // What layout 1 left: a watermark, and a board whose members carry no score.
      await r.set(`${prefix}wm:0:upgrade`, '42');
      await r.zadd(`${prefix}{t1:up:w}:z`, '-5', `20000000000000:alice`);
      await r.hset(`${prefix}{t1:up:w}:h`, 'alice', '20000000000000:alice');
      // No watermark: the pipeline's rank sync treats the partition as lost and rebuilds it.
      expect(await idx.watermark('upgrade', 0)).toBeNull();
      expect(await idx.applyAfter([], { stream: 'upgrade', partition: 0, nextOffset: 43 })).toBe('lost');
      expect(await idx.get('t1:up:w', 'alice')).toBeNull();
      expect(await idx.count('t1:up:w')).toBe(0);
      await idx.load('t1:up:w', [{ member: 'alice', score: 5, tiebreak: 0 }]);
      expect(await idx.get('t1:up:w', 'alice')).toEqual({
        member: 'alice',
        score: 5,
        tiebreak: 0,
        position: 0,
      });
      // The keys are the ones rankKeys names, and a member starts with its score's 64 bits.
      const keys = rankKeys(prefix);
      expect(await r.zrange(keys.zset('t1:up:w'), '0', '-1')).toEqual([encodeMember(5, 0, 'alice')]);
      expect(encodeMember(5, 0, 'alice').slice(0, 16)).toBe('4014000000000000');
    } finally {
      await idx.close();
      await r.quit();
    }
  });
});
