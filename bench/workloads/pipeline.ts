/**
 * Workload 2, pipeline: a backlog of N events (10,000 users, 3 leaderboards, 2 earning rules;
 * bench/lib/events.ts) drained by the processors; events/s end to end, i.e. until every event's
 * scores are visible in the rank index. Baseline in the same run: the same score updates written
 * straight to Redis (pipelined ZINCRBY) and the same ledger rows straight to Postgres (batched
 * inserts), concurrently. Then the delay from acceptance to a visible rank (p50/p99) under a
 * steady load at half the measured peak rate.
 *
 * Distributed: the backlog is produced once into a topic; each run drains it from offset 0 with a
 * fresh Postgres schema and Redis prefix (offsets live in SQL, so a new schema starts over), set up
 * through the admin gateway before the processors start. Embedded: each run starts from a copy of
 * a data directory holding the definitions; the backlog goes in through the ingestion gateway
 * (role ingest), then `api,processors` drain it; and "end to end" runs every role in one process
 * while wrk sends bulk requests (issue 7: ≥10,000 events/s ingested and processed end to end).
 */
import { randomUUID } from 'node:crypto';
import { cpSync, mkdirSync, rmSync } from 'node:fs';
import Redis from 'ioredis';
import { KafkaEventLog } from '../../adapters/eventlog/kafka';
import { rankKeys, ranksPrefix } from '../../adapters/ranks/redis';
import { PgSql } from '../../adapters/sql/pg';
import { PgliteSql } from '../../adapters/sql/pglite';
import { windowAt } from '../../core/windows';
import { PIPELINE_GROUP } from '../../processors/pipeline/pipeline';
import { EVENTS_TOPIC, eventKey } from '../../schemas/topics';
import { tenantToken } from '../lib/admin';
import { growStore } from '../lib/grow';
import { runChild } from '../lib/child';
import { latencyRate, type Bench } from '../lib/context';
import {
  bulkBodies,
  eventRecord,
  expectedEffects,
  generate,
  standardBoards,
  standardRules,
  type BenchEvent,
  type CreditEffect,
} from '../lib/events';
import { setUp, type Definitions } from '../lib/inproc';
import { runProbes, WARM_UP_S, type ProbeResult } from '../lib/probes';
import { profiled, type ProfileClock } from '../lib/profiling';
import { logTail, procStat, startService, type Service } from '../lib/service';
import { distributedEnv, type Deployment } from '../lib/stack';
import { figure, percentile, progress, sleep, uniqueName } from '../lib/util';
import { runWrk } from '../lib/wrk';

export interface DrainRun {
  eventsPerS: number;
  events: number;
  seconds: number;
  /** Events per CPU-second of the processing process over the same window (when sampled). */
  eventsPerCpuS?: number;
  /** Time from the process start to its first committed batch (not in the rate). */
  startupS: number;
  checks?: Record<string, number>;
}

export const STANDARD: Omit<Definitions, 'tenants'> = { boards: standardBoards(), rules: standardRules() };

/** Produces events into a deployment's topic (the event log's own adapter: same Avro records, same keys). */
export async function produceBacklog(b: Bench, topicPrefix: string, events: BenchEvent[]): Promise<number> {
  const log = new KafkaEventLog({
    brokers: b.stack.kafkaBrokers.split(','),
    schemaRegistryUrl: b.stack.registryUrl,
    topicPrefix,
    log: () => undefined,
  });
  try {
    await log.ensureTopic(EVENTS_TOPIC);
    const now = Date.now();
    const recs = events.map((e) => ({ key: eventKey(e.tenant, e.user), value: eventRecord(e, now) }));
    for (let i = 0; i < recs.length; i += 1000) await log.append(EVENTS_TOPIC, recs.slice(i, i + 1000));
    const ends = await log.endOffsets(EVENTS_TOPIC);
    return [...ends.values()].reduce((a, x) => a + x, 0);
  } finally {
    await log.close();
  }
}

/** Sum of the rank index's watermarks of the pipeline: records whose scores are visible. */
export function watermarkReader(redis: Redis, d: Deployment): () => Promise<number> {
  const stream = `${PIPELINE_GROUP}:${d.topicPrefix}${EVENTS_TOPIC.name}`;
  const wm = rankKeys(ranksPrefix(d.redisPrefix)).watermark;
  const keys = Array.from({ length: EVENTS_TOPIC.partitions }, (_, p) => wm(stream, p));
  return async () => (await redis.mget(...keys)).reduce((a, v) => a + Number(v ?? 0), 0);
}

/** Polls `done()` until it reaches `total`; the rate counts from the first progress seen. */
export async function measureDrain(
  label: string,
  total: number,
  done: () => Promise<number>,
  spawnedAt: number,
  limitMs: number,
  clock?: ProfileClock,
  cpuMs?: () => Promise<number | null>,
): Promise<DrainRun> {
  const deadline = Date.now() + limitMs;
  let t0 = 0;
  let d0 = 0;
  let c0: number | null = null;
  for (;;) {
    const n = await done().catch(() => 0);
    const now = Date.now();
    if (n > 0 && !t0) {
      t0 = now;
      d0 = n;
      c0 = cpuMs ? await cpuMs() : null;
      clock?.start();
    }
    if (n >= total) {
      clock?.end();
      const seconds = (now - t0) / 1000;
      const c1 = c0 !== null && cpuMs ? await cpuMs() : null;
      const cpuS = c0 !== null && c1 !== null ? (c1 - c0) / 1000 : NaN;
      return {
        eventsPerS: seconds > 0 ? (n - d0) / seconds : NaN,
        events: total,
        seconds,
        ...(cpuS > 0 ? { eventsPerCpuS: (n - d0) / cpuS } : {}),
        startupS: (t0 - spawnedAt) / 1000,
      };
    }
    if (now > deadline)
      throw new Error(`${label}: ${n} of ${total} records after ${Math.round(limitMs / 1000)} s`);
    await sleep(50);
  }
}

