/**
 * Write-behind inside one transaction: statements whose answer the caller does not need (a set
 * of rows written, nothing read back) are sent at once and not awaited, so that the caller's next
 * work (JavaScript, the next statement) overlaps their execution. On the embedded store every
 * statement is a round trip to the database thread; without this, that thread waits for the main
 * thread between every two statements (docs/performance.md, fifth pass).
 *
 * Order is kept: both adapters run one transaction's statements in the order they were sent
 * (PGlite's query queue, node-postgres's per-client queue), so a later read sees every earlier
 * write. Failures are never lost: the first failed write is thrown by `settle()`, which the owner
 * of the transaction calls before its last statements and COMMIT, and by any later `query` or
 * `exec` (whose own error would only say that the transaction is aborted, SQLSTATE 25P02). On a
 * store whose COMMIT refuses a transaction with a failed statement (`Sql.commitChecksStatements`:
 * the embedded one), the owner may skip `settle()` and let the last writes and the COMMIT go out
 * together; the transaction then fails with the first failed write's error.
 */
import type { Queryable, QueryResult } from '../adapters/sql/types';

export class WriteBehind implements Queryable {
  private pending: Array<Promise<void>> = [];
  private failure: { err: unknown } | null = null;

  constructor(private readonly q: Queryable) {}

  async query<R = Record<string, unknown>>(text: string, params?: unknown[]): Promise<QueryResult<R>> {
    try {
      return await this.q.query<R>(text, params);
    } catch (err) {
      await this.settle();
      throw err;
    }
  }

  async exec(script: string): Promise<void> {
    try {
      await this.q.exec(script);
    } catch (err) {
      await this.settle();
      throw err;
    }
  }

  /** Sends a write without waiting for it. */
  send(text: string, params?: unknown[]): void {
    this.pending.push(
      this.q.query(text, params).then(
        () => undefined,
        (err: unknown) => {
          this.failure ??= { err };
        },
      ),
    );
  }

  /** Waits for every write sent; throws the first that failed. */
  async settle(): Promise<void> {
    while (this.pending.length) {
      const sent = this.pending;
      this.pending = [];
      await Promise.all(sent);
    }
    if (this.failure) throw this.failure.err;
  }
}

/**
 * Runs a write whose result is not needed: sent without waiting when `q` is a WriteBehind (its
 * owner settles it before COMMIT), else awaited as usual.
 */
export async function write(q: Queryable, text: string, params?: unknown[]): Promise<void> {
  if (q instanceof WriteBehind) q.send(text, params);
  else await q.query(text, params);
}
