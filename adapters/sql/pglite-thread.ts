/**
 * SQL adapter for embedded Postgres (PGlite) run in a worker thread (issue 19). PGlite is
 * single-threaded WASM: on the main thread every statement of the pipeline held the event loop,
 * so during a drain the gateways of the same process (ingest, queries, health, metrics) waited
 * for seconds. Here the database lives in `./pglite-host.ts` on its own thread and core; the main
 * thread only posts statements and awaits their answers.
 *
 * Same semantics as `PgliteSql` (which the host runs): one session, transactions queued behind
 * each other, READ COMMITTED, rows with int8 as numbers. Values cross the thread by structured
 * clone (Date, Uint8Array, arrays and plain objects survive; a Buffer parameter arrives as a
 * Uint8Array, which PGlite writes as bytea all the same). A database error keeps its message,
 * name and plain fields (`code`, `detail`, `constraint`...), which is what callers look at.
 *
 * If the worker dies (a WASM abort, out of memory), every pending and later call fails with
 * `EmbeddedDatabaseStopped` and `onStopped` is called once: the composition root logs it and ends
 * the process, because a process without its database cannot keep any promise it made.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { literalArrays } from './array-literal';
import { DataDirInUse } from './dirlock';
import type { HostData, Reply, Request, SerializedError } from './pglite-host';
import { ROW_STATEMENT } from './row-statement';
import type { Queryable, QueryResult, Sql } from './types';

export class EmbeddedDatabaseStopped extends Error {
  constructor(reason: string) {
    super(`the embedded database thread stopped: ${reason}`);
    this.name = 'EmbeddedDatabaseStopped';
  }
}

export interface ThreadOptions {
  /** Directory of the database (locked while open); undefined for one in memory. */
  dataDir?: string;
  /** Called once if the thread stops on its own (not after close()). */
  onStopped?: (err: Error) => void;
}

/** A request awaiting its reply; `text`: a query's, whose parameter types the reply may bring. */
type Pending = { resolve(v: unknown): void; reject(e: Error): void; text?: string; generation?: number };

/** Statement texts whose parameter types are kept at most (the host's prepared statements: 1,000). */
const MAX_TYPED = 1000;
type Call = Request extends infer R ? (R extends { id: number } ? Omit<R, 'id'> : never) : never;

/** The worker's entry: the host module, compiled on the fly by tsx when this runs from source. */
function bootstrap(): string {
  const ts = join(__dirname, 'pglite-host.ts');
  const host = existsSync(ts) ? ts : join(__dirname, 'pglite-host.js');
  return [
    // Under `tsx` the worker inherits its loader; under Jest (or plain node) it needs registering.
    `if (${JSON.stringify(host)}.endsWith('.ts') && !require.extensions['.ts']) require('tsx/cjs/api').register();`,
    `require(${JSON.stringify(host)});`,
  ].join('\n');
}

function toError(e: SerializedError): Error {
  if (e.name === 'DataDirInUse') return new DataDirInUse(String(e.fields.dir), Number(e.fields.pid));
  const err = new Error(e.message);
  err.name = e.name;
  return Object.assign(err, e.fields);
}

export class PgliteThreadSql implements Sql {
  readonly kind = 'pglite' as const;
  /** See `Sql.commitChecksStatements` (the thread's PgliteSql refuses the COMMIT; `tx` below). */
  readonly commitChecksStatements = true;
  private readonly pending = new Map<number, Pending>();
  /**
   * The parameter types of the statements the thread has prepared, by text: array parameters of
   * these go as their literals (`literalArrays`), one string to clone instead of an array.
   * Forgotten whenever a statement that may change the schema is sent (the thread then forgets
   * its prepared statements too).
   */
  private readonly paramTypes = new Map<string, readonly number[]>();
  /** Counts the times `paramTypes` was forgotten: a reply to a query sent before then brings none. */
  private typesGeneration = 0;
  private nextId = 1;
  private nextTx = 1;
  private stopped: Error | null = null;
  private closing = false;

  private constructor(
    private readonly worker: Worker,
    private readonly onStopped: ((err: Error) => void) | undefined,
  ) {
    worker.on('message', (m: Reply) => this.settle(m));
    worker.on('error', (err) => this.stop(err.message));
    worker.on('exit', (code) => this.stop(`exit code ${code}`));
  }

