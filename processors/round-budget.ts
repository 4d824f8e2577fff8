/**
 * How many records the consumer framework's next round may take so that it holds the store for
 * about `maxRoundMs` at most (the framework's `maxRoundMs` option; the embedded shape sets it).
 *
 * The estimate is a time per record, learnt from the rounds' times. A round's time is a fixed part
 * (its transaction's statements, the offsets, the commit: 15-60 ms in the embedded shape) plus a
 * part per record, so a small round's time per record overstates what one more record costs: a
 * round of one record that took 30 ms says "30 ms per record", while a round of 400 records took
 * 150 ms (0.4 ms per record including its share of the fixed part). A moving average of every
 * round's time per record therefore learnt from a quiet spell (rounds of one record) that rounds
 * must stay under about 25 records, and when load arrived it took about a dozen rounds to let them
 * grow, while the backlog, and the time from acceptance to a visible rank, grew for one to two
 * seconds (docs/performance.md, issue 19, fifteenth pass).
 *
 * So the rounds teach two things. A round that took at least a quarter of `maxRoundMs` is mostly
 * per-record time: it moves the moving average up or down. A shorter round only bounds the time
 * per record from above (its fixed part is not zero): it lowers the estimate to its own time per
 * record when that is lower, and never raises it. A round that overran the bound (the estimate was
 * too low: its records got slower, or a short round of cheap records lowered it) raises the
 * estimate at once to its own time per record, so the next round fits again.
 */
export class RoundBudget {
  /** Milliseconds per record (0 until a round has been timed: no bound but `roundCap`). */
  private msPerRecord = 0;

  constructor(
    /** 0: no time bound. */
    private readonly maxRoundMs: number,
    /** The most records a round takes in any case. */
    private readonly roundCap: number,
  ) {}

  /** The records the next round may take: `roundCap`, or fewer to keep within `maxRoundMs` (at least 1). */
  cap(): number {
    if (this.maxRoundMs <= 0 || this.msPerRecord <= 0) return this.roundCap;
    return Math.min(this.roundCap, Math.max(1, Math.floor(this.maxRoundMs / this.msPerRecord)));
  }

  /** Learns from a round of `records` records that held the store for `ms`. */
  timed(ms: number, records: number): void {
    const perRecord = ms / Math.max(1, records);
    if (this.msPerRecord === 0 || ms > this.maxRoundMs)
      this.msPerRecord = Math.max(this.msPerRecord, perRecord);
    else if (ms >= this.maxRoundMs / 4) this.msPerRecord = 0.7 * this.msPerRecord + 0.3 * perRecord;
    else this.msPerRecord = Math.min(this.msPerRecord, perRecord);
  }
}
