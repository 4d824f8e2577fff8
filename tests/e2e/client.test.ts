/**
 * A client generated from the OpenAPI documents, as a user would make one: openapi-typescript
 * turns each gateway's served /openapi.json into types, the quick-start program
 * (tests/client/quickstart.ts, openapi-fetch) must type-check against them, including the misuses
 * in tests/client/refusals.ts that the types must refuse, and then runs against the service.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { childEnv } from '../support/process';
import { call, createTenant, startTestApp, tenantToken, type TestApp } from '../support/app';

const root = join(__dirname, '..', '..');
const clientDir = join(root, 'tests', 'client');
let app: TestApp;

beforeAll(async () => {
  app = await startTestApp('embedded');
}, 120_000);
afterAll(() => app?.stop());

/** Runs node with args without blocking this process (the service under test runs in it). */
function run(args: string[], env: Record<string, string> = {}) {
  return new Promise<{ status: number; out: string; stdout: string }>((resolve) => {
    execFile(
      process.execPath,
      args,
      { cwd: root, encoding: 'utf8', env: childEnv(env), timeout: 120_000 },
      (err, stdout, stderr) => {
        const status = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
        resolve({ status, out: `${stdout}${stderr}`, stdout });
      },
    );
  });
}

it('generates typed clients that type-check and run the quick start', async () => {
  const docs = mkdtempSync(join(tmpdir(), 'ludus-openapi-'));
  const generated = join(clientDir, 'generated');
  rmSync(generated, { recursive: true, force: true });
  mkdirSync(generated);
  try {
    for (const gateway of ['admin', 'ingest', 'query'] as const) {
      const doc = await call('GET', `${app.url[gateway]}/openapi.json`);
      expect(doc.status).toBe(200);
      writeFileSync(join(docs, `${gateway}.json`), JSON.stringify(doc.body));
      const gen = await run([
        join(root, 'node_modules', 'openapi-typescript', 'bin', 'cli.js'),
        join(docs, `${gateway}.json`),
        '-o',
        join(generated, `${gateway}.ts`),
        // A field with a default may be left out of a request (the service fills it in).
        '--default-non-nullable',
        'false',
      ]);
      expect([gateway, gen.status, gen.status === 0 ? '' : gen.out]).toEqual([gateway, 0, '']);
    }

    const check = await run([
      join(root, 'node_modules', 'typescript', 'bin', 'tsc'),
      '-p',
      join(clientDir, 'tsconfig.json'),
    ]);
    expect(check.out).toBe('');
    expect(check.status).toBe(0);

    const tenant = await createTenant(app);
    const quick = await run(['--import', 'tsx', join(clientDir, 'quickstart.ts')], {
      ADMIN_URL: app.url.admin,
      INGEST_URL: app.url.ingest,
      QUERY_URL: app.url.query,
      API_KEY: app.rootKey,
      TENANT_ID: tenant.id,
      TENANT_JWT: await tenantToken(tenant),
    });
    expect([quick.status, quick.status === 0 ? '' : quick.out]).toEqual([0, '']);
    expect(JSON.parse(quick.stdout)).toEqual({
      event_id: 'evt-quickstart-1',
      user_id: 'alice',
      score: 7,
      rank: 1,
    });
  } finally {
    rmSync(docs, { recursive: true, force: true });
    rmSync(generated, { recursive: true, force: true });
  }
}, 240_000);
