/**
 * The composition root: the one place that turns configuration into adapters and roles.
 * Adapters are chosen here, once; nothing else asks which shape it runs in.
 */
import { mkdirSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Analytics } from '../adapters/analytics/types';
import type { EventLog } from '../adapters/eventlog/types';
import type { RankIndex } from '../adapters/ranks/types';
import { DataDirInUse } from '../adapters/sql/dirlock';
import { migrate } from '../adapters/sql/migrate';
import type { Sql } from '../adapters/sql/types';
import { systemClock, type Clock } from '../core/clock';
import type { Config } from './config';
import type { Logger } from '../shared/logger';

export interface Adapters {
  sql: Sql;
  eventLog: EventLog;
  ranks: RankIndex;
  analytics: Analytics;
}

/** A store could not be reached at start: names the variable to fix, no stack trace. */
export class StartupError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`${message} (check ${variable})`);
    this.name = 'StartupError';
  }
}

/** Runs `open` with a deadline, turning any failure into a StartupError naming `variable`. */
export async function connect<T>(
  what: string,
  variable: string,
  timeoutMs: number,
  open: () => Promise<T>,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      open(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
  } catch (err) {
    if (err instanceof StartupError) throw err;
    throw new StartupError(variable, `cannot reach ${what}: ${(err as Error).message}`);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Opens the SQL store the configuration names. The embedded one runs PGlite in a worker thread
 * (adapters/sql/pglite-thread.ts); `onStopped` hears if that thread dies on its own.
 */
export async function openSql(config: Config, onStopped?: (err: Error) => void): Promise<Sql> {
  if (config.adapters.sql === 'pg') {
    const { PgSql } = await import('../adapters/sql/pg');
    const url = config.databaseUrl as string;
    return connect(
      `PostgreSQL at ${redact(url)}`,
      'LUDUS_DATABASE_URL',
      config.connectTimeoutMs,
      async () => {
        const sql = new PgSql({ url, schema: config.databaseSchema ?? undefined });
        try {
          await sql.init();
        } catch (err) {
          await closeQuietly(sql);
          throw err;
        }
        return sql;
      },
    );
  }
  const { PgliteThreadSql } = await import('../adapters/sql/pglite-thread');
  const dir = join(config.dataDir, 'pg');
  mkdirSync(dir, { recursive: true });
  return connect(
    `embedded Postgres in ${dir}`,
    'LUDUS_DATA_DIR',
    Math.max(config.connectTimeoutMs, 60000),
    () =>
      PgliteThreadSql.open({ dataDir: dir, onStopped }).catch((err: unknown) => {
        if (!(err instanceof DataDirInUse)) throw err;
        const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;
        throw new StartupError(
          'LUDUS_DATA_DIR',
          `data directory ${config.dataDir} is in use by process ${err.pid} (a running Ludus server); stop it, or use its operator API at http://${host}:${config.ports.admin}/v1/tenants instead`,
        );
      }),
  );
}

/** The event logs' diagnostics, as lines of the process's logger tagged `component: event-log`. */
function eventLogLogger(log: Logger, tags: object = {}) {
  return (level: 'debug' | 'info' | 'warn' | 'error', message: string, extra?: object) =>
    log[level]({ ...extra, ...tags, component: 'event-log' }, message);
}

export async function openEventLog(config: Config, sql: Sql, log: Logger): Promise<EventLog> {
  if (config.adapters.eventLog === 'kafka') {
    const { KafkaEventLog } = await import('../adapters/eventlog/kafka');
    const brokers = config.kafka.brokers;
    const logTo = eventLogLogger(log);
    const eventLog = new KafkaEventLog({
      brokers,
      clientId: config.kafka.clientId,
      schemaRegistryUrl: config.kafka.schemaRegistryUrl as string,
      topicPrefix: config.kafka.topicPrefix,
      connectTimeoutMs: config.connectTimeoutMs,
      log: logTo,
    });
    // The adapter's own timeout (with the reason) fires first; this one is the backstop.
    await connect(
      `Kafka at ${brokers.join(',')}`,
      'LUDUS_KAFKA_BROKERS',
      config.connectTimeoutMs + 2000,
      () => eventLog.ping(),
    ).catch(async (err) => {
      await closeQuietly(eventLog);
      throw err;
    });
    await connect(
      `the schema registry at ${config.kafka.schemaRegistryUrl}`,
      'LUDUS_SCHEMA_REGISTRY_URL',
      config.connectTimeoutMs,
      () => eventLog.pingRegistry(),
    ).catch(async (err) => {
      await closeQuietly(eventLog);
      throw err;
    });
    return eventLog;
  }
  const logTo = eventLogLogger(log);
  if (sql.kind === 'pglite') {
    // The embedded default: the log in files of the data directory, so that PGlite runs the
    // pipeline's transactions only (issue 19). A data directory whose log was still the SQL table
    // has its records carried over once, when a topic's files are first created.
    const { FileEventLog } = await import('../adapters/eventlog/file');
    const { sqlLogImporter } = await import('../adapters/eventlog/local');
    const dir = join(config.dataDir, 'log');
    try {
      return new FileEventLog({ dir, log: logTo, importer: sqlLogImporter(sql), ...config.fileLog });
    } catch (err) {
      if (!(err instanceof DataDirInUse)) throw err;
      throw new StartupError(
        'LUDUS_DATA_DIR',
        `the event log in ${dir} is in use by process ${err.pid} (a running Ludus server); stop it first`,
      );
    }
  }
  // A real Postgres without Kafka: the log is a table of that database.
  const { LocalEventLog } = await import('../adapters/eventlog/local');
  return new LocalEventLog(sql, { log: logTo, retentionMs: config.fileLog.retentionMs });
}

/** An event log for the ingest warm-up's synthetic appends (ingest/warm-up.ts), and its disposal. */
export interface WarmUpEventLog {
  eventLog: EventLog;
  /** Called once the warm-up is over: closes and removes what only the warm-up used. */
  dispose(): Promise<void>;
}

/**
 * Where the ingest warm-up appends. With Kafka: the process's own log (the `ludus.warm-up` topic,
 * which nothing consumes and the broker keeps an hour). In the embedded shape: a scratch file log
 * of the same class in `<data dir>/log-warm-up`, removed once the warm-up is over, because the file
 * log keeps a partition's last segment for ever (the same code gets warm; the data directory keeps
 * nothing). A data directory left with one by a crash has it removed at the next start. With the
 * SQL-table log (Postgres without Kafka): none, the warm-up would write to the database.
 */
export async function openWarmUpEventLog(
  config: Config,
  a: Adapters,
  log: Logger,
): Promise<WarmUpEventLog | null> {
  if (a.eventLog.kind === 'kafka') return { eventLog: a.eventLog, dispose: async () => undefined };
  if (a.eventLog.kind !== 'file') return null;
  const { FileEventLog } = await import('../adapters/eventlog/file');
  const dir = join(config.dataDir, 'log-warm-up');
  await rm(dir, { recursive: true, force: true });
  const eventLog = new FileEventLog({ dir, log: eventLogLogger(log, { warm_up: true }), ...config.fileLog });
  return {
    eventLog,
    dispose: async () => {
      await closeQuietly(eventLog);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export async function openRanks(config: Config): Promise<RankIndex> {
  if (config.adapters.ranks === 'redis') {
    const { RedisRankIndex, ranksPrefix } = await import('../adapters/ranks/redis');
    const url = config.redis.url as string;
    const ranks = new RedisRankIndex({ redis: url, prefix: ranksPrefix(config.redis.prefix) });
    await connect(`Redis at ${redact(url)}`, 'LUDUS_REDIS_URL', config.connectTimeoutMs, () =>
      ranks.ping(),
    ).catch(async (err) => {
      await closeQuietly(ranks);
      throw err;
    });
    return ranks;
  }
  const { MemoryRankIndex } = await import('../adapters/ranks/memory');
  return new MemoryRankIndex();
}

export async function openAnalytics(config: Config, sql: Sql): Promise<Analytics> {
  if (config.adapters.analytics === 'clickhouse') {
    const { ClickHouseAnalytics } = await import('../adapters/analytics/clickhouse');
    const url = config.clickhouse.url as string;
    const analytics = new ClickHouseAnalytics({
      url,
      database: config.clickhouse.database,
      username: config.clickhouse.username,
      password: config.clickhouse.password,
    });
    await connect(
      `ClickHouse at ${redact(url)}`,
      'LUDUS_CLICKHOUSE_URL',
      config.connectTimeoutMs,
      async () => {
        await analytics.ping();
        await analytics.ensureSchema();
      },
    ).catch(async (err) => {
      await closeQuietly(analytics);
      throw err;
    });
    return analytics;
  }
  const { SqlAnalytics } = await import('../adapters/analytics/sql');
  return new SqlAnalytics(sql);
}

/** Opens every adapter the configuration names and brings the SQL schema up to date. */
export async function openAdapters(config: Config, log: Logger): Promise<Adapters> {
  const opened: Array<{ close(): Promise<void> }> = [];
  try {
    const sql = await openSql(config, (err) => {
      // Crash-only: without its database the process can keep no promise it made.
      log.fatal({ err: err.message }, 'the embedded database stopped; exiting');
      process.exit(1);
    });
    opened.push(sql);
    const applied = await migrate(sql);
    if (applied.length > 0) log.info({ applied }, 'migrations applied');
    const eventLog = await openEventLog(config, sql, log);
    opened.push(eventLog);
    const ranks = await openRanks(config);
    opened.push(ranks);
    const analytics = await openAnalytics(config, sql);
    opened.push(analytics);
    log.info(
      { sql: sql.kind, event_log: eventLog.kind, ranks: ranks.kind, analytics: analytics.kind },
      'adapters ready',
    );
    return { sql, eventLog, ranks, analytics };
  } catch (err) {
    for (const a of opened.reverse()) await closeQuietly(a);
    throw err;
  }
}

/** Closes adapters in the reverse order of opening; the SQL store last. */
export async function closeAdapters(a: Adapters): Promise<void> {
  for (const c of [a.analytics, a.ranks, a.eventLog, a.sql]) await c.close().catch(() => undefined);
}

export interface Services {
  clock: Clock;
}

export function defaultServices(): Services {
  return { clock: systemClock };
}

/** Closes a half-opened adapter after a failed start; a client stuck reconnecting gets 1 s. */
export async function closeQuietly(c: { close(): Promise<void> }, ms = 1000): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    c.close().catch(() => undefined),
    new Promise<void>((r) => {
      timer = setTimeout(r, ms);
    }),
  ]);
  clearTimeout(timer);
}

/** Hides the password of a URL for messages and logs. */
export function redact(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return url;
  }
}
