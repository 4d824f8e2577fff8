/**
 * The two-lane mutex: one holder at a time; a waiting short holder goes ahead of waiting long
 * ones; each lane in arrival order; a stream of short holders cannot starve the long lane; a
 * holder that throws releases the lock.
 */
import { TwoLaneMutex } from './mutex';

const tick = () => new Promise((r) => setImmediate(r));

/** A holder that records its name when it gets the lock and keeps it for one turn. */
const holder = (m: TwoLaneMutex, order: string[]) => (name: string, lane: 'short' | 'long') =>
  m.run(lane, async () => {
    order.push(name);
    await tick();
  });

describe('TwoLaneMutex', () => {
  it('lets one holder in at a time', async () => {
    const m = new TwoLaneMutex();
    let inside = 0;
    let most = 0;
    await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        m.run(i % 3 ? 'short' : 'long', async () => {
          most = Math.max(most, ++inside);
          await tick();
          inside--;
        }),
      ),
    );
    expect(most).toBe(1);
  });

  it('serves waiting short holders before waiting long ones, each lane in arrival order', async () => {
    const m = new TwoLaneMutex();
    const order: string[] = [];
    const hold = holder(m, order);
    await Promise.all([
      hold('first', 'long'),
      hold('L1', 'long'),
      hold('L2', 'long'),
      hold('S1', 'short'),
      hold('S2', 'short'),
    ]);
    expect(order).toEqual(['first', 'S1', 'S2', 'L1', 'L2']);
  });

  it('lets a long holder in after a burst of short ones', async () => {
    const m = new TwoLaneMutex(3);
    const order: string[] = [];
    const hold = holder(m, order);
    await Promise.all([
      hold('first', 'long'),
      hold('L1', 'long'),
      ...Array.from({ length: 5 }, (_, i) => hold(`S${i + 1}`, 'short')),
    ]);
    expect(order).toEqual(['first', 'S1', 'S2', 'S3', 'L1', 'S4', 'S5']);
  });

  it('releases the lock when a holder throws', async () => {
    const m = new TwoLaneMutex();
    await expect(
      m.run('long', async () => {
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    await expect(m.run('short', async () => 'next')).resolves.toBe('next');
  });
});
