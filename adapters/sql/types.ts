/**
 * The SQL port. Both adapters speak Postgres (PGlite is Postgres in WASM), so the SQL text
 * is the same in both shapes; only connection handling differs.
 */
export interface QueryResult<R> {
  rows: R[];
  rowCount: number;
}

/** Something that runs statements: the pool itself or one transaction. */
export interface Queryable {
  query<R = Record<string, unknown>>(text: string, params?: unknown[]): Promise<QueryResult<R>>;
  /** Runs a script of one or more statements without parameters (migrations). */
  exec(script: string): Promise<void>;
}

export interface Sql extends Queryable {
  /** Which adapter this is, for logs and /ready only: no module may branch on it. */
  readonly kind: 'pg' | 'pglite';
  /**
   * Runs fn inside one transaction (READ COMMITTED). Commits when fn resolves, rolls back when
   * it throws. Transactions never nest; fn must use the Queryable it is given.
   */
  tx<T>(fn: (q: Queryable) => Promise<T>): Promise<T>;
  /**
   * True when a transaction in which a statement failed never commits, whether or not `fn`
   * awaited that statement: `tx` rolls it back and rejects with the first failure. A caller may
   * then send its last writes and return without waiting for their answers (the writes and the
   * COMMIT go out together). False or absent: `fn` must await every statement it sent.
   */
  readonly commitChecksStatements?: boolean;
  /** Cheap liveness check used by /ready. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
