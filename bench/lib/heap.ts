/**
 * Memory of the embedded rank index, run as its own process with --expose-gc:
 *
 *   node --import tsx --expose-gc bench/lib/heap.ts '{"entries": 1000000}'
 *
 * Heap used after a full GC, before and after loading one board of `entries` users into a
 * MemoryRankIndex (the entries array itself released). Prints HEAP {"heapDeltaBytes", ...}.
 */
import { MemoryRankIndex } from '../../adapters/ranks/memory';
import { userId } from './events';
import { prng } from './util';

async function main(): Promise<void> {
  const { entries: n } = JSON.parse(process.argv[2]!) as { entries: number };
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run with --expose-gc');
  const settle = () => {
    for (let i = 0; i < 3; i++) gc();
    return process.memoryUsage();
  };
  const index = new MemoryRankIndex();
  const m0 = settle();
  const rnd = prng(n);
  let entries: Array<{ member: string; score: number; tiebreak: number }> | null = Array.from(
    { length: n },
    (_, i) => ({
      member: userId(i),
      score: Math.floor(rnd() * 1_000_000),
      tiebreak: 0,
    }),
  );
  const t = performance.now();
  await index.load('bench:top:all_time', entries);
  const loadS = (performance.now() - t) / 1000;
  entries = null;
  const m1 = settle();
  if ((await index.count('bench:top:all_time')) !== n) throw new Error('index lost entries');
  process.stdout.write(
    `HEAP ${JSON.stringify({ entries: n, loadS, heapDeltaBytes: m1.heapUsed - m0.heapUsed, rssDeltaBytes: m1.rss - m0.rss })}\n`,
  );
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`heap: ${(err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  },
);
