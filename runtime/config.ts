/**
 * Typed configuration, read from the environment here and nowhere else (ARCHITECTURE.md).
 * Every variable is documented in README.md ("Configuration"). A bad value fails with a
 * ConfigError that names the variable; no setting falls through silently to a default.
 */
import type { RateLimitSpec, WebhookConfig } from '../shared/settings';

export type { RateLimitSpec, WebhookConfig } from '../shared/settings';
import { resolve } from 'node:path';

export const ROLES = ['ingest', 'api', 'processors', 'scheduler', 'dispatcher', 'analytics'] as const;
export type Role = (typeof ROLES)[number];

export type Shape = 'embedded' | 'distributed';

export interface Config {
  shape: Shape;
  roles: Role[];
  /** How many processes run the roles, sharing the ports (runtime/processes.ts); more than 1 needs every adapter outside the process. */
  processes: number;
  dataDir: string;
  host: string;
  ports: { ingest: number; admin: number; query: number };
  /**
   * Port of the operations listener (/health, /ready, /metrics; runtime/ops.ts), null: none.
   * LUDUS_OPS_PORT unset: 8083 in a process that runs no gateway role (ingest, api), none in one
   * that does (its gateways serve the same three routes); a number: that port in every process;
   * `off`: none.
   */
  opsPort: number | null;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** Adapter choice per port; LUDUS_SHAPE sets all four, each may be overridden. */
  adapters: {
    sql: 'pglite' | 'pg';
    eventLog: 'local' | 'kafka';
    ranks: 'memory' | 'redis';
    analytics: 'sql' | 'clickhouse';
    rateLimiter: 'memory' | 'redis';
  };
  databaseUrl: string | null;
  /** Postgres schema to work in (created when missing); null: the connection's default (public). */
  databaseSchema: string | null;
  kafka: { brokers: string[]; schemaRegistryUrl: string | null; topicPrefix: string; clientId: string };
  redis: { url: string | null; prefix: string };
  clickhouse: { url: string | null; database: string; username: string; password: string };
  /**
   * Server key (32 bytes) that encrypts tenant secrets and API keys at rest. Required in the
   * distributed shape; the embedded shape generates one in the data directory when unset.
   */
  secretKey: Buffer | null;
  /** Operator key for /v1/tenants and /v1/api-keys; embedded: generated on first start when unset. */
  rootKey: string | null;
  /** Rate limits per tenant and gateway. */
  rateLimits: { ingest: RateLimitSpec; admin: RateLimitSpec; query: RateLimitSpec };
  /**
   * Failed coupon validations and redemptions allowed per user and per tenant before further
   * attempts answer 429 (docs/coupons.md "Guessing codes").
   */
  couponGuessLimits: { user: RateLimitSpec; tenant: RateLimitSpec };
  /** Permitted clock skew of signed requests (X-Timestamp), seconds. */
  signatureSkewSeconds: number;
  /**
   * How long a tenant's credentials are cached by a gateway, ms (suspension takes effect within it);
   * also the query routes' cache of board definitions and open window rows (core/leaderboards/cache.ts).
   */
  tenantCacheMs: number;
  /**
   * How long a gateway remembers a verified HS256 tenant or end-user token, ms (never past the
   * token's exp; the tenant's secret and status are still checked on every use; 0: off).
   * http/auth/token-cache.ts.
   */
  tokenCacheMs: number;
  /** Duplicates of an event_id within this window are ignored (SPEC.md: 300 s). */
  dedupeWindowMs: number;
  /** How often the scheduler ticks, ms. */
  schedulerIntervalMs: number;
  /**
   * The pipeline's SQL transactions in flight at most; batches of partitions that arrive meanwhile
   * are applied together in the next one (processors/framework.ts, rounds). 0: no limit (one
   * transaction per batch). Default: 1 on PGlite (one session), 2 on Postgres.
   */
  pipelineTransactions: number;
  /** Records of one pipeline round at most. */
  pipelineRoundRecords: number;
  /**
   * How long (ms) a round may wait for a batch of every assigned partition that is not in a round
   * in flight (processors/framework.ts). Default 5 in both shapes: on Postgres the batches of one
   * Kafka fetch go in one round; on PGlite the partitions a round released join the next round
   * instead of waiting a round out (half the median latency; docs/performance.md, fourteenth pass).
   */
  pipelineGatherMs: number;
  /**
   * How long (ms) a pipeline round should hold the store at most, from the time per record of the
   * rounds before it (processors/round-budget.ts). Default: 700 on PGlite (the gateways' store reads
   * wait for the running round; their caches renew an entry from a quarter of its 1-s TTL, so a
   * round of 700 ms leaves the renewal time to finish), 0 (no bound) on Postgres.
   */
  pipelineRoundMs: number;
  /**
   * How long (ms) the pipeline applies synthetic events, in transactions that roll back, before the
   * process listens and consumes (processors/warm-up.ts), so that load finds it warm. 0: no warm-up.
   */
  pipelineWarmUpMs: number;
  /**
   * How long (ms) a process with the `ingest` role appends synthetic events to a topic nothing
   * consumes (`ludus.warm-up`, ingest/warm-up.ts) before it listens, so that load finds its
   * gateway warm. Default 2000 with Kafka; 1500 in the embedded shape, whose warm-up appends to a
   * scratch file log removed afterwards (runtime/compose.ts `openWarmUpEventLog`); 0 (none) with the
   * SQL-table log of Postgres without Kafka.
   */
  ingestWarmUpMs: number;
  /**
   * The embedded shape's event log files (adapters/eventlog/file.ts): segments are closed at this
   * size, and deleted once their last record is older than the retention (never a partition's
   * last segment). Kafka's retention is the broker's own configuration. The retention applies to
   * the SQL-table log (Postgres without Kafka, adapters/eventlog/local.ts) as well.
   */
  fileLog: { segmentBytes: number; retentionMs: number };
  /** Users per chunk of an achievement backfill (one transaction each; docs/achievements.md "Backfill"). */
  achievementBackfillChunkUsers: number;
  /** Live leaderboard WebSockets (docs/leaderboards.md "Live updates"). */
  live: {
    /** How often a watched page is re-read (once per distinct page, shared by its sockets), ms. */
    throttleMs: number;
    /** Ping interval, ms; a socket that misses a pong is dropped at the next. */
    pingMs: number;
    /** How often open sockets' tenants are re-checked (suspension, rotated secrets), ms. */
    recheckMs: number;
    /** Open sockets per process: in all, per tenant, per end user. */
    maxConnections: number;
    maxPerTenant: number;
    maxPerUser: number;
  };
  /** Every HTTP listener (docs/operations.md "Limits, timeouts and caps"). */
  http: {
    /** A request's headers must arrive within this, ms. */
    headersTimeoutMs: number;
    /** A whole request (headers and body) must arrive within this, ms. */
    requestTimeoutMs: number;
    /** An idle keep-alive connection is closed after this, ms. */
    keepAliveTimeoutMs: number;
    /** Open connections from one client address per listener; 0: no cap. */
    maxConnectionsPerAddress: number;
  };
  /** How long start-up waits for each external store before giving up, in ms. */
  connectTimeoutMs: number;
  /** How long graceful shutdown waits for in-flight work, in ms. */
  shutdownTimeoutMs: number;
  /** Outbound webhooks (docs/webhooks.md). */
  webhooks: WebhookConfig;
}

