/**
 * The command line: tenants and keys commands with --json, against a fresh embedded data
 * directory, and the first-start welcome (demo tenant, root key, curl lines).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { childEnv, spawnCli } from '../support/process';
import { waitFor } from '../support/wait';

const run = promisify(execFile);
const ROOT = join(__dirname, '..', '..');

// Each step spawns a fresh CLI process (tsx, migrations, PGlite open): seconds each on a loaded
// two-core machine, so the test bound is generous.
jest.setTimeout(180_000);

describe('ludus command line [embedded]', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'ludus-cli-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const ludus = async (...args: string[]) => {
    const r = await run(
      join(ROOT, 'node_modules', '.bin', 'tsx'),
      [join(ROOT, 'runtime', 'cli.ts'), ...args],
      {
        cwd: ROOT,
        env: childEnv({ LUDUS_DATA_DIR: dir }),
      },
    );
    return r.stdout;
  };
  const fails = async (...args: string[]) => {
    try {
      await ludus(...args);
    } catch (err) {
      return err as { stderr: string; code: number };
    }
    throw new Error('expected a failure');
  };

  it('creates, lists and suspends tenants, creates, lists and revokes keys, with --json', async () => {
    const t = JSON.parse(await ludus('tenants', 'create', 'Acme', '--id', 'acme', '--json'));
    expect(t).toMatchObject({ id: 'acme', name: 'Acme', status: 'active' });
    expect(t.jwt_secret).toMatch(/^ldt_/);
    const list = JSON.parse(await ludus('tenants', 'list', '--json'));
    expect(list.map((x: { id: string }) => x.id)).toContain('acme');
    expect(JSON.stringify(list)).not.toContain(t.jwt_secret);
    expect(JSON.parse(await ludus('tenants', 'suspend', 'acme', '--json')).status).toBe('suspended');
    expect(await ludus('tenants', 'activate', 'acme')).toContain('tenant acme is active');
    const k = JSON.parse(
      await ludus(
        'keys',
        'create',
        '--name',
        'ci',
        '--tenants',
        'acme',
        '--scopes',
        'coupons:read,wallet:*',
        '--json',
      ),
    );
    expect(k).toMatchObject({ name: 'ci', tenant_ids: ['acme'], scopes: ['coupons:read', 'wallet:*'] });
    expect(k.key).toMatch(/^ldk_/);
    const keys = JSON.parse(await ludus('keys', 'list', '--json'));
    expect(keys.find((x: { id: string }) => x.id === k.id)).toMatchObject({
      hint: k.key.slice(-4),
      revoked_at: null,
    });
    expect(JSON.stringify(keys)).not.toContain(k.key);
    expect(JSON.parse(await ludus('keys', 'revoke', k.id, '--json')).revoked_at).not.toBeNull();
    expect(await ludus('tenants', 'list')).toMatch(/^ID\s+NAME\s+STATUS/);
  });

  it('refuses bad input with one line naming what to fix', async () => {
    const dup = await fails('tenants', 'create', 'Again', '--id', 'acme');
    expect(dup.stderr.trim()).toBe('ludus: tenant acme already exists');
    const scope = await fails(
      'keys',
      'create',
      '--name',
      'x',
      '--tenants',
      'acme',
      '--scopes',
      'coupons:delete',
    );
    expect(scope.stderr.trim()).toBe('ludus: --scopes: unknown scope coupons:delete');
    const tenant = await fails('keys', 'create', '--name', 'x', '--tenants', 'ghost');
    expect(tenant.stderr.trim()).toBe('ludus: --tenants: tenant ghost not found');
    const id = await fails('tenants', 'create', 'X', '--id', 'Bad Id');
    expect(id.stderr.trim()).toMatch(/^ludus: --id: /);
  });
});

describe('first embedded start', () => {
  it('creates a demo tenant and prints its key, a tenant JWT, the root key and curl lines once', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ludus-first-'));
    const env = childEnv({
      LUDUS_DATA_DIR: dir,
      LUDUS_INGEST_PORT: '0',
      LUDUS_ADMIN_PORT: '0',
      LUDUS_QUERY_PORT: '0',
      LUDUS_HOST: '127.0.0.1',
    });
    const p = spawnCli(['serve'], env);
    try {
      await p.waitForLog((l) => l.msg === 'ludus is up');
      // The banner (secrets) goes to stderr; stdout holds only JSON log lines.
      const text = await waitFor(() => (p.stderr().includes('Query gateway') ? p.stderr() : null), {
        what: 'the welcome banner on stderr',
      });
      expect(p.logs.filter((l) => 'raw' in l)).toEqual([]);
      expect(text).toContain('Demo tenant "demo" created');
      expect(text).toMatch(/API key \(admin gateway\):\s+ldk_/);
      expect(text).toMatch(/Root key/);
      expect(text).toMatch(/curl -X POST http:\/\/127\.0\.0\.1:\d+\/v1\/events/);
      const jwtLine = /tenant JWT \(30 days\):\s+(\S+)/.exec(text)![1]!;
      const ingest = (p.logs.find((l) => l.msg === 'ludus is up') as { ingest: string }).ingest;
      const r = await fetch(`${ingest}/v1/whoami`, { headers: { authorization: `Bearer ${jwtLine}` } });
      expect(await r.json()).toEqual({ principal: 'tenant', via: 'jwt', tenant_id: 'demo' });
      p.child.kill('SIGTERM');
      expect(await p.exited).toBe(0);
      // A second start prints nothing of the kind.
      const again = spawnCli(['serve'], env);
      await again.waitForLog((l) => l.msg === 'ludus is up');
      again.child.kill('SIGTERM');
      await again.exited;
      expect(again.stderr()).not.toContain('Demo tenant');
      expect(again.logs.some((l) => typeof l.raw === 'string' && l.raw.includes('Demo tenant'))).toBe(false);
    } finally {
      p.child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
