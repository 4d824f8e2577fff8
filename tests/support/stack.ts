/**
 * Connection settings of the real stack for tests. ops/test brings the stack up (ops/stack up)
 * and exports `ops/stack env`; the defaults below are the same values, so a single test file can
 * also be run by hand against a stack that is already up.
 */
import { randomBytes } from 'node:crypto';
import { migrate } from '../../adapters/sql/migrate';
import { PgSql } from '../../adapters/sql/pg';
import { PgliteSql } from '../../adapters/sql/pglite';
import { PgliteThreadSql } from '../../adapters/sql/pglite-thread';
import type { Sql } from '../../adapters/sql/types';

const env = process.env;

export const stack = {
  /** Tests use their own database, never the service's (see ops/stack: ludus_test). */
  pgUrl: env.LUDUS_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/ludus_test',
  kafkaBrokers: (env.LUDUS_KAFKA_BROKERS ?? '127.0.0.1:9092').split(','),
  schemaRegistryUrl: env.LUDUS_SCHEMA_REGISTRY_URL ?? 'http://127.0.0.1:8090/apis/ccompat/v7',
  redisUrl: env.LUDUS_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379/15',
  clickhouseUrl: env.LUDUS_CLICKHOUSE_URL ?? 'http://127.0.0.1:8123',
};

/** A short unique lowercase name, for schemas, topics, key prefixes and databases. */
export function uniqueName(prefix: string): string {
  return `${prefix}_${Date.now().toString(36)}_${randomBytes(3).toString('hex')}`;
}

/** A migrated Postgres schema of its own, on the real server. */
export async function openTestPg(schema = uniqueName('t')): Promise<PgSql> {
  const sql = new PgSql({ url: stack.pgUrl, schema, max: 5 });
  await sql.init();
  await migrate(sql);
  return sql;
}

/** A migrated in-memory PGlite. */
export async function openTestPglite(): Promise<PgliteSql> {
  const sql = await PgliteSql.open();
  await migrate(sql);
  return sql;
}

/** A migrated in-memory PGlite in a worker thread (what the embedded server runs). */
export async function openTestPgliteThread(): Promise<PgliteThreadSql> {
  const sql = await PgliteThreadSql.open();
  await migrate(sql);
  return sql;
}

/** Drops a test schema made by openTestPg and closes the pool. */
export async function dropTestPg(sql: PgSql, schema: string): Promise<void> {
  await sql.exec(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await sql.close();
}

/** Both SQL adapters, for suites that run a contract against each. */
export const sqlAdapters: Array<[string, () => Promise<Sql>]> = [
  ['pglite', openTestPglite],
  ['pglite in a worker thread', openTestPgliteThread],
  ['pg', () => openTestPg()],
];