/** Sum of ludus_consumer_records_total of the pipeline group, from a gateway's /metrics. */
export async function processedFromMetrics(url: string): Promise<number> {
  const r = await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(60000) });
  const text = await r.text();
  let n = 0;
  for (const m of text.matchAll(/^ludus_consumer_records_total\{([^}]*)\} (\d+)/gm))
    if (m[1]!.includes(`group="${PIPELINE_GROUP}"`)) n += Number(m[2]);
  return n;
}

function windowKeys(at: number) {
  return {
    weekly: windowAt({ type: 'weekly', timezone: 'UTC', reset_day: 'monday', reset_time: '00:00' }, at).key,
    monthly: windowAt({ type: 'monthly', timezone: 'UTC' }, at).key,
  };
}

/** What a baseline writes to Postgres (`directBaseline`). */
export type BaselineRows = 'ledger' | 'stored';

/** Events per transaction of the `stored` baseline: the pipeline's round cap (LUDUS_PIPELINE_ROUND_RECORDS). */
const STORED_CHUNK = 4000;
const COPIES: Record<BaselineRows, string[]> = {
  ledger: ['ledger'],
  stored: ['processed_events', 'leaderboard_scores', 'ledger', 'balances', 'earning_usage'],
};

/**
 * The baselines: the pipeline's effects written straight to the stores, Redis and Postgres
 * concurrently, with no reads, no locks and no logic. Redis: every score increment as a pipelined
 * ZINCRBY (1000 per round trip). Postgres, into copies of the tables (same columns, same indexes):
 *
 * - `ledger`: every ledger row, in batched INSERTs of 1000 rows (the baseline of every pass
 *   before the nineteenth);
 * - `stored`: every row the pipeline stores, one transaction per 4,000 events (the pipeline's
 *   round cap): the dedupe rows, the score rows (upserted: sum, count and latest time per board
 *   window and user), the ledger rows, the balances and the cap-usage rows of the day and the
 *   week (upserted, added); the upserted rows go in key order.
 */
export async function directBaseline(
  b: Bench,
  d: Deployment,
  events: BenchEvent[],
  shape: Parameters<typeof expectedEffects>[1],
  rowsKind: BaselineRows = 'ledger',
): Promise<{
  rows: BaselineRows;
  eventsPerS: number;
  seconds: number;
  zincrby: number;
  ledgerRows: number;
  /** Rows sent to Postgres (upserts count once per statement and key). */
  pgRows: number;
  redisS: number;
  pgS: number;
}> {
  const fx = expectedEffects(events, shape, windowKeys(events[0]!.occurred_at));
  const redis = new Redis(b.stack.redisUrl);
  const sql = new PgSql({ url: b.stack.pgUrl, schema: d.schema, max: 1 });
  try {
    await sql.init();
    await sql.exec(
      COPIES[rowsKind]
        .map(
          (t) => `DROP TABLE IF EXISTS baseline_${t}; CREATE TABLE baseline_${t} (LIKE ${t} INCLUDING ALL);`,
        )
        .join('\n'),
    );
    const now = Date.now();
    const balances = new Map<string, number>();
    const ledgerRow = (l: CreditEffect): unknown[] => {
      const k = `${l.tenant}\u0000${l.user}`;
      const after = (balances.get(k) ?? 0) + l.amount;
      balances.set(k, after);
      return [
        randomUUID(),
        l.tenant,
        l.user,
        'coins',
        l.amount,
        after,
        'earning_rule',
        `${l.rule}:${l.ref}`,
        'baseline',
        `earning:${l.rule}:${l.ref}`,
        now,
      ];
    };
    const writes =
      rowsKind === 'ledger'
        ? ledgerStatements(fx.ledger.map(ledgerRow))
        : storedStatements(events, fx, ledgerRow, now);
    const pgRows = writes.reduce((n, w) => n + w.reduce((m, [, cols]) => m + (cols[0]?.length ?? 0), 0), 0);
    const t = performance.now();
    let redisS = 0;
    let pgS = 0;
    await Promise.all([
      (async () => {
        for (let i = 0; i < fx.zincr.length; i += 1000) {
          const p = redis.pipeline();
          for (const z of fx.zincr.slice(i, i + 1000))
            p.zincrby(`${d.redisPrefix}baseline:{${z.tenant}:${z.board}:${z.window}}:z`, -z.points, z.user);
          await p.exec();
        }
        redisS = (performance.now() - t) / 1000;
      })(),
      (async () => {
        for (const w of writes) {
          if (w.length === 1) await sql.query(w[0]![0], w[0]![1]);
          else await sql.tx((q) => Promise.all(w.map(([text, cols]) => q.query(text, cols))));
        }
        pgS = (performance.now() - t) / 1000;
      })(),
    ]);
    const seconds = (performance.now() - t) / 1000;
    return {
      rows: rowsKind,
      eventsPerS: events.length / seconds,
      seconds,
      zincrby: fx.zincr.length,
      ledgerRows: fx.ledger.length,
      pgRows,
      redisS,
      pgS,
    };
  } finally {
    redis.disconnect();
    await sql.close();
  }
}

/** A statement and its parameters: one array per column. */
type Write = [text: string, cols: unknown[][]];

/** Rows as one array per column. */
const columns = (rows: unknown[][]): unknown[][] =>
  rows.length ? rows[0]!.map((_, c) => rows.map((r) => r[c])) : [];

const LEDGER_INSERT = `INSERT INTO baseline_ledger (id, tenant_id, user_id, currency_id, amount, balance_after, source_type, source_ref, description, idempotency_key, created_at)
             SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bigint[], $7::text[], $8::text[], $9::text[], $10::text[], $11::bigint[])`;

