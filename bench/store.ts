/**
 * Store purchase throughput (issue 17), against a same-run baseline.
 *
 *   node --import tsx bench/store.ts [--seconds 5] [--runs 3] [--workers 16]
 *
 * On the stack's Postgres (a schema of its own, dropped at the end), through the store service
 * (core/store/store.ts: the whole purchase transaction, facts, outbox), in three workloads:
 *   - one reward: every purchase takes a unit of one reward's stock (one hot stock row);
 *   - many rewards: 100 rewards with stock, each purchase picks one at random;
 *   - baseline: the bare SQL of one purchase transaction (key lock and lookup, reward read,
 *     conditional stock update, balance lock and update, ledger row, order row, three outbox rows)
 *     on the one-reward setup, the stock row last as the service takes it, with the same workers:
 *     what the service adds is the difference.
 * Each figure is the median of `runs` runs of `seconds` seconds (min and max beside it); users are
 * spread over 2000 funded accounts, so balance rows rarely collide. Results to stdout and
 * bench/results/store.json.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openApp } from '../runtime/app';
import { loadConfig } from '../runtime/config';
import { createLogger } from '../shared/logger';
import { createReward } from '../core/store/catalog';
import { PgSql } from '../adapters/sql/pg';
import { ensureStack, ROOT, stackSettings } from './lib/stack';

const arg = (name: string, dflt: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
};
const SECONDS = arg('seconds', 5);
const RUNS = arg('runs', 3);
const WORKERS = arg('workers', 16);
const USERS = 2000;

async function main() {
  ensureStack();
  const stack = stackSettings();
  const schema = `bench_store_${process.pid}`;
  const dir = mkdtempSync(join(tmpdir(), 'ludus-bench-store-'));
  const config = loadConfig({
    LUDUS_DATA_DIR: dir,
    LUDUS_SQL: 'pg',
    LUDUS_DATABASE_URL: stack.pgUrl,
    LUDUS_DATABASE_SCHEMA: schema,
    LUDUS_ROLES: 'api,processors',
    LUDUS_ROOT_KEY: `ldr_${randomUUID()}`,
  });
  const app = await openApp(config, createLogger('silent'));
  const { sql } = app.ctx.adapters;
  const { store, wallet, tenants } = app.ctx.services;
  try {
    const tenant = (await tenants.createTenant({ name: 'bench' })).tenant.id;
    await sql.query(
      `INSERT INTO currencies (tenant_id, id, name, is_spendable, decimal_places, created_at, updated_at)
       VALUES ($1, 'coins', 'Coins', true, 0, now(), now())`,
      [tenant],
    );
    const now = Date.now();
    for (let i = 0; i < USERS; i += 100)
      await sql.tx(async (q) => {
        for (let u = i; u < i + 100; u++)
          await wallet.credit(q, {
            tenant_id: tenant,
            user_id: `u${u}`,
            currency_id: 'coins',
            amount: 1_000_000_000,
            source_type: 'bench',
            now,
          });
      });
    const reward = (slug: string) =>
      sql.tx((q) =>
        createReward(
          q,
          tenant,
          {
            slug,
            name: slug,
            fulfillment: { type: 'manual' },
            purchase: { prices: [{ currency: 'coins', amount: 1 }] },
            stock: 100_000_000,
          },
          now,
        ),
      );
    const one = await reward('one');
    const many: string[] = [];
    for (let i = 0; i < 100; i++) many.push((await reward(`many-${i}`)).slug);

    let seq = 0;
    const user = () => `u${Math.floor(Math.random() * USERS)}`;
    const viaService = (pick: () => string) => async () => {
      await store.purchase(
        tenant,
        pick(),
        { user_id: user(), idempotency_key: `k${++seq}`, currency: 'coins' },
        Date.now(),
      );
    };
    // The bare statements of one purchase, as the service issues them (less its reads of what
    // it just wrote, the state machine and the fact bus).
    const bare = async () => {
      const u = user();
      const key = `b${++seq}`;
      const at = Date.now();
      await sql.tx(async (q) => {
        await q.query('SELECT pg_advisory_xact_lock($1::int4, hashtext($2))', [1, `${tenant}:${u}:${key}`]);
        await q.query(
          'SELECT id FROM reward_orders WHERE tenant_id = $1 AND user_id = $2 AND idempotency_key = $3',
          [tenant, u, key],
        );
        await q.query('SELECT * FROM catalog_rewards WHERE tenant_id = $1 AND slug = $2', [tenant, 'one']);
        const b = await q.query<{ available: string }>(
          "SELECT available FROM balances WHERE tenant_id = $1 AND user_id = $2 AND currency_id = 'coins' FOR UPDATE",
          [tenant, u],
        );
        const after = Number(b.rows[0]!.available) - 1;
        await q.query(
          "UPDATE balances SET available = $3 WHERE tenant_id = $1 AND user_id = $2 AND currency_id = 'coins'",
          [tenant, u, after],
        );
        const tx = randomUUID();
        const id = randomUUID();
        await q.query(
          `INSERT INTO ledger (id, tenant_id, user_id, currency_id, amount, balance_after, source_type, source_ref, idempotency_key, created_at)
           VALUES ($1, $2, $3, 'coins', -1, $4, 'purchase', $5, $6, $7)`,
          [tx, tenant, u, after, id, `purchase:${u}:${key}`, at],
        );
        await q.query(
          `INSERT INTO reward_orders (tenant_id, id, user_id, reward_id, reward_slug, reward_name, source_type, state, fulfillment,
             idempotency_key, price_currency, price_amount, debit_tx_id, stock_held, created_at, updated_at)
           VALUES ($1, $2, $3, $4, 'one', 'one', 'purchase', 'fulfilling', '{"type":"manual"}', $5, 'coins', 1, $6, true, $7, $7)`,
          [tenant, id, u, one.id, key, tx, at],
        );
        await q.query(
          `INSERT INTO outbox (tenant_id, event_type, dedupe_key, payload, created_at)
           SELECT $1, e, e || ':' || $2, '{}'::jsonb, $3 FROM unnest(ARRAY['currency.spent', 'order.created', 'order.fulfilling']) AS e`,
          [tenant, id, at],
        );
        // The hot row last, as the service takes it.
        await q.query(
          'UPDATE catalog_stock SET remaining = remaining - 1 WHERE tenant_id = $1 AND reward_id = $2 AND variant_id = $3 AND remaining > 0',
          [tenant, one.id, 'default'],
        );
      });
    };

    const measure = async (fn: () => Promise<void>) => {
      let done = 0;
      let failed = 0;
      const until = Date.now() + SECONDS * 1000;
      const started = Date.now();
      await Promise.all(
        Array.from({ length: WORKERS }, async () => {
          while (Date.now() < until) {
            try {
              await fn();
              done++;
            } catch {
              failed++;
            }
          }
        }),
      );
      return { per_second: Math.round(done / ((Date.now() - started) / 1000)), failed };
    };
    const workloads: Array<[string, () => Promise<void>]> = [
      ['baseline (bare SQL of one purchase)', bare],
      ['one reward with stock', viaService(() => 'one')],
      ['100 rewards with stock', viaService(() => many[Math.floor(Math.random() * many.length)]!)],
    ];
    const results: Record<string, { median: number; min: number; max: number; failed: number }> = {};
    for (const [name, fn] of workloads) {
      await measure(fn); // warm-up run, not counted
      const runs: number[] = [];
      let failed = 0;
      for (let r = 0; r < RUNS; r++) {
        const m = await measure(fn);
        runs.push(m.per_second);
        failed += m.failed;
      }
      runs.sort((a, b) => a - b);
      results[name] = {
        median: runs[Math.floor(runs.length / 2)]!,
        min: runs[0]!,
        max: runs[runs.length - 1]!,
        failed,
      };
      process.stderr.write(`${name}: ${JSON.stringify(results[name])}\n`);
    }
    const base = results['baseline (bare SQL of one purchase)']!.median;
    const lines = Object.entries(results).map(
      ([name, r]) =>
        `| ${name} | ${r.median} | ${r.min}–${r.max} | ${(r.median / base).toFixed(2)} | ${r.failed} |`,
    );
    const table = [
      `Purchases per second, Postgres, ${WORKERS} concurrent workers, median of ${RUNS} runs of ${SECONDS} s`,
      '',
      '| workload | per second | range | of baseline | failed |',
      '|---|---|---|---|---|',
      ...lines,
    ].join('\n');
    process.stdout.write(`${table}\n`);
    writeFileSync(
      join(ROOT, 'bench', 'results', 'store.json'),
      `${JSON.stringify({ at: new Date().toISOString(), seconds: SECONDS, runs: RUNS, workers: WORKERS, users: USERS, results }, null, 2)}\n`,
    );
  } finally {
    await app.close();
    rmSync(dir, { recursive: true, force: true });
    const admin = new PgSql({ url: stack.pgUrl, max: 1 });
    await admin.exec(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.close();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  },
);