  /** Starts the thread and opens the database in it; resolves once it answers. */
  static async open(opts: ThreadOptions = {}): Promise<PgliteThreadSql> {
    const worker = new Worker(bootstrap(), {
      eval: true,
      workerData: { dataDir: opts.dataDir } satisfies HostData,
    });
    const ready = new Promise<void>((resolve, reject) => {
      const onMessage = (m: Reply) => {
        if (m.id !== 0) return;
        worker.off('message', onMessage);
        worker.off('exit', onExit);
        if (m.ok) resolve();
        else reject(toError(m.error));
      };
      const onExit = (code: number) => reject(new Error(`the database thread exited (${code})`));
      worker.on('message', onMessage);
      worker.once('exit', onExit);
    });
    try {
      await ready;
    } catch (err) {
      await worker.terminate();
      throw err;
    }
    return new PgliteThreadSql(worker, opts.onStopped);
  }

  private settle(m: Reply): void {
    const p = this.pending.get(m.id);
    if (!p) return;
    this.pending.delete(m.id);
    if (m.ok) {
      if (
        m.types &&
        p.text !== undefined &&
        p.generation === this.typesGeneration &&
        !this.paramTypes.has(p.text)
      ) {
        if (this.paramTypes.size >= MAX_TYPED) this.paramTypes.clear();
        this.paramTypes.set(p.text, m.types);
      }
      p.resolve(m.value);
    } else p.reject(toError(m.error));
  }

  private stop(reason: string): void {
    if (this.stopped) return;
    this.stopped = new EmbeddedDatabaseStopped(reason);
    for (const p of this.pending.values()) p.reject(this.stopped);
    this.pending.clear();
    if (!this.closing) this.onStopped?.(this.stopped);
  }

  /** Posts a request; `unsent` hears of one refused before it left (the thread never saw it). */
  private call<T>(req: Call, unsent?: (err: Error) => void): Promise<T> {
    if (this.stopped) return Promise.reject(this.stopped);
    const id = this.nextId++;
    let text: string | undefined;
    if (req.op === 'query') {
      text = req.text;
      const types = this.paramTypes.get(text);
      if (types && req.params) req = { ...req, params: literalArrays(req.params, types) };
      else if (!ROW_STATEMENT.test(text)) this.forgetTypes();
    } else if (req.op === 'exec') this.forgetTypes();
    const generation = this.typesGeneration;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject, text, generation });
      try {
        this.worker.postMessage({ ...req, id });
      } catch (err) {
        // A parameter that cannot be cloned (a function, a symbol): refused before it left.
        this.pending.delete(id);
        unsent?.(err as Error);
        reject(err as Error);
      }
    });
  }

  private forgetTypes(): void {
    this.paramTypes.clear();
    this.typesGeneration++;
  }

  query<R>(text: string, params?: unknown[]): Promise<QueryResult<R>> {
    return this.call({ op: 'query', text, params });
  }

  exec(script: string): Promise<void> {
    return this.call({ op: 'exec', script });
  }

  /**
   * The transaction's first statements go out with its BEGIN, without waiting for it (the host
   * runs them once the transaction is open, in order): one round trip to the thread fewer per
   * transaction. A BEGIN that fails fails them, and the transaction, with its error.
   *
   * A statement that failed refuses the COMMIT even when `fn` did not await it
   * (`commitChecksStatements`): one that failed in the thread is refused there (PgliteSql's
   * `tx`), one that never left (a parameter that cannot be cloned) here.
   */
  async tx<T>(fn: (q: Queryable) => Promise<T>): Promise<T> {
    const tx = this.nextTx++;
    let unsent: Error | null = null;
    const refused = (err: Error) => (unsent ??= err);
    const begun = this.call<void>({ op: 'begin', tx });
    // Its failure reaches `fn` through the statements, and the caller below.
    begun.catch(() => undefined);
    const q: Queryable = {
      query: (text, params) => this.call({ op: 'query', text, params, tx }, refused),
      exec: (script) => this.call({ op: 'exec', script, tx }, refused),
    };
    let out: T;
    try {
      out = await fn(q);
      await begun;
      if (unsent) throw unsent;
    } catch (err) {
      if (!this.stopped) await this.call({ op: 'end', tx, commit: false });
      throw err;
    }
    await this.call({ op: 'end', tx, commit: true });
    return out;
  }

  async ping(): Promise<void> {
    await this.query('SELECT 1');
  }

  async close(): Promise<void> {
    if (this.stopped) return;
    this.closing = true;
    const ended = new Promise<void>((resolve) => this.worker.once('exit', () => resolve()));
    try {
      await this.call({ op: 'close' });
      // The host closes its port after answering and its thread ends by itself; terminate only
      // a thread that does not (a close that failed, or one still busy after 5 s).
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<'late'>((r) => (timer = setTimeout(() => r('late'), 5000)));
      const how = await Promise.race([ended, late]);
      clearTimeout(timer);
      if (how === 'late') await this.worker.terminate();
    } catch (err) {
      await this.worker.terminate();
      throw err;
    }
  }
}
