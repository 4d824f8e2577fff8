/**
 * The real stack (ops/stack) as the bench sees it: connection settings, the environment of a
 * distributed service process, and cleanup of everything a run creates (Postgres schemas, Redis
 * keys, Kafka topics and groups, registry subjects, ClickHouse database, temporary directories).
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { resolve } from 'node:path';
import { Kafka, logLevel } from 'kafkajs';
import Redis from 'ioredis';
import { PgSql } from '../../adapters/sql/pg';
import { progress } from './util';

export const ROOT = resolve(__dirname, '..', '..');

export interface StackSettings {
  pgUrl: string;
  kafkaBrokers: string;
  registryUrl: string;
  redisUrl: string;
  clickhouseUrl: string;
}

/** Reads the URLs of `ops/stack env` (the keys it prints are not used: the bench makes its own). */
export function stackSettings(): StackSettings {
  const out = execFileSync('bash', [`${ROOT}/ops/stack`, 'env'], { encoding: 'utf8', timeout: 30000 });
  const env: Record<string, string> = {};
  for (const m of out.matchAll(/^export (LUDUS_[A-Z_]+)=(.*)$/gm)) env[m[1]!] = m[2]!.replace(/^'|'$/g, '');
  const need = (k: string) => {
    if (!env[k]) throw new Error(`ops/stack env printed no ${k}`);
    return env[k]!;
  };
  return {
    pgUrl: need('LUDUS_DATABASE_URL'),
    kafkaBrokers: need('LUDUS_KAFKA_BROKERS'),
    registryUrl: need('LUDUS_SCHEMA_REGISTRY_URL'),
    // A private Redis (same version) keeps other benchmarks' scripts off the measured one.
    redisUrl: process.env.LUDUS_BENCH_REDIS_URL || need('LUDUS_REDIS_URL'),
    clickhouseUrl: need('LUDUS_CLICKHOUSE_URL'),
  };
}

/** `ops/stack status`; `ops/stack up` when something is down (idempotent, bounded). */
export function ensureStack(): void {
  try {
    execFileSync('bash', [`${ROOT}/ops/stack`, 'status'], { stdio: 'ignore', timeout: 60000 });
  } catch {
    progress('the stack is not fully up: running ops/stack up');
    execFileSync('bash', [`${ROOT}/ops/stack`, 'up'], { stdio: 'inherit', timeout: 300000 });
  }
}

/** Names of one isolated deployment: its schema, Redis prefix and topic prefix. */
export interface Deployment {
  schema: string;
  redisPrefix: string;
  topicPrefix: string;
}

/**
 * Tracks what the bench creates and removes it at the end (or on Ctrl-C). Every name carries the
 * bench run's id, so leftovers of a killed run are easy to find: `bench_<id>`.
 */
export class Cleanup {
  readonly id = `b${Date.now().toString(36)}${randomBytes(2).toString('hex')}`;
  readonly clickhouseDatabase = `bench_${this.id}`;
  private readonly schemas = new Set<string>();
  private readonly redisPrefixes = new Set<string>();
  private readonly topicPrefixes = new Set<string>();
  private readonly dirs = new Set<string>();
  private seq = 0;

  constructor(private readonly stack: StackSettings | null) {}

  /** A fresh deployment (schema, Redis prefix, topic prefix) registered for cleanup. */
  deployment(label: string): Deployment {
    const n = `${this.id}_${label}_${++this.seq}`.toLowerCase().replace(/[^a-z0-9_]/g, '_');
    const d = { schema: `bench_${n}`, redisPrefix: `bench:${n}:`, topicPrefix: `bench.${n}.` };
    this.schemas.add(d.schema);
    this.redisPrefixes.add(d.redisPrefix);
    this.topicPrefixes.add(d.topicPrefix);
    return d;
  }

  dir(path: string): string {
    this.dirs.add(path);
    return path;
  }

  /** Drops one deployment now (long runs free Redis memory and Kafka disk as they go); '' skips a part. */
  async drop(d: Deployment): Promise<void> {
    await this.dropAll([d.schema], [d.redisPrefix], [d.topicPrefix]);
    this.schemas.delete(d.schema);
    this.redisPrefixes.delete(d.redisPrefix);
    this.topicPrefixes.delete(d.topicPrefix);
  }

  async run(): Promise<void> {
    for (const d of this.dirs) rmSync(d, { recursive: true, force: true });
    this.dirs.clear();
    if (!this.stack) return;
    await this.dropAll([...this.schemas], [...this.redisPrefixes], [...this.topicPrefixes]);
    this.schemas.clear();
    this.redisPrefixes.clear();
    this.topicPrefixes.clear();
    await fetch(this.stack.clickhouseUrl, {
      method: 'POST',
      body: `DROP DATABASE IF EXISTS ${this.clickhouseDatabase}`,
      signal: AbortSignal.timeout(10000),
    }).catch((err: unknown) => progress(`cleanup: ClickHouse: ${(err as Error).message}`));
  }