/** `ledger`: the ledger rows in INSERTs of 1000, each on its own (autocommit). */
function ledgerStatements(rows: unknown[][]): Write[][] {
  const out: Write[][] = [];
  for (let i = 0; i < rows.length; i += 1000) out.push([[LEDGER_INSERT, columns(rows.slice(i, i + 1000))]]);
  return out;
}

/** The rows of a map in key order (one lock order for concurrent transactions). */
const sortedRows = (m: Map<string, unknown[]>): unknown[][] => [...m.keys()].sort().map((k) => m.get(k)!);

/** `stored`: per STORED_CHUNK events, one transaction of five set-based statements. */
function storedStatements(
  events: BenchEvent[],
  fx: ReturnType<typeof expectedEffects>,
  ledgerRow: (l: CreditEffect) => unknown[],
  now: number,
): Write[][] {
  const out: Write[][] = [];
  let z = 0;
  let l = 0;
  for (let i = 0; i < events.length; i += STORED_CHUNK) {
    const end = Math.min(i + STORED_CHUNK, events.length);
    const processed = events.slice(i, end).map((e) => [e.tenant, e.event_id, now]);
    const scores = new Map<string, unknown[]>();
    for (; z < fx.zincr.length && fx.zincr[z]!.event < end; z++) {
      const s = fx.zincr[z]!;
      const k = `${s.tenant}\u0000${s.board}\u0000${s.window}\u0000${s.user}`;
      const row = scores.get(k) ?? [s.tenant, s.board, s.window, s.user, 0, 0, 0, 0, 0];
      row[4] = (row[4] as number) + s.points;
      row[5] = (row[5] as number) + s.points;
      row[6] = (row[6] as number) + 1;
      row[7] = events[s.event]!.occurred_at;
      scores.set(k, row);
    }
    const ledger: unknown[][] = [];
    const credited = new Map<string, unknown[]>();
    const usage = new Map<string, unknown[]>();
    for (; l < fx.ledger.length && fx.ledger[l]!.event < end; l++) {
      const c = fx.ledger[l]!;
      ledger.push(ledgerRow(c));
      const bk = `${c.tenant}\u0000${c.user}`;
      const b = credited.get(bk) ?? [c.tenant, c.user, 'coins', 0, 0];
      b[3] = (b[3] as number) + c.amount;
      b[4] = (b[4] as number) + c.amount;
      credited.set(bk, b);
      const at = events[c.event]!.occurred_at;
      for (const period of [`d:${new Date(at).toISOString().slice(0, 10)}`, `w:${windowKeys(at).weekly}`]) {
        const uk = `${bk}\u0000${c.rule}\u0000${period}`;
        const u = usage.get(uk) ?? [c.tenant, c.rule, c.user, period, 0];
        u[4] = (u[4] as number) + c.amount;
        usage.set(uk, u);
      }
    }
    const chunk: Write[] = [
      [
        `INSERT INTO baseline_processed_events (tenant_id, event_id, received_at)
         SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[]) ON CONFLICT DO NOTHING`,
        columns(processed),
      ],
      [
        `INSERT INTO baseline_leaderboard_scores AS s (tenant_id, leaderboard_id, window_key, user_id, score, total, n, tiebreak, partition)
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::float8[], $6::float8[], $7::bigint[], $8::bigint[], $9::int[])
         ON CONFLICT (tenant_id, leaderboard_id, window_key, user_id) DO UPDATE SET score = s.score + EXCLUDED.score,
           total = s.total + EXCLUDED.total, n = s.n + EXCLUDED.n, tiebreak = EXCLUDED.tiebreak`,
        columns(sortedRows(scores)),
      ],
    ];
    if (ledger.length) {
      chunk.push(
        [LEDGER_INSERT, columns(ledger)],
        [
          `INSERT INTO baseline_balances AS b (tenant_id, user_id, currency_id, available, lifetime_earned)
           SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[])
           ON CONFLICT (tenant_id, user_id, currency_id) DO UPDATE SET available = b.available + EXCLUDED.available,
             lifetime_earned = b.lifetime_earned + EXCLUDED.lifetime_earned`,
          columns(sortedRows(credited)),
        ],
        [
          `INSERT INTO baseline_earning_usage AS u (tenant_id, rule_id, user_id, period, amount)
           SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[])
           ON CONFLICT (tenant_id, rule_id, user_id, period) DO UPDATE SET amount = u.amount + EXCLUDED.amount`,
          columns(sortedRows(usage)),
        ],
      );
    }
    out.push(chunk);
  }
  return out;
}

export async function pipelineWorkload(b: Bench): Promise<void> {
  // The embedded shape first, for the reason given in ingestWorkload.
  await embedded(b);
  const p = b.profile;
  const N = p.pipeline.events;
  const redis = new Redis(b.stack.redisUrl);
  try {
    await distributedDrain(b, N, redis);
    await distributedLatency(b, redis);
  } finally {
    redis.disconnect();
  }
}

/** The distributed drain and latency of `pipelineWorkload`, without the embedded shape. */
export async function pipelineDistributedWorkload(b: Bench): Promise<void> {
  const redis = new Redis(b.stack.redisUrl);
  try {
    await distributedDrain(b, b.profile.pipeline.events, redis);
    await distributedLatency(b, redis);
  } finally {
    redis.disconnect();
  }
}

