import { ReadThroughCache } from './read-through-cache';

/** A load whose answers the test releases by hand, counting its calls. */
function gate<V>() {
  const pending: Array<{ resolve: (v: V | null) => void; reject: (e: Error) => void }> = [];
  const load = jest.fn(
    () =>
      new Promise<V | null>((resolve, reject) => {
        pending.push({ resolve, reject });
      }),
  );
  return { load, pending };
}

const flush = () => new Promise((r) => setImmediate(r));

describe('ReadThroughCache', () => {
  let t: number;
  const now = () => t;
  beforeEach(() => {
    t = 1_000_000;
  });

  it('serves a fresh entry without reading, and reads again once it is ttlMs old', async () => {
    const c = new ReadThroughCache<string>({ now, ttlMs: 1000, maxEntries: 10 });
    let n = 0;
    const load = jest.fn(async () => `v${++n}`);
    expect(await c.get('k', load)).toBe('v1');
    t += 200; // under a quarter of the TTL: no background read
    expect(await c.get('k', load)).toBe('v1');
    expect(load).toHaveBeenCalledTimes(1);
    t += 800; // 1000 ms old: too old to serve, the request waits for the read
    expect(await c.get('k', load)).toBe('v2');
    expect(load).toHaveBeenCalledTimes(2);
  });

  it('renews an entry older than a quarter of the TTL in the background and answers from the entry meanwhile', async () => {
    const c = new ReadThroughCache<string>({ now, ttlMs: 1000, maxEntries: 10 });
    const g = gate<string>();
    const first = c.get('k', g.load);
    g.pending[0]!.resolve('old');
    expect(await first).toBe('old');
    t += 600;
    // Answered at once from the entry, while one background read starts (and only one).
    expect(await c.get('k', g.load)).toBe('old');
    expect(await c.get('k', g.load)).toBe('old');
    expect(g.load).toHaveBeenCalledTimes(2);
    g.pending[1]!.resolve('new');
    await flush();
    // The renewed entry counts its age from the start of its read (t + 600): fresh until t + 1600.
    t += 900;
    expect(await c.get('k', g.load)).toBe('new');
    t += 100; // exactly ttlMs after the read started: no longer served
    const waited = c.get('k', g.load);
    expect(g.load).toHaveBeenCalledTimes(3);
    g.pending[2]!.resolve('newest');
    expect(await waited).toBe('newest');
  });

  it('a failed background read leaves the entry serving until it runs out, then the next request reads', async () => {
    const c = new ReadThroughCache<string>({ now, ttlMs: 1000, maxEntries: 10 });
    const g = gate<string>();
    const first = c.get('k', g.load);
    g.pending[0]!.resolve('v');
    await first;
    t += 700;
    expect(await c.get('k', g.load)).toBe('v');
    g.pending[1]!.reject(new Error('store down'));
    await flush();
    expect(await c.get('k', g.load)).toBe('v'); // a new background read (the failed one is gone)
    expect(g.load).toHaveBeenCalledTimes(3);
    g.pending[2]!.reject(new Error('store down'));
    await flush();
    t += 300;
    const waited = c.get('k', g.load);
    g.pending[3]!.reject(new Error('still down'));
    await expect(waited).rejects.toThrow('still down');
  });

  it('shares one read among concurrent misses', async () => {
    const c = new ReadThroughCache<string>({ now, ttlMs: 1000, maxEntries: 10 });
    const g = gate<string>();
    const a = c.get('k', g.load);
    const b = c.get('k', g.load);
    expect(g.load).toHaveBeenCalledTimes(1);
    g.pending[0]!.resolve('v');
    expect(await Promise.all([a, b])).toEqual(['v', 'v']);
  });

  it('forget drops the entry and the read in flight; that read is not remembered', async () => {
    const c = new ReadThroughCache<string>({ now, ttlMs: 1000, maxEntries: 10 });
    const g = gate<string>();
    const stale = c.get('k', g.load);
    c.forget('k');
    const fresh = c.get('k', g.load);
    expect(g.load).toHaveBeenCalledTimes(2);
    g.pending[1]!.resolve('after');
    g.pending[0]!.resolve('before');
    expect(await stale).toBe('before');
    expect(await fresh).toBe('after');
    expect(await c.get('k', g.load)).toBe('after');
    expect(g.load).toHaveBeenCalledTimes(2);
    // A background renewal forgotten before it lands is not remembered either.
    t += 600;
    expect(await c.get('k', g.load)).toBe('after');
    c.clear();
    g.pending[2]!.resolve('renewed before the clear');
    await flush();
    const again = c.get('k', g.load);
    expect(g.load).toHaveBeenCalledTimes(4);
    g.pending[3]!.resolve('read after the clear');
    expect(await again).toBe('read after the clear');
  });

  it('remembers null only with cacheMisses', async () => {
    const plain = new ReadThroughCache<string>({ now, ttlMs: 1000, maxEntries: 10 });
    const load = jest.fn(async () => null);
    expect(await plain.get('k', load)).toBeNull();
    expect(await plain.get('k', load)).toBeNull();
    expect(load).toHaveBeenCalledTimes(2);
    const negative = new ReadThroughCache<string>({ now, ttlMs: 1000, maxEntries: 10, cacheMisses: true });
    const load2 = jest.fn(async () => null);
    expect(await negative.get('k', load2)).toBeNull();
    expect(await negative.get('k', load2)).toBeNull();
    expect(load2).toHaveBeenCalledTimes(1);
  });

  it('serves kept values until evicted, with ttlMs 0 too, and reads everything else every time', async () => {
    const c = new ReadThroughCache<{ closed: boolean }>({
      now,
      ttlMs: 0,
      maxEntries: 10,
      keep: (v) => v.closed,
    });
    const closed = jest.fn(async () => ({ closed: true }));
    const open = jest.fn(async () => ({ closed: false }));
    await c.get('a', closed);
    t += 10_000_000;
    await c.get('a', closed);
    expect(closed).toHaveBeenCalledTimes(1);
    await c.get('b', open);
    await c.get('b', open);
    expect(open).toHaveBeenCalledTimes(2);
  });

  it('does not trust an entry from the future (a clock set back)', async () => {
    const c = new ReadThroughCache<string>({ now, ttlMs: 1000, maxEntries: 10 });
    const load = jest.fn(async () => 'v');
    await c.get('k', load);
    t -= 5000;
    await c.get('k', load);
    expect(load).toHaveBeenCalledTimes(2);
  });

  it('clears the map when it is full before a new key goes in', async () => {
    const c = new ReadThroughCache<string>({ now, ttlMs: 1000, maxEntries: 2 });
    const load = jest.fn(async () => 'v');
    await c.get('a', load);
    await c.get('b', load);
    await c.get('c', load); // full: a and b are dropped
    await c.get('c', load);
    await c.get('a', load);
    expect(load).toHaveBeenCalledTimes(4);
  });
});
