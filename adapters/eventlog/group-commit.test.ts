import { GroupCommit } from './group-commit';

/** A flush that waits until released, recording every group it was given. */
function gatedFlush() {
  const groups: string[][] = [];
  const gates: Array<() => void> = [];
  let failNext: Error | undefined;
  const flush = (items: string[]) => {
    groups.push(items);
    const err = failNext;
    failNext = undefined;
    return new Promise<void>((resolve, reject) => gates.push(() => (err ? reject(err) : resolve())));
  };
  return {
    groups,
    flush,
    failNext: (err: Error) => (failNext = err),
    /** Releases the oldest pending flush, then lets the queue move on. */
    release: async () => {
      gates.shift()!();
      await new Promise((r) => setImmediate(r));
    },
  };
}

const settledAs = (p: Promise<void>) =>
  p.then(
    () => 'resolved',
    (err: Error) => `rejected: ${err.message}`,
  );

describe('GroupCommit', () => {
  it('flushes a lone item at once, and merges what arrives during a flush into the next group, in order', async () => {
    const f = gatedFlush();
    const gc = new GroupCommit<string>({ maxBytes: 1000, flush: f.flush });
    const a = gc.submit('a', 10);
    expect(f.groups).toEqual([['a']]);
    const rest = ['b', 'c', 'd'].map((x) => gc.submit(x, 10));
    expect(f.groups).toHaveLength(1);
    await f.release();
    await a;
    expect(f.groups).toEqual([['a'], ['b', 'c', 'd']]);
    await f.release();
    await Promise.all(rest);
    await gc.idle();
  });

  it('keeps a group within maxBytes, and sends an item larger than that alone', async () => {
    const f = gatedFlush();
    const gc = new GroupCommit<string>({ maxBytes: 100, flush: f.flush });
    const all = [gc.submit('first', 1)];
    all.push(
      gc.submit('x1', 40),
      gc.submit('x2', 40),
      gc.submit('x3', 40),
      gc.submit('huge', 500),
      gc.submit('y', 1),
    );
    for (let i = 0; i < 5; i++) await f.release();
    await Promise.all(all);
    expect(f.groups).toEqual([['first'], ['x1', 'x2'], ['x3'], ['huge'], ['y']]);
  });

  it('limits each bin on its own for items sized by bin (the file log: maxBytes per partition)', async () => {
    const f = gatedFlush();
    const gc = new GroupCommit<string>({ maxBytes: 100, flush: f.flush });
    const bins = (entries: Array<[string, number]>) => new Map(entries);
    const all = [gc.submit('first', bins([['p0', 1]]))];
    all.push(
      gc.submit('a', bins([['p0', 60]])),
      gc.submit('b', bins([['p1', 60]])), // another bin: joins a's group
      gc.submit(
        'c',
        bins([
          ['p1', 30],
          ['p2', 90],
        ]),
      ), // p1 at 90, p2 at 90: still fits
      gc.submit('d', bins([['p2', 20]])), // p2 would reach 110: starts the next group
      gc.submit('e', bins([['p0', 100]])),
    );
    for (let i = 0; i < 3; i++) await f.release();
    await Promise.all(all);
    expect(f.groups).toEqual([['first'], ['a', 'b', 'c'], ['d', 'e']]);
  });

  it('rejects every item of a failed group with its error, and the next group goes on', async () => {
    const f = gatedFlush();
    const gc = new GroupCommit<string>({ maxBytes: 1000, flush: f.flush });
    const first = gc.submit('first', 1);
    f.failNext(new Error('broker gone'));
    const failed = [gc.submit('a', 1), gc.submit('b', 1)].map(settledAs);
    await f.release();
    await first;
    const later = gc.submit('later', 1);
    await f.release();
    expect(await Promise.all(failed)).toEqual(['rejected: broker gone', 'rejected: broker gone']);
    expect(f.groups).toEqual([['first'], ['a', 'b'], ['later']]);
    await f.release();
    expect(await settledAs(later)).toBe('resolved');
  });

  it('rejects a bad maxBytes', () => {
    expect(() => new GroupCommit<string>({ maxBytes: 0, flush: async () => undefined })).toThrow(/maxBytes/);
  });

  it('serves 10,000 concurrent submitters with far fewer flushes, each item exactly once', async () => {
    const seen: number[] = [];
    let flushes = 0;
    const gc = new GroupCommit<number>({
      maxBytes: 64 * 1024,
      flush: async (items) => {
        flushes++;
        await new Promise((r) => setTimeout(r, 1));
        seen.push(...items);
      },
    });
    await Promise.all(Array.from({ length: 10_000 }, (_, i) => gc.submit(i, 100)));
    expect(seen).toEqual(Array.from({ length: 10_000 }, (_, i) => i));
    // 64 KiB / 100 B = 655 items per group at most: 16 groups, and the lone first one.
    expect(flushes).toBeLessThanOrEqual(17);
    expect(flushes).toBeGreaterThanOrEqual(16);
  });
});