/** The documented default schedule (docs/webhooks.md): 10 retries over about 24 hours. */
export const DEFAULT_WEBHOOK_RETRY_SCHEDULE = '5,30,120,600,1800,3600,7200,14400,28800,28800';

/** `5,30,120` (seconds, decimals allowed) into delays in ms. */
export function parseRetrySchedule(variable: string, raw: string): number[] {
  const parts = raw.split(',').map((p) => p.trim());
  const bad = () =>
    new ConfigError(
      variable,
      `must be a comma-separated list of 1 to 50 delays in seconds, each at most 604800, e.g. ${DEFAULT_WEBHOOK_RETRY_SCHEDULE} (got "${raw}")`,
    );
  if (parts.length < 1 || parts.length > 50) throw bad();
  return parts.map((p) => {
    if (!/^\d+(\.\d{1,3})?$/.test(p) || Number(p) > 604800) throw bad();
    return Math.round(Number(p) * 1000);
  });
}

const UNIT_MS: Record<string, number> = { s: 1000, m: 60000, h: 3600000, d: 86400000 };

/** `1000/s,10000/m,100000/h,1000000/d` into windows; `off` disables the limit. */
export function parseRateLimit(variable: string, raw: string): RateLimitSpec {
  if (raw === 'off') return [];
  return raw.split(',').map((part) => {
    const m = /^\s*(\d+)\s*\/\s*([smhd])\s*$/.exec(part);
    if (!m || Number(m[1]) < 1) {
      throw new ConfigError(
        variable,
        `must be "off" or a list like 1000/s,10000/m,100000/h,1000000/d (got "${raw}")`,
      );
    }
    return { limit: Number(m[1]), windowMs: UNIT_MS[m[2]!]! };
  });
}

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`${variable}: ${message}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

/** Builds the configuration from an environment (process.env by default). */
export function loadConfig(env: Env = process.env): Config {
  const str = (name: string, def: string): string => {
    const v = env[name];
    return v === undefined || v === '' ? def : v;
  };
  const opt = (name: string): string | null => {
    const v = env[name];
    return v === undefined || v === '' ? null : v;
  };
  const oneOf = <T extends string>(name: string, allowed: readonly T[], def: T): T => {
    const v = str(name, def);
    if (!(allowed as readonly string[]).includes(v)) {
      throw new ConfigError(name, `must be one of ${allowed.join(', ')} (got "${v}")`);
    }
    return v as T;
  };
  const int = (name: string, def: number, min: number, max: number): number => {
    const raw = str(name, String(def));
    if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
      throw new ConfigError(name, `must be an integer from ${min} to ${max} (got "${raw}")`);
    }
    return Number(raw);
  };
  const url = (name: string, protocols: string[]): string | null => {
    const v = opt(name);
    if (v === null) return null;
    let parsed: URL;
    try {
      parsed = new URL(v);
    } catch {
      throw new ConfigError(name, `is not a valid URL (got "${v}")`);
    }
    if (!protocols.includes(parsed.protocol)) {
      throw new ConfigError(name, `must use ${protocols.join(' or ')} (got "${parsed.protocol}")`);
    }
    return v;
  };

  const shape = oneOf<Shape>('LUDUS_SHAPE', ['embedded', 'distributed'], 'embedded');
  const dist = shape === 'distributed';

  const rolesRaw = str('LUDUS_ROLES', 'all');
  const roles: Role[] =
    rolesRaw === 'all'
      ? [...ROLES]
      : rolesRaw.split(',').map((r) => {
          const role = r.trim();
          if (!(ROLES as readonly string[]).includes(role)) {
            throw new ConfigError('LUDUS_ROLES', `unknown role "${role}" (roles: all, ${ROLES.join(', ')})`);
          }
          return role as Role;
        });

  const adapters: Config['adapters'] = {
    sql: oneOf('LUDUS_SQL', ['pglite', 'pg'], dist ? 'pg' : 'pglite'),
    eventLog: oneOf('LUDUS_EVENT_LOG', ['local', 'kafka'], dist ? 'kafka' : 'local'),
    ranks: oneOf('LUDUS_RANKS', ['memory', 'redis'], dist ? 'redis' : 'memory'),
    analytics: oneOf('LUDUS_ANALYTICS', ['sql', 'clickhouse'], dist ? 'clickhouse' : 'sql'),
    rateLimiter: oneOf('LUDUS_RATE_LIMITER', ['memory', 'redis'], dist ? 'redis' : 'memory'),
  };

  if (adapters.ranks === 'memory' && roles.includes('api') !== roles.includes('processors')) {
    throw new ConfigError(
      'LUDUS_RANKS',
      'the memory rank index is fed only in the process that runs processors: run the api and processors roles together, or use redis',
    );
  }

  const processes = int('LUDUS_PROCESSES', 1, 1, 64);
  const inProcess = Object.entries(adapters).filter(([, a]) => ['pglite', 'local', 'memory'].includes(a));
  if (processes > 1 && inProcess.length > 0) {
    throw new ConfigError(
      'LUDUS_PROCESSES',
      `several processes need adapters that live outside the process (the distributed shape); these live in it: ${inProcess
        .map(([k, a]) => `${k}=${a}`)
        .join(', ')}`,
    );
  }

  const databaseUrl = url('LUDUS_DATABASE_URL', ['postgres:', 'postgresql:']);
  const brokersRaw = opt('LUDUS_KAFKA_BROKERS');
  const brokers = brokersRaw ? brokersRaw.split(',').map((b) => b.trim()) : [];
  for (const b of brokers) {
    if (!/^[A-Za-z0-9.\-[\]:]+:\d{1,5}$/.test(b)) {
      throw new ConfigError(
        'LUDUS_KAFKA_BROKERS',
        `must be a comma-separated list of host:port (got "${b}")`,
      );
    }
  }
  const schemaRegistryUrl = url('LUDUS_SCHEMA_REGISTRY_URL', ['http:', 'https:']);
  const redisUrl = url('LUDUS_REDIS_URL', ['redis:', 'rediss:']);
  const clickhouseUrl = url('LUDUS_CLICKHOUSE_URL', ['http:', 'https:']);

  // A chosen adapter must have what it needs: say which variable is missing.
  const need = (cond: boolean, variable: string, why: string) => {
    if (cond) throw new ConfigError(variable, `is required ${why}`);
  };
  need(adapters.sql === 'pg' && !databaseUrl, 'LUDUS_DATABASE_URL', 'when the SQL adapter is pg');
  need(
    adapters.eventLog === 'kafka' && brokers.length === 0,
    'LUDUS_KAFKA_BROKERS',
    'when the event log is kafka',
  );
  need(
    adapters.eventLog === 'kafka' && !schemaRegistryUrl,
    'LUDUS_SCHEMA_REGISTRY_URL',
    'when the event log is kafka',
  );
  need(adapters.ranks === 'redis' && !redisUrl, 'LUDUS_REDIS_URL', 'when the rank index is redis');
  need(adapters.rateLimiter === 'redis' && !redisUrl, 'LUDUS_REDIS_URL', 'when the rate limiter is redis');
  need(
    adapters.analytics === 'clickhouse' && !clickhouseUrl,
    'LUDUS_CLICKHOUSE_URL',
    'when analytics is clickhouse',
  );

  const database = str('LUDUS_CLICKHOUSE_DATABASE', 'ludus');
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(database)) {
    throw new ConfigError(
      'LUDUS_CLICKHOUSE_DATABASE',
      `must be letters, digits and underscores (got "${database}")`,
    );
  }
  const topicPrefix = str('LUDUS_TOPIC_PREFIX', '');
  if (!/^[A-Za-z0-9._-]*$/.test(topicPrefix)) {
    throw new ConfigError(
      'LUDUS_TOPIC_PREFIX',
      `may hold letters, digits, ".", "_" and "-" only (got "${topicPrefix}")`,
    );
  }

  return {
    shape,
    roles,
    processes,
    dataDir: resolve(str('LUDUS_DATA_DIR', './data')),
    host: str('LUDUS_HOST', '0.0.0.0'),
    ports: {
      ingest: int('LUDUS_INGEST_PORT', 8080, 0, 65535),
      admin: int('LUDUS_ADMIN_PORT', 8081, 0, 65535),
      query: int('LUDUS_QUERY_PORT', 8082, 0, 65535),
    },
    opsPort:
      str('LUDUS_OPS_PORT', '') === 'off'
        ? null
        : opt('LUDUS_OPS_PORT') !== null
          ? int('LUDUS_OPS_PORT', 8083, 0, 65535)
          : roles.includes('ingest') || roles.includes('api')
            ? null
            : 8083,
    logLevel: oneOf(
      'LUDUS_LOG_LEVEL',
      ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'],
      'info',
    ),
    adapters,
    databaseUrl,
    databaseSchema: schemaName(opt('LUDUS_DATABASE_SCHEMA')),
    kafka: { brokers, schemaRegistryUrl, topicPrefix, clientId: str('LUDUS_KAFKA_CLIENT_ID', 'ludus') },
    redis: { url: redisUrl, prefix: str('LUDUS_REDIS_PREFIX', 'ludus:') },
    clickhouse: {
      url: clickhouseUrl,
      database,
      username: str('LUDUS_CLICKHOUSE_USER', 'default'),
      password: str('LUDUS_CLICKHOUSE_PASSWORD', ''),
    },
    secretKey: secretKey(opt('LUDUS_SECRET_KEY'), dist),
    rootKey: rootKey(opt('LUDUS_ROOT_KEY')),
    rateLimits: {
      ingest: parseRateLimit(
        'LUDUS_RATE_LIMIT_INGEST',
        str('LUDUS_RATE_LIMIT_INGEST', '1000/s,10000/m,100000/h,1000000/d'),
      ),
      admin: parseRateLimit('LUDUS_RATE_LIMIT_ADMIN', str('LUDUS_RATE_LIMIT_ADMIN', '100/s,3000/m')),
      query: parseRateLimit('LUDUS_RATE_LIMIT_QUERY', str('LUDUS_RATE_LIMIT_QUERY', '1000/s,30000/m')),
    },
    couponGuessLimits: {
      user: parseRateLimit(
        'LUDUS_COUPON_GUESS_LIMIT_USER',
        str('LUDUS_COUPON_GUESS_LIMIT_USER', '10/m,50/h'),
      ),
      tenant: parseRateLimit(
        'LUDUS_COUPON_GUESS_LIMIT_TENANT',
        str('LUDUS_COUPON_GUESS_LIMIT_TENANT', '1000/m,20000/h'),
      ),
    },
    signatureSkewSeconds: int('LUDUS_SIGNATURE_SKEW_SECONDS', 300, 1, 86400),
    tenantCacheMs: int('LUDUS_TENANT_CACHE_MS', 1000, 0, 600000),
    tokenCacheMs: int('LUDUS_TOKEN_CACHE_MS', 30000, 0, 600000),
    dedupeWindowMs: int('LUDUS_DEDUPE_WINDOW_SECONDS', 300, 1, 30 * 86400) * 1000,
    schedulerIntervalMs: int('LUDUS_SCHEDULER_INTERVAL_MS', 1000, 50, 3600000),
    pipelineTransactions: int('LUDUS_PIPELINE_TRANSACTIONS', adapters.sql === 'pglite' ? 1 : 2, 0, 1000),
    pipelineRoundRecords: int('LUDUS_PIPELINE_ROUND_RECORDS', 4000, 1, 100000),
    pipelineGatherMs: int('LUDUS_PIPELINE_GATHER_MS', 5, 0, 1000),
    pipelineRoundMs: int('LUDUS_PIPELINE_ROUND_MS', adapters.sql === 'pglite' ? 700 : 0, 0, 600_000),
    pipelineWarmUpMs: int('LUDUS_PIPELINE_WARM_UP_MS', adapters.sql === 'pglite' ? 2000 : 5000, 0, 600_000),
    ingestWarmUpMs: int(
      'LUDUS_INGEST_WARM_UP_MS',
      adapters.eventLog === 'kafka' ? 2000 : adapters.sql === 'pglite' ? 1500 : 0,
      0,
      600_000,
    ),
    fileLog: {
      segmentBytes: int('LUDUS_EVENT_LOG_SEGMENT_MB', 64, 1, 1024) * 1024 * 1024,
      retentionMs: int('LUDUS_EVENT_LOG_RETENTION_HOURS', 720, 1, 24 * 365 * 10) * 3600 * 1000,
    },
    achievementBackfillChunkUsers: int('LUDUS_ACHIEVEMENT_BACKFILL_CHUNK_USERS', 500, 1, 100000),
    live: {
      throttleMs: int('LUDUS_LIVE_THROTTLE_MS', 1000, 50, 60000),
      pingMs: int('LUDUS_LIVE_PING_MS', 30000, 100, 600000),
      recheckMs: int('LUDUS_LIVE_RECHECK_MS', 2000, 50, 600000),
      maxConnections: int('LUDUS_LIVE_MAX_CONNECTIONS', 10000, 1, 1000000),
      maxPerTenant: int('LUDUS_LIVE_MAX_PER_TENANT', 1000, 1, 1000000),
      maxPerUser: int('LUDUS_LIVE_MAX_PER_USER', 5, 1, 1000000),
    },
    http: httpLimits(
      int('LUDUS_HTTP_HEADERS_TIMEOUT_MS', 10000, 100, 600000),
      int('LUDUS_HTTP_REQUEST_TIMEOUT_MS', 30000, 100, 3600000),
      int('LUDUS_HTTP_KEEP_ALIVE_TIMEOUT_MS', 5000, 100, 600000),
      int('LUDUS_HTTP_MAX_CONNECTIONS_PER_ADDRESS', 256, 0, 1000000),
    ),
    connectTimeoutMs: int('LUDUS_CONNECT_TIMEOUT_MS', 10000, 100, 600000),
    shutdownTimeoutMs: int('LUDUS_SHUTDOWN_TIMEOUT_MS', 15000, 0, 600000),
    webhooks: {
      retryScheduleMs: parseRetrySchedule(
        'LUDUS_WEBHOOK_RETRY_SCHEDULE',
        str('LUDUS_WEBHOOK_RETRY_SCHEDULE', DEFAULT_WEBHOOK_RETRY_SCHEDULE),
      ),
      allowPrivate: oneOf('LUDUS_WEBHOOK_ALLOW_PRIVATE', ['true', 'false'], 'false') === 'true',
      timeoutMs: int('LUDUS_WEBHOOK_TIMEOUT_MS', 5000, 100, 60000),
      retentionMs: int('LUDUS_WEBHOOK_RETENTION_DAYS', 30, 1, 3650) * 86400000,
      disableAfterMs: int('LUDUS_WEBHOOK_DISABLE_AFTER_SECONDS', 432000, 0, 31536000) * 1000,
      concurrency: int('LUDUS_WEBHOOK_CONCURRENCY', 16, 1, 1000),
      pollMs: int('LUDUS_WEBHOOK_POLL_MS', 500, 10, 60000),
    },
  };
}

function httpLimits(
  headersTimeoutMs: number,
  requestTimeoutMs: number,
  keepAliveTimeoutMs: number,
  maxConnectionsPerAddress: number,
): Config['http'] {
  if (headersTimeoutMs > requestTimeoutMs) {
    throw new ConfigError(
      'LUDUS_HTTP_HEADERS_TIMEOUT_MS',
      `must not exceed LUDUS_HTTP_REQUEST_TIMEOUT_MS (${requestTimeoutMs}) (got "${headersTimeoutMs}")`,
    );
  }
  return { headersTimeoutMs, requestTimeoutMs, keepAliveTimeoutMs, maxConnectionsPerAddress };
}

function secretKey(raw: string | null, distributed: boolean): Buffer | null {
  if (raw === null) {
    if (distributed) {
      throw new ConfigError(
        'LUDUS_SECRET_KEY',
        'is required in the distributed shape (32 random bytes, base64: openssl rand -base64 32)',
      );
    }
    return null;
  }
  const key = /^[0-9a-fA-F]{64}$/.test(raw) ? Buffer.from(raw, 'hex') : Buffer.from(raw, 'base64');
  if (key.length !== 32) throw new ConfigError('LUDUS_SECRET_KEY', 'must be 32 bytes, base64 or hex encoded');
  return key;
}

function rootKey(raw: string | null): string | null {
  if (raw !== null && raw.length < 32)
    throw new ConfigError('LUDUS_ROOT_KEY', 'must be at least 32 characters');
  return raw;
}

function schemaName(raw: string | null): string | null {
  if (raw !== null && !/^[a-z_][a-z0-9_]{0,62}$/.test(raw)) {
    throw new ConfigError(
      'LUDUS_DATABASE_SCHEMA',
      `must be lowercase letters, digits and underscores (got "${raw}")`,
    );
  }
  return raw;
}
