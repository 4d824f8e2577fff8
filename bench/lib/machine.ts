/**
 * What the numbers were measured on: the machine, the versions of the stack, and how busy the
 * machine was with other work while the bench ran (other engineers' test suites share it).
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { version as ludusVersion } from '../../package.json';
import { benchPids } from './service';
import { ROOT, type StackSettings } from './stack';

export interface MachineInfo {
  cpus: number;
  cpuModel: string;
  memoryGb: number;
  os: string;
  node: string;
  hostname: string;
}

/**
 * How fast this machine runs a fixed piece of single-threaded JavaScript, so that a comparison of
 * two runs can tell a slower machine from a slower Ludus (machines of one kind differ by two to
 * three times: docs/performance.md, issue 19). One operation: a JSON round trip of a fixed
 * 1.5 KB object, 64 Map insertions and lookups, and the sort of 128 numbers; the median rate of
 * nine slices of 200 ms. Measured while nothing of the bench runs yet. Back-to-back calibrations
 * on one machine differ by up to about 15 % (its speed moves too), so only a larger difference
 * says something (bench/lib/compare.ts `speedNote`).
 */
export interface Calibration {
  opsPerS: number;
  /** The slices' rates, for the spread. */
  slices: number[];
}

export function calibrate(): Calibration {
  const doc = {
    tenant_id: 'calibration',
    events: Array.from({ length: 12 }, (_, i) => ({
      event_id: `e-${i}`,
      type: 'match_finished',
      actor: { user_id: `user-${i * 7}` },
      occurred_at: '2026-11-28T12:00:00.000Z',
      attrs: { kills: i, mode: 'ranked', win: i % 2 === 0 },
    })),
  };
  const numbers = Array.from({ length: 128 }, (_, i) => (i * 7919) % 1009);
  let sink = 0;
  const op = (): void => {
    const back = JSON.parse(JSON.stringify(doc)) as typeof doc;
    const m = new Map<string, number>();
    for (let i = 0; i < 64; i++) m.set(`${back.tenant_id}:${i}`, i);
    for (let i = 0; i < 64; i += 3) sink += m.get(`${back.tenant_id}:${i}`) ?? 0;
    sink += numbers.slice().sort((a, b) => a - b)[64]!;
  };
  const slice = (ms: number): number => {
    let n = 0;
    const start = performance.now();
    const end = start + ms;
    while (performance.now() < end) {
      for (let i = 0; i < 20; i++) op();
      n += 20;
    }
    return n / ((performance.now() - start) / 1000);
  };
  slice(300); // the JIT's warm-up
  const slices = Array.from({ length: 9 }, () => Math.round(slice(200)));
  if (sink === -1) slices.push(0); // keeps `sink` (and the work) alive
  const sorted = [...slices].sort((a, b) => a - b);
  return { opsPerS: sorted[4]!, slices };
}

export function machineInfo(): MachineInfo {
  return {
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model ?? 'unknown',
    memoryGb: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    os: `${os.type()} ${os.release()}`,
    node: process.version,
    hostname: os.hostname(),
  };
}

function quiet(fn: () => string): string | null {
  try {
    return fn().trim() || null;
  } catch {
    return null;
  }
}

export async function versions(stack: StackSettings | null): Promise<Record<string, string | null>> {
  const out: Record<string, string | null> = { ludus: ludusVersion };
  out.wrk = quiet(() => execFileSync('wrk', ['--version'], { encoding: 'utf8' }).split('\n')[0]!);
  out.redisBenchmark = quiet(() => execFileSync('redis-benchmark', ['--version'], { encoding: 'utf8' }));
  if (!stack) return out;
  out.redis = quiet(
    () =>
      execFileSync('redis-cli', ['-u', stack.redisUrl, 'INFO', 'server'], { encoding: 'utf8' }).match(
        /redis_version:(\S+)/,
      )![1]!,
  );
  out.postgres = quiet(() =>
    execFileSync('psql', [stack.pgUrl, '-Atc', 'SHOW server_version'], { encoding: 'utf8', timeout: 10000 }),
  );
  out.clickhouse = await fetch(`${stack.clickhouseUrl}/?query=SELECT%20version()`, {
    signal: AbortSignal.timeout(5000),
  })
    .then((r) => r.text())
    .then((t) => t.trim())
    .catch(() => null);
  const home = process.env.LUDUS_STACK_HOME ?? `${os.homedir()}/.cache/ludus-stack`;
  out.kafka = quiet(() => {
    const jar = readdirSync(`${home}/kafka/libs`).find((f) => /^kafka_2\.13-.*\.jar$/.test(f))!;
    return jar.replace(/^kafka_2\.13-|\.jar$/g, '');
  });
  out.kafkajs = quiet(
    () =>
      (JSON.parse(readFileSync(`${ROOT}/node_modules/kafkajs/package.json`, 'utf8')) as { version: string })
        .version,
  );
  out.registry =
    quiet(() => execFileSync('bash', [`${ROOT}/ops/stack`, 'status'], { encoding: 'utf8' }))?.match(
      /Apicurio Registry ([\d.]+)/,
    )?.[1] ?? '3.3.3 (Apicurio, ops/stack)';
  return out;
}

