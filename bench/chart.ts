/**
 * The scaling curves as a PNG: an SVG drawn here, converted by rsvg-convert (Debian's
 * librsvg2-bin; no native npm module). Two panels: accepted/processed events per second against
 * active leaderboards + rules per tenant, and against tenants; log scales; medians with min–max
 * whiskers.
 *
 *   npx tsx bench/chart.ts bench/results/full.json docs/img/scaling.png
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';

interface Fig {
  median: number;
  min: number;
  max: number;
}
interface Curve {
  curve: 'definitions' | 'tenants';
  x: number;
  label: string;
  ingest: Fig;
  pipeline: Fig;
}
interface ResultsFile {
  name: string;
  startedAt: string;
  machine: { cpus: number; node: string };
  raw: Record<string, unknown>;
}

const W = 980;
const H = 470;
const SERIES = [
  { key: 'ingest' as const, name: 'ingest (bulk, accepted)', color: '#1f77b4' },
  { key: 'pipeline' as const, name: 'pipeline (drained, visible in Redis)', color: '#d62728' },
];

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;');
const k = (v: number) => (v >= 1000 ? `${Math.round(v / 100) / 10}k` : String(Math.round(v)));

function panel(curves: Curve[], x0: number, title: string, xTitle: string): string {
  const pw = 400;
  const ph = 300;
  const top = 90;
  const left = x0 + 70;
  const xs = curves.map((c) => c.x);
  const all = curves.flatMap((c) => SERIES.flatMap((s) => [c[s.key].min, c[s.key].max])).filter((v) => v > 0);
  const lo = Math.pow(10, Math.floor(Math.log10(Math.min(...all))));
  const hi = Math.pow(10, Math.ceil(Math.log10(Math.max(...all))));
  const y = (v: number) =>
    top + ph - ((Math.log10(v) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) * ph;
  const xmin = Math.log10(Math.min(...xs));
  const xmax = Math.log10(Math.max(...xs));
  const x = (v: number) =>
    left + 30 + (xmax === xmin ? (pw - 60) / 2 : ((Math.log10(v) - xmin) / (xmax - xmin)) * (pw - 60));
  const out: string[] = [];
  out.push(
    `<text x="${left + pw / 2}" y="${top - 18}" font-size="15" font-weight="bold" text-anchor="middle">${esc(title)}</text>`,
  );
  out.push(`<rect x="${left}" y="${top}" width="${pw}" height="${ph}" fill="none" stroke="#444"/>`);
  for (let d = lo; d <= hi * 1.0001; d *= 10) {
    for (const m of [1, 2, 5]) {
      const v = d * m;
      if (v < lo || v > hi) continue;
      out.push(
        `<line x1="${left}" x2="${left + pw}" y1="${y(v)}" y2="${y(v)}" stroke="${m === 1 ? '#ccc' : '#eee'}"/>`,
      );
      out.push(`<text x="${left - 6}" y="${y(v) + 4}" font-size="11" text-anchor="end">${k(v)}</text>`);
    }
  }
  for (const c of curves) {
    out.push(`<line x1="${x(c.x)}" x2="${x(c.x)}" y1="${top + ph}" y2="${top + ph + 5}" stroke="#444"/>`);
    out.push(`<text x="${x(c.x)}" y="${top + ph + 18}" font-size="12" text-anchor="middle">${c.x}</text>`);
  }
  out.push(
    `<text x="${left + pw / 2}" y="${top + ph + 40}" font-size="12" text-anchor="middle">${esc(xTitle)}</text>`,
  );
  out.push(
    `<text x="${left - 52}" y="${top + ph / 2}" font-size="12" text-anchor="middle" transform="rotate(-90 ${left - 52} ${top + ph / 2})">events per second (log scale)</text>`,
  );
  for (const s of SERIES) {
    const pts = curves.map((c) => `${x(c.x)},${y(c[s.key].median)}`).join(' ');
    out.push(`<polyline points="${pts}" fill="none" stroke="${s.color}" stroke-width="2.5"/>`);
    for (const c of curves) {
      const f = c[s.key];
      out.push(
        `<line x1="${x(c.x)}" x2="${x(c.x)}" y1="${y(f.min)}" y2="${y(f.max)}" stroke="${s.color}" stroke-width="1.5"/>`,
      );
      for (const v of [f.min, f.max])
        out.push(
          `<line x1="${x(c.x) - 5}" x2="${x(c.x) + 5}" y1="${y(v)}" y2="${y(v)}" stroke="${s.color}" stroke-width="1.5"/>`,
        );
      out.push(`<circle cx="${x(c.x)}" cy="${y(f.median)}" r="4" fill="${s.color}"/>`);
      const last = c.x === Math.max(...xs);
      out.push(
        `<text x="${x(c.x) + (last ? -8 : 8)}" y="${y(f.median) - 7}" font-size="11" fill="${s.color}" text-anchor="${last ? 'end' : 'start'}">${k(f.median)}</text>`,
      );
    }
  }
  return out.join('\n');
}

export function buildSvg(curves: Curve[], subtitle: string): string {
  const defs = curves.filter((c) => c.curve === 'definitions').sort((a, b) => a.x - b.x);
  const tenants = curves.filter((c) => c.curve === 'tenants').sort((a, b) => a.x - b.x);
  const legend = SERIES.map(
    (s, i) =>
      `<line x1="${300 + i * 260}" x2="${330 + i * 260}" y1="${H - 22}" y2="${H - 22}" stroke="${s.color}" stroke-width="3"/>` +
      `<text x="${336 + i * 260}" y="${H - 18}" font-size="12">${esc(s.name)}</text>`,
  ).join('\n');
  return `<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="DejaVu Sans, sans-serif">
<rect width="${W}" height="${H}" fill="white"/>
<text x="${W / 2}" y="26" font-size="17" font-weight="bold" text-anchor="middle">Ludus scaling, distributed shape (median, whiskers min–max of 3 runs)</text>
<text x="${W / 2}" y="46" font-size="12" text-anchor="middle" fill="#555">${esc(subtitle)}</text>
${defs.length ? panel(defs, 0, 'Active leaderboards + earning rules per tenant', 'boards and rules per tenant (each event matches one)') : ''}
${tenants.length ? panel(tenants, 490, 'Tenants', 'tenants (3 boards + 2 rules each, 10,000 users in all)') : ''}
${legend}
</svg>
`;
}

export function renderChart(results: ResultsFile, png: string): void {
  const curves = results.raw['scaling.curves'] as Curve[] | undefined;
  if (!curves?.length) throw new Error('no scaling curves in these results');
  const subtitle = `bench ${results.name}, ${results.startedAt.slice(0, 16).replace('T', ' ')} UTC, ${results.machine.cpus} cores shared by Ludus, Kafka, Postgres, Redis and the load generator`;
  const svg = `${png.replace(/\.png$/, '')}.svg`;
  writeFileSync(svg, buildSvg(curves, subtitle));
  try {
    execFileSync('rsvg-convert', ['-f', 'png', '-o', png, svg], { timeout: 30000 });
  } catch (err) {
    throw new Error(`rsvg-convert failed (apt-get install -y librsvg2-bin): ${(err as Error).message}`);
  } finally {
    rmSync(svg, { force: true });
  }
}

if (require.main === module) {
  const [file, png] = process.argv.slice(2);
  if (!file || !png) {
    process.stderr.write('usage: npx tsx bench/chart.ts <results.json> <out.png>\n');
    process.exit(2);
  }
  renderChart(JSON.parse(readFileSync(file, 'utf8')) as ResultsFile, png);
  process.stdout.write(`${png}\n`);
}
