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
