/**
 * Compares a benchmark run with committed results of the same profile: every figure of the
 * summary that both hold, its change, and whether it regressed by more than the tolerance.
 *
 * Which way is worse: a rate (unit ending in `/s`, or `/CPU-s` per CPU-second) and a same-run ratio are worse when lower;
 * latencies (p50, p99) and sizes are worse when higher. The same-run ratio is the figure least
 * moved by the machine (its baseline ran beside it), so a drop there is the clearest signal.
 */

export interface Stat {
  median: number;
}

export interface SummaryRow {
  workload: string;
  shape: string;
  what: string;
  unit: string;
  value: Stat;
  p50?: Stat;
  p99?: Stat;
  ratio?: number;
}

export interface Results {
  name?: string;
  profile?: string;
  machine?: { cpus?: number; memoryGb?: number; cpuModel?: string; calibration?: { opsPerS: number } };
  summary: SummaryRow[];
}

export interface Change {
  figure: string;
  measure: 'value' | 'p50' | 'p99' | 'ratio';
  unit: string;
  before: number;
  after: number;
  /** after / before. */
  factor: number;
  regressed: boolean;
}

const higherIsBetter = (measure: Change['measure'], unit: string) =>
  measure === 'ratio' || (measure === 'value' && /\/(s|CPU-s)$/.test(unit));

/**
 * The figure a row stands for, across runs: a latency measured at a rate derived from the run's own
 * peak ("acceptance → visible rank at 6,034 events/s") is the same figure at another rate, so the
 * rate is left out of the name; the rows show both rates' latencies side by side.
 */
export function figureKey(r: SummaryRow): string {
  const workload = r.workload.replace(/\bat [\d,]+ events\/s\b/, 'at <rate> events/s');
  return `${workload} · ${r.shape} · ${r.what}`;
}

/** Every figure both runs hold, compared; a figure only one run holds is left out (listed by `unmatched`). */
export function compare(before: Results, after: Results, tolerance: number): Change[] {
  const old = new Map(before.summary.map((r) => [figureKey(r), r]));
  const out: Change[] = [];
  for (const r of after.summary) {
    const b = old.get(figureKey(r));
    if (!b) continue;
    const pairs: Array<[Change['measure'], number | undefined, number | undefined]> = [
      ['value', b.value?.median, r.value?.median],
      ['p50', b.p50?.median, r.p50?.median],
      ['p99', b.p99?.median, r.p99?.median],
      ['ratio', b.ratio, r.ratio],
    ];
    for (const [measure, x, y] of pairs) {
      if (typeof x !== 'number' || typeof y !== 'number' || !(x > 0) || !Number.isFinite(y)) continue;
      const factor = y / x;
      const regressed = higherIsBetter(measure, r.unit) ? factor < 1 - tolerance : factor > 1 + tolerance;
      out.push({
        figure: figureKey(r),
        measure,
        unit: measure === 'ratio' ? '' : r.unit,
        before: x,
        after: y,
        factor,
        regressed,
      });
    }
  }
  return out;
}

/** Figures of one run that the other does not hold. */
export function unmatched(before: Results, after: Results): { onlyBefore: string[]; onlyAfter: string[] } {
  const a = new Set(after.summary.map(figureKey));
  const b = new Set(before.summary.map(figureKey));
  return {
    onlyBefore: [...b].filter((k) => !a.has(k)),
    onlyAfter: [...a].filter((k) => !b.has(k)),
  };
}

/** Why two runs are not comparable (another machine kind, another profile), or null. */
export function incomparable(before: Results, after: Results): string | null {
  if (before.profile && after.profile && before.profile !== after.profile)
    return `profiles differ: ${before.profile} vs ${after.profile}`;
  const m = before.machine;
  const n = after.machine;
  if (m && n) {
    if (m.cpus !== n.cpus) return `CPU counts differ: ${m.cpus} vs ${n.cpus}`;
    if (m.memoryGb && n.memoryGb && Math.abs(m.memoryGb - n.memoryGb) / m.memoryGb > 0.1)
      return `memory differs: ${m.memoryGb} GB vs ${n.memoryGb} GB`;
  }
  return null;
}

/** Beyond this difference of the CPU calibrations, the rates are said to have moved with the machine. */
export const SPEED_TOLERANCE = 0.15;

/**
 * What the two runs' CPU calibrations (bench/lib/machine.ts) say about the machines' speeds, when
 * it matters: a run on a machine more than SPEED_TOLERANCE slower or faster, or a run without a
 * calibration to tell. Null when both were measured at about the same speed. It does not change
 * which figures regressed: it says which of them may be the machine's.
 */
export function speedNote(before: Results, after: Results): string | null {
  const b = before.machine?.calibration?.opsPerS;
  const a = after.machine?.calibration?.opsPerS;
  if (!(typeof b === 'number' && b > 0) || !(typeof a === 'number' && a > 0))
    return (
      `${typeof b === 'number' ? 'this run' : 'the committed run'} has no CPU calibration, so a slower ` +
      'machine cannot be told from a slower Ludus: trust the same-run ratios (the "ratio" rows), not the rates.'
    );
  const factor = a / b;
  if (Math.abs(factor - 1) <= SPEED_TOLERANCE) return null;
  return (
    `this machine ran the CPU calibration at ${Math.round(factor * 100)} % of the committed run's speed ` +
    `(${Math.round(a).toLocaleString('en-US')} against ${Math.round(b).toLocaleString('en-US')} ops/s): ` +
    'rates and latencies without a same-run baseline move with the machine; the same-run ratios (the "ratio" rows) do not.'
  );
}
