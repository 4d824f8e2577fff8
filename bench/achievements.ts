/**
 * Achievements benchmark (issue 15; issue 19: the pipeline's targets with the feature steps on).
 * Stand-alone, not a workload of bench/run.ts (docs/performance.md "Achievements").
 *
 * 1. Pipeline: batches of 1,000 events (2,000 users, 4 event types, 28 days), each batch in one
 *    transaction as the pipeline runs it: dedupe (`markProcessed`), then the pipeline's SQL steps
 *    in order, earning (one rule crediting `xp` per event, so cumulative criteria advance through
 *    the `wallet.credited` reaction), streaks (none defined) and achievements. Measured for a
 *    tenant with 50 active achievements of mixed criteria (event_count with and without
 *    conditions, streak, nested combined, cumulative) against the same steps for a tenant with
 *    none (same-run baseline: everything but the achievement work). The scoring step (Redis) and
 *    the event log are left out: they cost the same either side. Each run uses fresh tenants; the
 *    two sides alternate their order run by run. On Postgres (the stack's, a schema of its own:
 *    the distributed shape's store) and PGlite (the embedded shape's).
 * 2. Backfill (distributed shape): a history of N events in ClickHouse (a database of its own),
 *    then a backfill of an achievement (combined: `play` with mode=ranked at least 5 times and
 *    `win` at least 3 times) run chunk by chunk to the end (`Backfills.step`), events and users per
 *    second. Same-run baselines: (a) the bare scan, the same chunked history query
 *    (`userEventHistory`, 500 users a chunk) with nothing done with it: what reading history
 *    costs; (b) the scan plus bare writes: per chunk, one transaction inserting the same progress
 *    rows (per user and part, the count) with one INSERT ... unnest. (b) is what the product's
 *    backfill cannot avoid; the rest is its own cost (claims, locks, completion checks,
 *    completions, cursor).
 *
 *   node --import tsx bench/achievements.ts [--events 20000] [--history 50000] [--runs 3]
 *     [--shapes pg,pglite] [--no-backfill] [--no-pipeline] [--trace] [--name achievements]
 *
 * Medians of `runs` with min and max. Writes bench/results/<name>.json; leaves nothing behind
 * (drops its Postgres schema and ClickHouse database).
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createClient } from '@clickhouse/client';
import { ClickHouseAnalytics } from '../adapters/analytics/clickhouse';
import type { AnalyticsEvent } from '../adapters/analytics/types';
import { migrate } from '../adapters/sql/migrate';
import { PgSql } from '../adapters/sql/pg';
import { PgliteSql } from '../adapters/sql/pglite';
import type { Queryable, Sql } from '../adapters/sql/types';
import { Backfills } from '../core/achievements/backfill';
import { validateCriteria } from '../core/achievements/criteria';
import { AchievementEngine, achievementReactions } from '../core/achievements/progress';
import { compiled, createAchievement, getAchievement } from '../core/achievements/store';
import { markProcessed } from '../core/events/processed';
import { FactBus } from '../core/facts';
import { eventView } from '../core/leaderboards/definition';
import { outboxReactions } from '../core/outbox';
import { SeededRandom } from '../core/random';
import { Granter } from '../core/rewards/grant';
import { createRule } from '../core/wallet/earning';
import { Wallet } from '../core/wallet/wallet';
import { AchievementStep } from '../processors/pipeline/achievements';
import { EarningStep } from '../processors/pipeline/earning';
import { runSteps, type AnyStep, type StepBatch } from '../processors/pipeline/step';
import { StreakStep } from '../processors/pipeline/streaks';
import type { EventRecord } from '../schemas/topics';

const argv = process.argv.slice(2);
const arg = (name: string, dflt: string) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 && argv[i + 1] !== undefined ? argv[i + 1]! : dflt;
};
const EVENTS = Number(arg('events', '20000'));
const HISTORY = Number(arg('history', '50000'));
const RUNS = Number(arg('runs', '3'));
const SHAPES = arg('shapes', 'pg,pglite').split(',');
const NAME = arg('name', 'achievements');
const BACKFILL = !argv.includes('--no-backfill');
const PIPELINE = !argv.includes('--no-pipeline');
/** --trace: time every statement of the pipeline runs by its first words (printed at the end). */
const TRACE = argv.includes('--trace') ? new Map<string, { n: number; ms: number }>() : null;
const PG_URL = process.env.LUDUS_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/ludus_test';
const CH_URL = process.env.LUDUS_CLICKHOUSE_URL ?? 'http://127.0.0.1:8123';

