/**
 * One process per embedded data directory (issue 11, item 12), with real processes: while the
 * server runs, `ludus tenants create` on its directory is refused with one line naming the
 * server's pid and its operator API, and exits non-zero (before, it printed "created" and the
 * tenant was lost); the server keeps serving and the API creates the tenant. A server killed with
 * SIGKILL leaves a stale lock that the next process takes over; a stopped server removes its lock.
 */
import { randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { childEnv, spawnCli, type Spawned } from '../support/process';

const run = promisify(execFile);
const ROOT = join(__dirname, '..', '..');

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

describe('the embedded data directory is locked to one process', () => {
  let dir: string;
  let env: NodeJS.ProcessEnv;
  let adminPort: number;
  const rootKey = `ldr_${randomBytes(32).toString('base64url')}`;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ludus-lock-'));
    adminPort = await freePort();
    env = childEnv({
      LUDUS_DATA_DIR: dir,
      LUDUS_HOST: '127.0.0.1',
      LUDUS_INGEST_PORT: '0',
      LUDUS_ADMIN_PORT: String(adminPort),
      LUDUS_QUERY_PORT: '0',
      LUDUS_ROOT_KEY: rootKey,
    });
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** Runs the command line to its end: exit code, stdout, stderr. */
  const ludus = async (...args: string[]) => {
    try {
      const r = await run(process.execPath, ['--import', 'tsx', join(ROOT, 'runtime', 'cli.ts'), ...args], {
        cwd: ROOT,
        env,
      });
      return { code: 0, stdout: r.stdout, stderr: r.stderr };
    } catch (err) {
      const e = err as { code: number; stdout: string; stderr: string };
      return { code: e.code, stdout: e.stdout, stderr: e.stderr };
    }
  };
  const serve = async (): Promise<Spawned> => {
    const p = spawnCli(['serve', '--roles', 'ingest,api,processors'], env);
    await p.waitForLog((l) => l.msg === 'ludus is up', 90_000);
    return p;
  };
  const tenantIds = async () => {
    const r = await fetch(`http://127.0.0.1:${adminPort}/v1/tenants`, { headers: { 'x-api-key': rootKey } });
    expect(r.status).toBe(200);
    return ((await r.json()) as { tenants: Array<{ id: string }> }).tenants.map((t) => t.id);
  };

  it('refuses a second process while the server runs, and hands over after SIGKILL and after a stop', async () => {
    const first = await serve();
    try {
      const refused = await ludus('tenants', 'create', 'Acme', '--id', 'acme');
      expect(refused.code).not.toBe(0);
      expect(refused.stdout).not.toContain('created');
      const lines = refused.stderr.trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toContain(`data directory ${dir} is in use by process ${first.child.pid}`);
      expect(lines[0]).toContain(`http://127.0.0.1:${adminPort}/v1/tenants`);
      // The server kept serving, never saw a tenant "acme", and its API creates one.
      expect(await tenantIds()).not.toContain('acme');
      const created = await fetch(`http://127.0.0.1:${adminPort}/v1/tenants`, {
        method: 'POST',
        headers: { 'x-api-key': rootKey, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'Acme', id: 'acme' }),
      });
      expect(created.status).toBe(201);
      expect(await tenantIds()).toContain('acme');
    } finally {
      first.child.kill('SIGKILL');
      await first.exited;
    }

    // A stale lock (its process is gone) is taken over; what the API created survived.
    expect(existsSync(join(dir, 'pg.lock'))).toBe(true);
    const created = await ludus('tenants', 'create', 'Beta', '--id', 'beta');
    expect([created.code, created.stderr]).toEqual([0, '']);
    const list = await ludus('tenants', 'list', '--json');
    expect(JSON.parse(list.stdout).map((t: { id: string }) => t.id)).toEqual(
      expect.arrayContaining(['acme', 'beta']),
    );
    expect(existsSync(join(dir, 'pg.lock'))).toBe(false);

    // The server sees what the command line created, and removes its lock when stopped.
    const second = await serve();
    try {
      expect(await tenantIds()).toEqual(expect.arrayContaining(['acme', 'beta']));
      expect((await ludus('tenants', 'list')).code).not.toBe(0);
    } finally {
      second.child.kill('SIGTERM');
      expect(await second.exited).toBe(0);
    }
    expect(existsSync(join(dir, 'pg.lock'))).toBe(false);
  }, 240_000);
});
