/**
 * What a bench run records: every run's raw figures (by workload), the summary rows (median,
 * min, max; baseline measured in the same run; ratio; target), and the markdown table.
 */
import { figure, fmt, type Figure } from './util';

export interface Target {
  text: string;
  met: boolean | null;
}

export interface Row {
  workload: string;
  shape: 'distributed' | 'embedded' | 'stack';
  what: string;
  unit: string;
  value: Figure;
  p50?: Figure;
  p99?: Figure;
  baseline?: { name: string; value: Figure };
  /** value.median / baseline.median */
  ratio?: number;
  targets?: Target[];
  note?: string;
}

export class Results {
  readonly rows: Row[] = [];
  readonly raw: Record<string, unknown> = {};

  /** Raw figures of one measurement (every run), under a dotted path such as `ingest.distributed.bulk`. */
  record(path: string, value: unknown): void {
    this.raw[path] = value;
  }

  row(r: Omit<Row, 'ratio'>): Row {
    const row: Row = { ...r };
    if (r.baseline && Number.isFinite(r.baseline.value.median) && r.baseline.value.median > 0)
      row.ratio = Math.round((r.value.median / r.baseline.value.median) * 1000) / 1000;
    this.rows.push(row);
    return row;
  }
}

export { figure };

const range = (f: Figure | undefined, digits = 0) =>
  f && Number.isFinite(f.median)
    ? `${fmt(f.median, digits)} (${fmt(f.min, digits)}–${fmt(f.max, digits)})`
    : '';

/** The summary table: one line per row; figures are median (min–max) of the runs. */
export function markdownTable(rows: Row[]): string {
  const head =
    '| workload | shape | figure | median (min–max) | p50 ms | p99 ms | baseline (same run) | ratio | target |\n' +
    '|---|---|---|---:|---:|---:|---|---:|---|';
  const lines = rows.map((r) => {
    const targets = (r.targets ?? [])
      .map((t) => `${t.text}: **${t.met === null ? 'n/a' : t.met ? 'met' : 'missed'}**`)
      .join('; ');
    const baseline = r.baseline ? `${r.baseline.name}: ${range(r.baseline.value)} ${r.unit}` : '';
    return [
      r.workload,
      r.shape,
      `${r.what} (${r.unit})`,
      range(r.value),
      range(r.p50, 1),
      range(r.p99, 1),
      baseline,
      r.ratio === undefined ? '' : `${(r.ratio * 100).toFixed(r.ratio < 0.1 ? 1 : 0)}%`,
      targets + (r.note ? `${targets ? '; ' : ''}${r.note}` : ''),
    ]
      .map((c) => ` ${c} `)
      .join('|');
  });
  return [head, ...lines.map((l) => `|${l}|`)].join('\n');
}
