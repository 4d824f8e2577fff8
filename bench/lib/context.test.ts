import { latencyRate, type Bench } from './context';

const bench = (latencyRates: Bench['latencyRates']) => ({ latencyRates }) as Bench;

describe('latency runs: their rate and name', () => {
  it('load at half the peak, named so, unless --latency-rate fixed the rate of that shape', () => {
    expect(latencyRate(bench({}), 'embedded', 12_965)).toEqual({
      rate: 6483,
      label: 'acceptance → visible rank at 6,483 events/s (half the peak)',
    });
    expect(latencyRate(bench({ embedded: 6400 }), 'embedded', 12_965)).toEqual({
      rate: 6400,
      label: 'acceptance → visible rank at 6,400 events/s (fixed rate)',
    });
    // A rate fixed for one shape leaves the other at half its peak; never below 100 events/s.
    expect(latencyRate(bench({ embedded: 6400 }), 'distributed', 21_161).rate).toBe(10581);
    expect(latencyRate(bench({}), 'distributed', 50).rate).toBe(100);
  });
});
