/**
 * End to end: the real entry point, started as a user would, in both shapes.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { childEnv, spawnCli, type Spawned } from '../support/process';
import { shapeEnv } from '../support/app';

const fromZero = {
  LUDUS_INGEST_PORT: '0',
  LUDUS_ADMIN_PORT: '0',
  LUDUS_QUERY_PORT: '0',
  LUDUS_HOST: '127.0.0.1',
};

async function expectServing(p: Spawned): Promise<void> {
  const up = await p.waitForLog((l) => l.msg === 'ludus is up', 60000);
  for (const gateway of ['ingest', 'admin', 'query']) {
    const base = up[gateway] as string;
    expect(base).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const health = await fetch(`${base}/health`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: 'healthy', gateway });
    const ready = await fetch(`${base}/ready`);
    const body = (await ready.json()) as Record<string, string>;
    expect(ready.status).toBe(200);
    expect(body.status).toBe('ready');
    expect(body.database).toBe('ok');
    const metrics = await fetch(`${base}/metrics`);
    expect(metrics.headers.get('content-type')).toMatch(/text\/plain/);
    expect(await metrics.text()).toMatch(
      /ludus_http_requests_total\{gateway="[a-z]+",method="GET",route="\/health",status="200"\}/,
    );
    const missing = await fetch(`${base}/v1/nope`);
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({
      error: { code: 'NOT_FOUND', message: 'No route for GET /v1/nope', status: 404 },
    });
    expect(missing.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  }
}

async function expectGracefulStop(p: Spawned): Promise<void> {
  p.child.kill('SIGTERM');
  const code = await p.exited;
  if (code !== 0)
    throw new Error(
      `exit code ${code}, signal ${p.child.signalCode}; stderr: ${p.stderr()}; last logs: ${JSON.stringify(p.logs.slice(-5))}`,
    );
  expect(p.logs.some((l) => l.msg === 'stopped')).toBe(true);
}

describe('ludus serve [embedded]', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'ludus-e2e-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('serves /health, /ready and /metrics on all three gateways with no configuration but ports', async () => {
    // The default pipeline warm-up too (the test harness turns it off elsewhere).
    const env = childEnv({ ...fromZero, LUDUS_DATA_DIR: dir });
    delete env.LUDUS_PIPELINE_WARM_UP_MS;
    const p = spawnCli(['serve'], env);
    try {
      await expectServing(p);
      const warm = p.logs.findIndex((l) => l.msg === 'warmed up on synthetic records (rolled back)');
      expect(warm).toBeGreaterThanOrEqual(0);
      expect(p.logs[warm]!.records).toBeGreaterThanOrEqual(500);
      // Before anything listens: load that arrives finds the pipeline warm.
      expect(warm).toBeLessThan(p.logs.findIndex((l) => l.msg === 'listening'));
      const migrated = p.logs.find((l) => l.msg === 'migrations applied');
      expect(migrated).toBeDefined();
      const adapters = p.logs.find((l) => l.msg === 'adapters ready');
      expect(adapters).toMatchObject({
        sql: 'pglite',
        event_log: 'file',
        ranks: 'memory',
        analytics: 'sql',
      });
    } finally {
      await expectGracefulStop(p);
    }
  });

  it('restarts on the same data directory without re-applying migrations', async () => {
    const p = spawnCli(
      ['serve', '--roles', 'api,processors'],
      childEnv({ ...fromZero, LUDUS_DATA_DIR: dir }),
    );
    try {
      const up = await p.waitForLog((l) => l.msg === 'ludus is up');
      expect(up.roles).toEqual(['api', 'processors']);
      expect(up.ingest).toBeUndefined();
      expect(p.logs.some((l) => l.msg === 'migrations applied')).toBe(false);
    } finally {
      await expectGracefulStop(p);
    }
  });
});

describe('ludus serve [distributed]', () => {
  it('runs every role against Kafka, the schema registry, Postgres, Redis and ClickHouse', async () => {
    const p = spawnCli(['serve'], childEnv({ ...fromZero, ...shapeEnv('distributed') }));
    try {
      await expectServing(p);
      const adapters = p.logs.find((l) => l.msg === 'adapters ready');
      expect(adapters).toMatchObject({
        sql: 'pg',
        event_log: 'kafka',
        ranks: 'redis',
        analytics: 'clickhouse',
      });
    } finally {
      await expectGracefulStop(p);
    }
  });
});

describe('bad configuration fails at start with one clear line naming the variable', () => {
  const distributed = { ...shapeEnv('distributed'), LUDUS_CONNECT_TIMEOUT_MS: '3000' };
  const cases: Array<[string, Record<string, string>, string]> = [
    ['an unreachable Kafka', { LUDUS_KAFKA_BROKERS: '127.0.0.1:1' }, 'LUDUS_KAFKA_BROKERS'],
    ['a malformed database URL', { LUDUS_DATABASE_URL: 'postgres//nope' }, 'LUDUS_DATABASE_URL'],
    [
      'an unreachable Postgres',
      { LUDUS_DATABASE_URL: 'postgres://postgres@127.0.0.1:1/ludus' },
      'LUDUS_DATABASE_URL',
    ],
    ['an unreachable Redis', { LUDUS_REDIS_URL: 'redis://127.0.0.1:1' }, 'LUDUS_REDIS_URL'],
    ['an unreachable ClickHouse', { LUDUS_CLICKHOUSE_URL: 'http://127.0.0.1:1' }, 'LUDUS_CLICKHOUSE_URL'],
    ['an unknown shape', { LUDUS_SHAPE: 'cloud' }, 'LUDUS_SHAPE'],
  ];
  it.each(cases)('%s', async (_what, bad, variable) => {
    const dir = mkdtempSync(join(tmpdir(), 'ludus-bad-'));
    const p = spawnCli(['serve'], childEnv({ ...fromZero, ...distributed, LUDUS_DATA_DIR: dir, ...bad }));
    expect(await p.exited).toBe(1);
    const lines = p.stderr().trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^ludus: /);
    expect(lines[0]).toContain(variable);
    expect(lines[0]).not.toMatch(/\n\s+at /);
    rmSync(dir, { recursive: true, force: true });
  });
});
