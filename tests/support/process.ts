/**
 * Runs the real command-line entry (`tsx runtime/cli.ts ...`) as a child process, for end-to-end
 * tests of start-up, configuration errors and shutdown.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';

const ROOT = join(__dirname, '..', '..');
/**
 * Node itself with tsx's loader, not the `tsx` wrapper: the wrapper runs the program in a child
 * process, so a SIGKILL sent to it would leave the real process running.
 */
const NODE_ARGS = ['--import', 'tsx'];

/** A clean environment: only what the child needs, plus the given LUDUS_* settings. */
export function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    LUDUS_LOG_LEVEL: 'info',
    // Every child opens its operations listener on a free port (never 8083, shared by parallel tests).
    LUDUS_OPS_PORT: '0',
    // No pipeline warm-up (2 s of synthetic work per start), unless a test asks for it.
    LUDUS_PIPELINE_WARM_UP_MS: '0',
    LUDUS_INGEST_WARM_UP_MS: '0',
    ...extra,
  };
}

export interface Spawned {
  child: ChildProcess;
  /** Structured log lines seen on stdout so far. */
  logs: Array<Record<string, unknown>>;
  stderr(): string;
  /** Resolves with the first log line matching, or rejects after timeoutMs. */
  waitForLog(
    match: (l: Record<string, unknown>) => boolean,
    timeoutMs?: number,
  ): Promise<Record<string, unknown>>;
  exited: Promise<number | null>;
}

export function spawnCli(args: string[], env: NodeJS.ProcessEnv): Spawned {
  const child = spawn(process.execPath, [...NODE_ARGS, join(ROOT, 'runtime', 'cli.ts'), ...args], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: Array<Record<string, unknown>> = [];
  let err = '';
  let buf = '';
  const waiters: Array<() => void> = [];
  child.stdout!.on('data', (d: Buffer) => {
    buf += d.toString('utf8');
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      try {
        logs.push(JSON.parse(line));
      } catch {
        logs.push({ raw: line });
      }
    }
    waiters.splice(0).forEach((w) => w());
  });
  child.stderr!.on('data', (d: Buffer) => (err += d.toString('utf8')));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const waitForLog = (match: (l: Record<string, unknown>) => boolean, timeoutMs = 60000) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const timer = setTimeout(
        () =>
          reject(
            new Error(
              `log line not seen within ${timeoutMs} ms; stderr: ${err}; logs: ${JSON.stringify(logs.slice(-5))}`,
            ),
          ),
        timeoutMs,
      );
      const check = () => {
        const hit = logs.find(match);
        if (hit) {
          clearTimeout(timer);
          resolve(hit);
          return;
        }
        waiters.push(check);
      };
      exited.then(() => {
        const hit = logs.find(match);
        if (!hit) {
          clearTimeout(timer);
          reject(new Error(`process exited before the log line; stderr: ${err}`));
        }
      });
      check();
    });
  return { child, logs, stderr: () => err, waitForLog, exited };
}
