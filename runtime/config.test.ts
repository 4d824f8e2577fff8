import { ConfigError, loadConfig, ROLES } from './config';

describe('loadConfig', () => {
  it('defaults to the embedded shape with every role and the documented ports', () => {
    const c = loadConfig({});
    expect(c.shape).toBe('embedded');
    expect(c.roles).toEqual([...ROLES]);
    expect(c.adapters).toEqual({
      sql: 'pglite',
      eventLog: 'local',
      ranks: 'memory',
      analytics: 'sql',
      rateLimiter: 'memory',
    });
    expect(c.ports).toEqual({ ingest: 8080, admin: 8081, query: 8082 });
    expect(c.dataDir.endsWith('/data')).toBe(true);
  });

  const distributed = {
    LUDUS_SHAPE: 'distributed',
    LUDUS_DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/ludus',
    LUDUS_KAFKA_BROKERS: '127.0.0.1:9092',
    LUDUS_SCHEMA_REGISTRY_URL: 'http://127.0.0.1:8090/apis/ccompat/v7',
    LUDUS_REDIS_URL: 'redis://127.0.0.1:6379/0',
    LUDUS_CLICKHOUSE_URL: 'http://127.0.0.1:8123',
    LUDUS_SECRET_KEY: Buffer.alloc(32, 7).toString('base64'),
  };

  it('chooses the distributed adapters from LUDUS_SHAPE, each overridable', () => {
    expect(loadConfig(distributed).adapters).toEqual({
      sql: 'pg',
      eventLog: 'kafka',
      ranks: 'redis',
      analytics: 'clickhouse',
      rateLimiter: 'redis',
    });
    expect(loadConfig({ ...distributed, LUDUS_RANKS: 'memory' }).adapters.ranks).toBe('memory');
  });

  it('parses rate limits with the SPEC.md ingestion defaults', () => {
    expect(loadConfig({}).rateLimits.ingest).toEqual([
      { limit: 1000, windowMs: 1000 },
      { limit: 10000, windowMs: 60000 },
      { limit: 100000, windowMs: 3600000 },
      { limit: 1000000, windowMs: 86400000 },
    ]);
    expect(loadConfig({ LUDUS_RATE_LIMIT_QUERY: 'off' }).rateLimits.query).toEqual([]);
  });

  it('runs one gathered pipeline transaction at a time on PGlite and two on Postgres, unless told', () => {
    expect(loadConfig({})).toMatchObject({
      pipelineTransactions: 1,
      pipelineRoundRecords: 4000,
      pipelineGatherMs: 5,
    });
    expect(loadConfig(distributed)).toMatchObject({ pipelineTransactions: 2, pipelineGatherMs: 5 });
    expect(
      loadConfig({
        ...distributed,
        LUDUS_PIPELINE_TRANSACTIONS: '0',
        LUDUS_PIPELINE_ROUND_RECORDS: '500',
        LUDUS_PIPELINE_GATHER_MS: '0',
      }),
    ).toMatchObject({ pipelineTransactions: 0, pipelineRoundRecords: 500, pipelineGatherMs: 0 });
  });

  it('warms the ingest gateway up for 2 s with Kafka, 1.5 s embedded, not with the SQL-table log, unless told', () => {
    expect(loadConfig({})).toMatchObject({ ingestWarmUpMs: 1500 });
    expect(loadConfig({ LUDUS_SQL: 'pg', LUDUS_DATABASE_URL: 'postgres://127.0.0.1/x' })).toMatchObject({
      ingestWarmUpMs: 0,
    });
    expect(loadConfig(distributed)).toMatchObject({ ingestWarmUpMs: 2000 });
    expect(loadConfig({ ...distributed, LUDUS_INGEST_WARM_UP_MS: '0' })).toMatchObject({ ingestWarmUpMs: 0 });
    expect(() => loadConfig({ LUDUS_INGEST_WARM_UP_MS: '2s' })).toThrow(/^LUDUS_INGEST_WARM_UP_MS:/);
  });

  it('bounds rounds at 700 ms on PGlite and not on Postgres, and warms the pipeline up for 2 s on PGlite and 5 s on Postgres, unless told', () => {
    expect(loadConfig({})).toMatchObject({ pipelineRoundMs: 700, pipelineWarmUpMs: 2000 });
    expect(loadConfig(distributed)).toMatchObject({ pipelineRoundMs: 0, pipelineWarmUpMs: 5000 });
    expect(loadConfig({ LUDUS_PIPELINE_ROUND_MS: '0', LUDUS_PIPELINE_WARM_UP_MS: '0' })).toMatchObject({
      pipelineRoundMs: 0,
      pipelineWarmUpMs: 0,
    });
  });

  it('keeps the embedded log in 64 MiB segments for 720 hours, unless told', () => {
    expect(loadConfig({}).fileLog).toEqual({
      segmentBytes: 64 * 1024 * 1024,
      retentionMs: 720 * 3600 * 1000,
    });
    expect(
      loadConfig({ LUDUS_EVENT_LOG_SEGMENT_MB: '8', LUDUS_EVENT_LOG_RETENTION_HOURS: '24' }).fileLog,
    ).toEqual({ segmentBytes: 8 * 1024 * 1024, retentionMs: 24 * 3600 * 1000 });
  });

  it('parses a subset of roles', () => {
    expect(loadConfig({ LUDUS_ROLES: 'ingest, api, processors' }).roles).toEqual([
      'ingest',
      'api',
      'processors',
    ]);
  });

  const bad: Array<[string, Record<string, string>, RegExp]> = [
    ['unknown shape', { LUDUS_SHAPE: 'cloud' }, /^LUDUS_SHAPE: must be one of embedded, distributed/],
    ['unknown role', { LUDUS_ROLES: 'ingest,web' }, /^LUDUS_ROLES: unknown role "web"/],
    ['a negative transaction limit', { LUDUS_PIPELINE_TRANSACTIONS: '-1' }, /^LUDUS_PIPELINE_TRANSACTIONS:/],
    ['rounds of no records', { LUDUS_PIPELINE_ROUND_RECORDS: '0' }, /^LUDUS_PIPELINE_ROUND_RECORDS:/],
    ['segments of no bytes', { LUDUS_EVENT_LOG_SEGMENT_MB: '0' }, /^LUDUS_EVENT_LOG_SEGMENT_MB:/],
    ['a negative round bound', { LUDUS_PIPELINE_ROUND_MS: '-5' }, /^LUDUS_PIPELINE_ROUND_MS:/],
    ['a warm-up that is not a number', { LUDUS_PIPELINE_WARM_UP_MS: '2s' }, /^LUDUS_PIPELINE_WARM_UP_MS:/],
    [
      'a retention of hours that are not',
      { LUDUS_EVENT_LOG_RETENTION_HOURS: 'a week' },
      /^LUDUS_EVENT_LOG_RETENTION_HOURS:/,
    ],

    ['unknown adapter', { LUDUS_EVENT_LOG: 'rabbit' }, /^LUDUS_EVENT_LOG: must be one of local, kafka/],
    [
      'malformed URL',
      { ...distributed, LUDUS_DATABASE_URL: 'not a url' },
      /^LUDUS_DATABASE_URL: is not a valid URL/,
    ],
    [
      'wrong URL scheme',
      { ...distributed, LUDUS_REDIS_URL: 'http://x' },
      /^LUDUS_REDIS_URL: must use redis: or rediss:/,
    ],
    [
      'bad broker list',
      { ...distributed, LUDUS_KAFKA_BROKERS: 'kafka' },
      /^LUDUS_KAFKA_BROKERS: must be a comma-separated list/,
    ],
    ['missing broker list', { ...distributed, LUDUS_KAFKA_BROKERS: '' }, /^LUDUS_KAFKA_BROKERS: is required/],
    [
      'port out of range',
      { LUDUS_ADMIN_PORT: '70000' },
      /^LUDUS_ADMIN_PORT: must be an integer from 0 to 65535/,
    ],
    ['non-numeric port', { LUDUS_QUERY_PORT: '80a' }, /^LUDUS_QUERY_PORT: must be an integer/],
    [
      'zero backfill chunk',
      { LUDUS_ACHIEVEMENT_BACKFILL_CHUNK_USERS: '0' },
      /^LUDUS_ACHIEVEMENT_BACKFILL_CHUNK_USERS: must be an integer from 1 to 100000/,
    ],
    [
      'missing secret key',
      { ...distributed, LUDUS_SECRET_KEY: '' },
      /^LUDUS_SECRET_KEY: is required in the distributed shape/,
    ],
    ['short secret key', { ...distributed, LUDUS_SECRET_KEY: 'abcd' }, /^LUDUS_SECRET_KEY: must be 32 bytes/],
    ['short root key', { LUDUS_ROOT_KEY: 'short' }, /^LUDUS_ROOT_KEY: must be at least 32 characters/],
    [
      'bad rate limit',
      { LUDUS_RATE_LIMIT_INGEST: '10/x' },
      /^LUDUS_RATE_LIMIT_INGEST: must be "off" or a list/,
    ],
    [
      'memory ranks split from processors',
      { LUDUS_ROLES: 'api' },
      /^LUDUS_RANKS: the memory rank index is fed only/,
    ],
    ['hostile database name', { LUDUS_CLICKHOUSE_DATABASE: 'x; DROP' }, /^LUDUS_CLICKHOUSE_DATABASE:/],
  ];
  it.each(bad)('rejects %s with an error naming the variable', (_what, env, message) => {
    let err: unknown;
    try {
      loadConfig(env);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toMatch(message);
  });
});

describe('loadConfig: outbound webhooks', () => {
  it('defaults to the documented schedule, a 5 s timeout, 30 days of log and private addresses refused', () => {
    expect(loadConfig({}).webhooks).toEqual({
      retryScheduleMs: [5, 30, 120, 600, 1800, 3600, 7200, 14400, 28800, 28800].map((s) => s * 1000),
      allowPrivate: false,
      timeoutMs: 5000,
      retentionMs: 30 * 86400000,
      disableAfterMs: 5 * 86400000,
      concurrency: 16,
      pollMs: 500,
    });
  });

  it('takes a shorter schedule, fractions of seconds included, and the other settings', () => {
    const w = loadConfig({
      LUDUS_WEBHOOK_RETRY_SCHEDULE: '0.5, 1,2.25',
      LUDUS_WEBHOOK_ALLOW_PRIVATE: 'true',
      LUDUS_WEBHOOK_TIMEOUT_MS: '1000',
      LUDUS_WEBHOOK_RETENTION_DAYS: '7',
      LUDUS_WEBHOOK_DISABLE_AFTER_SECONDS: '0',
      LUDUS_WEBHOOK_CONCURRENCY: '4',
      LUDUS_WEBHOOK_POLL_MS: '50',
    }).webhooks;
    expect(w).toEqual({
      retryScheduleMs: [500, 1000, 2250],
      allowPrivate: true,
      timeoutMs: 1000,
      retentionMs: 7 * 86400000,
      disableAfterMs: 0,
      concurrency: 4,
      pollMs: 50,
    });
  });

  const bad: Array<[string, Record<string, string>, RegExp]> = [
    [
      'a word in the schedule',
      { LUDUS_WEBHOOK_RETRY_SCHEDULE: '5,soon' },
      /^LUDUS_WEBHOOK_RETRY_SCHEDULE: must be/,
    ],
    ['a negative delay', { LUDUS_WEBHOOK_RETRY_SCHEDULE: '-5' }, /^LUDUS_WEBHOOK_RETRY_SCHEDULE:/],
    ['an empty entry', { LUDUS_WEBHOOK_RETRY_SCHEDULE: '5,,10' }, /^LUDUS_WEBHOOK_RETRY_SCHEDULE:/],
    ['a delay over 7 days', { LUDUS_WEBHOOK_RETRY_SCHEDULE: '604801' }, /^LUDUS_WEBHOOK_RETRY_SCHEDULE:/],
    [
      'more than 50 delays',
      { LUDUS_WEBHOOK_RETRY_SCHEDULE: Array(51).fill('1').join(',') },
      /^LUDUS_WEBHOOK_RETRY_SCHEDULE:/,
    ],
    [
      'a yes',
      { LUDUS_WEBHOOK_ALLOW_PRIVATE: 'yes' },
      /^LUDUS_WEBHOOK_ALLOW_PRIVATE: must be one of true, false/,
    ],
    ['a tiny timeout', { LUDUS_WEBHOOK_TIMEOUT_MS: '5' }, /^LUDUS_WEBHOOK_TIMEOUT_MS: must be an integer/],
    ['no retention', { LUDUS_WEBHOOK_RETENTION_DAYS: '0' }, /^LUDUS_WEBHOOK_RETENTION_DAYS:/],
    ['zero concurrency', { LUDUS_WEBHOOK_CONCURRENCY: '0' }, /^LUDUS_WEBHOOK_CONCURRENCY:/],
    [
      'a fractional disable time',
      { LUDUS_WEBHOOK_DISABLE_AFTER_SECONDS: '1.5' },
      /^LUDUS_WEBHOOK_DISABLE_AFTER_SECONDS:/,
    ],
  ];
  it.each(bad)('rejects %s with an error naming the variable', (_what, env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });
});
