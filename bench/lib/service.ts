/**
 * Ludus service processes started by the bench: `node --import tsx runtime/cli.ts serve --roles ...`
 * with an explicit environment (nothing of the bench's own LUDUS_* leaks in), fixed free ports, a
 * log file, optional node flags (--cpu-prof), and a bounded stop (SIGTERM, then SIGKILL).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { ROOT } from './stack';
import { Fatal, progress, sleep, waitFor } from './util';

/** Every child the bench started and has not stopped yet: killed on exit whatever happens. */
const children = new Set<ChildProcess>();

/** Process ids of the services the bench is running now (the noise sampler leaves them out). */
export function benchPids(): Set<number> {
  return new Set([...children].map((c) => c.pid!).filter(Boolean));
}

export function killAllChildren(): void {
  for (const c of children) {
    try {
      c.kill('SIGKILL');
    } catch {
      /* gone */
    }
  }
  children.clear();
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

export interface ServiceOptions {
  label: string;
  roles: string;
  env: Record<string, string>;
  /** Extra node flags, e.g. ['--cpu-prof', '--cpu-prof-dir=...']. */
  nodeFlags?: string[];
  logFile: string;
  /** Wait for /health of every gateway the roles serve. Default true. */
  waitHealthy?: boolean;
  startTimeoutMs?: number;
  /**
   * Another script and its arguments instead of `runtime/cli.ts serve --roles <roles>` (a
   * baseline server such as bench/minimal-query.ts); only the query URL's /health is awaited.
   */
  script?: string[];
}

export interface Service {
  label: string;
  pid: number;
  url: { ingest: string; admin: string; query: string };
  /** Resolves when the process has exited; the exit code (or null after a signal). */
  exited: Promise<number | null>;
  stop(): Promise<void>;
}

/** Environment every service gets; the caller's env overrides it. */
export function baseEnv(ports: { ingest: number; admin: number; query: number }): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: process.env.HOME ?? '/tmp',
    LUDUS_HOST: '127.0.0.1',
    LUDUS_INGEST_PORT: String(ports.ingest),
    LUDUS_ADMIN_PORT: String(ports.admin),
    LUDUS_QUERY_PORT: String(ports.query),
    // The operations listener on a free port: several processes of one role share this host.
    LUDUS_OPS_PORT: '0',
    // Access logs (info) off: the bench measures the service, not pino writing to a file.
    LUDUS_LOG_LEVEL: 'warn',
    LUDUS_RATE_LIMIT_INGEST: 'off',
    LUDUS_RATE_LIMIT_QUERY: 'off',
    LUDUS_RATE_LIMIT_ADMIN: 'off',
  };
}

/** Settings every service of the run gets on top of its own (`--service-env`, for A/B runs). */
let overrides: Record<string, string> = {};

export function setServiceOverrides(env: Record<string, string>): void {
  overrides = { ...env };
}

export async function startService(o: ServiceOptions): Promise<Service> {
  const ports = { ingest: await freePort(), admin: await freePort(), query: await freePort() };
  const env = { ...baseEnv(ports), ...o.env, ...overrides };
  const fd = openSync(o.logFile, 'a');
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      ...(o.nodeFlags ?? []),
      ...(o.script ?? ['runtime/cli.ts', 'serve', '--roles', o.roles]),
    ],
    { cwd: ROOT, env, stdio: ['ignore', fd, fd] },
  );
  closeSync(fd);
  children.add(child);
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => {
      children.delete(child);
      resolve(code);
    }),
  );
  let dead = false;
  void exited.then(() => (dead = true));
  const url = {
    ingest: `http://127.0.0.1:${ports.ingest}`,
    admin: `http://127.0.0.1:${ports.admin}`,
    query: `http://127.0.0.1:${ports.query}`,
  };
  const roles = o.roles.split(',');
  const gateways = o.script
    ? [url.query]
    : [
        ...(roles.includes('ingest') || roles.includes('all') ? [url.ingest] : []),
        ...(roles.includes('api') || roles.includes('all') ? [url.admin, url.query] : []),
      ];
  const svc: Service = {
    label: o.label,
    pid: child.pid!,
    url,
    exited,
    stop: async () => {
      if (dead) return;
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 30000);
      await exited;
      clearTimeout(t);
    },
  };
  if (o.waitHealthy !== false && gateways.length) {
    try {
      await waitFor(
        `${o.label} (log: ${o.logFile})`,
        o.startTimeoutMs ?? 120000,
        async () => {
          // A process that died will not come up: fail now, with the end of its log (the log
          // itself is removed with the run's scratch files).
          if (dead) throw new Fatal(`${o.label} exited during start-up: ${logTail(o.logFile)}`);
          for (const g of gateways) {
            const r = await fetch(`${g}/health`, { signal: AbortSignal.timeout(2000) });
            if (!r.ok) return undefined;
            await r.arrayBuffer();
          }
          return true;
        },
        100,
      );
    } catch (err) {
      await svc.stop();
      throw err;
    }
  }
  progress(`${o.label}: pid ${svc.pid} ${o.waitHealthy === false ? 'started' : 'up'} (roles ${o.roles})`);
  return svc;
}

/** Samples a process's CPU time (user+sys, ms) and RSS (MB) from /proc. */
export async function procStat(pid: number): Promise<{ cpuMs: number; rssMb: number } | null> {
  try {
    const { readFileSync } = await import('node:fs');
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    const rssPages = Number(fields[21]);
    return { cpuMs: (ticks * 1000) / 100, rssMb: (rssPages * 4096) / 1048576 };
  } catch {
    return null;
  }
}

export { sleep };

/** The last lines of a log file, on one line (for error messages). */
export function logTail(file: string): string {
  try {
    return readFileSync(file, 'utf8').trim().split('\n').slice(-5).join(' | ').slice(-1500);
  } catch {
    return '(no log)';
  }
}
