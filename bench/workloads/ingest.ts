/**
 * Workload 1, ingest: bulk requests of 100 events and single events against the ingestion gateway,
 * from wrk in its own process at a fixed concurrency, with a valid tenant JWT and rate limits off.
 * Figures: accepted events/s and request latency p50/p99.
 *
 * Baselines in the same run (distributed shape): the same Avro records produced straight to Kafka
 * by a bare kafkajs producer with the event log's settings (bench/lib/kafka-producer.ts), and
 * Kafka's own ProducerPerformance (from the ops/stack jars) with the same record size.
 */
import { execFile } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { Type, type Schema } from 'avsc';
import { Kafka, logLevel } from 'kafkajs';
import eventV1 from '../../schemas/avro/event.v1.avsc.json';
import { EVENTS_TOPIC } from '../../schemas/topics';
import { createTenant, tenantToken } from '../lib/admin';
import { runChild } from '../lib/child';
import type { Bench } from '../lib/context';
import { bulkBodies, eventRecord, generate } from '../lib/events';
import { setUp } from '../lib/inproc';
import { profiled } from '../lib/profiling';
import { startService, type Service } from '../lib/service';
import { distributedEnv, ROOT } from '../lib/stack';
import { figure, progress, uniqueName } from '../lib/util';
import { runWrk, type WrkResult } from '../lib/wrk';

export interface IngestRun {
  eventsPerS: number;
  requestsPerS: number;
  p50: number;
  p99: number;
  errors: number;
  requests: number;
  seconds: number;
  /** Distributed: records the topic gained during the run (a cross-check of accepted events). */
  kafkaRecords?: number;
}

/** Runs wrk `runs` times against an ingestion gateway; bodies of `batch` events from `tokens`' tenants. */
export async function measureIngest(
  b: Bench,
  svcUrl: string,
  tokens: Map<string, string>,
  o: {
    label: string;
    batch: number;
    runs: number;
    durationS: number;
    warmupS: number;
    variants?: number;
    topicEnds?: () => Promise<number>;
  },
): Promise<IngestRun[]> {
  const tenants = [...tokens.keys()];
  const events = generate(Math.max(6400, tenants.length * 100), {
    tenants,
    users: b.profile.pipeline.users,
    seed: 7,
    idPrefix: 'x',
    variants: o.variants,
  });
  const templates = (tag: string) =>
    bulkBodies(events, Math.max(32, tenants.length), o.batch, tag).map((x) => ({
      method: 'POST' as const,
      path: o.batch === 1 ? '/v1/events' : '/v1/events/bulk',
      headers: { authorization: `Bearer ${tokens.get(x.tenant)}`, 'content-type': 'application/json' },
      body: x.body,
    }));
  const wrk = (seconds: number, tag: string) =>
    runWrk({
      baseUrl: svcUrl,
      templates: templates(tag),
      connections: b.profile.ingest.connections,
      durationS: seconds,
      scriptFile: `${b.tmp}/${uniqueName('ingest')}.lua`,
    });
  // One request first: it must be accepted whole, or the figures would count failures.
  const probe = templates(uniqueName('probe'))[0]!;
  const r = await fetch(`${svcUrl}${probe.path}`, {
    method: 'POST',
    headers: probe.headers,
    body: probe.body.replaceAll('@@ID@@', '0'),
  });
  const text = await r.text();
  if (r.status !== 202 || (o.batch > 1 && !text.includes(`"accepted":${o.batch}`)))
    throw new Error(`${o.label}: the probe request was not accepted: ${r.status} ${text.slice(0, 300)}`);
  if (o.warmupS > 0) await wrk(o.warmupS, uniqueName('warm'));
  const runs: IngestRun[] = [];
  for (let i = 0; i < o.runs; i++) {
    const before = o.topicEnds ? await o.topicEnds() : 0;
    const w: WrkResult = await wrk(o.durationS, uniqueName('run'));
    const after = o.topicEnds ? await o.topicEnds() : 0;
    const run: IngestRun = {
      eventsPerS: w.rps * o.batch,
      requestsPerS: w.rps,
      p50: w.latencyMs.p50,
      p99: w.latencyMs.p99,
      errors: w.errors,
      requests: w.requests,
      seconds: w.durationS,
      ...(o.topicEnds ? { kafkaRecords: after - before } : {}),
    };
    runs.push(run);
    progress(
      `${o.label} run ${i + 1}/${o.runs}: ${Math.round(run.eventsPerS)} events/s, p50 ${run.p50.toFixed(1)} ms, p99 ${run.p99.toFixed(1)} ms${run.errors ? `, ${run.errors} errors` : ''}`,
    );
  }
  return runs;
}

