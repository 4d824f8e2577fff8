/** A FIFO async mutex: one holder at a time, waiters served in arrival order. */
export class Mutex {
  private tail: Promise<void> = Promise.resolve();

  async run<T>(fn: () => Promise<T>): Promise<T> {
    let release!: () => void;
    const next = new Promise<void>((r) => (release = r));
    const prev = this.tail;
    this.tail = prev.then(() => next);
    await prev;
    try {
      return await fn();
    } finally {
      release();
    }
  }
}

/**
 * A mutex with two lanes: waiters of the `short` lane go ahead of waiting `long` ones, so that a
 * single statement waits for the holder at most, not for every queued transaction. Each lane is
 * FIFO, and after `burst` short grants in a row while a long waiter waits, the long one goes next:
 * a steady stream of short holders cannot starve the long lane.
 */
export class TwoLaneMutex {
  private held = false;
  private readonly short: Array<() => void> = [];
  private readonly long: Array<() => void> = [];
  private shortInARow = 0;

  constructor(private readonly burst = 8) {}

  async run<T>(lane: 'short' | 'long', fn: () => Promise<T>): Promise<T> {
    if (this.held)
      await new Promise<void>((grant) => (lane === 'short' ? this.short : this.long).push(grant));
    else this.held = true;
    try {
      return await fn();
    } finally {
      this.release();
    }
  }

  private release(): void {
    const longFirst = this.long.length > 0 && (this.short.length === 0 || this.shortInARow >= this.burst);
    const next = longFirst ? this.long.shift() : this.short.shift();
    if (!next) {
      this.held = false;
      this.shortInARow = 0;
      return;
    }
    this.shortInARow = longFirst ? 0 : this.shortInARow + 1;
    next(); // the lock passes straight to the next holder: `held` stays true
  }
}
