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
  it('takes up to the round cap without a time bound, or before any round taught an estimate', () => {
    expect(new RoundBudget(0, 2000).cap()).toBe(2000);
    const b = new RoundBudget(0, 2000);
    b.timed(500, 1);
    expect(b.cap()).toBe(2000);
    expect(new RoundBudget(700, 2000).cap()).toBe(2000);
    // Before an estimate, a round shorter than a quarter of the bound (mostly its fixed part) teaches nothing.
    const quiet = new RoundBudget(700, 2000);
    quiet.timed(60, 1);
    quiet.timed(174, 1);
    expect(quiet.cap()).toBe(2000);
  });

  it('bounds the next round by the time per record of the first round of at least a quarter of the bound, and takes at least one record', () => {
    const b = new RoundBudget(700, 2000);
    b.timed(350, 100);
    expect(b.cap()).toBe(200);
    const quarter = new RoundBudget(700, 2000);
    quarter.timed(175, 50);
    expect(quarter.cap()).toBe(200);
    const slow = new RoundBudget(100, 2000);
    slow.timed(300, 1); // over the bound
    expect(slow.cap()).toBe(1);
  });

  it('lets any round within the bound lower the estimate to its own time per record, and never raise it', () => {
    const b = new RoundBudget(700, 4000);
    b.timed(350, 700); // 0.5 ms per record: 1,400 records
    expect(b.cap()).toBe(1400);
    b.timed(700, 350); // 2 ms per record, within the bound: no change
    expect(b.cap()).toBe(1400);
    b.timed(30, 1); // 30 ms per record, a short round (a fixed cost): no change
    expect(b.cap()).toBe(1400);
    b.timed(100, 400); // 0.25 ms per record, a short round: lowers it at once
    expect(b.cap()).toBe(2800);
    b.timed(1000, 2000); // 0.5 ms per record, over the bound: raised at once
    expect(b.cap()).toBe(1400);
  });

  it('takes a backlog after a quiet spell in rounds of the cap, and after one overrun keeps within 1 % of the bound', () => {
    const rounds = burstAfterQuiet(new RoundBudget(700, 2000), 50, 6000);
    // The quiet rounds (20.4 ms each) teach nothing: the first round takes the cap (820 ms, over
    // the bound), which sets the estimate at its 0.41 ms per record: 1,707 records (702.8 ms:
    // 0.4 % over, since a smaller round's fixed part weighs more), then 1,700 (700 ms).
    expect(rounds.slice(0, 3)).toEqual([2000, 1707, 1700]);
    expect(Math.max(...rounds.slice(1).map(roundMs))).toBeLessThanOrEqual(707);
    expect(rounds.length).toBeLessThanOrEqual(4);
  });

  it('recovers within four rounds from an estimate taught by slow first rounds (a cold process)', () => {
    // Rounds of 150 ms plus 0.2 ms per record: the embedded shape while its gateways take load on
    // the same thread (a trace of the eighteenth pass, docs/performance.md).
    const busyRoundMs = (records: number) => 150 + 0.2 * records;
    const b = new RoundBudget(700, 4000);
    b.timed(370, 61); // 6 ms per record, the first round of a cold process under load: 115 records
    expect(b.cap()).toBe(115);
    const rounds: number[] = [];
    for (let i = 0; i < 4; i++) {
      const n = b.cap();
      b.timed(busyRoundMs(n), n);
      rounds.push(n);
    }
    // 115 records (173 ms), 465 (243 ms), 1,339 (418 ms), 2,243 (599 ms), then 2,622 allowed. A
    // moving average of the rounds of at least a quarter of the bound allowed 115, 465, 578, 710.
    expect(rounds).toEqual([115, 465, 1339, 2243]);
    expect(b.cap()).toBeGreaterThanOrEqual(2600);
    expect(Math.max(...rounds.map(busyRoundMs))).toBeLessThanOrEqual(700);
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
