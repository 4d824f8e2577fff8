/**
 * A tenant-scoped definition table: the SQL every definition resource repeats (row to view, get,
 * page with its total, list, patch, delete), written once. A feature's store declares its table
 * (`definitionTable({...})`) and keeps only what is its own (inserts with their defaults, domain
 * queries). Every statement carries the tenant in its WHERE clause (ARCHITECTURE.md invariant 4).
 *
 * Patch semantics, the same for every resource: a key that is `undefined` leaves the column as it
 * is; `null` sets SQL NULL; a value sets it (a JSON column is written as jsonb). `updated_at` is set
 * to the time given. When the table is versioned, the `version` column grows by one when a
 * versioned column actually changes value (a config change applies to future events only, and
 * caches key on the version).
 *
 * Column and table names come from the declaration in code, never from input: a patch key that is
 * not a declared column is a programming error and throws.
 */
import type { Queryable } from '../../adapters/sql/types';

export interface TableSpec<Row, View> {
  /** The SQL table name. */
  table: string;
  /** The columns a patch may set (besides updated_at and version). */
  columns: readonly (keyof Row & string)[];
  /** Columns stored as jsonb: patched values are JSON-encoded and cast. */
  json?: readonly (keyof Row & string)[];
  /** Columns whose change bumps `version` (the table then has an integer `version` column). */
  versioned?: readonly (keyof Row & string)[];
  /** Columns a listing may filter on besides `columns` (e.g. a status moved by its own route). */
  filterable?: readonly (keyof Row & string)[];
  /** The listing order (default `created_at, id`). */
  order?: string;
  toView(row: Row): View;
}

/** A filter of a listing: column = value, or no condition when the value is undefined. */
export type Filters<Row> = Partial<Record<keyof Row & string, string | number | boolean | undefined>>;

/**
 * Whose definitions a listing reads: one tenant, several (a key that reaches several tenants), or
 * every tenant (`null`: the operator's listing across tenants).
 */
export type TenantScope = string | readonly string[] | null;

export interface Page<View> {
  items: View[];
  total: number;
}

export interface DefinitionTable<Row, View> {
  /** One definition of the tenant, optionally locked (FOR UPDATE) for the rest of the transaction. */
  get(q: Queryable, tenantId: string, id: string, opts?: { lock?: boolean }): Promise<View | null>;
  /** Every definition in the scope matching the filters, in the listing order. */
  list(q: Queryable, scope: TenantScope, filters?: Filters<Row>): Promise<View[]>;
  /** One page of the listing and the total of the filtered listing. */
  page(
    q: Queryable,
    scope: TenantScope,
    opts: { filters?: Filters<Row>; limit: number; offset: number },
  ): Promise<Page<View>>;
  /** Applies a patch (semantics above); null when the definition does not exist. */
  patch(
    q: Queryable,
    tenantId: string,
    id: string,
    changes: Partial<Record<keyof Row & string, unknown>>,
    now: number,
  ): Promise<View | null>;
  /** Deletes a definition; answers what was deleted, or null. */
  remove(q: Queryable, tenantId: string, id: string): Promise<View | null>;
}

export function definitionTable<Row, View>(spec: TableSpec<Row, View>): DefinitionTable<Row, View> {
  const order = spec.order ?? 'created_at, id';
  const settable = new Set<string>(spec.columns);
  const filterable = new Set<string>([...spec.columns, ...(spec.filterable ?? [])]);
  const json = new Set<string>(spec.json ?? []);
  const versioned = new Set<string>(spec.versioned ?? []);
  const one = (rows: Row[]) => (rows[0] ? spec.toView(rows[0]) : null);

  /** The scope's tenant condition and `col = $n` for the defined filters, with their parameters. */
  const where = (scope: TenantScope, filters: Filters<Row> = {}) => {
    const params: unknown[] = [];
    const conds: string[] = [];
    if (typeof scope === 'string') {
      params.push(scope);
      conds.push('tenant_id = $1');
    } else if (scope !== null) {
      params.push(scope);
      conds.push('tenant_id = ANY($1::text[])');
    }
    for (const [col, v] of Object.entries(filters)) {
      if (v === undefined) continue;
      if (!filterable.has(col)) throw new Error(`${spec.table}: cannot filter on ${col}`);
      params.push(v);
      conds.push(`${col} = $${params.length}`);
    }
    return { sql: conds.length ? conds.join(' AND ') : 'TRUE', params };
  };

  return {
    async get(q, tenantId, id, opts = {}) {
      const r = await q.query<Row>(
        `SELECT * FROM ${spec.table} WHERE tenant_id = $1 AND id = $2${opts.lock ? ' FOR UPDATE' : ''}`,
        [tenantId, id],
      );
      return one(r.rows);
    },

    async list(q, scope, filters) {
      const w = where(scope, filters);
      const r = await q.query<Row>(`SELECT * FROM ${spec.table} WHERE ${w.sql} ORDER BY ${order}`, w.params);
      return r.rows.map(spec.toView);
    },

    async page(q, scope, opts) {
      const w = where(scope, opts.filters);
      const n = w.params.length;
      const r = await q.query<Row & { total_count: number }>(
        `SELECT *, count(*) OVER ()::int AS total_count FROM ${spec.table} WHERE ${w.sql}
         ORDER BY ${order} LIMIT $${n + 1} OFFSET $${n + 2}`,
        [...w.params, opts.limit, opts.offset],
      );
      if (r.rows.length > 0 || opts.offset === 0) {
        return { items: r.rows.map(spec.toView), total: r.rows[0]?.total_count ?? 0 };
      }
      // A page past the end has no row to carry the total: count it.
      const c = await q.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM ${spec.table} WHERE ${w.sql}`,
        w.params,
      );
      return { items: [], total: c.rows[0]?.n ?? 0 };
    },

    async patch(q, tenantId, id, changes, now) {
      const params: unknown[] = [tenantId, id, new Date(now).toISOString()];
      const sets = ['updated_at = $3'];
      const bumps: string[] = [];
      for (const [col, v] of Object.entries(changes)) {
        if (v === undefined) continue;
        if (!settable.has(col)) throw new Error(`${spec.table}: cannot patch ${col}`);
        const isJson = json.has(col);
        params.push(isJson && v !== null ? JSON.stringify(v) : v);
        const p = `$${params.length}${isJson ? '::jsonb' : ''}`;
        sets.push(`${col} = ${p}`);
        // The right-hand side of SET sees the row before the update.
        if (versioned.has(col)) bumps.push(`${col} IS DISTINCT FROM ${p}`);
      }
      if (bumps.length > 0)
        sets.push(`version = version + CASE WHEN ${bumps.join(' OR ')} THEN 1 ELSE 0 END`);
      const r = await q.query<Row>(
        `UPDATE ${spec.table} SET ${sets.join(', ')} WHERE tenant_id = $1 AND id = $2 RETURNING *`,
        params,
      );
      return one(r.rows);
    },

    async remove(q, tenantId, id) {
      const r = await q.query<Row>(`DELETE FROM ${spec.table} WHERE tenant_id = $1 AND id = $2 RETURNING *`, [
        tenantId,
        id,
      ]);
      return one(r.rows);
    },
  };
}
