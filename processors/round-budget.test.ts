import { RoundBudget } from './round-budget';

/** A store whose rounds take a fixed 20 ms plus 0.4 ms per record (the embedded shape's order). */
const roundMs = (records: number) => 20 + 0.4 * records;

/**
 * Rounds of a backlog of `backlog` records after `quiet` rounds of one record each: the records
 * each round took, as the framework takes them (up to the budget's cap, or what is left).
 */
function burstAfterQuiet(budget: RoundBudget, quiet: number, backlog: number): number[] {
  for (let i = 0; i < quiet; i++) budget.timed(roundMs(1), 1);
  const rounds: number[] = [];
  for (let left = backlog; left > 0;) {
    const n = Math.min(budget.cap(), left);
    budget.timed(roundMs(n), n);
    rounds.push(n);
    left -= n;
  }
  return rounds;
}

describe('RoundBudget', () => {
  it('takes up to the round cap without a time bound, or before any round was timed', () => {
    expect(new RoundBudget(0, 2000).cap()).toBe(2000);
    const b = new RoundBudget(0, 2000);
    b.timed(500, 1);
    expect(b.cap()).toBe(2000);
    expect(new RoundBudget(700, 2000).cap()).toBe(2000);
  });

  it('bounds the next round by the time per record of the first one, and takes at least one record', () => {
    const b = new RoundBudget(700, 2000);
    b.timed(350, 100);
    expect(b.cap()).toBe(200);
    const slow = new RoundBudget(100, 2000);
    slow.timed(300, 1);
    expect(slow.cap()).toBe(1);
  });

  it('lets a short round lower the estimate to its own time per record, and never raise it', () => {
    const b = new RoundBudget(700, 2000);
    b.timed(20, 1); // 20 ms per record: 35 records
    expect(b.cap()).toBe(35);
    b.timed(35, 35); // 1 ms per record, a short round: lowers it at once
    expect(b.cap()).toBe(700);
    b.timed(30, 1); // 30 ms per record, a short round (a fixed cost): ignored
    expect(b.cap()).toBe(700);
  });

  it('moves the estimate both ways after a round of at least a quarter of the bound', () => {
    const b = new RoundBudget(700, 2000);
    b.timed(350, 700); // 0.5 ms per record
    b.timed(700, 350); // 2 ms per record, a long round: 0.7 * 0.5 + 0.3 * 2 = 0.95
    expect(b.cap()).toBe(Math.floor(700 / 0.95));
    b.timed(175, 700); // 0.25 ms per record, exactly a quarter: 0.7 * 0.95 + 0.3 * 0.25 = 0.74
    expect(b.cap()).toBe(Math.floor(700 / (0.7 * 0.95 + 0.3 * 0.25)));
  });

  it('takes a backlog after a quiet spell in large rounds from the second round on, each within the bound', () => {
    const rounds = burstAfterQuiet(new RoundBudget(700, 2000), 50, 6000);
    // Quiet rounds of one record (20.4 ms) allow 34 records. That round (33.6 ms, short) lowers the
    // estimate to its 0.99 ms per record: 708 records. That one (303 ms, long) moves the average
    // towards its 0.43 ms. (A moving average of every round allowed 48 records in the second round.)
    expect(rounds.slice(0, 3)).toEqual([34, 708, 853]);
    expect(Math.max(...rounds.map(roundMs))).toBeLessThanOrEqual(700);
    expect(rounds.length).toBeLessThanOrEqual(7);
  });

  it('shrinks the next round at once after a round that overran the bound', () => {
    const b = new RoundBudget(700, 2000);
    burstAfterQuiet(b, 1, 4000);
    const big = b.cap();
    expect(big).toBeGreaterThan(1000);
    // Records now cost 2 ms each: the first round overruns (over 2 s), the next one fits.
    b.timed(20 + 2 * big, big);
    const next = b.cap();
    expect(next).toBe(Math.floor(700 / (2 + 20 / big)));
    expect(20 + 2 * next).toBeLessThanOrEqual(720);
  });

  it('recovers from a short round of cheap records with one overrun', () => {
    const b = new RoundBudget(700, 2000);
    b.timed(200, 500); // 0.4 ms per record
    b.timed(10, 200); // 0.05 ms per record (duplicates, say), a short round: 2,000 records
    expect(b.cap()).toBe(2000);
    b.timed(20 + 0.4 * 2000, 2000); // 820 ms: over the bound
    expect(b.cap()).toBe(Math.floor(700 / 0.41));
  });
});
