/**
 * Spins per second on one wheel (issue 18), against a same-run baseline: the bare SQL of one spin
 * transaction on the same database.
 *
 *   npx tsx bench/wheels.ts [--seconds 5] [--connections 16] [--runs 3] [--shapes distributed,embedded]
 *
 * Per shape: one Ludus application in this process (the api role; the distributed shape on the
 * stack's Postgres in a schema of its own), one tenant, one wheel (weights 1 and 3: a 5-coin prize
 * and a no-win segment, a cost of 1 coin, unlimited), 1,000 users with coins. Service: `connections`
 * loops POST /v1/wheels/{id}/spin through the query gateway for `seconds`, each for a random user.
 * Baseline: the same number of loops running, through the application's own SQL pool, the
 * statements a spin transaction writes (wheel read, per-user lock, counter row, balance lock, the
 * ledger row and balance of the cost, a quarter of the time the prize's grant row, ledger row and
 * balance, the history row, the counter update), without HTTP, authentication, validation, the
 * wallet's idempotency and fact machinery or the outbox rows of its webhooks. Runs alternate
 * (service, baseline) and the median of `runs` is reported with min and max. Client and server
 * share this process and its cores. Results: bench/results/wheels-<time>.json.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SignJWT } from 'jose';
import type { Queryable } from '../adapters/sql/types';
import { openApp } from '../runtime/app';
import { loadConfig } from '../runtime/config';
import { startRoles } from '../runtime/roles';
import { createLogger } from '../shared/logger';
import { machineInfo, NoiseSampler } from './lib/machine';
import { Cleanup, distributedEnv, ensureStack, ROOT, stackSettings } from './lib/stack';
import { figure, percentile, progress, type Figure } from './lib/util';

const arg = (name: string, dflt: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1]! : dflt;
};
const SECONDS = Number(arg('seconds', '5'));
const CONNECTIONS = Number(arg('connections', '16'));
const RUNS = Number(arg('runs', '3'));
const SHAPES = arg('shapes', 'distributed,embedded').split(',');
const USERS = 1000;

async function http(method: string, url: string, headers: Record<string, string>, body?: unknown) {
  const r = await fetch(url, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : undefined };
}

/** `loops` loops of `fn` for `seconds`: operations per second and latency percentiles (ms). */
async function drive(loops: number, seconds: number, fn: (i: number) => Promise<boolean>) {
  const until = Date.now() + seconds * 1000;
  const lat: number[] = [];
  let ok = 0;
  let failed = 0;
  const started = Date.now();
  await Promise.all(
    Array.from({ length: loops }, async (_, l) => {
      let i = l;
      while (Date.now() < until) {
        const t = performance.now();
        if (await fn(i)) ok++;
        else failed++;
        lat.push(performance.now() - t);
        i += loops;
      }
    }),
  );
  const s = (Date.now() - started) / 1000;
  return { rps: ok / s, failed, p50: percentile(lat, 50), p99: percentile(lat, 99) };
}

