/**
 * Small helpers shared by the bench: progress output, statistics, a seeded PRNG, names.
 */
import { randomBytes } from 'node:crypto';

const started = Date.now();

/** One progress line on stderr, prefixed with the elapsed time: stdout keeps the summary. */
export function progress(msg: string): void {
  const s = ((Date.now() - started) / 1000).toFixed(1).padStart(6);
  process.stderr.write(`[bench ${s}s] ${msg}\n`);
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** A short unique lowercase name (schemas, topics, key prefixes). */
export function uniqueName(prefix: string): string {
  return `${prefix}_${Date.now().toString(36)}_${randomBytes(3).toString('hex')}`;
}

/** Median, min and max of the runs of one figure. */
export interface Figure {
  median: number;
  min: number;
  max: number;
  runs: number[];
}

export function figure(runs: number[]): Figure {
  const xs = runs.filter((x) => Number.isFinite(x));
  if (xs.length === 0) return { median: NaN, min: NaN, max: NaN, runs };
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  const median = s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
  return { median, min: s[0]!, max: s[s.length - 1]!, runs };
}

/** The p-th percentile (0..100) of samples, nearest-rank. */
export function percentile(samples: number[], p: number): number {
  if (samples.length === 0) return NaN;
  const s = [...samples].sort((a, b) => a - b);
  const i = Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1));
  return s[i]!;
}

/** mulberry32: a small deterministic PRNG, so every run and its baseline see the same events. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Formats a number for tables: 12,345 / 1.23 / 0.012. */
export function fmt(x: number, digits = 0): string {
  if (!Number.isFinite(x)) return 'n/a';
  if (digits === 0 && Math.abs(x) >= 100) return Math.round(x).toLocaleString('en-US');
  const d = Math.abs(x) >= 100 ? 0 : Math.abs(x) >= 10 ? Math.max(digits, 1) : Math.max(digits, 2);
  return x.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: 0 });
}

/** Runs fn with a deadline; rejects with `what timed out` (every step of the bench is bounded). */
export async function bounded<T>(what: string, ms: number, fn: () => Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      fn(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what} timed out after ${Math.round(ms / 1000)} s`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** An error of a `waitFor` check that waiting cannot cure (e.g. the process died): thrown at once. */
export class Fatal extends Error {}

/** Polls `check` every `everyMs` until it returns a value other than undefined, within `ms`. */
export async function waitFor<T>(
  what: string,
  ms: number,
  check: () => Promise<T | undefined>,
  everyMs = 100,
): Promise<T> {
  const deadline = Date.now() + ms;
  let lastErr: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v !== undefined) return v;
    } catch (err) {
      if (err instanceof Fatal) throw err;
      lastErr = err;
    }
    if (Date.now() > deadline)
      throw new Error(
        `${what}: not ready after ${Math.round(ms / 1000)} s${lastErr ? ` (${(lastErr as Error).message})` : ''}`,
      );
    await sleep(everyMs);
  }
}
