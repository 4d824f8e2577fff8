/**
 * Several processes of one service on one machine (`ludus serve --processes N`,
 * `LUDUS_PROCESSES`): the primary process forks N workers with node:cluster and serves nothing
 * itself; each worker runs the configured roles, and the gateways' ports are shared (the primary
 * accepts each connection and hands it to a worker in turn). For the distributed shape only: its
 * stores, event log, rank index and rate limiter live outside the process, so the roles are
 * stateless (the gateways) or share their work through the stores (processors through Kafka's
 * consumer group, scheduler and dispatcher through row locks). The embedded shape keeps its data in
 * the process, so config refuses it.
 *
 * Supervision: a worker that exits on its own is started again after a pause; more than
 * `MAX_RESTARTS` within `RESTART_WINDOW_MS` stops the service (exit 1: something fails at every
 * start, and a loop of restarts would hide it). SIGTERM or SIGINT to the primary is passed to every
 * worker, which drains as a single process does; the primary exits when they have, 0 if every
 * worker stopped cleanly.
 */
import cluster, { type Worker } from 'node:cluster';
import type { Logger } from '../shared/logger';

export const MAX_RESTARTS = 5;
export const RESTART_WINDOW_MS = 60_000;
const RESTART_PAUSE_MS = 1000;

export function superviseProcesses(count: number, log: Logger): void {
  let stopping = false;
  let failed = false;
  const restarts: number[] = [];
  const live = new Set<Worker>();

  const start = () => {
    const w = cluster.fork();
    live.add(w);
    w.on('exit', (code, signal) => {
      live.delete(w);
      if (stopping) {
        if (code !== 0) failed = true;
        if (live.size === 0) {
          log.info({ failed }, 'every process stopped');
          process.exit(failed ? 1 : 0);
        }
        return;
      }
      const now = Date.now();
      restarts.push(now);
      while (restarts.length && restarts[0]! < now - RESTART_WINDOW_MS) restarts.shift();
      if (restarts.length > MAX_RESTARTS) {
        log.error(
          { pid: w.process.pid, code, signal, restarts: restarts.length },
          `processes keep exiting (${restarts.length} in ${RESTART_WINDOW_MS / 1000} s): stopping`,
        );
        failed = true;
        stop('restarts');
        return;
      }
      log.error({ pid: w.process.pid, code, signal }, 'a process exited; starting another');
      setTimeout(() => {
        if (!stopping) start();
      }, RESTART_PAUSE_MS).unref();
    });
  };

  const stop = (reason: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ reason, processes: live.size }, 'stopping every process');
    if (live.size === 0) process.exit(failed ? 1 : 0);
    for (const w of live) w.process.kill('SIGTERM');
  };

  log.info({ processes: count, pid: process.pid }, 'starting processes');
  for (let i = 0; i < count; i++) start();
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

/** True in a worker of `superviseProcesses` (and false in a single process). */
export const isWorker = () => cluster.isWorker;

/** The first worker prints the start-up banner; the others do not repeat it. */
export const isFirstWorker = () => !cluster.isWorker || cluster.worker?.id === 1;
