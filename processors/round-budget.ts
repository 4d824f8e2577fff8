/**
 * How many records the consumer framework's next round may take so that it holds the store for
 * about `maxRoundMs` at most (the framework's `maxRoundMs` option; the embedded shape sets it).
 *
 * The estimate is a time per record, learnt from the rounds' times. A round's time is a fixed part
 * (its transaction's statements, the offsets, the commit: 15-60 ms in the embedded shape, more
 * while the gateways share the thread) plus a part per record, so any round's time per record is
 * an upper bound of what one more record costs: a round of one record that took 30 ms says "at
 * most 30 ms per record", a round of 400 records that took 150 ms "at most 0.4 ms".
 *
 * So a round within the bound only ever lowers the estimate, to its own time per record when that
 * is lower. Rounds sized by that estimate then grow as fast as their fixed part is spread over
 * more records, and under a steady cost they settle where a round takes about `maxRoundMs`, from
 * below. A round that overran the bound (records got slower, or a round of cheap records, such as
 * duplicates, lowered the estimate) raises it at once to its own time per record, so the next round
 * fits again.
 *
 * Before the estimate exists, a round shorter than a quarter of the bound teaches nothing: its
 * fixed part is most of it. A quiet spell (rounds of one record) therefore leaves the rounds
 * bounded by `roundCap` alone, and load that arrives afterwards is taken as it comes; the first
 * round that takes a quarter of the bound, or overruns it, sets the estimate.
 *
 * History (docs/performance.md, issue 19): a moving average of every round's time per record learnt
 * from a quiet spell that rounds must stay under about 25 records (fifteenth pass); with short
 * rounds ignored, the first slow rounds of a cold process still taught 2-6 ms per record, and the
 * average let the rounds grow back over about 30 rounds while a backlog built (eighteenth pass).
 */
export class RoundBudget {
  /** Milliseconds per record (0 until a round has taught one: no bound but `roundCap`). */
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
    if (ms > this.maxRoundMs) this.msPerRecord = Math.max(this.msPerRecord, perRecord);
    else if (this.msPerRecord > 0) this.msPerRecord = Math.min(this.msPerRecord, perRecord);
    else if (ms >= this.maxRoundMs / 4) this.msPerRecord = perRecord;
  }
}
