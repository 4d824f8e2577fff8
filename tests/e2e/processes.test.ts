/**
 * `ludus serve --processes N` (runtime/processes.ts): the roles in N worker processes sharing the
 * gateways' ports, a worker that dies started again while the others keep answering, SIGTERM
 * draining every worker; and the embedded shape refused, since its data lives in one process.
 */
import { shapeEnv } from '../support/app';
import { childEnv, spawnCli } from '../support/process';

const up = (l: Record<string, unknown>) => l.msg === 'ludus is up';

describe('ludus serve --processes [distributed]', () => {
  it('runs the roles in two processes on one port, replaces one that dies, and stops both on SIGTERM', async () => {
    const env = childEnv({
      ...shapeEnv('distributed'),
      LUDUS_INGEST_PORT: '0',
      LUDUS_ADMIN_PORT: '0',
      LUDUS_QUERY_PORT: '0',
    });
    const p = spawnCli(['serve', '--roles', 'ingest,api', '--processes', '2'], env);
    try {
      await p.waitForLog((l) => l.msg === 'starting processes' && l.processes === 2);
      await p.waitForLog(() => p.logs.filter(up).length >= 2, 90000);
      const first = p.logs.filter(up);
      const pids = first.map((l) => l.pid as number);
      expect(new Set(pids).size).toBe(2);
      // Both workers listen on the same port of each gateway.
      expect(first[0]!.query).toBe(first[1]!.query);
      const query = first[0]!.query as string;
      const health = async () =>
        (await fetch(`${query}/health`, { headers: { connection: 'close' } })).status;
      expect(await Promise.all(Array.from({ length: 20 }, health))).toEqual(Array(20).fill(200));

      // One worker killed: the other keeps answering, and the primary starts a third.
      process.kill(pids[0]!, 'SIGKILL');
      await p.waitForLog((l) => l.msg === 'a process exited; starting another' && l.pid === pids[0]);
      expect(await Promise.all(Array.from({ length: 10 }, health))).toEqual(Array(10).fill(200));
      const third = await p.waitForLog((l) => up(l) && !pids.includes(l.pid as number), 90000);
      expect(third.query).toBe(query);

      p.child.kill('SIGTERM');
      expect(await p.exited).toBe(0);
      expect(p.logs.filter((l) => l.msg === 'stopped').length).toBe(2);
      expect(p.logs.some((l) => l.msg === 'every process stopped')).toBe(true);
    } finally {
      if (p.child.exitCode === null) p.child.kill('SIGKILL');
    }
  });

  it('refuses several processes in the embedded shape, naming the variable', async () => {
    const p = spawnCli(['serve', '--processes', '2'], childEnv({}));
    expect(await p.exited).toBe(1);
    expect(p.stderr()).toMatch(
      /LUDUS_PROCESSES.*several processes need adapters that live outside the process.*sql=pglite/,
    );
    expect(p.logs.filter(up)).toEqual([]);
  });
});