  private async dropAll(schemas: string[], redisPrefixes: string[], topicPrefixes: string[]): Promise<void> {
    const stack = this.stack;
    if (!stack) return;
    // Only names this bench made (an empty prefix would match everything on the shared stack).
    const ours = (x: string) =>
      x.startsWith(`bench_${this.id}`) ||
      x.startsWith(`bench:${this.id}`) ||
      x.startsWith(`bench.${this.id}`);
    schemas = schemas.filter(ours);
    redisPrefixes = redisPrefixes.filter(ours);
    topicPrefixes = topicPrefixes.filter(ours);
    if (schemas.length) {
      const sql = new PgSql({ url: stack.pgUrl, max: 1 });
      try {
        for (const s of schemas) await sql.exec(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
      } catch (err) {
        progress(`cleanup: Postgres: ${(err as Error).message}`);
      } finally {
        await sql.close();
      }
    }
    if (redisPrefixes.length) {
      const redis = new Redis(stack.redisUrl, { lazyConnect: true });
      redis.on('error', () => undefined);
      try {
        await redis.connect();
        for (const p of redisPrefixes) await unlinkPrefix(redis, p);
      } catch (err) {
        progress(`cleanup: Redis: ${(err as Error).message}`);
      } finally {
        redis.disconnect();
      }
    }
    if (topicPrefixes.length) {
      const kafka = new Kafka({
        clientId: 'ludus-bench-cleanup',
        brokers: stack.kafkaBrokers.split(','),
        logLevel: logLevel.NOTHING,
      });
      const admin = kafka.admin();
      try {
        await admin.connect();
        const topics = (await admin.listTopics()).filter((t) => topicPrefixes.some((p) => t.startsWith(p)));
        if (topics.length) await admin.deleteTopics({ topics, timeout: 30000 });
        const groups = (await admin.listGroups()).groups
          .map((g) => g.groupId)
          .filter((g) => topicPrefixes.some((p) => g.startsWith(p)));
        if (groups.length) await admin.deleteGroups(groups).catch(() => undefined);
      } catch (err) {
        progress(`cleanup: Kafka: ${(err as Error).message}`);
      } finally {
        await admin.disconnect();
      }
      for (const p of topicPrefixes) {
        for (const [topic, q] of ['ludus.events', 'ludus.warm-up'].flatMap((t) => [
          [t, ''],
          [t, '?permanent=true'],
        ])) {
          await fetch(`${stack.registryUrl}/subjects/${encodeURIComponent(`${p}${topic}-value`)}${q}`, {
            method: 'DELETE',
            signal: AbortSignal.timeout(10000),
          }).catch(() => undefined);
        }
      }
    }
  }
}

/** Deletes every key under a prefix (SCAN + UNLINK, in batches). */
export async function unlinkPrefix(redis: Redis, prefix: string): Promise<number> {
  let cursor = '0';
  let n = 0;
  const pattern = `${prefix.replace(/([*?[\]\\])/g, '\\$1')}*`;
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    if (keys.length) {
      await redis.unlink(...keys);
      n += keys.length;
    }
  } while (cursor !== '0');
  return n;
}

/** The environment of a distributed service process of one deployment. */
export function distributedEnv(
  stack: StackSettings,
  d: Deployment,
  cleanup: Cleanup,
  secretKey: string,
): Record<string, string> {
  return {
    LUDUS_SHAPE: 'distributed',
    LUDUS_DATABASE_URL: stack.pgUrl,
    LUDUS_DATABASE_SCHEMA: d.schema,
    LUDUS_KAFKA_BROKERS: stack.kafkaBrokers,
    LUDUS_SCHEMA_REGISTRY_URL: stack.registryUrl,
    LUDUS_TOPIC_PREFIX: d.topicPrefix,
    LUDUS_REDIS_URL: stack.redisUrl,
    LUDUS_REDIS_PREFIX: d.redisPrefix,
    LUDUS_CLICKHOUSE_URL: stack.clickhouseUrl,
    LUDUS_CLICKHOUSE_DATABASE: cleanup.clickhouseDatabase,
    LUDUS_SECRET_KEY: secretKey,
  };
}

/**
 * Redis used_memory once background frees are done (UNLINK of an earlier run frees lazily, which
 * would shrink used_memory during the next measurement): lazyfree_pending_objects 0 and two
 * readings 200 ms apart within 1 MB.
 */
export async function settledUsedMemory(redis: Redis): Promise<number> {
  const read = async () => {
    const info = await redis.info('memory');
    return {
      used: Number(/used_memory:(\d+)/.exec(info)![1]),
      pending: Number(/lazyfree_pending_objects:(\d+)/.exec(info)?.[1] ?? 0),
    };
  };
  let last = await read();
  const deadline = Date.now() + 30000;
  for (;;) {
    await new Promise((r) => setTimeout(r, 200));
    const cur = await read();
    if ((cur.pending === 0 && Math.abs(cur.used - last.used) < 1 << 20) || Date.now() > deadline)
      return cur.used;
    last = cur;
  }
}
