import { PGlite } from '@electric-sql/pglite';
import { lockDir, type DirLock } from './dirlock';
import { TwoLaneMutex } from '../../shared/mutex';
import type { Queryable, QueryResult, Sql } from './types';

/**
 * SQL adapter for embedded Postgres (PGlite). PGlite is a single session, so every statement and
 * every transaction runs behind one mutex: a transaction holds the session until it ends. A single
 * statement waiting for the session goes ahead of waiting transactions (`TwoLaneMutex`): a
 * gateway's read (a tenant's credentials, a definition) then waits for the transaction running at
 * most, not for every pipeline batch queued behind it (issue 19).
 * A data directory on disk is locked to this process while open (./dirlock.ts): a second process
 * on the same directory is refused with DataDirInUse instead of writing a copy that gets lost.
 */
export class PgliteSql implements Sql {
  readonly kind = 'pglite' as const;
  private readonly lock = new TwoLaneMutex();

  private constructor(
    private readonly db: PGlite,
    private readonly dirLock: DirLock | null,
  ) {}

  /** dataDir undefined means in memory (tests); otherwise a directory on disk, locked while open. */
  static async open(dataDir?: string): Promise<PgliteSql> {
    const dirLock = dataDir ? lockDir(dataDir) : null;
    try {
      const db = await PGlite.create(dataDir ? { dataDir } : {});
      return new PgliteSql(db, dirLock);
    } catch (err) {
      dirLock?.release();
      throw err;
    }
  }

  private async raw<R>(text: string, params?: unknown[]): Promise<QueryResult<R>> {
    const r = await this.db.query<R>(text, params as unknown[]);
    // affectedRows is 0 for SELECT in PGlite; pg reports the number of rows returned.
    return { rows: normalizeRows(r.rows), rowCount: Math.max(r.affectedRows ?? 0, r.rows.length) };
  }

  query<R>(text: string, params?: unknown[]): Promise<QueryResult<R>> {
    return this.lock.run('short', () => this.raw<R>(text, params));
  }

  tx<T>(fn: (q: Queryable) => Promise<T>): Promise<T> {
    return this.lock.run('long', async () => {
      const q: Queryable = {
        query: (text, params) => this.raw(text, params),
        exec: async (script) => void (await this.db.exec(script)),
      };
      await this.db.exec('BEGIN');
      try {
        const out = await fn(q);
        await this.db.exec('COMMIT');
        return out;
      } catch (err) {
        await this.db.exec('ROLLBACK');
        throw err;
      }
    });
  }

  exec(script: string): Promise<void> {
    return this.lock.run('short', async () => void (await this.db.exec(script)));
  }

  async ping(): Promise<void> {
    await this.query('SELECT 1');
  }

  async close(): Promise<void> {
    try {
      await this.lock.run('long', () => this.db.close());
    } finally {
      this.dirLock?.release();
    }
  }
}

/** PGlite returns int8 as bigint; the pg adapter returns numbers. Make both agree. */
function normalizeRows<R>(rows: R[]): R[] {
  for (const row of rows as Record<string, unknown>[]) {
    for (const k of Object.keys(row)) if (typeof row[k] === 'bigint') row[k] = Number(row[k]);
  }
  return rows;
}
