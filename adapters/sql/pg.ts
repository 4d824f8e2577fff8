import { Pool, types } from 'pg';
import { arrayLiteral } from './array-literal';
import { plannerOptions } from './planner';
import type { Queryable, QueryResult, Sql } from './types';

// BIGINT (int8) comes back as a string by default; our counters and offsets fit in 2^53.
types.setTypeParser(20, (v) => Number(v));
// NUMERIC stays a string (money-like values are integers in minor units anyway).

export interface PgOptions {
  url: string;
  /** Postgres schema to work in (tests use one per suite); created when missing. */
  schema?: string;
  max?: number;
}

/**
 * The connection string and the options of every session: the planner's settings (./planner.ts),
 * then the URL's own `options` (an operator's settings win over Ludus's defaults), then the schema.
 * `pg` lets a URL's `options` replace the pool's, so they are taken out of the URL and merged here.
 */
export function sessionOptions(opts: Pick<PgOptions, 'url' | 'schema'>): {
  connectionString: string;
  options: string;
} {
  let connectionString = opts.url;
  let fromUrl: string | null = null;
  try {
    const u = new URL(opts.url);
    fromUrl = u.searchParams.get('options');
    if (fromUrl !== null) {
      u.searchParams.delete('options');
      connectionString = u.toString();
    }
  } catch {
    // Not a URL (a socket directory): nothing to merge.
  }
  const options = [
    ...plannerOptions(),
    ...(fromUrl ? [fromUrl] : []),
    ...(opts.schema ? ['-c', `search_path=${quoteIdent(opts.schema)}`] : []),
  ];
  return { connectionString, options: options.join(' ') };
}

/** SQL adapter for a real PostgreSQL server, through a `pg` pool. */
export class PgSql implements Sql {
  readonly kind = 'pg' as const;
  private readonly pool: Pool;

  constructor(private readonly opts: PgOptions) {
    this.pool = new Pool({
      ...sessionOptions(opts),
      max: opts.max ?? 10,
      connectionTimeoutMillis: 5000,
    });
    // An idle client that errors (server restart) must not crash the process.
    this.pool.on('error', () => undefined);
  }

  /** Connects once and creates the schema when one was asked for. */
  async init(): Promise<void> {
    if (this.opts.schema)
      await this.pool.query(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(this.opts.schema)}`);
    else await this.ping();
  }

  async query<R>(text: string, params?: unknown[]): Promise<QueryResult<R>> {
    const r = await this.pool.query(text, encodeParams(params));
    return { rows: r.rows as R[], rowCount: r.rowCount ?? 0 };
  }

  async tx<T>(fn: (q: Queryable) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    const q: Queryable = {
      query: async <R>(text: string, params?: unknown[]) => {
        const r = await client.query(text, encodeParams(params));
        return { rows: r.rows as R[], rowCount: r.rowCount ?? 0 };
      },
      exec: async (script: string) => {
        await client.query(script);
      },
    };
    let broken = false;
    try {
      await client.query('BEGIN');
      const out = await fn(q);
      await client.query('COMMIT');
      return out;
    } catch (err) {
      try {
        await client.query('ROLLBACK');
      } catch {
        broken = true;
      }
      throw err;
    } finally {
      client.release(broken);
    }
  }

  async exec(script: string): Promise<void> {
    await this.pool.query(script);
  }

  async ping(): Promise<void> {
    await this.pool.query('SELECT 1');
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}

/** Arrays of strings or numbers go as array literals written here (./array-literal.ts), the rest as pg writes them. */
function encodeParams(params: unknown[] | undefined): unknown[] | undefined {
  return params?.map((v) => (Array.isArray(v) ? (arrayLiteral(v) ?? v) : v));
}

export function quoteIdent(name: string): string {
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) throw new Error(`invalid SQL identifier: ${name}`);
  return `"${name}"`;
}