async function distributedDrain(b: Bench, N: number, redis: Redis): Promise<void> {
  const p = b.profile;
  const holder = b.cleanup.deployment('pipe');
  const events = generate(N, {
    tenants: ['bench'],
    users: p.pipeline.users,
    seed: 11,
    idPrefix: uniqueName('pipe'),
  });
  const expected = expectedEffects(events, { kind: 'standard' }, windowKeys(events[0]!.occurred_at));
  let t = Date.now();
  const total = await produceBacklog(b, holder.topicPrefix, events);
  progress(`pipeline: backlog of ${total} events produced in ${((Date.now() - t) / 1000).toFixed(1)} s`);
  const runs: DrainRun[] = [];
  const baselines: Array<Awaited<ReturnType<typeof directBaseline>>> = [];
  const storedBaselines: typeof baselines = [];
  const oneRun = async (label: string, nodeFlags: string[] = [], clock?: ProfileClock, grown = 0) => {
    const d = { ...b.cleanup.deployment('piperun'), topicPrefix: holder.topicPrefix };
    const env = distributedEnv(b.stack, d, b.cleanup, b.secretKey);
    await setUp(env, ['api'], b.rootKey, { tenants: ['bench'], ...STANDARD });
    if (grown > 0) {
      const sql = new PgSql({ url: b.stack.pgUrl, schema: d.schema, max: 1 });
      try {
        await growStore(sql, grown, 'store');
      } finally {
        await sql.close();
      }
    }
    t = Date.now();
    clock?.spawned();
    const svc = await startService({
      label,
      roles: 'processors',
      env,
      nodeFlags,
      waitHealthy: false,
      logFile: `${b.tmp}/pipeline-distributed.log`,
    });
    let run: DrainRun;
    try {
      run = await measureDrain(
        label,
        total,
        watermarkReader(redis, d),
        t,
        Math.max(180_000, (N / 300) * 1000),
        clock,
        async () => (await procStat(svc.pid))?.cpuMs ?? null,
      );
    } finally {
      await svc.stop();
    }
    const sql = new PgSql({ url: b.stack.pgUrl, schema: d.schema, max: 1 });
    try {
      const c = await sql.query<{ ledger: number; scores: number; processed: number }>(
        `SELECT (SELECT count(*)::int FROM ledger WHERE tenant_id = 'bench') AS ledger,
                (SELECT count(*)::int FROM leaderboard_scores WHERE tenant_id = 'bench') AS scores,
                (SELECT count(*)::int FROM processed_events WHERE tenant_id = 'bench') AS processed`,
      );
      run.checks = { ...c.rows[0]!, expectedLedger: expected.ledger.length };
    } finally {
      await sql.close();
    }
    return { run, d, pid: svc.pid };
  };
  for (let i = 0; i < p.runs; i++) {
    const { run, d } = await oneRun(`processors (distributed) run ${i + 1}`);
    runs.push(run);
    progress(
      `pipeline distributed run ${i + 1}/${p.runs}: ${Math.round(run.eventsPerS)} events/s (${run.seconds.toFixed(1)} s; ${Math.round(run.eventsPerCpuS ?? NaN)} events per CPU-second of the processor; ledger ${run.checks!.ledger}/${run.checks!.expectedLedger})`,
    );
    for (const kind of ['ledger', 'stored'] as const) {
      const base = await directBaseline(b, d, events, { kind: 'standard' }, kind);
      (kind === 'ledger' ? baselines : storedBaselines).push(base);
      progress(
        `pipeline baseline (${kind}) run ${i + 1}/${p.runs}: ${Math.round(base.eventsPerS)} events/s (${base.zincrby} ZINCRBY in ${base.redisS.toFixed(2)} s, ${base.pgRows} rows to Postgres in ${base.pgS.toFixed(2)} s)`,
      );
    }
    await b.cleanup.drop({ ...d, topicPrefix: '' });
  }
  // The same drain on a grown store: other users' rows in every table the pipeline reads or
  // writes (bench/lib/grow.ts), against the drain above on fresh tables.
  const grownRuns: DrainRun[] = [];
  for (let i = 0; i < p.runs; i++) {
    const { run, d } = await oneRun(
      `processors (distributed, grown store) run ${i + 1}`,
      [],
      undefined,
      p.pipeline.grownUsers,
    );
    grownRuns.push(run);
    progress(
      `pipeline distributed, grown store, run ${i + 1}/${p.runs}: ${Math.round(run.eventsPerS)} events/s (${run.seconds.toFixed(1)} s; ledger ${run.checks!.ledger}/${run.checks!.expectedLedger})`,
    );
    await b.cleanup.drop({ ...d, topicPrefix: '' });
  }
  if (p.profile) {
    await profiled(b, 'pipeline-distributed', async (nodeFlags, clock) => {
      const r = await oneRun('processors (distributed, --cpu-prof)', nodeFlags, clock);
      await b.cleanup.drop({ ...r.d, topicPrefix: '' });
      return r.pid;
    });
  }
  await b.cleanup.drop(holder);
  b.results.record('pipeline.distributed.drain', runs);
  b.results.record('pipeline.distributed.baseline', baselines);
  b.results.record('pipeline.distributed.baselineStored', storedBaselines);
  b.results.record('pipeline.distributed.grown', grownRuns);
  const drain = figure(runs.map((r) => r.eventsPerS));
  const row = b.results.row({
    workload: `pipeline drain (${N.toLocaleString('en-US')} events)`,
    shape: 'distributed',
    what: 'events/s end to end (visible in Redis)',
    unit: 'events/s',
    value: drain,
    baseline: {
      name: 'ZINCRBY pipelined + batched ledger INSERTs',
      value: figure(baselines.map((r) => r.eventsPerS)),
    },
  });
  row.targets = [{ text: '≥50,000 events/s', met: row.value.median >= 50_000 }];
  const stored = b.results.row({
    workload: `pipeline drain (${N.toLocaleString('en-US')} events), vs every stored row`,
    shape: 'distributed',
    what: 'events/s end to end (visible in Redis)',
    unit: 'events/s',
    value: drain,
    baseline: {
      name: 'ZINCRBY pipelined + every row the pipeline stores (dedupe, scores, ledger, balances, cap usage), one transaction per 4,000 events',
      value: figure(storedBaselines.map((r) => r.eventsPerS)),
    },
  });
  stored.targets = [
    {
      text: '≥50% of the direct writes of the same effects',
      met: drain.median >= 0.5 * stored.baseline!.value.median,
    },
  ];
  grownStoreRow(b, N, 'distributed', 'events/s end to end (visible in Redis)', grownRuns, runs);
  // The drain per CPU-second of the processor process (user + system time from /proc over the
  // drain): it moves far less than the rate with the machine's other load (Postgres, Kafka and
  // the other runs share the cores), so two commits compare better by it.
  const perCpu = runs.map((r) => r.eventsPerCpuS).filter((x): x is number => x !== undefined);
  if (perCpu.length === runs.length)
    b.results.row({
      workload: `pipeline drain (${N.toLocaleString('en-US')} events), per CPU-second of the processor`,
      shape: 'distributed',
      what: 'events per CPU-second of the processing process',
      unit: 'events/CPU-s',
      value: figure(perCpu),
    });
  b.peaks.pipelineDistributed = row.value.median;
}

