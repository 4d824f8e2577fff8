/**
 * The batch-state helper of pipeline steps (issue 13, seam 1), also used by reactions to facts in
 * core/ (achievements; re-exported by processors/pipeline/batch-state.ts): the per-key state a step reads,
 * changes and writes back for a whole batch, in three moves that every step does the same way:
 *
 *   1. `lock(q, keys)`: one statement reads the rows of the batch's keys and locks them FOR
 *      UPDATE in key order (the ORDER BY of the key columns: one order for every transaction,
 *      so two batches that touch the same rows wait for each other instead of deadlocking, which
 *      is what happened when they were locked in each batch's event order, issue 7);
 *   2. the step computes the new values in memory (pure code, no SQL per event);
 *   3. `upsert(q, rows)`: one set-based statement writes every changed row (`unnest` of one array
 *      per column, in key order), inserting new keys and merging existing ones per column:
 *      `replace` (the new value) or `add` (the stored value plus the new one).
 *
 * A table is described once (`BatchStateSpec`): its name, key columns and value columns with their
 * SQL types. Numeric columns come back as numbers (pg returns bigint as a string).
 */
import type { Queryable } from '../adapters/sql/types';
import { write } from './write-behind';

export type SqlType = 'text' | 'bigint' | 'integer' | 'int' | 'float8' | 'double precision' | 'boolean';

export interface BatchStateSpec<R> {
  /** The table (an identifier from code, never from input). */
  table: string;
  /** The key columns, in lock order (the table's primary key). */
  keys: ReadonlyArray<{ column: keyof R & string; type: SqlType }>;
  /** The value columns and how a write merges into an existing row. */
  values: ReadonlyArray<{ column: keyof R & string; type: SqlType; merge: 'replace' | 'add' }>;
}

const NUMERIC = new Set<SqlType>(['bigint', 'integer', 'int', 'float8', 'double precision']);
const IDENT = /^[a-z_][a-z0-9_]*$/;

export class BatchState<R extends object> {
  /** The statement of `lock` (its plan is checked by tests/contract/batch-state-plan.test.ts). */
  readonly lockSql: string;
  private readonly upsertSql: string;
  private readonly numeric: Array<keyof R & string>;
  private readonly keyCols: string[];

  constructor(readonly spec: BatchStateSpec<R>) {
    const all = [...spec.keys, ...spec.values];
    for (const name of [spec.table, ...all.map((c) => c.column)])
      if (!IDENT.test(name))
        throw new Error(`batch state: ${JSON.stringify(name)} is not a plain identifier`);
    if (spec.keys.length === 0) throw new Error(`batch state of ${spec.table}: no key columns`);
    const t = spec.table;
    const keyCols = spec.keys.map((k) => k.column);
    this.keyCols = keyCols;
    const params = (cols: ReadonlyArray<{ type: SqlType }>) =>
      cols.map((c, i) => `$${i + 1}::${c.type}[]`).join(', ');
    // The row's key comes back as its position among the keys sent (k.i): the key columns' text
    // is not sent back, decoded and copied across the database thread once more (issue 19).
    this.lockSql =
      `SELECT k.i${spec.values.map((c) => `, s.${c.column}`).join('')} FROM ${t} s\n` +
      ` JOIN unnest(${params(spec.keys)}) WITH ORDINALITY AS k(${keyCols.join(', ')}, i)\n` +
      `   ON ${keyCols.map((c) => `s.${c} = k.${c}`).join(' AND ')}\n` +
      ` ORDER BY ${keyCols.map((c) => `s.${c}`).join(', ')} FOR UPDATE OF s`;
    const set = spec.values.map((v) =>
      v.merge === 'add'
        ? `${v.column} = ${t}.${v.column} + EXCLUDED.${v.column}`
        : `${v.column} = EXCLUDED.${v.column}`,
    );
    this.upsertSql =
      `INSERT INTO ${t} (${all.map((c) => c.column).join(', ')})\n` +
      ` SELECT * FROM unnest(${params(all)})\n` +
      ` ON CONFLICT (${keyCols.join(', ')}) ` +
      (set.length ? `DO UPDATE SET ${set.join(', ')}` : 'DO NOTHING');
    this.numeric = all.filter((c) => NUMERIC.has(c.type)).map((c) => c.column);
  }

  /** The identity of a key: its key columns joined by NUL (NUL cannot occur in a Postgres text). */
  id(key: Partial<R>): string {
    const k = key as Record<string, unknown>;
    const cols = this.keyCols;
    let id = String(k[cols[0]]);
    for (let i = 1; i < cols.length; i++) id += '\u0000' + String(k[cols[i]]);
    return id;
  }

  /** Unique keys, in their first occurrence's order. */
  private unique<T extends Partial<R>>(items: readonly T[]): T[] {
    const byId = new Map<string, T>();
    for (const x of items) {
      const id = this.id(x);
      if (!byId.has(id)) byId.set(id, x);
    }
    return [...byId.values()];
  }

  /**
   * The stored rows of these keys (absent keys are missing from the map), locked FOR UPDATE in key
   * order until the transaction ends. Keys may repeat. Returns rows by `id`.
   *
   * The statement's ORDER BY sets the lock order (Postgres locks the rows after sorting them), so
   * the keys are sent unsorted: sorting them here too cost a sort of every batch's keys per table
   * (docs/performance.md, issue 19, nineteenth pass).
   */
  async lock(q: Queryable, keys: readonly Partial<R>[]): Promise<Map<string, R>> {
    if (keys.length === 0) return new Map();
    const unique = this.unique(keys);
    const r = await q.query<Record<string, unknown>>(
      this.lockSql,
      this.spec.keys.map((c) => unique.map((k) => (k as Record<string, unknown>)[c.column])),
    );
    const out = new Map<string, R>();
    for (const found of r.rows) {
      const key = unique[Number(found.i) - 1] as Record<string, unknown>;
      const row: Record<string, unknown> = {};
      for (const c of this.keyCols) row[c] = key[c];
      for (const c of this.spec.values) row[c.column] = found[c.column];
      for (const c of this.numeric) row[c] = Number(row[c]);
      out.set(this.id(row as Partial<R>), row as R);
    }
    return out;
  }

  /**
   * Writes rows in one statement, in key order: new keys are inserted, existing ones merged per
   * value column. Keys must be unique here (a repeated key makes Postgres refuse the statement:
   * "ON CONFLICT DO UPDATE command cannot affect row a second time").
   */
  async upsert(q: Queryable, rows: readonly R[]): Promise<void> {
    if (rows.length === 0) return;
    const sorted = [...rows]
      .map((row) => [this.id(row), row] as const)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([, row]) => row as Record<string, unknown>);
    // Nothing is read back: on a write-behind transaction, the statement is sent without waiting.
    await write(
      q,
      this.upsertSql,
      [...this.spec.keys, ...this.spec.values].map((c) => sorted.map((row) => row[c.column])),
    );
  }
}