interface PacedRun {
  rate: number;
  eventsPerS: number;
  errors: number;
  latencyMs: { p50: number; p99: number };
}

/**
 * Bulk requests paced (open loop, bench/lib/pacer.ts) at `rate` events/s: the request latency a
 * client sees when the gateway is not saturated, which a closed-loop wrk run cannot show.
 */
async function pacedIngest(
  b: Bench,
  url: string,
  tokens: Map<string, string>,
  rate: number,
): Promise<PacedRun[]> {
  const runs: PacedRun[] = [];
  for (let i = 0; i < b.profile.runs; i++) {
    const r = await runChild<Omit<PacedRun, 'rate'>>(
      'bench/lib/pacer.ts',
      {
        mode: 'rate',
        url,
        tokens: Object.fromEntries(tokens),
        users: b.profile.pipeline.users,
        seed: 31 + i,
        idPrefix: uniqueName('half'),
        batch: 100,
        eventsPerS: rate,
        durationS: b.profile.ingest.durationS,
        maxInFlight: 64,
      },
      'PACER',
      (b.profile.ingest.durationS + 120) * 1000,
    );
    runs.push({ rate, ...r });
    progress(
      `ingest distributed bulk at half the peak (${Math.round(rate)} events/s) run ${i + 1}/${b.profile.runs}: ${Math.round(r.eventsPerS)} events/s, p50 ${r.latencyMs.p50.toFixed(1)} ms, p99 ${r.latencyMs.p99.toFixed(1)} ms${r.errors ? `, ${r.errors} errors` : ''}`,
    );
  }
  return runs;
}

const figs = (runs: IngestRun[]) => ({
  value: figure(runs.map((r) => r.eventsPerS)),
  p50: figure(runs.map((r) => r.p50)),
  p99: figure(runs.map((r) => r.p99)),
});

/** Average size of the event log's record values (Confluent header + Avro body). */
function recordSize(): number {
  const type = Type.forSchema(eventV1 as Schema);
  const evs = generate(1000, {
    tenants: ['bench'],
    users: 10000,
    seed: 7,
    idPrefix: 'run_xxxxxxxx-1234567-12',
  });
  const total = evs.reduce((a, e) => a + type.toBuffer(eventRecord(e)).length + 5, 0);
  return Math.round(total / evs.length);
}

