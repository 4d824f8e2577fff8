import { compare, incomparable, speedNote, unmatched, type Results, type SummaryRow } from './compare';

const row = (what: string, unit: string, value: number, extra: Partial<SummaryRow> = {}): SummaryRow => ({
  workload: 'w',
  shape: 'embedded',
  what,
  unit,
  value: { median: value },
  ...extra,
});
const run = (rows: SummaryRow[], profile = 'quick'): Results => ({
  profile,
  machine: { cpus: 2, memoryGb: 23.5 },
  summary: rows,
});

describe('bench compare', () => {
  it('flags a rate or a same-run ratio that fell, and a latency that rose, by more than the tolerance', () => {
    const before = run([
      row('rate', 'events/s', 1000, { ratio: 0.5, p99: { median: 100 } }),
      row('steady', 'events/s', 1000, { p99: { median: 100 } }),
    ]);
    const after = run([
      row('rate', 'events/s', 650, { ratio: 0.34, p99: { median: 131 } }),
      row('steady', 'events/s', 1400, { p99: { median: 129 } }),
    ]);
    const changes = compare(before, after, 0.3);
    const regressed = changes
      .filter((c) => c.regressed)
      .map((c) => `${c.figure.split(' · ')[2]}:${c.measure}`);
    expect(regressed).toEqual(['rate:value', 'rate:p99', 'rate:ratio']);
    expect(changes.find((c) => c.figure.endsWith('steady') && c.measure === 'value')!.factor).toBeCloseTo(
      1.4,
    );
  });

  it('reads a rate per CPU-second as a rate: a rise is no regression, a fall is', () => {
    const before = run([row('up', 'req/CPU-s', 6000), row('down', 'req/CPU-s', 6000)]);
    const after = run([row('up', 'req/CPU-s', 14000), row('down', 'req/CPU-s', 3000)]);
    const regressed = compare(before, after, 0.3).filter((c) => c.regressed);
    expect(regressed.map((c) => c.figure)).toEqual(['w · embedded · down']);
  });

  it("compares a latency measured at a rate of the run's own peak with the same latency at another rate", () => {
    const at = (rate: string, p99: number) =>
      row('probes visible', 'probes', 61, {
        workload: `acceptance → visible rank at ${rate} events/s (half the peak)`,
        p99: { median: p99 },
      });
    const changes = compare(run([at('6,034', 218)]), run([at('6,482', 811)]), 0.3);
    expect(changes.filter((c) => c.regressed).map((c) => [c.measure, c.before, c.after])).toEqual([
      ['p99', 218, 811],
    ]);
    expect(unmatched(run([at('6,034', 218)]), run([at('6,482', 811)]))).toEqual({
      onlyBefore: [],
      onlyAfter: [],
    });
  });

  it('compares only figures both runs hold, and says which are missing', () => {
    const before = run([row('a', 'events/s', 1), row('gone', 'events/s', 1)]);
    const after = run([row('a', 'events/s', 1), row('new', 'events/s', 1)]);
    expect(compare(before, after, 0.3).map((c) => c.figure)).toEqual(['w · embedded · a']);
    expect(unmatched(before, after)).toEqual({
      onlyBefore: ['w · embedded · gone'],
      onlyAfter: ['w · embedded · new'],
    });
  });

  it('refuses runs of another profile or machine kind', () => {
    expect(incomparable(run([], 'quick'), run([], 'full'))).toMatch(/profiles differ/);
    expect(incomparable(run([]), { ...run([]), machine: { cpus: 8, memoryGb: 23.5 } })).toMatch(/CPU counts/);
    expect(incomparable(run([]), run([]))).toBeNull();
  });

  it("says when the machines' CPU calibrations differ, or when one run has none", () => {
    const at = (opsPerS?: number): Results => ({
      ...run([]),
      machine: { cpus: 2, memoryGb: 23.5, ...(opsPerS ? { calibration: { opsPerS } } : {}) },
    });
    expect(speedNote(at(100_000), at(110_000))).toBeNull();
    expect(speedNote(at(100_000), at(86_000))).toBeNull();
    expect(speedNote(at(100_000), at(45_000))).toMatch(
      /at 45 % of the committed run's speed \(45,000 against 100,000/,
    );
    expect(speedNote(at(100_000), at(130_000))).toMatch(/at 130 % /);
    expect(speedNote(at(), at(100_000))).toMatch(/^the committed run has no CPU calibration/);
    expect(speedNote(at(100_000), at())).toMatch(/^this run has no CPU calibration/);
  });
});