/** The statements of one spin transaction, written out by hand (the baseline). */
async function bareSpin(
  q: Queryable,
  tenant: string,
  wheel: string,
  prizeItem: string,
  user: string,
  n: number,
) {
  const now = Date.now();
  const id = `${user}-${n}-${now}`;
  await q.query('SELECT * FROM wheels WHERE tenant_id = $1 AND id = $2', [tenant, wheel]);
  await q.query('SELECT pg_advisory_xact_lock($1::int4, hashtext($2))', [0x4c445753, `${tenant}:${user}`]);
  await q.query(
    'INSERT INTO wheel_user_spins (tenant_id, wheel_id, user_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING',
    [tenant, wheel, user],
  );
  await q.query(
    'SELECT * FROM wheel_user_spins WHERE tenant_id = $1 AND wheel_id = $2 AND user_id = $3 FOR UPDATE',
    [tenant, wheel, user],
  );
  const move = async (amount: number, source: string) => {
    const b = await q.query<{ available: string }>(
      `SELECT available FROM balances WHERE tenant_id = $1 AND user_id = $2 AND currency_id = 'coins' FOR UPDATE`,
      [tenant, user],
    );
    const after = Number(b.rows[0]!.available) + amount;
    await q.query(
      `INSERT INTO ledger (id, tenant_id, user_id, currency_id, amount, balance_after, source_type, source_ref, created_at)
       VALUES ($1, $2, $3, 'coins', $4, $5, $6, $7, $8)`,
      [`${id}:${source}`, tenant, user, amount, after, source, id, now],
    );
    await q.query(
      `UPDATE balances SET available = $3, lifetime_earned = lifetime_earned + GREATEST($4, 0)
       WHERE tenant_id = $1 AND user_id = $2 AND currency_id = 'coins'`,
      [tenant, user, after, amount],
    );
  };
  await move(-1, 'wheel_spin');
  const win = n % 4 === 0;
  if (win) {
    await move(5, 'wheel');
    await q.query(
      `INSERT INTO reward_grants (id, tenant_id, grant_key, user_id, item_id, reward_type, payload, status, source_type, source_ref, created_at)
       VALUES ($1, $2, $3, $4, $5, 'currency', '{}', 'credited', 'wheel', $6, $7)`,
      [id, tenant, `wheel:${wheel}:${id}`, user, prizeItem, id, now],
    );
  }
  await q.query(
    `INSERT INTO wheel_spins (tenant_id, id, wheel_id, user_id, result_index, reward_item_id, draw, spun_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [
      tenant,
      id,
      wheel,
      user,
      win ? 0 : 1,
      win ? prizeItem : null,
      '{"random":0.5,"weights":[1,3],"total":4}',
      now,
    ],
  );
  await q.query(
    `UPDATE wheel_user_spins SET total_spins = total_spins + 1, day_spins = day_spins + 1, day = $4, last_spun_at = $5
     WHERE tenant_id = $1 AND wheel_id = $2 AND user_id = $3`,
    [tenant, wheel, user, new Date(now).toISOString().slice(0, 10), now],
  );
}

async function benchShape(shape: string, cleanup: Cleanup, rootKey: string) {
  const dir = mkdtempSync(join(tmpdir(), 'ludus-bench-wheels-'));
  const stack = shape === 'distributed' ? stackSettings() : null;
  const env: Record<string, string> = {
    LUDUS_DATA_DIR: dir,
    LUDUS_HOST: '127.0.0.1',
    LUDUS_INGEST_PORT: '0',
    LUDUS_ADMIN_PORT: '0',
    LUDUS_QUERY_PORT: '0',
    LUDUS_OPS_PORT: '0',
    LUDUS_ROOT_KEY: rootKey,
    LUDUS_ROLES: stack ? 'api' : 'api,processors',
    LUDUS_LOG_LEVEL: 'warn',
    LUDUS_RATE_LIMIT_INGEST: 'off',
    LUDUS_RATE_LIMIT_QUERY: 'off',
    LUDUS_RATE_LIMIT_ADMIN: 'off',
    ...(stack
      ? distributedEnv(stack, cleanup.deployment('wheels'), cleanup, randomBytes(32).toString('base64'))
      : {}),
  };
  const app = await openApp(loadConfig(env), createLogger('warn'));
  const running = await startRoles(app.ctx);
  try {
    const url = Object.fromEntries(running.listening.map((l) => [l.gateway, l.url])) as Record<
      string,
      string
    >;
    const root = { 'x-api-key': rootKey };
    const tenant = `wheels_${cleanup.id}`.toLowerCase().replace(/[^a-z0-9_]/g, '_');
    const t = await http('POST', `${url.admin}/v1/tenants`, root, { id: tenant, name: tenant });
    const adminPath = (p: string) => `${url.admin}/v1/tenants/${tenant}${p}`;
    await http('POST', adminPath('/wallet/currencies'), root, {
      id: 'coins',
      name: 'coins',
      is_spendable: true,
      decimal_places: 0,
    });
    const item = await http('POST', adminPath('/reward-items'), root, {
      name: '5 coins',
      reward_type: 'currency',
      payload: { currency_id: 'coins', amount: 5 },
    });
    const wheel = await http('POST', adminPath('/wheels'), root, {
      name: 'bench',
      config: {
        segments: [
          { reward_id: item.body.item_id, probability: 1 },
          { reward_id: null, probability: 3 },
        ],
        cost: { currency_id: 'coins', amount: 1 },
      },
    });
    if (wheel.status !== 201) throw new Error(`wheel: ${wheel.status} ${JSON.stringify(wheel.body)}`);
    const users = Array.from({ length: USERS }, (_, i) => `u${i}`);
    for (let i = 0; i < users.length; i += 50)
      await Promise.all(
        users.slice(i, i + 50).map((u) =>
          http('POST', adminPath('/wallet/grant'), root, {
            user_id: u,
            currency_id: 'coins',
            amount: 10_000_000,
          }),
        ),
      );
    const now = Math.floor(Date.now() / 1000);
    const token = await new SignJWT({ sub_type: 'tenant', sub_id: tenant })
      .setProtectedHeader({ alg: 'HS256' })
      .setIssuedAt(now)
      .setExpirationTime(now + 3600)
      .sign(new TextEncoder().encode(t.body.jwt_secret));
    const auth = { authorization: `Bearer ${token}` };
    const spinUrl = `${url.query}/v1/wheels/${wheel.body.id}/spin`;
    const pickUser = (i: number) => users[(i * 7919) % USERS]!;
    const sql = app.ctx.adapters.sql;

    const service: Array<{ rps: number; p50: number; p99: number; failed: number }> = [];
    const baseline: typeof service = [];
    // Warm up both paths.
    await drive(
      CONNECTIONS,
      1,
      async (i) => (await http('POST', spinUrl, auth, { user_id: pickUser(i) })).status === 200,
    );
    for (let run = 0; run < RUNS; run++) {
      progress(`${shape}: run ${run + 1}/${RUNS}`);
      service.push(
        await drive(
          CONNECTIONS,
          SECONDS,
          async (i) => (await http('POST', spinUrl, auth, { user_id: pickUser(i) })).status === 200,
        ),
      );
      baseline.push(
        await drive(CONNECTIONS, SECONDS, async (i) => {
          await sql.tx((q) => bareSpin(q, tenant, wheel.body.id, item.body.item_id, pickUser(i), i));
          return true;
        }),
      );
    }
    const f = (xs: number[]): Figure => figure(xs);
    return {
      shape,
      service: {
        rps: f(service.map((x) => x.rps)),
        p50_ms: f(service.map((x) => x.p50)),
        p99_ms: f(service.map((x) => x.p99)),
        failed: service.map((x) => x.failed),
      },
      baseline: {
        rps: f(baseline.map((x) => x.rps)),
        p50_ms: f(baseline.map((x) => x.p50)),
        p99_ms: f(baseline.map((x) => x.p99)),
      },
      ratio: f(service.map((x, i) => x.rps / baseline[i]!.rps)),
    };
  } finally {
    await running.stop();
    await app.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main() {
  ensureStack();
  const cleanup = new Cleanup(stackSettings());
  const noise = new NoiseSampler();
  noise.start();
  const rootKey = `ldr_${randomBytes(32).toString('base64url')}`;
  const startedAt = Date.now();
  const out = [];
  try {
    for (const shape of SHAPES) out.push(await benchShape(shape, cleanup, rootKey));
  } finally {
    await cleanup.run();
    noise.stop();
  }
  const result = {
    label: 'busy machine, 5 builders running',
    at: new Date().toISOString(),
    settings: { seconds: SECONDS, connections: CONNECTIONS, runs: RUNS, users: USERS },
    machine: machineInfo(),
    noise: noise.window(startedAt),
    results: out,
  };
  const file = join(ROOT, 'bench', 'results', `wheels-${result.at.replace(/[:.]/g, '-')}.json`);
  writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`);
  for (const r of out)
    process.stdout.write(
      `${r.shape}: service ${r.service.rps.median.toFixed(0)} spins/s (p50 ${r.service.p50_ms.median.toFixed(1)} ms, p99 ${r.service.p99_ms.median.toFixed(1)} ms); ` +
        `bare SQL ${r.baseline.rps.median.toFixed(0)} tx/s (p50 ${r.baseline.p50_ms.median.toFixed(1)} ms); ratio ${r.ratio.median.toFixed(2)}\n`,
    );
  process.stdout.write(`written ${file}\n`);
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`${(err as Error).stack}\n`);
    process.exit(1);
  },
);
