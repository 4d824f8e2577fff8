/**
 * Workload 4, scaling: ingest and pipeline throughput (distributed shape) with 1, 10 and 100 active
 * leaderboards and earning rules per tenant, and with 1 and 100 tenants; memory per million
 * leaderboard entries in Redis (INFO used_memory delta around load() of a 1M board) and in the
 * embedded index (heap delta after a full GC, in its own process).
 *
 * Definitions: K boards and K rules where each event matches exactly one board and purchases one
 * rule (bench/lib/events.ts), so the work per event is the same and only the number of active
 * definitions grows. Tenants: the standard 3 boards and 2 rules per tenant, 10,000 users spread
 * over the tenants. Each curve's baseline is its smallest configuration (ratio = throughput
 * relative to it); each pipeline run also measures the direct-write baseline of its own effects.
 */
import Redis from 'ioredis';
import { ranksPrefix, RedisRankIndex } from '../../adapters/ranks/redis';
import { tenantToken } from '../lib/admin';
import { runChild } from '../lib/child';
import type { Bench } from '../lib/context';
import { expectedEffects, generate, scalingBoards, scalingRules, userId } from '../lib/events';
import { setUp, type Definitions } from '../lib/inproc';
import { startService } from '../lib/service';
import { distributedEnv, settledUsedMemory } from '../lib/stack';
import { figure, prng, progress, uniqueName, type Figure } from '../lib/util';
import { measureIngest } from './ingest';
import {
  directBaseline,
  measureDrain,
  produceBacklog,
  STANDARD,
  watermarkReader,
  type DrainRun,
} from './pipeline';

interface Config {
  curve: 'definitions' | 'tenants';
  x: number;
  label: string;
  tenants: string[];
  defs: Omit<Definitions, 'tenants'>;
  variants: number;
  effects: Parameters<typeof expectedEffects>[1];
}

export interface Curve {
  curve: 'definitions' | 'tenants';
  x: number;
  label: string;
  ingest: Figure;
  pipeline: Figure;
  pipelineBaseline: Figure;
}

export async function scalingWorkload(b: Bench): Promise<void> {
  const p = b.profile;
  const configs: Config[] = [
    ...p.scaling.defs.map((k): Config => ({
      curve: 'definitions',
      x: k,
      label: `${k} board${k > 1 ? 's' : ''} + ${k} rule${k > 1 ? 's' : ''}`,
      tenants: ['bench'],
      defs: { boards: scalingBoards(k), rules: scalingRules(k) },
      variants: k,
      effects: { kind: 'scaling', k },
    })),
    ...p.scaling.tenants.map((t): Config => ({
      curve: 'tenants',
      x: t,
      label: `${t} tenant${t > 1 ? 's' : ''} (3 boards + 2 rules each)`,
      tenants:
        t === 1 ? ['bench'] : Array.from({ length: t }, (_, i) => `bench${String(i).padStart(3, '0')}`),
      defs: STANDARD,
      variants: 1,
      effects: { kind: 'standard' },
    })),
  ];
  const curves: Curve[] = [];
  const redis = new Redis(b.stack.redisUrl);
  try {
    for (const c of configs) curves.push(await measureConfig(b, c, redis));
  } finally {
    redis.disconnect();
  }
  b.results.record('scaling.curves', curves);
  for (const kind of ['definitions', 'tenants'] as const) {
    const cs = curves.filter((c) => c.curve === kind);
    const base = cs[0];
    if (!base) continue;
    for (const c of cs) {
      b.results.row({
        workload: `scaling: ${c.label}`,
        shape: 'distributed',
        what: 'ingest, accepted events/s (bulk)',
        unit: 'events/s',
        value: c.ingest,
        baseline: { name: base.label, value: base.ingest },
      });
      b.results.row({
        workload: `scaling: ${c.label}`,
        shape: 'distributed',
        what: 'pipeline drain, events/s',
        unit: 'events/s',
        value: c.pipeline,
        baseline: { name: base.label, value: base.pipeline },
        note: `direct writes of the same effects: ${Math.round(c.pipelineBaseline.median).toLocaleString('en-US')} events/s`,
      });
    }
  }
  await memory(b);
}

