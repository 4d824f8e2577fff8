import { PGlite, parse, protocol } from '@electric-sql/pglite';
import { LITERAL_ARRAYS, literalFor } from './array-literal';
import { lockDir, type DirLock } from './dirlock';
import { ROW_STATEMENT } from './row-statement';
import { plannerOptions } from './planner';
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
 *
 * Statements with parameters that read or write rows (SELECT, INSERT, UPDATE, DELETE, WITH) run as
 * named prepared statements (issue 19, fifteenth pass): PGlite's own `query` parses, analyses
 * and plans the text again at every call, in six calls into the WebAssembly module (parse,
 * describe, bind, describe, execute, sync). Here a text is parsed and described once; each call
 * after that is one call (bind, describe, execute, sync), and Postgres may keep its plan (its
 * plan cache: a generic plan after five custom ones when it costs no more). The pipeline's small
 * statements take half the time, a round of 100 records a fifth less (docs/performance.md).
 * Parameters are serialised and rows parsed by PGlite's own serialisers and parsers, as `query`
 * does; a statement without parameters goes through `query`. Any other statement (DDL, SET, a
 * script) forgets every prepared statement (DEALLOCATE ALL) once it succeeded, so that no
 * statement prepared before a change of schema runs after it; so does the cache reaching
 * MAX_PREPARED texts.
 *
 * A transaction in which a statement failed never commits, even when its callback did not await
 * that statement (a write sent behind, core/write-behind.ts): `tx` rolls it back and rejects with
 * the first failure (`commitChecksStatements`).
 */
export class PgliteSql implements Sql {
  readonly kind = 'pglite' as const;
  private readonly lock = new TwoLaneMutex();
  /** Statement text → its prepared statement's name and parameter types. */
  private readonly prepared = new Map<string, { name: string; types: number[] }>();
  private statements = 0;
  private inTx = false;
  /** The first statement of the open transaction that failed: its COMMIT is refused (`tx`). */
  private txFailure: { err: unknown } | null = null;
  /** See `Sql.commitChecksStatements`. */
  readonly commitChecksStatements = true;
  private tail: Promise<unknown> = Promise.resolve();

  private constructor(
    private readonly db: PGlite,
    private readonly dirLock: DirLock | null,
  ) {}

  /** dataDir undefined means in memory (tests); otherwise a directory on disk, locked while open. */
  static async open(dataDir?: string): Promise<PgliteSql> {
    const dirLock = dataDir ? lockDir(dataDir) : null;
    try {
      // PGlite's own start parameters, then the planner's settings (./planner.ts).
      const startParams = [...PGlite.defaultStartParams, ...plannerOptions()];
      // int8 as a number, as the pg adapter gives it: PGlite's own parser makes a BigInt of every
      // value first (a number only when it is safe), which cost a conversion per field afterwards.
      const parsers = { [INT8]: (x: string) => Number(x) };
      const db = await PGlite.create({ ...(dataDir ? { dataDir } : {}), startParams, parsers });
      return new PgliteSql(db, dirLock);
    } catch (err) {
      dirLock?.release();
      throw err;
    }
  }

