/**
 * Removing what a distributed test made on the shared stack: its Kafka topics and consumer groups,
 * its schema registry subjects, its Redis keys and its Postgres schema. One stack serves every
 * suite (and every run): leftovers slow the broker down and make counts meaningless.
 *
 * Everything is found by the unique prefixes of shapeEnv (tests/support/app.ts). Best effort: a
 * failure is reported on stderr, never fails the test that is cleaning up.
 */
import { Kafka, logLevel } from 'kafkajs';
import Redis from 'ioredis';
import { stack } from './stack';

export interface StackState {
  /** LUDUS_TOPIC_PREFIX: topics, consumer groups and registry subjects start with it. */
  topicPrefix?: string;
  /** LUDUS_REDIS_PREFIX: every Redis key starts with it. */
  redisPrefix?: string;
  /** LUDUS_DATABASE_SCHEMA: dropped with everything in it. */
  schema?: string;
}

/** The state a shapeEnv('distributed') environment names. */
export function stateOfEnv(env: Record<string, string | undefined>): StackState {
  return {
    topicPrefix: env.LUDUS_TOPIC_PREFIX || undefined,
    redisPrefix: env.LUDUS_REDIS_PREFIX || undefined,
    schema: env.LUDUS_DATABASE_SCHEMA || undefined,
  };
}

/** Removes topics, groups, subjects, keys and the schema of one test app. */
export async function removeStackState(state: StackState): Promise<void> {
  const steps: Array<[string, () => Promise<void>]> = [];
  // A prefix that is empty would match everything: never clean up without one.
  if (state.topicPrefix) {
    const prefix = state.topicPrefix;
    steps.push([`kafka ${prefix}`, () => deleteKafkaByPrefix(prefix)]);
    steps.push([`registry ${prefix}`, () => deleteSubjectsByPrefix(prefix)]);
  }
  if (state.redisPrefix) {
    const prefix = state.redisPrefix;
    steps.push([`redis ${prefix}`, () => deleteRedisKeys(prefix)]);
  }
  if (state.schema) {
    const schema = state.schema;
    steps.push([`postgres ${schema}`, () => dropSchema(schema)]);
  }
  const results = await Promise.allSettled(steps.map(([, run]) => run()));
  results.forEach((r, i) => {
    if (r.status === 'rejected') {
      process.stderr.write(`test cleanup of ${steps[i]![0]} failed: ${String(r.reason)}\n`);
    }
  });
}

/** Deletes the consumer groups and topics whose names start with `prefix`. */
export async function deleteKafkaByPrefix(prefix: string): Promise<void> {
  const admin = new Kafka({
    clientId: 'ludus-test-cleanup',
    brokers: stack.kafkaBrokers,
    logLevel: logLevel.NOTHING,
  }).admin();
  await admin.connect();
  try {
    const groups = (await admin.listGroups()).groups
      .map((g) => g.groupId)
      .filter((g) => g.startsWith(prefix));
    if (groups.length > 0) await admin.deleteGroups(groups).catch(() => undefined);
    const topics = (await admin.listTopics()).filter((t) => t.startsWith(prefix));
    if (topics.length > 0) await admin.deleteTopics({ topics, timeout: 10_000 });
  } finally {
    await admin.disconnect();
  }
}

/** Deletes the registry subjects whose names start with `prefix`: soft delete, then permanent. */
export async function deleteSubjectsByPrefix(prefix: string): Promise<void> {
  const base = stack.schemaRegistryUrl.replace(/\/+$/, '');
  const res = await fetch(`${base}/subjects`);
  if (!res.ok) throw new Error(`GET /subjects answered ${res.status}`);
  const subjects = ((await res.json()) as string[]).filter((s) => s.startsWith(prefix));
  for (const s of subjects) {
    const url = `${base}/subjects/${encodeURIComponent(s)}`;
    const soft = await fetch(url, { method: 'DELETE' });
    await soft.arrayBuffer();
    const hard = await fetch(`${url}?permanent=true`, { method: 'DELETE' });
    await hard.arrayBuffer();
    if (!hard.ok && hard.status !== 404)
      throw new Error(`DELETE ${s}?permanent=true answered ${hard.status}`);
  }
}

/** Unlinks every key of the test Redis database that starts with `prefix` (SCAN, not KEYS). */
export async function deleteRedisKeys(prefix: string): Promise<void> {
  const r = new Redis(stack.redisUrl, { lazyConnect: true, maxRetriesPerRequest: 2 });
  await r.connect();
  try {
    const pattern = `${prefix.replace(/[*?[\]\\]/g, '\\$&')}*`;
    let cursor = '0';
    do {
      const [next, keys] = await r.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      if (keys.length > 0) await r.unlink(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    r.disconnect();
  }
}

/** Drops a Postgres schema of the test database with everything in it. */
export async function dropSchema(schema: string): Promise<void> {
  const { PgSql } = await import('../../adapters/sql/pg');
  const sql = new PgSql({ url: stack.pgUrl, max: 1 });
  try {
    await sql.exec(`DROP SCHEMA IF EXISTS "${schema.replace(/"/g, '""')}" CASCADE`);
  } finally {
    await sql.close();
  }
}

/** How much test state the stack holds under the usual test prefixes (for checking cleanup). */
export async function countStackState(): Promise<{
  topics: number;
  subjects: number;
  keys: number;
  schemas: number;
}> {
  const admin = new Kafka({
    clientId: 'ludus-test-count',
    brokers: stack.kafkaBrokers,
    logLevel: logLevel.NOTHING,
  }).admin();
  await admin.connect();
  const topics = (await admin.listTopics().finally(() => admin.disconnect())).filter(
    (t) => !t.startsWith('__'),
  );
  const subjects = (await (await fetch(`${stack.schemaRegistryUrl}/subjects`)).json()) as string[];
  const r = new Redis(stack.redisUrl);
  const keys = await r.dbsize().finally(() => r.disconnect());
  const { PgSql } = await import('../../adapters/sql/pg');
  const sql = new PgSql({ url: stack.pgUrl, max: 1 });
  const schemas = await sql
    .query<{ n: number }>(
      "SELECT count(*)::int AS n FROM information_schema.schemata WHERE schema_name NOT IN ('public', 'information_schema') AND schema_name NOT LIKE 'pg\\_%'",
    )
    .finally(() => sql.close());
  return { topics: topics.length, subjects: subjects.length, keys, schemas: Number(schemas.rows[0]!.n) };
}