async function measureConfig(b: Bench, c: Config, redis: Redis): Promise<Curve> {
  const p = b.profile;
  // Ingest: the definitions exist (ingest does not read them: this shows it).
  const d = b.cleanup.deployment('scale');
  const env = distributedEnv(b.stack, d, b.cleanup, b.secretKey);
  const t0 = Date.now();
  const secrets = await setUp(env, ['api'], b.rootKey, { tenants: c.tenants, ...c.defs });
  progress(`scaling ${c.label}: set up in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  const tokens = new Map<string, string>();
  for (const [t, s] of secrets) tokens.set(t, await tenantToken(s));
  const svc = await startService({
    label: `ingest gateway (${c.label})`,
    roles: 'ingest',
    env,
    logFile: `${b.tmp}/scaling.log`,
  });
  let ingest;
  try {
    ingest = await measureIngest(b, svc.url.ingest, tokens, {
      label: `scaling ingest ${c.label}`,
      batch: 100,
      runs: p.runs,
      durationS: p.scaling.ingestS,
      warmupS: 1,
      variants: c.variants,
    });
  } finally {
    await svc.stop();
    await b.cleanup.drop(d);
  }

  // Pipeline: one backlog, drained 3 times from a fresh schema.
  const holder = b.cleanup.deployment('scalepipe');
  const events = generate(p.scaling.events, {
    tenants: c.tenants,
    users: p.pipeline.users,
    seed: 61,
    idPrefix: uniqueName('sc'),
    variants: c.variants,
  });
  const total = await produceBacklog(b, holder.topicPrefix, events);
  const drains: DrainRun[] = [];
  const bases: number[] = [];
  for (let i = 0; i < p.runs; i++) {
    const rd = { ...b.cleanup.deployment('scalerun'), topicPrefix: holder.topicPrefix };
    const renv = distributedEnv(b.stack, rd, b.cleanup, b.secretKey);
    await setUp(renv, ['api'], b.rootKey, { tenants: c.tenants, ...c.defs });
    const t = Date.now();
    const proc = await startService({
      label: `processors (${c.label})`,
      roles: 'processors',
      env: renv,
      waitHealthy: false,
      logFile: `${b.tmp}/scaling.log`,
    });
    try {
      const run = await measureDrain(
        `scaling ${c.label}`,
        total,
        watermarkReader(redis, rd),
        t,
        Math.max(180_000, (total / 200) * 1000),
      );
      drains.push(run);
      progress(`scaling pipeline ${c.label} run ${i + 1}/${p.runs}: ${Math.round(run.eventsPerS)} events/s`);
    } finally {
      await proc.stop();
    }
    bases.push((await directBaseline(b, rd, events, c.effects)).eventsPerS);
    await b.cleanup.drop({ ...rd, topicPrefix: '' });
  }
  await b.cleanup.drop(holder);
  b.results.record(`scaling.${c.curve}.${c.x}`, {
    label: c.label,
    ingest,
    pipeline: drains,
    pipelineBaseline: bases,
  });
  return {
    curve: c.curve,
    x: c.x,
    label: c.label,
    ingest: figure(ingest.map((r) => r.eventsPerS)),
    pipeline: figure(drains.map((r) => r.eventsPerS)),
    pipelineBaseline: figure(bases),
  };
}

/** Memory per million entries: Redis (INFO delta) and the embedded index (heap delta). */
async function memory(b: Bench): Promise<void> {
  const n = 1_000_000;
  const redisRuns: number[] = [];
  const redis = new Redis(b.stack.redisUrl);
  try {
    for (let i = 0; i < b.profile.runs; i++) {
      const d = b.cleanup.deployment('mem');
      try {
        const rnd = prng(n + i);
        const entries = Array.from({ length: n }, (_, j) => ({
          member: userId(j),
          score: Math.floor(rnd() * 1e6),
          tiebreak: 0,
        }));
        const m0 = await settledUsedMemory(redis);
        await new RedisRankIndex({ redis, prefix: ranksPrefix(d.redisPrefix) }).load(
          'bench:top:all_time',
          entries,
        );
        redisRuns.push((await settledUsedMemory(redis)) - m0);
        progress(`memory: Redis, 1M entries: used_memory +${Math.round(redisRuns[i]! / 1048576)} MB`);
      } finally {
        await b.cleanup.drop(d);
      }
    }
  } finally {
    redis.disconnect();
  }
  const heaps: Array<{ heapDeltaBytes: number; rssDeltaBytes: number; loadS: number }> = [];
  for (let i = 0; i < b.profile.runs; i++) {
    heaps.push(await runChild('bench/lib/heap.ts', { entries: n }, 'HEAP', 300_000, ['--expose-gc']));
    progress(
      `memory: embedded index, 1M entries: heap +${Math.round(heaps[i]!.heapDeltaBytes / 1048576)} MB`,
    );
  }
  b.results.record('memory', { entries: n, redisInfoDeltaBytes: redisRuns, embedded: heaps });
  const mb = (x: number) => x / 1048576;
  b.results.row({
    workload: 'memory per 1M leaderboard entries',
    shape: 'distributed',
    what: 'Redis INFO used_memory delta',
    unit: 'MB',
    value: figure(redisRuns.map(mb)),
    note: 'a 1M board loaded with load(): sorted set + hash',
  });
  b.results.row({
    workload: 'memory per 1M leaderboard entries',
    shape: 'embedded',
    what: 'heap delta of the memory index',
    unit: 'MB',
    value: figure(heaps.map((h) => mb(h.heapDeltaBytes))),
  });
}
