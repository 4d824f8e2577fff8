/**
 * Rate-limiter contract: the same suite against Redis (shared across instances) and memory.
 */
import { MemoryRateLimiter } from '../../adapters/ratelimit/memory';
import { RedisRateLimiter } from '../../adapters/ratelimit/redis';
import type { RateLimiter } from '../../adapters/ratelimit/types';
import { stack, uniqueName } from '../support/stack';
import { waitFor } from '../support/wait';

const prefix = `${uniqueName('rl')}:`;
const adapters: Array<[string, () => RateLimiter]> = [
  ['memory', () => new MemoryRateLimiter()],
  ['redis', () => new RedisRateLimiter({ url: stack.redisUrl, prefix })],
];

describe.each(adapters)('RateLimiter contract [%s]', (_name, make) => {
  let rl: RateLimiter;
  beforeAll(() => {
    rl = make();
  });
  afterAll(() => rl.close());

  const T0 = Date.UTC(2026, 10, 22, 12, 0, 0, 0);
  const windows = [
    { limit: 3, windowMs: 1000 },
    { limit: 5, windowMs: 60000 },
  ];

  it('allows up to the limit in a window, then denies without counting the denial', async () => {
    const key = uniqueName('k');
    const seen = [];
    for (let i = 0; i < 4; i++) seen.push(await rl.hit(key, windows, T0 + 10));
    expect(seen.map((d) => d.allowed)).toEqual([true, true, true, false]);
    expect(seen.map((d) => d.remaining)).toEqual([2, 1, 0, 0]);
    expect(seen[3]).toMatchObject({ limit: 3, resetAt: T0 + 1000 });
    // Next second: the per-second window resets (2 left after this hit) but the minute, with 3
    // counted (the denial was not) and this one, has only 1 left: it is the one reported.
    const d = await rl.hit(key, windows, T0 + 1010);
    expect(d).toMatchObject({ allowed: true, limit: 5, remaining: 1, resetAt: T0 + 60000 });
    const d2 = await rl.hit(key, windows, T0 + 1020);
    expect(d2).toMatchObject({ allowed: true, limit: 5, remaining: 0, resetAt: T0 + 60000 });
    const d3 = await rl.hit(key, windows, T0 + 2000);
    expect(d3).toMatchObject({ allowed: false, limit: 5, remaining: 0 });
  });

  it('peeks at a key without counting (peek)', async () => {
    const key = uniqueName('peek');
    expect(await rl.peek(key, windows, T0)).toMatchObject({ allowed: true, remaining: 3 });
    for (let i = 0; i < 2; i++) await rl.hit(key, windows, T0);
    expect(await rl.peek(key, windows, T0)).toMatchObject({ allowed: true, remaining: 1 });
    expect(await rl.peek(key, windows, T0)).toMatchObject({ allowed: true, remaining: 1 });
    await rl.hit(key, windows, T0);
    expect(await rl.peek(key, windows, T0)).toMatchObject({ allowed: false, remaining: 0 });
    expect(await rl.peek(key, windows, T0 + 1000)).toMatchObject({ allowed: true });
  });

  it('keeps keys apart', async () => {
    const a = uniqueName('a');
    const b = uniqueName('b');
    for (let i = 0; i < 3; i++) await rl.hit(a, windows, T0);
    expect((await rl.hit(a, windows, T0)).allowed).toBe(false);
    expect((await rl.hit(b, windows, T0)).allowed).toBe(true);
  });

  it('remembers a key once until its time to live passes (firstUse)', async () => {
    const key = uniqueName('once');
    const now = Date.now();
    const first = await Promise.all(Array.from({ length: 10 }, () => rl.firstUse(key, 1500, now)));
    expect(first.filter(Boolean)).toHaveLength(1);
    expect(await rl.firstUse(key, 1500, now + 100)).toBe(false);
    expect(await rl.firstUse(uniqueName('other'), 1500, now)).toBe(true);
    // Redis expires by its own clock, memory by the `now` given: wait for the key to be forgotten.
    await waitFor(() => rl.firstUse(key, 1500, Date.now()), { timeoutMs: 5000 });
  });

  it('never lets concurrent hits exceed the limit', async () => {
    const key = uniqueName('c');
    const ds = await Promise.all(
      Array.from({ length: 50 }, () => rl.hit(key, [{ limit: 20, windowMs: 60000 }], T0)),
    );
    expect(ds.filter((d) => d.allowed)).toHaveLength(20);
  });
});

describe('RateLimiter [redis] shares limits across instances', () => {
  it('two limiters on one Redis count against one budget', async () => {
    const a = new RedisRateLimiter({ url: stack.redisUrl, prefix });
    const b = new RedisRateLimiter({ url: stack.redisUrl, prefix });
    try {
      const key = uniqueName('shared');
      const w = [{ limit: 4, windowMs: 60000 }];
      const now = Date.now();
      const results = [];
      for (let i = 0; i < 3; i++) {
        results.push((await a.hit(key, w, now)).allowed, (await b.hit(key, w, now)).allowed);
      }
      expect(results.filter(Boolean)).toHaveLength(4);
    } finally {
      await a.close();
      await b.close();
    }
  });
});
