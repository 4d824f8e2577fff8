/**
 * `ludus tokens` and `ludus --version`: a newcomer creates a tenant and an API key with the command
 * line, mints tokens, and calls the gateways of a server started afterwards on the same data
 * directory (the embedded store admits one process at a time, so the commands run first).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { decodeJwt } from 'jose';
import { version } from '../../package.json';
import { call } from '../support/app';
import { childEnv, spawnCli } from '../support/process';

const run = promisify(execFile);
const ROOT = join(__dirname, '..', '..');

describe('ludus tokens [embedded]', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'ludus-tokens-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const ludus = async (...args: string[]) => {
    const r = await run(process.execPath, ['--import', 'tsx', join(ROOT, 'runtime', 'cli.ts'), ...args], {
      cwd: ROOT,
      env: childEnv({ LUDUS_DATA_DIR: dir }),
    });
    return r.stdout;
  };
  const fails = async (...args: string[]) => {
    try {
      await ludus(...args);
    } catch (err) {
      return (err as { stderr: string }).stderr.trim();
    }
    throw new Error('expected a failure');
  };

  it('mints end-user, admin and short-lived tokens the gateways accept, and refuses the expired one', async () => {
    expect((await ludus('--version')).trim()).toBe(version);

    await ludus('tenants', 'create', 'Acme', '--id', 'acme', '--json');
    const key = JSON.parse(await ludus('keys', 'create', '--name', 'ops', '--tenants', 'acme', '--json'));
    // --json: one JSON document on stdout, nothing else.
    const user = JSON.parse(
      await ludus('tokens', '--tenant', 'acme', '--user', 'alice', '--expires-in', '30d', '--json'),
    );
    expect(user).toMatchObject({ sub_type: 'user', tenant_id: 'acme', user_id: 'alice' });
    const claims = decodeJwt(user.token);
    expect(claims).toMatchObject({ sub_type: 'user', tenant_id: 'acme', sub: 'alice' });
    expect(claims.exp! - claims.iat!).toBe(30 * 86400);
    expect(new Date(user.expires_at).getTime()).toBe(claims.exp! * 1000);
    // Without --json: the token alone, for TOKEN=$(...).
    const admin = (await ludus('tokens', '--admin-key', key.id, '--expires-in', '15m')).trim();
    expect(decodeJwt(admin)).toMatchObject({ sub_type: 'admin', sub_id: key.id });
    const short = (await ludus('tokens', '--tenant', 'acme', '--user', 'bob', '--expires-in', '1s')).trim();
    expect(decodeJwt(short).exp! - decodeJwt(short).iat!).toBe(1);

    expect(await fails('tokens', '--tenant', 'ghost')).toBe('ludus: --tenant: tenant ghost not found');
    expect(await fails('tokens', '--tenant', 'acme', '--expires-in', '2y')).toMatch(/^ludus: --expires-in: /);
    expect(await fails('tokens', '--tenant', 'acme', '--admin-key', key.id)).toMatch(
      /^ludus: tokens: give either/,
    );

    const server = spawnCli(
      ['serve', '--roles', 'ingest,api,processors'],
      childEnv({
        LUDUS_DATA_DIR: dir,
        LUDUS_HOST: '127.0.0.1',
        LUDUS_INGEST_PORT: '0',
        LUDUS_ADMIN_PORT: '0',
        LUDUS_QUERY_PORT: '0',
      }),
    );
    try {
      const up = (await server.waitForLog((l) => l.msg === 'ludus is up')) as {
        query: string;
        admin: string;
      };
      const bearer = (t: string) => ({ authorization: `Bearer ${t}` });
      expect((await call('GET', `${up.query}/v1/whoami`, { headers: bearer(user.token) })).body).toEqual({
        principal: 'user',
        via: 'jwt',
        tenant_id: 'acme',
        user_id: 'alice',
      });
      const asAdmin = await call('GET', `${up.admin}/v1/whoami`, { headers: bearer(admin) });
      expect(asAdmin.status).toBe(200);
      expect(asAdmin.body).toMatchObject({ principal: 'api_key', via: 'admin_jwt' });
      // The one-second token expired while the server started (its expiry is in the past now).
      expect(decodeJwt(short).exp! * 1000).toBeLessThan(Date.now());
      const expired = await call('GET', `${up.query}/v1/whoami`, { headers: bearer(short) });
      expect(expired.status).toBe(401);
      expect(expired.body.error).toMatchObject({ code: 'UNAUTHORIZED', message: 'Token expired' });
      // Still serving the valid token.
      expect((await call('GET', `${up.query}/v1/whoami`, { headers: bearer(user.token) })).status).toBe(200);
      server.child.kill('SIGTERM');
      expect(await server.exited).toBe(0);
    } finally {
      server.child.kill('SIGKILL');
    }
  }, 240_000);
});
