/**
 * The worker-thread side of `PgliteThreadSql` (./pglite-thread.ts): owns one `PgliteSql` and runs
 * the statements the main thread posts, so that PGlite's WASM and its JavaScript stay off the
 * main thread's event loop. It keeps no logic of its own: the session mutex, the transaction
 * handling and the row normalisation are `PgliteSql`'s, so both ways of running PGlite behave alike.
 *
 * Protocol (one `Request` in, one `Reply` out per `id`):
 * - `query` / `exec` with `tx` run inside that open transaction, without it on their own;
 * - `begin` opens the transaction `tx` (an id the main thread chose) and answers once the session
 *   is this transaction's (PgliteSql's mutex queues it behind the others). Statements of `tx` may
 *   follow at once, without waiting for that answer: they wait for the transaction to open and run
 *   in the order they came (a BEGIN that failed fails them too). `end` commits or rolls it back
 *   and answers when done (after a failed BEGIN, with nothing to end, it answers at once);
 * - `close` closes the database (and releases the data directory's lock).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { PgliteSql } from './pglite';
import type { Queryable } from './types';

export type Request =
  | { id: number; op: 'query'; text: string; params?: unknown[]; tx?: number }
  | { id: number; op: 'exec'; script: string; tx?: number }
  | { id: number; op: 'begin'; tx: number }
  | { id: number; op: 'end'; tx: number; commit: boolean }
  | { id: number; op: 'close' };

export type Reply =
  | {
      id: number;
      ok: true;
      value: unknown;
      /** A `query`'s parameter types (OIDs), once prepared: the main thread writes array literals with them. */
      types?: readonly number[];
    }
  | { id: number; ok: false; error: SerializedError };

/** An error as data: its message, name and own fields (SQLSTATE `code`, `detail`, `constraint`...). */
export interface SerializedError {
  message: string;
  name: string;
  fields: Record<string, unknown>;
}

export interface HostData {
  /** Directory of the database, or undefined for one in memory. */
  dataDir?: string;
}

/** Thrown inside a transaction's callback to make PgliteSql roll it back. */
class Rollback extends Error {}

interface OpenTx {
  q: Queryable;
  finish(commit: boolean): void;
  done: Promise<unknown>;
}

export function serializeError(err: unknown): SerializedError {
  if (!(err instanceof Error)) return { message: String(err), name: 'Error', fields: {} };
  const fields: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(err)) {
    if (v === undefined || typeof v === 'function') continue;
    if (typeof v === 'object' && v !== null) continue; // only plain values cross the thread
    fields[k] = v;
  }
  return { message: err.message, name: err.name, fields };
}

async function serve(): Promise<void> {
  const port = parentPort;
  if (!port) throw new Error('pglite-host runs in a worker thread only');
  const data = workerData as HostData;
  const sql = await PgliteSql.open(data.dataDir);
  /** Transactions by the main thread's id, from their `begin` (settled once open) to their `end`. */
  const txs = new Map<number, Promise<OpenTx>>();

  const open = async (): Promise<OpenTx> => {
    let opened!: (q: Queryable) => void;
    const ready = new Promise<Queryable>((r) => (opened = r));
    let finish!: (commit: boolean) => void;
    const ended = new Promise<boolean>((r) => (finish = r));
    const done = sql.tx(async (q) => {
      opened(q);
      if (!(await ended)) throw new Rollback();
    });
    // A BEGIN that fails rejects `done` before `ready` resolves.
    const q = await Promise.race([ready, done.then(() => Promise.reject(new Error('BEGIN failed')))]);
    return { q, finish, done };
  };

  const begin = async (id: number): Promise<void> => {
    if (txs.has(id)) throw new Error(`transaction ${id} is open already`);
    const t = open();
    txs.set(id, t);
    await t;
  };

  const end = async (id: number, commit: boolean): Promise<void> => {
    const opening = txs.get(id);
    if (!opening) throw new Error(`no open transaction ${id}`);
    txs.delete(id);
    let t: OpenTx;
    try {
      t = await opening;
    } catch {
      return; // its BEGIN failed (and said so): nothing to end
    }
    t.finish(commit);
    try {
      await t.done;
    } catch (err) {
      if (!(err instanceof Rollback)) throw err;
    }
  };

  const target = async (tx: number | undefined): Promise<Queryable> => {
    if (tx === undefined) return sql;
    const t = txs.get(tx);
    if (!t) throw new Error(`no open transaction ${tx}`);
    return (await t).q;
  };

  const run = async (m: Request): Promise<unknown> => {
    switch (m.op) {
      case 'query':
        return (await target(m.tx)).query(m.text, m.params);
      case 'exec':
        return (await target(m.tx)).exec(m.script);
      case 'begin':
        return begin(m.tx);
      case 'end':
        return end(m.tx, m.commit);
      case 'close':
        for (const id of [...txs.keys()]) await end(id, false);
        await sql.close();
        return undefined;
    }
  };

  port.on('message', (m: Request) => {
    run(m).then(
      (value) => {
        const types = m.op === 'query' ? sql.paramTypes(m.text) : undefined;
        port.postMessage({ id: m.id, ok: true, value, ...(types ? { types } : {}) } satisfies Reply);
        // Closed: let the thread end on its own once the answer is out (no terminate needed).
        if (m.op === 'close') port.close();
      },
      (err: unknown) => port.postMessage({ id: m.id, ok: false, error: serializeError(err) } satisfies Reply),
    );
  });
  port.postMessage({ id: 0, ok: true, value: 'ready' } satisfies Reply);
}

serve().catch((err: unknown) => {
  parentPort?.postMessage({ id: 0, ok: false, error: serializeError(err) } satisfies Reply);
});