  /**
   * Runs calls into PGlite one after the other in the order they were made. PGlite queues its own
   * `query` and `exec` behind two locks but `execProtocol` behind none, so without this queue a
   * prepared statement could overtake a statement sent before it (the pipeline's write-behind sends
   * statements without waiting and relies on their order: core/write-behind.ts).
   */
  private ordered<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.tail.then(fn, fn);
    this.tail = run.catch(() => undefined);
    return run;
  }

  private raw<R>(text: string, params?: unknown[]): Promise<QueryResult<R>> {
    return this.ordered(async () => {
      try {
        const rowStatement = ROW_STATEMENT.test(text);
        const r =
          rowStatement && params !== undefined && params.length > 0
            ? await this.runPrepared<R>(text, params)
            : await this.db.query<R>(text, params);
        if (!rowStatement) await this.forgetPrepared();
        // affectedRows is 0 for SELECT in PGlite; pg reports the number of rows returned.
        return { rows: r.rows, rowCount: Math.max(r.affectedRows ?? 0, r.rows.length) };
      } catch (err) {
        // Only the open transaction's statements run while it is open (the session's lock).
        if (this.inTx) this.txFailure ??= { err };
        throw err;
      }
    });
  }

  /** Runs a script; one that may change the schema (any but the transaction's own) forgets the prepared statements. */
  private script(script: string, changesSchema = true): Promise<void> {
    return this.ordered(async () => {
      try {
        await this.db.exec(script);
        if (changesSchema) await this.forgetPrepared();
      } catch (err) {
        if (this.inTx) this.txFailure ??= { err };
        throw err;
      }
    });
  }

  /** The parameter types (OIDs) of `text` when it is prepared now; undefined otherwise. */
  paramTypes(text: string): readonly number[] | undefined {
    return this.prepared.get(text)?.types;
  }

  /** Runs `text` as a named prepared statement, preparing it on its first use. */
  private async runPrepared<R>(text: string, params: unknown[]): Promise<Results<R>> {
    let st = this.prepared.get(text);
    if (!st) {
      if (this.prepared.size >= MAX_PREPARED) await this.forgetPrepared();
      const name = `ludus_${++this.statements}`;
      const described = await this.send([
        serialize.parse({ name, text }),
        serialize.describe({ type: 'S', name }),
        serialize.sync(),
      ]);
      st = { name, types: parse.parseDescribeStatementResults(described) };
      this.prepared.set(text, st);
    }
    const types = st.types;
    const values = params.map((v, i) => {
      if (v === null || v === undefined) return null;
      const type = types[i]!;
      // An array's literal: written by the caller (PgliteThreadSql), or here.
      if (typeof v === 'string' && LITERAL_ARRAYS.has(type)) return v;
      const literal = literalFor(v, type);
      if (literal !== undefined) return literal;
      const serializer = this.db.serializers[type];
      return serializer ? serializer(v) : String(v);
    });
    const messages = await this.send([
      serialize.bind({ statement: st.name, values }),
      serialize.describe({ type: 'P' }),
      serialize.execute({}),
      serialize.sync(),
    ]);
    return parse.parseResults(messages, this.db.parsers)[0] as Results<R>;
  }

  /** After a statement that may have changed the schema: no prepared statement outlives it. */
  private async forgetPrepared(): Promise<void> {
    if (this.prepared.size === 0) return;
    this.prepared.clear();
    await this.send([serialize.query('DEALLOCATE ALL')]);
  }

  /** One call into PGlite with these protocol messages (its filesystem synced outside transactions, as `query` does). */
  private async send(messages: Uint8Array[]) {
    const out = new Uint8Array(messages.reduce((n, m) => n + m.length, 0));
    let at = 0;
    for (const m of messages) {
      out.set(m, at);
      at += m.length;
    }
    const r = await this.db._runExclusiveQuery(() => this.db.execProtocol(out, { syncToFs: !this.inTx }));
    return r.messages;
  }

  query<R>(text: string, params?: unknown[]): Promise<QueryResult<R>> {
    return this.lock.run('short', () => this.raw<R>(text, params));
  }

  tx<T>(fn: (q: Queryable) => Promise<T>): Promise<T> {
    return this.lock.run('long', async () => {
      const q: Queryable = {
        query: (text, params) => this.raw(text, params),
        exec: (script) => this.script(script),
      };
      await this.script('BEGIN', false);
      this.inTx = true;
      this.txFailure = null;
      try {
        const out = await fn(q);
        // In the session's order, after every statement of the transaction (awaited by `fn` or
        // not): one that failed refuses the COMMIT, which Postgres would turn into a silent
        // ROLLBACK anyway (the transaction is aborted).
        await this.ordered(async () => {
          if (this.txFailure) throw this.txFailure.err;
        });
        await this.script('COMMIT', false);
        return out;
      } catch (err) {
        await this.script('ROLLBACK', false);
        throw err;
      } finally {
        this.inTx = false;
        this.txFailure = null;
      }
    });
  }

  exec(script: string): Promise<void> {
    return this.lock.run('short', () => this.script(script));
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

const { serialize } = protocol;
type Results<R> = Awaited<ReturnType<PGlite['query']>> & { rows: R[] };

/** Prepared statements kept at most; reaching it forgets them all (texts are few and fixed). */
const MAX_PREPARED = 1000;

/** The type OID of int8 (bigint). */
const INT8 = 20;