/** The drain on a grown store (bench/lib/grow.ts) against the same shape's drain on fresh tables. */
function grownStoreRow(
  b: Bench,
  N: number,
  shape: 'distributed' | 'embedded',
  what: string,
  grown: ReadonlyArray<{ eventsPerS: number }>,
  fresh: ReadonlyArray<{ eventsPerS: number }>,
): void {
  b.results.row({
    workload: `pipeline drain (${N.toLocaleString('en-US')} events), on a grown store (${b.profile.pipeline.grownUsers.toLocaleString('en-US')} other users' rows per table)`,
    shape,
    what,
    unit: 'events/s',
    value: figure(grown.map((r) => r.eventsPerS)),
    baseline: {
      name: 'the same drain on fresh tables (above)',
      value: figure(fresh.map((r) => r.eventsPerS)),
    },
  });
}

/** The p99 without the service's first seconds, for the progress line and the row's note. */
function afterWarmUp(runs: ProbeResult[]): string {
  const known = runs.map((r) => r.p99AfterWarmUp).filter((x) => Number.isFinite(x));
  if (known.length === 0) return `no probes after the first ${WARM_UP_S} s`;
  return `p99 of the probes after the first ${WARM_UP_S} s ${Math.round(figure(known).median)} ms (the warm-up left out; not the target's figure)`;
}

/** Steady load at half the peak drain rate, with probes; p50/p99 of acceptance to visible rank. */
async function distributedLatency(b: Bench, redis: Redis): Promise<void> {
  const p = b.profile;
  const { rate, label } = latencyRate(b, 'distributed', b.peaks.pipelineDistributed ?? 2000);
  const runs: Array<ProbeResult & { load: unknown; lagAtEnd: number }> = [];
  for (let i = 0; i < p.runs; i++) {
    const d = b.cleanup.deployment('lat');
    const env = distributedEnv(b.stack, d, b.cleanup, b.secretKey);
    const secrets = await setUp(env, ['api'], b.rootKey, { tenants: ['bench'], ...STANDARD });
    const token = await tenantToken(secrets.get('bench')!);
    const services: Service[] = [];
    try {
      services.push(
        await startService({
          label: 'processors (distributed)',
          roles: 'processors',
          env,
          waitHealthy: false,
          logFile: `${b.tmp}/latency-distributed.log`,
        }),
      );
      const ing = await startService({
        label: 'ingest gateway (distributed)',
        roles: 'ingest',
        env,
        logFile: `${b.tmp}/latency-distributed.log`,
      });
      services.push(ing);
      const hKey = rankKeys(ranksPrefix(d.redisPrefix)).hash('bench:matches:all_time');
      const isVisible = async (users: string[]) => {
        const pl = redis.pipeline();
        for (const u of users) pl.hexists(hKey, u);
        return ((await pl.exec()) ?? []).map(([, v]) => v === 1);
      };
      // Wait until the processors have joined the group and apply events: one probe must show up
      // (a fresh probe per attempt: the group may still be forming when the first is sent).
      let warm = { visible: 0 };
      for (let attempt = 1; attempt <= 3 && warm.visible === 0; attempt++) {
        warm = await runProbes({
          ingestUrl: ing.url.ingest,
          token,
          tag: uniqueName('warm'),
          perS: 1,
          durationS: 0.5,
          isVisible,
          pollMs: 20,
          drainMs: 60000,
        });
        if (warm.visible === 0) progress(`latency: warm-up probe ${attempt}/3 not visible after 60 s`);
      }
      if (warm.visible === 0)
        throw new Error(
          `latency: no warm-up probe became visible (processors log: ${logTail(`${b.tmp}/latency-distributed.log`)})`,
        );
      const load = runChild<unknown>(
        'bench/lib/pacer.ts',
        {
          mode: 'rate',
          url: ing.url.ingest,
          tokens: { bench: token },
          users: p.pipeline.users,
          seed: 21 + i,
          idPrefix: uniqueName('load'),
          batch: 100,
          eventsPerS: rate,
          durationS: p.pipeline.latencyS,
          maxInFlight: 32,
        },
        'PACER',
        (p.pipeline.latencyS + 120) * 1000,
      );
      const probes = await runProbes({
        ingestUrl: ing.url.ingest,
        token,
        tag: uniqueName('lat'),
        perS: p.pipeline.probesPerS,
        durationS: p.pipeline.latencyS,
        isVisible,
        pollMs: 5,
        drainMs: 30000,
      });
      const loadResult = await load;
      const applied = await watermarkReader(redis, d)();
      const log = new KafkaEventLog({
        brokers: b.stack.kafkaBrokers.split(','),
        schemaRegistryUrl: b.stack.registryUrl,
        topicPrefix: d.topicPrefix,
        log: () => undefined,
      });
      const ends = await log.endOffsets(EVENTS_TOPIC).finally(() => log.close());
      const lagAtEnd = [...ends.values()].reduce((a, x) => a + x, 0) - applied;
      runs.push({ ...probes, load: loadResult, lagAtEnd });
      progress(
        `latency distributed run ${i + 1}/${p.runs} at ${rate} events/s: p50 ${probes.p50.toFixed(0)} ms, p99 ${probes.p99.toFixed(0)} ms (${probes.visible}/${probes.sent} probes; lag at end ${lagAtEnd}; ${afterWarmUp([probes])})`,
      );
    } finally {
      for (const s of services.reverse()) await s.stop();
      await b.cleanup.drop(d);
    }
  }
  b.results.record('pipeline.distributed.latency', { eventsPerS: rate, runs });
  b.results.row({
    workload: label,
    shape: 'distributed',
    what: 'probes visible',
    unit: 'probes',
    value: figure(runs.map((r) => r.visible)),
    p50: figure(runs.map((r) => r.p50)),
    p99: figure(runs.map((r) => r.p99)),
    targets: [
      {
        text: 'p99 < 1 s (at half of 50,000/s)',
        met: figure(runs.map((r) => r.p99)).median < 1000 && rate >= 25000,
      },
    ],
    note: [
      rate < 25000
        ? `load is ${b.latencyRates.distributed ? 'a fixed rate (--latency-rate)' : 'half the measured peak'}, not half of 50,000/s; p99 < 1 s at this rate: ${figure(runs.map((r) => r.p99)).median < 1000 ? 'yes' : 'no'}`
        : undefined,
      afterWarmUp(runs),
    ]
      .filter(Boolean)
      .join('; '),
  });
}

