/**
 * Summarises a V8 .cpuprofile (node --cpu-prof): self time aggregated by function and by
 * file or package, the idle and garbage-collector shares, and the top entries.
 *
 *   npx tsx bench/profile.ts <file.cpuprofile> [--top 25]
 *
 * Self time is taken from the sample time deltas (not hitCount x interval), so it stays right
 * when the sampling interval drifts under load.
 */
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { ROOT } from './lib/stack';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface ProfileEntry {
  name: string;
  where: string;
  selfMs: number;
  pct: number;
}

export interface ProfileSummary {
  file: string;
  totalMs: number;
  /** Share of the profile that was not idle (the process was running JS, GC or natives). */
  busyMs: number;
  idlePct: number;
  gcPct: number;
  /** Percentages below are of busy time. */
  topFunctions: ProfileEntry[];
  topFiles: ProfileEntry[];
}

const SPECIAL = new Set(['(idle)', '(program)', '(garbage collector)', '(root)']);

/** `node_modules/kafkajs/...` becomes `kafkajs`; project files stay as paths; node internals `node:`. */
export function locationOf(url: string): string {
  if (!url) return '(native)';
  let u = url.replace(/^file:\/\//, '');
  const nm = u.lastIndexOf('node_modules/');
  if (nm >= 0) {
    const rest = u.slice(nm + 'node_modules/'.length).split('/');
    return rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  if (u.startsWith('node:')) return u;
  if (u.startsWith('/')) u = relative(ROOT, u);
  return u;
}

/** When a profile started, in µs of the process's monotonic clock (the same for all its threads). */
export function profileStartUs(file: string): number {
  return (JSON.parse(readFileSync(file, 'utf8')) as CpuProfile).startTime;
}

/**
 * `window`: only samples between these times (ms after the profile started, or after `originUs`
 * when given: another thread's profile start, see `profileStartUs`), e.g. the measured part of a
 * run without the process's start-up.
 */
export function summarise(
  file: string,
  top = 25,
  window?: { fromMs: number; toMs: number; originUs?: number },
): ProfileSummary {
  const p = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  let at = window?.originUs === undefined ? 0 : p.startTime - window.originUs;
  for (let i = 0; i < p.samples.length; i++) {
    const delta = p.timeDeltas[i] ?? 0;
    at += delta;
    if (window && (at < window.fromMs * 1000 || at > window.toMs * 1000)) continue;
    const id = p.samples[i]!;
    selfUs.set(id, (selfUs.get(id) ?? 0) + delta);
  }
  let total = 0;
  let idle = 0;
  let gc = 0;
  const fns = new Map<string, { name: string; where: string; us: number }>();
  const files = new Map<string, number>();
  for (const [id, us] of selfUs) {
    total += us;
    const cf = byId.get(id)!.callFrame;
    const name = cf.functionName || '(anonymous)';
    if (name === '(idle)') {
      idle += us;
      continue;
    }
    if (name === '(garbage collector)') gc += us;
    // Project files run through tsx (esbuild), whose line numbers do not match the source: name only.
    const loc = locationOf(cf.url);
    const where = SPECIAL.has(name)
      ? ''
      : `${loc}${cf.url && !loc.endsWith('.ts') ? `:${cf.lineNumber + 1}` : ''}`;
    const key = `${name}@${where}`;
    const f = fns.get(key) ?? { name, where, us: 0 };
    f.us += us;
    fns.set(key, f);
    const fileKey = SPECIAL.has(name) ? name : loc;
    files.set(fileKey, (files.get(fileKey) ?? 0) + us);
  }
  const busy = total - idle;
  const pct = (us: number) => Math.round((1000 * us) / Math.max(1, busy)) / 10;
  return {
    file: relative(ROOT, file),
    totalMs: Math.round(total / 1000),
    busyMs: Math.round(busy / 1000),
    idlePct: Math.round((1000 * idle) / Math.max(1, total)) / 10,
    gcPct: pct(gc),
    topFunctions: [...fns.values()]
      .sort((a, b) => b.us - a.us)
      .slice(0, top)
      .map((f) => ({ name: f.name, where: f.where, selfMs: Math.round(f.us / 1000), pct: pct(f.us) })),
    topFiles: [...files.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([where, us]) => ({ name: where, where, selfMs: Math.round(us / 1000), pct: pct(us) })),
  };
}

export function renderSummary(s: ProfileSummary, top = 15): string {
  const lines = [
    `${s.file}: ${s.totalMs} ms profiled, ${s.busyMs} ms busy (idle ${s.idlePct}%, GC ${s.gcPct}% of busy)`,
    '',
    '| self % of busy | self ms | function | where |',
    '|---:|---:|---|---|',
    ...s.topFunctions.slice(0, top).map((f) => `| ${f.pct} | ${f.selfMs} | \`${f.name}\` | ${f.where} |`),
    '',
    '| self % of busy | self ms | file or package |',
    '|---:|---:|---|',
    ...s.topFiles.slice(0, top).map((f) => `| ${f.pct} | ${f.selfMs} | ${f.name} |`),
  ];
  return lines.join('\n');
}

if (require.main === module) {
  const args = process.argv.slice(2);
  const topAt = args.indexOf('--top');
  const top = topAt >= 0 ? Number(args[topAt + 1]) : 25;
  const files = args.filter((a, i) => a !== '--top' && i !== topAt + 1);
  if (files.length === 0) {
    process.stderr.write('usage: npx tsx bench/profile.ts <file.cpuprofile>... [--top N]\n');
    process.exit(2);
  }
  for (const f of files) process.stdout.write(`${renderSummary(summarise(f, top), top)}\n\n`);
}