async function producerPerformance(
  b: Bench,
  topic: string,
  records: number,
  size: number,
): Promise<{ eventsPerS: number; p50: number; p99: number; raw: string }> {
  const args = [
    `${ROOT}/ops/stack`,
    'kafka-tool',
    'org.apache.kafka.tools.ProducerPerformance',
    '--topic',
    topic,
    '--num-records',
    String(records),
    '--record-size',
    String(size),
    '--throughput',
    '-1',
    '--producer-props',
    `bootstrap.servers=${b.stack.kafkaBrokers}`,
    'acks=all',
    'enable.idempotence=true',
    'max.in.flight.requests.per.connection=1',
    `batch.size=${size * 100}`,
    'linger.ms=0',
  ];
  const out = await new Promise<string>((resolve, reject) =>
    execFile('bash', args, { timeout: 180000, maxBuffer: 16 << 20 }, (err, stdout, stderr) =>
      err ? reject(new Error(`ProducerPerformance: ${err.message} ${stderr.slice(-300)}`)) : resolve(stdout),
    ),
  );
  const m =
    /(\d+) records sent, ([\d.]+) records\/sec .*?, ([\d.]+) ms avg latency, ([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th/.exec(
      out,
    );
  if (!m) throw new Error(`ProducerPerformance printed no summary: ${out.slice(-300)}`);
  return { eventsPerS: Number(m[2]), p50: Number(m[5]), p99: Number(m[7]), raw: m[0] };
}

export async function ingestWorkload(b: Bench): Promise<void> {
  // The embedded shape first, on a quiet stack: a user of that shape runs no Kafka beside it, and
  // after the distributed runs the stack is still busy for a while (the full run of the eighth
  // pass measured its embedded rows 30-70 % low for that reason).
  await ingestEmbedded(b);
  const p = b.profile;
  const conc = p.ingest.connections;

  // ---- distributed: the gateway on Kafka -------------------------------------------------------
  const d = b.cleanup.deployment('ingest');
  const env = { ...distributedEnv(b.stack, d, b.cleanup, b.secretKey), LUDUS_ROOT_KEY: b.rootKey };
  const kafka = new Kafka({
    clientId: 'ludus-bench',
    brokers: b.stack.kafkaBrokers.split(','),
    logLevel: logLevel.NOTHING,
  });
  const admin = kafka.admin();
  await admin.connect();
  const topic = `${d.topicPrefix}${EVENTS_TOPIC.name}`;
  const topicEnds = async () =>
    (await admin.fetchTopicOffsets(topic)).reduce((a, o) => a + Number(o.high), 0);
  let svc: Service | null = await startService({
    label: 'ingest gateway (distributed)',
    roles: 'ingest,api',
    env,
    logFile: `${b.tmp}/ingest-distributed.log`,
  });
  let bulk: IngestRun[];
  let single: IngestRun[];
  let halfPeak: PacedRun[];
  let tokens = new Map<string, string>();
  try {
    const t = await createTenant(svc.url.admin, b.rootKey, 'bench');
    tokens = new Map([['bench', await tenantToken(t)]]);
    const common = { runs: p.runs, durationS: p.ingest.durationS, warmupS: p.ingest.warmupS, topicEnds };
    bulk = await measureIngest(b, svc.url.ingest, tokens, {
      ...common,
      label: 'ingest distributed bulk',
      batch: 100,
    });
    single = await measureIngest(b, svc.url.ingest, tokens, {
      ...common,
      label: 'ingest distributed single',
      batch: 1,
    });
    halfPeak = await pacedIngest(b, svc.url.ingest, tokens, figure(bulk.map((r) => r.eventsPerS)).median / 2);
  } finally {
    await svc.stop();
    svc = null;
  }
  if (p.profile) {
    await profiled(b, 'ingest-distributed-bulk', async (nodeFlags, clock) => {
      clock.spawned();
      const s = await startService({
        label: 'ingest gateway (distributed, --cpu-prof)',
        roles: 'ingest,api',
        env,
        nodeFlags,
        logFile: `${b.tmp}/ingest-distributed-prof.log`,
      });
      try {
        clock.start();
        await measureIngest(b, s.url.ingest, tokens, {
          label: 'ingest distributed bulk (profiled)',
          batch: 100,
          runs: 1,
          durationS: p.ingest.durationS,
          warmupS: 0,
        });
        clock.end();
      } finally {
        await s.stop();
      }
      return s.pid;
    });
  }
  await admin.disconnect();
  await b.cleanup.drop(d);
  b.results.record('ingest.distributed.bulk', bulk);
  b.results.record('ingest.distributed.single', single);
  b.results.record('ingest.distributed.halfPeak', halfPeak);

  // ---- baselines: bare kafkajs producer, ProducerPerformance ------------------------------------
  const kd = b.cleanup.deployment('kbase');
  const kafkajs: Array<{ eventsPerS: number; sendMs: { p50: number; p99: number } }> = [];
  for (let i = 0; i < p.runs; i++) {
    const r = await runChild<{ eventsPerS: number; sendMs: { p50: number; p99: number } }>(
      'bench/lib/kafka-producer.ts',
      {
        brokers: b.stack.kafkaBrokers,
        registryUrl: b.stack.registryUrl,
        topicPrefix: kd.topicPrefix,
        durationS: p.ingest.kafkaDurationS,
        warmupS: i === 0 ? p.ingest.warmupS : 0,
        concurrency: conc,
        batch: 100,
        tenants: ['bench'],
        users: p.pipeline.users,
        seed: 7,
      },
      'BASELINE',
      (p.ingest.kafkaDurationS + p.ingest.warmupS + 60) * 1000,
    );
    kafkajs.push(r);
    progress(
      `kafkajs baseline run ${i + 1}/${p.runs}: ${Math.round(r.eventsPerS)} events/s, send p50 ${r.sendMs.p50.toFixed(1)} ms, p99 ${r.sendMs.p99.toFixed(1)} ms`,
    );
  }
  b.results.record('ingest.baseline.kafkajs', kafkajs);
  const size = recordSize();
  const perfTopic = `${kd.topicPrefix}perf`;
  const ka = kafka.admin();
  await ka.connect();
  await ka.createTopics({
    topics: [{ topic: perfTopic, numPartitions: EVENTS_TOPIC.partitions }],
    waitForLeaders: true,
  });
  await ka.disconnect();
  const perf: Array<{ eventsPerS: number; p50: number; p99: number; raw: string }> = [];
  for (let i = 0; i < p.runs; i++) {
    const r = await producerPerformance(b, perfTopic, p.ingest.perfRecords, size);
    perf.push(r);
    progress(
      `ProducerPerformance run ${i + 1}/${p.runs}: ${Math.round(r.eventsPerS)} records/s (${size} B records)`,
    );
  }
  b.results.record('ingest.baseline.producerPerformance', { recordSize: size, runs: perf });
  await b.cleanup.drop(kd);

  const kafkajsFig = figure(kafkajs.map((r) => r.eventsPerS));
  const perfFig = figure(perf.map((r) => r.eventsPerS));
  const bulkRow = b.results.row({
    workload: 'ingest bulk (100/request)',
    shape: 'distributed',
    what: 'accepted events/s',
    unit: 'events/s',
    ...figs(bulk),
    baseline: { name: 'bare kafkajs producer', value: kafkajsFig },
    targets: [],
  });
  bulkRow.targets = [
    { text: '≥100,000 events/s', met: bulkRow.value.median >= 100_000 },
    { text: 'p99 < 50 ms', met: bulkRow.p99!.median < 50 },
    { text: '≥50% of kafkajs', met: (bulkRow.ratio ?? 0) >= 0.5 },
  ];
  b.results.row({
    workload: 'ingest bulk (100/request)',
    shape: 'stack',
    what: `Kafka ProducerPerformance, ${size} B records`,
    unit: 'records/s',
    value: perfFig,
    p50: figure(perf.map((r) => r.p50)),
    p99: figure(perf.map((r) => r.p99)),
    note: 'per-record latency; acks=all, idempotent, 1 in flight, batch.size = 100 records',
  });
  b.results.row({
    workload: 'ingest bulk (100/request)',
    shape: 'distributed',
    what: 'gateway vs ProducerPerformance',
    unit: 'events/s',
    value: figure(bulk.map((r) => r.eventsPerS)),
    baseline: { name: 'ProducerPerformance', value: perfFig },
  });
  const halfRow = b.results.row({
    workload: 'ingest bulk (100/request) at half the peak',
    shape: 'distributed',
    what: 'accepted events/s, open loop (paced)',
    note: `paced at ${Math.round(halfPeak[0]?.rate ?? 0)} events/s (half the closed-loop median); latency per bulk request`,
    unit: 'events/s',
    value: figure(halfPeak.map((r) => r.eventsPerS)),
    p50: figure(halfPeak.map((r) => r.latencyMs.p50)),
    p99: figure(halfPeak.map((r) => r.latencyMs.p99)),
    targets: [],
  });
  halfRow.targets = [{ text: 'p99 < 50 ms', met: halfRow.p99!.median < 50 }];
  b.results.row({
    workload: 'ingest single',
    shape: 'distributed',
    what: 'accepted events/s',
    unit: 'events/s',
    ...figs(single),
    baseline: { name: 'bare kafkajs producer (batches of 100)', value: kafkajsFig },
  });
}

/** The embedded shape's ingestion gateway alone (also the `embedded` workload's first half). */
export async function ingestEmbedded(b: Bench): Promise<void> {
  const p = b.profile;
  // ---- embedded: the gateway on the local log (PGlite) ------------------------------------------
  const dir = b.cleanup.dir(`${b.tmp}/ingest-embedded`);
  mkdirSync(dir, { recursive: true });
  const eenv = { LUDUS_DATA_DIR: dir, LUDUS_ROOT_KEY: b.rootKey };
  const secrets = await setUp(eenv, ['ingest', 'api', 'processors'], b.rootKey, {
    tenants: ['bench'],
    boards: [],
    rules: [],
  });
  const svc = await startService({
    label: 'ingest gateway (embedded)',
    roles: 'ingest',
    env: eenv,
    logFile: `${b.tmp}/ingest-embedded.log`,
  });
  let ebulk: IngestRun[];
  let esingle: IngestRun[];
  try {
    const tokens = new Map([['bench', await tenantToken(secrets.get('bench')!)]]);
    const common = { runs: p.runs, durationS: p.ingest.durationS, warmupS: p.ingest.warmupS };
    ebulk = await measureIngest(b, svc.url.ingest, tokens, {
      ...common,
      label: 'ingest embedded bulk',
      batch: 100,
    });
    esingle = await measureIngest(b, svc.url.ingest, tokens, {
      ...common,
      label: 'ingest embedded single',
      batch: 1,
    });
  } finally {
    await svc.stop();
  }
  b.results.record('ingest.embedded.bulk', ebulk);
  b.results.record('ingest.embedded.single', esingle);
  b.results.row({
    workload: 'ingest bulk (100/request)',
    shape: 'embedded',
    what: 'accepted events/s',
    unit: 'events/s',
    ...figs(ebulk),
  });
  b.results.row({
    workload: 'ingest single',
    shape: 'embedded',
    what: 'accepted events/s',
    unit: 'events/s',
    ...figs(esingle),
  });
}