/** The embedded shape's store set up once (tenant, boards, rules), copied fresh for every run. */
interface EmbeddedFixture {
  env: (dir: string) => Record<string, string>;
  token: string;
  /** A fresh copy of the set-up store under `name`. */
  copy: (name: string) => string;
}

async function embeddedFixture(b: Bench): Promise<EmbeddedFixture> {
  const template = b.cleanup.dir(`${b.tmp}/pipeline-embedded-template`);
  mkdirSync(template, { recursive: true });
  const env = (dir: string) => ({ LUDUS_DATA_DIR: dir, LUDUS_ROOT_KEY: b.rootKey });
  const secrets = await setUp(env(template), ['ingest', 'api', 'processors'], b.rootKey, {
    tenants: ['bench'],
    ...STANDARD,
  });
  const token = await tenantToken(secrets.get('bench')!);
  const copy = (name: string) => {
    const dir = `${b.tmp}/${name}`;
    rmSync(dir, { recursive: true, force: true });
    cpSync(template, dir, { recursive: true });
    return dir;
  };
  return { env, token, copy };
}

/** The embedded shape: backlog drain, end to end with every role in one process, latency. */
export async function embedded(b: Bench): Promise<void> {
  const p = b.profile;
  const N = p.embedded.events;
  const fixture = await embeddedFixture(b);
  const { env, token, copy } = fixture;

  // Backlog drain: ingest N events (role ingest), then drain them (roles api,processors).
  const drains: Array<
    DrainRun & {
      ingest: unknown;
      stallMs: number;
      gatewayP99Ms: number;
      gatewayP99MsByEndpoint: Record<string, number>;
      doneAfterSpawnS: number;
    }
  > = [];
  const grownDrains: typeof drains = [];
  /** One drain; with `grown`, on a store grown by that many other users' rows per table first. */
  const drainRun = async (i: number, grown = 0) => {
    const dir = copy('pipeline-embedded-drain');
    if (grown > 0) {
      const store = await PgliteSql.open(`${dir}/pg`);
      try {
        await growStore(store, grown, 'embedded store');
      } finally {
        await store.close();
      }
    }
    const ing = await startService({
      label: 'ingest (embedded)',
      roles: 'ingest',
      env: env(dir),
      logFile: `${b.tmp}/pipeline-embedded.log`,
    });
    let ingest: { accepted: number };
    try {
      ingest = await runChild<{ accepted: number }>(
        'bench/lib/pacer.ts',
        {
          mode: 'count',
          url: ing.url.ingest,
          tokens: { bench: token },
          users: p.pipeline.users,
          seed: 31,
          idPrefix: uniqueName('bl'),
          batch: 100,
          events: N,
          concurrency: 16,
        },
        'PACER',
        600_000,
      );
    } finally {
      await ing.stop();
    }
    // Not waiting for /health: the processors start right after the listeners. While the backlog
    // drains, the gateways of the same process are probed every 50 ms (/metrics, /health and a
    // rank lookup, each timed: `gateway`), and the drain is timed from the store: the first ledger
    // row's created_at (the clock of the first batch) to the last offset commit
    // (consumer_offsets.updated_at).
    const t = Date.now();
    const proc = await startService({
      label: 'api,processors (embedded)',
      roles: 'api,processors',
      env: env(dir),
      waitHealthy: false,
      logFile: `${b.tmp}/pipeline-embedded.log`,
    });
    let stallMs = 0;
    // Answers are counted once the drain is under way (a first record processed): the process's
    // start (modules, the database thread, the rank index) is not part of "during a drain".
    // Each endpoint's answers are also kept apart, so that a slow p99 names its cause.
    let draining = false;
    const answers: number[] = [];
    const byEndpoint: Record<'metrics' | 'health' | 'rank', number[]> = { metrics: [], health: [], rank: [] };
    const timed = async <T>(what: keyof typeof byEndpoint, call: () => Promise<T>): Promise<T> => {
      const ts = Date.now();
      const out = await call();
      if (draining) {
        const ms = Date.now() - ts;
        answers.push(ms);
        byEndpoint[what].push(ms);
      }
      return out;
    };
    const get = async (url: string, headers: Record<string, string> = {}) => {
      const r = await fetch(url, { headers, signal: AbortSignal.timeout(60000) });
      await r.arrayBuffer();
    };
    try {
      const deadline = Date.now() + Math.max(180_000, (N / 100) * 1000);
      for (;;) {
        const ts = Date.now();
        const [n] = await Promise.all([
          timed('metrics', () => processedFromMetrics(proc.url.query)).catch(() => -1),
          timed('health', () => get(`${proc.url.query}/health`)).catch(() => undefined),
          timed('rank', () =>
            get(`${proc.url.query}/v1/leaderboards/matches/rank/u1`, { authorization: `Bearer ${token}` }),
          ).catch(() => undefined),
        ]);
        if (n >= 0 && draining) stallMs = Math.max(stallMs, Date.now() - ts);
        if (n > 0) draining = true;
        if (n >= ingest.accepted) break;
        if (Date.now() > deadline) throw new Error(`embedded drain: ${n} of ${ingest.accepted} processed`);
        await sleep(50);
      }
    } finally {
      await proc.stop();
    }
    const doneS = (Date.now() - t) / 1000;
    const sql = await PgliteSql.open(`${dir}/pg`);
    try {
      const r = await sql.query<{ first: number; last: number }>(
        `SELECT (SELECT min(created_at) FROM ledger WHERE tenant_id = 'bench')::bigint AS first,
                (SELECT max(extract(epoch FROM updated_at) * 1000) FROM consumer_offsets WHERE group_id = $1)::bigint AS last`,
        [PIPELINE_GROUP],
      );
      const seconds = (Number(r.rows[0]!.last) - Number(r.rows[0]!.first)) / 1000;
      const run = {
        eventsPerS: ingest.accepted / seconds,
        events: ingest.accepted,
        seconds,
        startupS: NaN,
        stallMs,
        gatewayP99Ms: percentile(answers, 99),
        gatewayAnswers: answers.length,
        gatewayP99MsByEndpoint: Object.fromEntries(
          Object.entries(byEndpoint).map(([k, v]) => [k, percentile(v, 99)]),
        ),
        doneAfterSpawnS: doneS,
        ingest,
      };
      (grown > 0 ? grownDrains : drains).push(run);
      progress(
        `pipeline embedded drain${grown > 0 ? ', grown store,' : ''} run ${i + 1}/${p.runs}: ${Math.round(run.eventsPerS)} events/s (${seconds.toFixed(1)} s; meanwhile ${answers.length} gateway answers, p99 ${run.gatewayP99Ms} ms: /metrics ${run.gatewayP99MsByEndpoint.metrics} ms, /health ${run.gatewayP99MsByEndpoint.health} ms, rank ${run.gatewayP99MsByEndpoint.rank} ms; slowest round ${stallMs} ms)`,
      );
    } finally {
      await sql.close();
      rmSync(dir, { recursive: true, force: true });
    }
  };
  for (let i = 0; i < p.runs; i++) await drainRun(i);
  for (let i = 0; i < p.runs; i++) await drainRun(i, p.pipeline.grownUsers);
  b.results.record('pipeline.embedded.drain', drains);
  b.results.record('pipeline.embedded.grown', grownDrains);
  b.results.row({
    workload: `pipeline drain (${N.toLocaleString('en-US')} events)`,
    shape: 'embedded',
    what: 'events/s (processed, in the memory index)',
    unit: 'events/s',
    value: figure(drains.map((r) => r.eventsPerS)),
    targets: [
      {
        text: 'gateway answers during the drain (/metrics, /health, rank lookup) p99 < 100 ms',
        met: figure(drains.map((r) => r.gatewayP99Ms)).median < 100,
      },
    ],
    note: `gateway answers during the drain: p99 ${figure(drains.map((r) => r.gatewayP99Ms)).median} ms; /metrics ${figure(drains.map((r) => r.gatewayP99MsByEndpoint.metrics!)).median} ms, /health ${figure(drains.map((r) => r.gatewayP99MsByEndpoint.health!)).median} ms, rank lookup ${figure(drains.map((r) => r.gatewayP99MsByEndpoint.rank!)).median} ms; slowest round of the three ${figure(drains.map((r) => r.stallMs)).median} ms (medians of the runs)`,
  });

  grownStoreRow(b, N, 'embedded', 'events/s (processed, in the memory index)', grownDrains, drains);

  // End to end: every role in one process, wrk sending bulk requests for e2eS seconds.
  const e2e: Array<{
    eventsPerS: number;
    accepted: number;
    ingestS: number;
    totalS: number;
    ingestEventsPerS: number;
    p99: number;
  }> = [];
  const endToEnd = async (i: number, nodeFlags: string[] = [], clock?: ProfileClock) => {
    const dir = copy('pipeline-embedded-e2e');
    clock?.spawned();
    const svc = await startService({
      label: 'all roles (embedded)',
      roles: 'ingest,api,processors',
      env: env(dir),
      nodeFlags,
      logFile: `${b.tmp}/pipeline-embedded.log`,
    });
    try {
      const events = generate(6400, {
        tenants: ['bench'],
        users: p.pipeline.users,
        seed: 41 + i,
        idPrefix: 'e',
      });
      const templates = bulkBodies(events, 64, 100, uniqueName('e2e')).map((x) => ({
        method: 'POST' as const,
        path: '/v1/events/bulk',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: x.body,
      }));
      clock?.start();
      const t0 = Date.now();
      const w = await runWrk({
        baseUrl: svc.url.ingest,
        templates,
        connections: p.ingest.connections,
        durationS: p.embedded.e2eS,
        scriptFile: `${b.tmp}/e2e.lua`,
      });
      const accepted = (w.requests - w.errors) * 100;
      const ingestS = (Date.now() - t0) / 1000;
      const deadline = Date.now() + Math.max(300_000, (accepted / 200) * 1000);
      let done = 0;
      while ((done = await processedFromMetrics(svc.url.query).catch(() => 0)) < accepted) {
        if (Date.now() > deadline) throw new Error(`embedded e2e: ${done} of ${accepted} processed`);
        await sleep(50);
      }
      clock?.end();
      const totalS = (Date.now() - t0) / 1000;
      return {
        eventsPerS: accepted / totalS,
        accepted,
        ingestS,
        totalS,
        ingestEventsPerS: accepted / ingestS,
        p99: w.latencyMs.p99,
        pid: svc.pid,
      };
    } finally {
      await svc.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  };
  for (let i = 0; i < p.runs; i++) {
    const { pid: _pid, ...r } = await endToEnd(i);
    e2e.push(r);
    progress(
      `pipeline embedded end-to-end run ${i + 1}/${p.runs}: ${Math.round(r.eventsPerS)} events/s (${r.accepted} events accepted in ${r.ingestS.toFixed(1)} s, all processed after ${r.totalS.toFixed(1)} s)`,
    );
  }
  if (p.profile) {
    await profiled(
      b,
      'pipeline-embedded-e2e',
      async (nodeFlags, clock) => (await endToEnd(99, nodeFlags, clock)).pid,
    );
  }
  b.results.record('pipeline.embedded.e2e', e2e);
  const e2eRow = b.results.row({
    workload: 'ingest + pipeline end to end (bulk, all roles in one process)',
    shape: 'embedded',
    what: 'events/s ingested and processed',
    unit: 'events/s',
    value: figure(e2e.map((r) => r.eventsPerS)),
    p99: figure(e2e.map((r) => r.p99)),
    note: 'p99: bulk request latency while the pipeline runs',
  });
  e2eRow.targets = [{ text: '≥10,000 events/s', met: e2eRow.value.median >= 10_000 }];
  await latencyRuns(b, fixture, e2eRow.value.median);
}

/**
 * The embedded acceptance-to-visible runs alone (`--only embedded-latency`), at the rate of
 * `--latency-rate embedded=N`: two commits or settings compared at one load without the drains
 * and end-to-end runs before them.
 */
export async function embeddedLatency(b: Bench): Promise<void> {
  if (!b.latencyRates.embedded)
    throw new Error('embedded-latency runs at a fixed rate: give --latency-rate embedded=N');
  await latencyRuns(b, await embeddedFixture(b), Number.NaN);
}

/**
 * Latency at half the end-to-end rate (`peak`), or at the fixed rate; probes read through the
 * query gateway's rank endpoint.
 */
async function latencyRuns(b: Bench, fixture: EmbeddedFixture, peak: number): Promise<void> {
  const p = b.profile;
  const { env, token, copy } = fixture;
  const { rate, label } = latencyRate(b, 'embedded', peak);
  const lat: ProbeResult[] = [];
  const latencyRun = async (i: number, nodeFlags: string[] = [], clock?: ProfileClock) => {
    const dir = copy('pipeline-embedded-latency');
    clock?.spawned();
    const svc = await startService({
      label: 'all roles (embedded)',
      roles: 'ingest,api,processors',
      env: env(dir),
      nodeFlags,
      logFile: `${b.tmp}/pipeline-embedded.log`,
    });
    try {
      const isVisible = (users: string[]) =>
        Promise.all(
          users.map(async (u) => {
            const r = await fetch(`${svc.url.query}/v1/leaderboards/matches/rank/${u}`, {
              headers: { authorization: `Bearer ${token}` },
            });
            return ((await r.json()) as { found?: boolean }).found === true;
          }),
        );
      clock?.start();
      const load = runChild<unknown>(
        'bench/lib/pacer.ts',
        {
          mode: 'rate',
          url: svc.url.ingest,
          tokens: { bench: token },
          users: p.pipeline.users,
          seed: 51 + i,
          idPrefix: uniqueName('load'),
          batch: 100,
          eventsPerS: rate,
          durationS: p.embedded.latencyS,
          maxInFlight: 32,
        },
        'PACER',
        (p.embedded.latencyS + 120) * 1000,
      );
      const probes = await runProbes({
        ingestUrl: svc.url.ingest,
        token,
        tag: uniqueName('lat'),
        perS: p.pipeline.probesPerS,
        durationS: p.embedded.latencyS,
        isVisible,
        pollMs: 10,
        drainMs: 30000,
      });
      await load;
      clock?.end();
      return { probes, pid: svc.pid };
    } finally {
      await svc.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  };
  for (let i = 0; i < p.runs; i++) {
    const { probes } = await latencyRun(i);
    lat.push(probes);
    progress(
      `latency embedded run ${i + 1}/${p.runs} at ${rate} events/s: p50 ${probes.p50.toFixed(0)} ms, p99 ${probes.p99.toFixed(0)} ms (${probes.visible}/${probes.sent} probes; ${afterWarmUp([probes])})`,
    );
  }
  if (p.profile) {
    await profiled(
      b,
      'pipeline-embedded-latency',
      async (nodeFlags, clock) => (await latencyRun(99, nodeFlags, clock)).pid,
    );
  }
  b.results.record('pipeline.embedded.latency', { eventsPerS: rate, runs: lat });
  b.results.row({
    workload: label,
    shape: 'embedded',
    what: 'probes visible',
    unit: 'probes',
    value: figure(lat.map((r) => r.visible)),
    p50: figure(lat.map((r) => r.p50)),
    p99: figure(lat.map((r) => r.p99)),
    note: afterWarmUp(lat),
  });
}
