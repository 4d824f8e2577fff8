import { exponentialDelay } from './backoff';

describe('exponentialDelay', () => {
  it('waits the initial delay after the first failure, doubles it, and stops at the cap', () => {
    expect([1, 2, 3, 4, 5, 6, 7].map((n) => exponentialDelay(n, 100, 5000))).toEqual([
      100, 200, 400, 800, 1600, 3200, 5000,
    ]);
  });
  it('stays at the cap however many failures, and treats fewer than one as the first', () => {
    expect(exponentialDelay(10_000, 1000, 600_000)).toBe(600_000);
    expect(exponentialDelay(0, 250, 5000)).toBe(250);
  });
});
