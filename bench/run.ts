/**
 * The benchmark suite of issue 7.
 *
 *   npm run bench                    quick profile (a few minutes)
 *   npm run bench -- --full          full profile (about 30 minutes): the figures of docs/performance.md
 *   npm run bench -- --only ingest,query [--profile] [--name NAME]
 *   npm run bench -- --only embedded --service-env LUDUS_PIPELINE_WARM_UP_MS=0   (A/B of a setting)
 *   npm run bench -- --only embedded --latency-rate embedded=6400   (latency at a fixed rate, to
 *                                    compare two commits at the same load; default: half the peak)
 *   npm run bench -- --only embedded-latency --latency-rate embedded=4250   (those runs alone)
 *
 * Workloads: ingest, pipeline, query, scaling (with memory per million entries). Every figure is
 * the median of 3 runs with min and max; each workload measures its baseline in the same run.
 * Progress goes to stderr; the summary table to stdout and bench/results/summary.md; everything
 * (machine, versions, configuration, every run's raw figures, noise) to bench/results/<name>.json.
 * The bench cleans up after itself: its processes, Postgres schemas, Redis keys, Kafka topics and
 * groups, registry subjects, ClickHouse database and scratch files.
 */
import { randomBytes } from 'node:crypto';
import { accessSync, constants, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { renderChart } from './chart';
import { PROFILES, type Bench, type Profile } from './lib/context';
import { calibrate, machineInfo, NoiseSampler, versions } from './lib/machine';
import { markdownTable, Results } from './lib/results';
import { killAllChildren, setServiceOverrides } from './lib/service';
import { Cleanup, ensureStack, ROOT, stackSettings } from './lib/stack';
import { bounded, progress } from './lib/util';
import { ingestEmbedded, ingestWorkload } from './workloads/ingest';
import {
  embedded as pipelineEmbedded,
  embeddedLatency,
  pipelineDistributedWorkload,
  pipelineWorkload,
} from './workloads/pipeline';
import { queryWorkload } from './workloads/query';
import { scalingWorkload } from './workloads/scaling';

/** Each workload, its time limit and the load generators it runs (commands on the PATH). */
const WORKLOADS: Record<string, { run: (b: Bench) => Promise<void>; limitMin: number; tools: string[] }> = {
  ingest: { run: ingestWorkload, limitMin: 10, tools: ['wrk'] },
  pipeline: { run: pipelineWorkload, limitMin: 14, tools: ['wrk'] },
  /** The distributed half of `pipeline` only (drain and latency). */
  'pipeline-distributed': { run: pipelineDistributedWorkload, limitMin: 10, tools: [] },
  query: { run: queryWorkload, limitMin: 25, tools: ['wrk', 'redis-benchmark'] },
  scaling: { run: scalingWorkload, limitMin: 14, tools: ['wrk'] },
  /** The embedded shape only: its ingest rows and its pipeline rows (drain, end to end, latency). */
  embedded: {
    run: async (b) => {
      await ingestEmbedded(b);
      await pipelineEmbedded(b);
    },
    limitMin: 20,
    tools: ['wrk'],
  },
  /** The embedded acceptance-to-visible runs alone, at `--latency-rate embedded=N`. */
  'embedded-latency': { run: embeddedLatency, limitMin: 10, tools: [] },
};

/** True when `command` is an executable file in a directory of the PATH. */
function onPath(command: string): boolean {
  return (process.env.PATH ?? '').split(delimiter).some((dir) => {
    try {
      accessSync(join(dir, command), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

/** Workloads that are a part of another one: run only when named with --only. */
const PARTS = new Set(['pipeline-distributed', 'embedded', 'embedded-latency']);

function parseArgs(argv: string[]) {
  const has = (f: string) => argv.includes(f);
  const val = (f: string) => {
    const i = argv.indexOf(f);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const withValue = ['--only', '--name', '--service-env', '--latency-rate'];
  const known = new Set(['--full', '--profile', '--help', '-h', ...withValue]);
  const serviceEnv: Record<string, string> = {};
  const latencyRates: Bench['latencyRates'] = {};
  for (const [i, a] of argv.entries()) {
    if (a.startsWith('-') && !known.has(a)) throw new Error(`unknown option ${a} (see --help)`);
    if (!a.startsWith('-') && !withValue.includes(argv[i - 1] ?? ''))
      throw new Error(`unexpected argument ${a}`);
    if (a === '--latency-rate') {
      // The acceptance-to-visible runs of a shape at this rate instead of half the run's peak (repeatable).
      const m = /^(embedded|distributed)=([1-9]\d{0,5})$/.exec(argv[i + 1] ?? '');
      if (!m) throw new Error('--latency-rate needs embedded=N or distributed=N (events/s, 1 to 999999)');
      latencyRates[m[1] as 'embedded' | 'distributed'] = Number(m[2]);
    }
    if (a === '--service-env') {
      // A setting every Ludus process of the run gets, on top of the bench's own (repeatable).
      const m = /^(LUDUS_[A-Z0-9_]+)=(.*)$/.exec(argv[i + 1] ?? '');
      if (!m) throw new Error('--service-env needs LUDUS_NAME=value');
      serviceEnv[m[1]!] = m[2]!;
    }
  }
  const full = has('--full');
  // By default every workload once: `pipeline-distributed` and `embedded` are parts of others
  // (for --only), so a full run measures them once, not twice.
  const only = val('--only')?.split(',') ?? Object.keys(WORKLOADS).filter((w) => !PARTS.has(w));
  for (const w of only)
    if (!WORKLOADS[w]) throw new Error(`unknown workload ${w} (${Object.keys(WORKLOADS).join(', ')})`);
  const profile: Profile = { ...PROFILES[full ? 'full' : 'quick'] };
  if (has('--profile')) profile.profile = true;
  return {
    help: has('--help') || has('-h'),
    profile,
    only,
    name: val('--name') ?? profile.name,
    serviceEnv,
    latencyRates,
  };
}

async function main(): Promise<number> {
  const args = parseArgs(process.argv.slice(2));
  if (args.help) {
    process.stdout.write(
      `${(/\/\*\*([\s\S]*?)\*\//.exec(readFileSync(__filename, 'utf8'))?.[1] ?? '').replace(/^ \* ?/gm, '')}\n`,
    );
    return 0;
  }
  // Fail before anything starts, not minutes later when the first load generator is spawned.
  const missing = [...new Set(args.only.flatMap((w) => WORKLOADS[w]!.tools))].filter((t) => !onPath(t));
  if (missing.length) {
    process.stderr.write(
      `bench: ${missing.join(' and ')} not found on the PATH (Debian: apt-get install -y wrk redis-tools)\n`,
    );
    return 2;
  }
  setServiceOverrides(args.serviceEnv);
  const startedAt = new Date();
  progress(`profile ${args.profile.name}, workloads ${args.only.join(', ')}; checking the stack`);
  ensureStack();
  const calibration = calibrate();
  progress(`CPU calibration: ${calibration.opsPerS.toLocaleString('en-US')} ops/s (bench/lib/machine.ts)`);
  const stack = stackSettings();
  const cleanup = new Cleanup(stack);
  const tmp = cleanup.dir(`${ROOT}/bench/results/tmp/${cleanup.id}`);
  mkdirSync(tmp, { recursive: true });
  const noise = new NoiseSampler();
  noise.start();
  const results = new Results();
  const b: Bench = {
    profile: args.profile,
    stack,
    cleanup,
    results,
    noise,
    tmp,
    rootKey: `ldr_${randomBytes(32).toString('base64url')}`,
    secretKey: randomBytes(32).toString('base64'),
    peaks: {},
    latencyRates: args.latencyRates,
  };
  let interrupted = false;
  const onSignal = (sig: string) => {
    if (interrupted) process.exit(130);
    interrupted = true;
    progress(`${sig}: stopping the bench's processes and cleaning up`);
    killAllChildren();
    void cleanup.run().finally(() => process.exit(130));
  };
  process.on('SIGINT', () => onSignal('SIGINT'));
  process.on('SIGTERM', () => onSignal('SIGTERM'));

  const timings: Record<string, unknown> = {};
  const errors: Record<string, string> = {};
  try {
    for (const w of args.only) {
      const t0 = Date.now();
      progress(`== ${w}`);
      try {
        await bounded(`workload ${w}`, WORKLOADS[w]!.limitMin * 60000, () => WORKLOADS[w]!.run(b));
      } catch (err) {
        errors[w] = (err as Error).stack ?? String(err);
        progress(`${w} FAILED: ${(err as Error).message}`);
        killAllChildren();
      }
      timings[w] = { seconds: Math.round((Date.now() - t0) / 1000), noise: noise.window(t0) };
      progress(`== ${w} done in ${Math.round((Date.now() - t0) / 1000)} s`);
    }
  } finally {
    noise.stop();
    killAllChildren();
    progress('cleaning up (schemas, Redis keys, topics, scratch files)');
    await bounded('cleanup', 180000, () => cleanup.run()).catch((err: unknown) =>
      progress(`cleanup: ${(err as Error).message}`),
    );
  }

  const finishedAt = new Date();
  const table = markdownTable(results.rows);
  const out = {
    name: args.name,
    profile: args.profile.name,
    startedAt: startedAt.toISOString(),
    finishedAt: finishedAt.toISOString(),
    seconds: Math.round((finishedAt.getTime() - startedAt.getTime()) / 1000),
    machine: { ...machineInfo(), calibration },
    versions: await versions(stack),
    configuration: {
      profile: args.profile,
      workloads: args.only,
      service: {
        LUDUS_LOG_LEVEL: 'warn (no access logs)',
        rateLimits: 'off',
        overrides: args.serviceEnv,
        latencyRates: args.latencyRates,
        loadGenerator: `wrk -t1 -c${args.profile.ingest.connections} (ingest), -c${args.profile.query.connections} (query)`,
      },
    },
    noise: { whole: noise.window(startedAt.getTime()), samples: noise.samples, byWorkload: timings },
    errors,
    summary: results.rows,
    raw: results.raw,
  };
  mkdirSync(`${ROOT}/bench/results`, { recursive: true });
  writeFileSync(`${ROOT}/bench/results/${args.name}.json`, `${JSON.stringify(out, null, 2)}\n`);
  const n = noise.window(startedAt.getTime());
  const md =
    `# Bench ${args.name} (${args.profile.name} profile), ${startedAt.toISOString()}\n\n` +
    `${out.machine.cpus} CPUs (${out.machine.cpuModel}, calibration ${calibration.opsPerS.toLocaleString('en-US')} ops/s), ${out.machine.memoryGb} GB, Node ${out.machine.node}; ` +
    `Kafka ${out.versions.kafka}, Redis ${out.versions.redis}, Postgres ${out.versions.postgres}, ClickHouse ${out.versions.clickhouse}. ` +
    `Noise: load average ${n.load1.mean} (max ${n.load1.max}), other engineers' tests used ${n.otherTestsCpuPct.mean}% of the machine on average (max ${n.otherTestsCpuPct.max}%).\n\n` +
    (Object.keys(args.serviceEnv).length
      ? `Service settings of this run: ${Object.entries(args.serviceEnv)
          .map(([k, v]) => `${k}=${v}`)
          .join(', ')}.\n\n`
      : '') +
    (Object.keys(args.latencyRates).length
      ? `Latency runs at fixed rates: ${Object.entries(args.latencyRates)
          .map(([k, v]) => `${k} ${v.toLocaleString('en-US')} events/s`)
          .join(', ')}.\n\n`
      : '') +
    `Figures: median (min–max) of ${args.profile.runs} runs.\n\n${table}\n` +
    (Object.keys(errors).length
      ? `\nFailed workloads: ${Object.keys(errors).join(', ')} (see the JSON)\n`
      : '');
  writeFileSync(`${ROOT}/bench/results/summary.md`, md);
  process.stdout.write(`\n${md}`);
  if (results.raw['scaling.curves']) {
    const png =
      args.profile.name === 'full' ? `${ROOT}/docs/img/scaling.png` : `${tmpRoot()}/${args.name}-scaling.png`;
    try {
      renderChart(out, png);
      progress(`chart: ${png}`);
    } catch (err) {
      progress(`chart failed: ${(err as Error).message}`);
    }
  }
  progress(`results: bench/results/${args.name}.json, bench/results/summary.md`);
  return Object.keys(errors).length ? 1 : 0;
}

const tmpRoot = () => {
  const d = `${ROOT}/bench/results/tmp`;
  mkdirSync(d, { recursive: true });
  return d;
};

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`bench: ${(err as Error).stack ?? String(err)}\n`);
    killAllChildren();
    process.exit(1);
  },
);
