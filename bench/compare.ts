/**
 * Fails loudly when a benchmark figure regressed: compares a run with the committed results of
 * the same profile on the same machine kind and exits 1 when any figure is worse by more than the
 * tolerance (default 30 %). Not part of `npm test` (figures are not tests).
 *
 *   npm run bench -- --name mine && npm run bench:compare -- bench/results/mine.json
 *   npm run bench:compare -- bench/results/mine.json --against bench/results/full.json --tolerance 0.2
 *
 * Without --against, the committed results of the run's profile (bench/results/<profile>.json).
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { Command } from 'commander';
import { compare, incomparable, speedNote, unmatched, type Results } from './lib/compare';

const program = new Command('bench:compare')
  .argument('<results>', 'a run: bench/results/<name>.json')
  .option('--against <file>', 'committed results to compare with (default: bench/results/<profile>.json)')
  .option('--tolerance <fraction>', 'how much worse a figure may be before it fails', '0.3')
  .parse();

const read = (f: string) => JSON.parse(readFileSync(resolve(f), 'utf8')) as Results;
const after = read(program.args[0]!);
const opts = program.opts<{ against?: string; tolerance: string }>();
const againstFile = opts.against ?? `bench/results/${after.profile ?? 'quick'}.json`;
const before = read(againstFile);
const tolerance = Number(opts.tolerance);
if (!(tolerance > 0 && tolerance < 1)) {
  console.error(`--tolerance must be a fraction between 0 and 1, not ${opts.tolerance}`);
  process.exit(2);
}

const why = incomparable(before, after);
if (why) {
  console.error(`not comparable with ${againstFile}: ${why}`);
  process.exit(2);
}

const fmt = (n: number) => (Math.abs(n) >= 100 ? Math.round(n).toLocaleString('en') : n.toPrecision(3));
const changes = compare(before, after, tolerance);
console.log(`${program.args[0]} against ${againstFile} (tolerance ${Math.round(tolerance * 100)} %)\n`);
const speed = speedNote(before, after);
if (speed) console.log(`Machine speed: ${speed}\n`);
console.log('| figure | measure | before | after | change | |');
console.log('|---|---|---|---|---|---|');
for (const c of changes) {
  const pct = `${c.factor >= 1 ? '+' : ''}${Math.round((c.factor - 1) * 100)} %`;
  console.log(
    `| ${c.figure} | ${c.measure}${c.unit ? ` (${c.unit})` : ''} | ${fmt(c.before)} | ${fmt(c.after)} | ${pct} | ${c.regressed ? '**REGRESSED**' : ''} |`,
  );
}
const { onlyBefore, onlyAfter } = unmatched(before, after);
if (onlyBefore.length) console.log(`\nnot in this run: ${onlyBefore.join('; ')}`);
if (onlyAfter.length) console.log(`\nnew in this run: ${onlyAfter.join('; ')}`);
const bad = changes.filter((c) => c.regressed);
if (changes.length === 0) {
  console.error('\nno figure in common: nothing compared');
  process.exit(2);
}
if (bad.length) {
  console.error(`\n${bad.length} figure(s) regressed by more than ${Math.round(tolerance * 100)} %:`);
  for (const c of bad) console.error(`  ${c.figure} ${c.measure}: ${fmt(c.before)} -> ${fmt(c.after)}`);
  if (speed) console.error(`(machine speed: ${speed})`);
  process.exit(1);
}
console.log(
  `\n${changes.length} figures compared, none regressed by more than ${Math.round(tolerance * 100)} %`,
);
