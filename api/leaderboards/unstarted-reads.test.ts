/**
 * UnstartedReads: requests of the same turn share one read; a read that started is never joined,
 * so every answer comes from a read that started after its request arrived.
 */
import { UnstartedReads } from './unstarted-reads';

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('UnstartedReads', () => {
  it('shares one read between the requests of one turn, per owner and key', async () => {
    const reads = new UnstartedReads<object, string>();
    const owner = {};
    const other = {};
    let started = 0;
    const read = (v: string) => async () => {
      started++;
      return v;
    };
    const a = reads.join(owner, 'k', read('a'));
    const b = reads.join(owner, 'k', read('b'));
    const c = reads.join(owner, 'other key', read('c'));
    const d = reads.join(other, 'k', read('d'));
    expect(reads.waitingFor(owner)).toBe(2);
    expect(started).toBe(0); // nothing starts before the turn ends
    expect(await Promise.all([a, b, c, d])).toEqual(['a', 'a', 'c', 'd']);
    expect(started).toBe(3);
    expect(reads.waitingFor(owner)).toBe(0);
  });

  it('never joins a read that started: a request arriving meanwhile reads again and sees a later write', async () => {
    const reads = new UnstartedReads<object, number>();
    const owner = {};
    let state = 1;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    // The first read takes the state at its start, then waits (a slow store).
    const first = reads.join(owner, 'k', async () => {
      const seen = state;
      await gate;
      return seen;
    });
    await turn(); // the first read has started
    state = 2; // a write completes, then a request arrives
    const second = reads.join(owner, 'k', async () => state);
    expect(second).not.toBe(first);
    expect(await second).toBe(2);
    release();
    expect(await first).toBe(1);
  });

  it('hands every joined request the failure of the shared read, and the next turn reads again', async () => {
    const reads = new UnstartedReads<object, number>();
    const owner = {};
    let calls = 0;
    const failing = () => {
      calls++;
      if (calls === 1) throw new Error('index down'); // thrown before any promise
      return Promise.resolve(calls);
    };
    const a = reads.join(owner, 'k', failing);
    const b = reads.join(owner, 'k', failing);
    await expect(a).rejects.toThrow('index down');
    await expect(b).rejects.toThrow('index down');
    expect(await reads.join(owner, 'k', failing)).toBe(2);
  });

  it('keeps the requests of many turns apart under concurrency: one read per turn and key', async () => {
    const reads = new UnstartedReads<object, number>();
    const owner = {};
    let reads_ = 0;
    const results: Array<Promise<number>> = [];
    for (let t = 0; t < 5; t++) {
      for (let i = 0; i < 10; i++) results.push(reads.join(owner, 'k', async () => ++reads_));
      await turn();
    }
    const got = await Promise.all(results);
    expect(reads_).toBe(5);
    expect(got).toEqual([1, 2, 3, 4, 5].flatMap((n) => Array<number>(10).fill(n)));
  });
});