/**
 * Samples, every `everyMs`, the 1-minute load average, the machine's CPU use (from /proc/stat) and
 * the CPU used by other engineers' test runs (jest, ops/test, and Ludus processes the bench did not start).
 */
export class NoiseSampler {
  private timer: NodeJS.Timeout | undefined;
  private lastCpu: { busy: number; total: number } | null = null;
  private lastJest = new Map<number, number>();
  private lastAt = 0;
  readonly samples: Array<{ t: number; load1: number; machineCpuPct: number; otherTestsCpuPct: number }> = [];

  start(everyMs = 2000): void {
    this.sample();
    this.timer = setInterval(() => this.sample(), everyMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  /** Mean and max of the samples taken since `fromT` (ms). */
  window(fromT: number, toT = Date.now()) {
    const xs = this.samples.filter((s) => s.t >= fromT && s.t <= toT);
    const agg = (k: 'load1' | 'machineCpuPct' | 'otherTestsCpuPct') => ({
      mean: xs.length ? Math.round((xs.reduce((a, s) => a + s[k], 0) / xs.length) * 10) / 10 : null,
      max: xs.length ? Math.max(...xs.map((s) => s[k])) : null,
    });
    return {
      samples: xs.length,
      load1: agg('load1'),
      machineCpuPct: agg('machineCpuPct'),
      otherTestsCpuPct: agg('otherTestsCpuPct'),
    };
  }

  private sample(): void {
    try {
      const now = Date.now();
      const load1 = Number(readFileSync('/proc/loadavg', 'utf8').split(' ')[0]);
      const cpu = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
      const idle = cpu[3]! + (cpu[4] ?? 0);
      const total = cpu.reduce((a, b) => a + b, 0);
      const cur = { busy: total - idle, total };
      const jest = new Map<number, number>();
      const ours = benchPids();
      ours.add(process.pid);
      for (const d of readdirSync('/proc')) {
        if (!/^\d+$/.test(d)) continue;
        try {
          const cmd = readFileSync(`/proc/${d}/cmdline`, 'utf8');
          // Other engineers' suites: jest and its workers, and the services their tests spawn.
          if (!/jest|ops\/test|runtime\/cli\.ts/.test(cmd) || ours.has(Number(d))) continue;
          const st = readFileSync(`/proc/${d}/stat`, 'utf8');
          const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
          // A worker of a service this bench started (LUDUS_PROCESSES=2) is the bench's own load.
          if (ours.has(Number(f[1]))) continue;
          jest.set(Number(d), Number(f[11]) + Number(f[12]));
        } catch {
          /* gone */
        }
      }
      if (this.lastCpu) {
        const dt = (now - this.lastAt) / 1000;
        let jestTicks = 0;
        for (const [pid, ticks] of jest) jestTicks += ticks - (this.lastJest.get(pid) ?? ticks);
        this.samples.push({
          t: now,
          load1,
          machineCpuPct:
            Math.round(
              ((100 * (cur.busy - this.lastCpu.busy)) / Math.max(1, cur.total - this.lastCpu.total)) * 10,
            ) / 10,
          // Of the whole machine (all cores = 100%).
          otherTestsCpuPct: Math.round((jestTicks / 100 / dt / os.cpus().length) * 100 * 10) / 10,
        });
      }
      this.lastCpu = cur;
      this.lastJest = jest;
      this.lastAt = now;
    } catch {
      /* not Linux: no samples */
    }
  }
}