const DAY = 86_400_000;
const BASE = Date.UTC(2026, 10, 1);

interface Figure {
  median: number;
  min: number;
  max: number;
  runs: number[];
}
const figure = (xs: number[]): Figure => {
  const s = [...xs].sort((a, b) => a - b);
  return { median: s[Math.floor(s.length / 2)]!, min: s[0]!, max: s[s.length - 1]!, runs: xs };
};
const round = (x: number, d = 0) => Number(x.toFixed(d));
const log = (s: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${s}\n`);

/** n events of a tenant: 4 types, 2,000 users (`users`), 28 days, attributes mode and level. */
function events(tenant: string, n: number, seed: number, users = 2000): EventRecord[] {
  let s = seed;
  const next = (m: number) => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0), (s >>> 8) % m);
  const out = Array.from({ length: n }, (_, i) => {
    const t = BASE + next(28) * DAY + next(DAY);
    return {
      tenant_id: tenant,
      event_id: `${tenant}-${i}`,
      type: ['play', 'win', 'login', 'buy'][next(4)]!,
      user_id: `u${next(users)}`,
      occurred_at: t,
      received_at: t,
      attrs_json: JSON.stringify({ mode: next(2) ? 'ranked' : 'casual', level: next(10) }),
      actor_metadata_json: null,
      subject_json: null,
    };
  });
  // Events of one user arrive in time order (one partition per user), as in the pipeline.
  return out.sort((a, b) => a.occurred_at - b.occurred_at);
}

/** The 50 achievements: 10 each of five kinds. */
function criteria(i: number): unknown {
  const type = ['play', 'win', 'login', 'buy'][i % 4]!;
  switch (i % 5) {
    case 0:
      return { type: 'event_count', event_type: type, threshold: 5 + i };
    case 1:
      return {
        type: 'event_count',
        event_type: type,
        conditions: { mode: { eq: 'ranked' } },
        threshold: 3 + i,
      };
    case 2:
      return { type: 'streak', event_type: type, threshold: 3 + (i % 4) };
    case 3:
      return {
        type: 'combined',
        operator: 'and',
        conditions: [
          { type: 'event_count', event_type: type, threshold: 10 },
          {
            type: 'combined',
            operator: 'and',
            conditions: [
              { type: 'streak', event_type: 'login', threshold: 2 },
              { type: 'cumulative', metric: 'xp', threshold: 20 },
            ],
          },
        ],
      };
    default:
      return { type: 'cumulative', metric: 'xp', threshold: 100 + i };
  }
}

interface Engine {
  facts: FactBus;
  wallet: Wallet;
  granter: Granter;
  engine: AchievementEngine;
  steps: AnyStep[];
}

function engineOf(): Engine {
  const random = new SeededRandom('bench-achievements');
  const facts = new FactBus();
  const wallet = new Wallet(facts, random);
  const granter = new Granter(wallet, random);
  const engine = new AchievementEngine(facts, granter);
  facts.register(outboxReactions, achievementReactions(engine));
  const steps: AnyStep[] = [
    new EarningStep(wallet),
    new StreakStep({ facts, granter }),
    new AchievementStep(engine),
  ];
  return { facts, wallet, granter, engine, steps };
}

async function tenant(sql: Sql, id: string, achievements: number): Promise<void> {
  await sql.query(
    `INSERT INTO tenants (id, name, jwt_secret_enc, hmac_secret_enc, created_at, updated_at)
     VALUES ($1, $1, 'x', 'x', now(), now())`,
    [id],
  );
  await sql.query(
    `INSERT INTO currencies (tenant_id, id, name, is_spendable, decimal_places, created_at, updated_at)
     VALUES ($1, 'xp', 'XP', false, 0, now(), now())`,
    [id],
  );
  await createRule(
    sql,
    id,
    {
      name: 'xp per event',
      currency_id: 'xp',
      event_type: '*',
      event_filter: null,
      calculation: { type: 'fixed', amount: 1 },
      max_per_event: null,
      max_per_day: null,
      max_per_week: null,
      priority: 0,
      active: true,
    },
    BASE,
  );
  const random = new SeededRandom(`defs-${id}`);
  for (let i = 0; i < achievements; i++) {
    const v = validateCriteria(criteria(i));
    if (!v.ok) throw new Error(v.error);
    await createAchievement(sql, random, id, { name: `a${i}`, criteria: v.criteria }, BASE);
  }
}

function batchOf(records: EventRecord[], offset: number, fresh: number[]): StepBatch {
  return {
    parts: [{ partition: 0, firstOffset: offset, nextOffset: offset + records.length }],
    events: fresh.map((i) => ({
      index: i,
      record: { topic: 'bench', partition: 0, offset: offset + i, key: '', value: records[i]!, timestamp: 0 },
      event: records[i]!,
      view: eventView(records[i]!),
    })),
    replayed: [],
    tenants: [...new Set(records.map((r) => r.tenant_id))],
    timezones: new Map(records.map((r) => [r.tenant_id, 'UTC'])),
    now: BASE + 30 * DAY,
  };
}

function traced(q: Queryable): Queryable {
  return {
    query: async (text: string, params?: unknown[]) => {
      const t0 = performance.now();
      try {
        return await q.query(text, params as never);
      } finally {
        const k = text.replace(/\s+/g, ' ').trim().slice(0, 90);
        const x = TRACE!.get(k) ?? { n: 0, ms: 0 };
        x.n++;
        x.ms += performance.now() - t0;
        TRACE!.set(k, x);
      }
    },
  } as Queryable;
}

/** Events per second through dedupe and the steps, 1,000 a batch, one transaction each. */
async function drain(sql: Sql, steps: AnyStep[], recs: EventRecord[]): Promise<number> {
  const t0 = performance.now();
  for (let i = 0; i < recs.length; i += 1000)
    await sql.tx(async (tx) => {
      const q = TRACE ? traced(tx) : tx;
      const records = recs.slice(i, i + 1000);
      const fresh = await markProcessed(q, records);
      await runSteps(q, steps, batchOf(records, i, fresh));
    });
  return recs.length / ((performance.now() - t0) / 1000);
}

async function pipeline(sql: Sql, shape: string) {
  const e = engineOf();
  const base: number[] = [];
  const ach: number[] = [];
  const completions: number[] = [];
  for (let r = 0; r < RUNS; r++) {
    await tenant(sql, `base${r}`, 0);
    await tenant(sql, `ach${r}`, 50);
    const sides: Array<['base' | 'ach', number[]]> = [
      ['base', base],
      ['ach', ach],
    ];
    if (r % 2) sides.reverse();
    for (const [side, into] of sides) {
      const rate = await drain(sql, e.steps, events(`${side}${r}`, EVENTS, 1 + r));
      into.push(rate);
      log(`${shape} run ${r + 1}: ${side} ${Math.round(rate)} events/s`);
    }
    const c = await sql.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM achievement_completions WHERE tenant_id = $1',
      [`ach${r}`],
    );
    completions.push(c.rows[0]!.n);
  }
  const b = figure(base.map((x) => round(x)));
  const a = figure(ach.map((x) => round(x)));
  return {
    what: `events/s, ${EVENTS} events in batches of 1,000 through dedupe + earning + streaks + achievements, one transaction a batch`,
    baseline_no_achievements: b,
    with_50_achievements: a,
    ratio: round(a.median / b.median, 2),
    ratio_per_run: ach.map((x, i) => round(x / base[i]!, 2)),
    completions_per_run: completions,
  };
}

async function backfill(sql: PgSql, schema: string) {
  const database = schema;
  const analytics = new ClickHouseAnalytics({ url: CH_URL, database });
  await analytics.ensureSchema();
  const e = engineOf();
  const seconds: number[] = [];
  const scan: number[] = [];
  const bare: number[] = [];
  let job: Awaited<ReturnType<Backfills['latest']>> = null;
  let users = 0;
  let read = 0;
  try {
    const v = validateCriteria({
      type: 'combined',
      operator: 'and',
      conditions: [
        { type: 'event_count', event_type: 'play', conditions: { mode: { eq: 'ranked' } }, threshold: 5 },
        { type: 'event_count', event_type: 'win', threshold: 3 },
      ],
    });
    if (!v.ok) throw new Error(v.error);
    for (let r = 0; r < RUNS; r++) {
      const t = `hist${r}`;
      await tenant(sql, t, 0);
      const hist = events(t, HISTORY, 7, Math.max(1, Math.round(HISTORY / 10)));
      for (let i = 0; i < hist.length; i += 10_000)
        await analytics.insertEvents(
          hist.slice(i, i + 10_000).map(({ actor_metadata_json: _a, subject_json: _s, ...x }) => x),
        );
      const random = new SeededRandom(`bf-${r}`);
      const def = await createAchievement(sql, random, t, { name: 'history', criteria: v.criteria }, BASE);
      const a = compiled((await getAchievement(sql, t, def.id))!);
      const backfills = new Backfills({
        sql,
        analytics,
        engine: e.engine,
        random,
        offsets: { topic: 'none', pipelineGroup: 'none', sinkGroup: 'none' },
      });

      // Baseline (a): the bare scan.
      let t0 = performance.now();
      let cursor = '';
      let n = 0;
      let u = 0;
      for (;;) {
        const h = await analytics.userEventHistory(t, ['play', 'win'], cursor, 500);
        if (h.length === 0) break;
        n += h.length;
        u += new Set(h.map((x) => x.user_id)).size;
        cursor = h[h.length - 1]!.user_id;
      }
      scan.push((performance.now() - t0) / 1000);
      read = n;
      users = u;

      // Baseline (b): the scan plus the same progress rows written bare, one transaction a chunk.
      t0 = performance.now();
      cursor = '';
      for (;;) {
        const h = await analytics.userEventHistory(t, ['play', 'win'], cursor, 500);
        if (h.length === 0) break;
        const rows = new Map<string, [string, string, number]>();
        for (const x of h as AnalyticsEvent[]) {
          const view = eventView({ ...x, actor_metadata_json: null, subject_json: null });
          for (const l of a.eventLeaves)
            if (l.matchesType(view.type) && l.condition.test(view)) {
              const k = `${x.user_id}\u0000${l.key}`;
              const row = rows.get(k) ?? [x.user_id, l.key, 0];
              row[2]++;
              rows.set(k, row);
            }
        }
        const list = [...rows.values()];
        await sql.tx((q: Queryable) =>
          q.query(
            `INSERT INTO achievement_progress (tenant_id, achievement_id, user_id, part, value, best, last_day, updated_at)
             SELECT $1, 'bare', u, p, v, 0, '', $5 FROM unnest($2::text[], $3::text[], $4::bigint[]) AS k(u, p, v)`,
            [t, list.map((x) => x[0]), list.map((x) => x[1]), list.map((x) => x[2]), BASE],
          ),
        );
        cursor = h[h.length - 1]!.user_id;
      }
      bare.push((performance.now() - t0) / 1000);

      // The product: a backfill job run chunk by chunk to the end.
      await backfills.start(t, def.id, false, BASE);
      t0 = performance.now();
      while (await backfills.step(BASE)) {
        /* chunk by chunk */
      }
      seconds.push((performance.now() - t0) / 1000);
      job = await backfills.latest(t, def.id);
      if (job?.state !== 'done') throw new Error(`backfill ended ${job?.state}: ${job?.error}`);
      log(
        `backfill run ${r + 1}: ${seconds[r]!.toFixed(2)} s (scan ${scan[r]!.toFixed(2)} s, scan + bare writes ${bare[r]!.toFixed(2)} s)`,
      );
    }
  } finally {
    await analytics.close();
    const ch = createClient({ url: CH_URL });
    await ch.command({ query: `DROP DATABASE IF EXISTS ${database}` }).catch(() => undefined);
    await ch.close();
  }
  const perS = (xs: number[], n: number) => figure(xs.map((s) => round(n / s)));
  const product = { events_per_s: perS(seconds, read), users_per_s: perS(seconds, users) };
  const scanF = { events_per_s: perS(scan, read), users_per_s: perS(scan, users) };
  const bareF = { events_per_s: perS(bare, read), users_per_s: perS(bare, users) };
  return {
    what: `backfill of one combined achievement (play ranked >= 5, win >= 3) over ${HISTORY} events of ${Math.round(HISTORY / 10)} users in ClickHouse, 500 users a chunk; progress and completions in Postgres`,
    events_read: read,
    users,
    completed: job?.completed,
    backfill: product,
    baseline_scan: scanF,
    baseline_scan_and_bare_writes: bareF,
    ratio_to_scan: round(product.events_per_s.median / scanF.events_per_s.median, 2),
    ratio_to_scan_and_bare_writes: round(product.events_per_s.median / bareF.events_per_s.median, 2),
  };
}

async function main() {
  const out: Record<string, unknown> = {
    date: new Date().toISOString(),
    note: 'busy machine: 2 cores shared with other engineers running tests and benchmarks',
    events: EVENTS,
    runs: RUNS,
  };
  const schema = `bench_ach_${randomBytes(4).toString('hex')}`;
  if (SHAPES.includes('pg')) {
    const sql = new PgSql({ url: PG_URL, schema, max: 4 });
    await sql.init();
    try {
      await migrate(sql);
      if (PIPELINE) {
        out.pipeline_postgres = await pipeline(sql, 'postgres');
        log(`postgres: ${JSON.stringify(out.pipeline_postgres)}`);
      }
      if (BACKFILL) {
        out.backfill_clickhouse = await backfill(sql, schema);
        log(`backfill: ${JSON.stringify(out.backfill_clickhouse)}`);
      }
    } finally {
      await sql.exec(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
      await sql.close();
    }
  }
  if (SHAPES.includes('pglite') && PIPELINE) {
    const sql = await PgliteSql.open();
    try {
      await migrate(sql);
      out.pipeline_pglite = await pipeline(sql, 'pglite');
      log(`pglite: ${JSON.stringify(out.pipeline_pglite)}`);
    } finally {
      await sql.close();
    }
  }
  if (TRACE)
    out.trace = [...TRACE.entries()]
      .sort((a, b) => b[1].ms - a[1].ms)
      .slice(0, 25)
      .map(([k, v]) => ({ statement: k, n: v.n, ms: Math.round(v.ms) }));
  const dir = join(__dirname, 'results');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${NAME}.json`);
  writeFileSync(file, JSON.stringify(out, null, 2) + '\n');
  process.stdout.write(`${JSON.stringify(out, null, 2)}\nwritten to ${file}\n`);
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
