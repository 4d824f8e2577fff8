/**
 * The definition-table helper on a real SQL store (PGlite), through a table of its own: paging
 * with totals (past the end too), filters, patch semantics (undefined leaves, null clears, jsonb),
 * version bumps only on a real change, tenant scoping of every statement, and refused columns.
 */
import type { Sql } from '../../adapters/sql/types';
import { openTestPglite, uniqueName } from '../../tests/support/stack';
import { definitionTable } from './table';

interface Row {
  tenant_id: string;
  id: string;
  name: string;
  note: string | null;
  kind: string;
  config: { a: number };
  version: number;
  created_at: string;
  updated_at: string;
}

const T0 = Date.UTC(2026, 10, 20);

describe('definitionTable [PGlite]', () => {
  let sql: Sql;
  const table = definitionTable<Row, Row>({
    table: 'table_helper_test',
    columns: ['name', 'note', 'kind', 'config'],
    json: ['config'],
    versioned: ['config'],
    toView: (r) => ({ ...r, created_at: new Date(r.created_at).toISOString() }),
  });

  beforeAll(async () => {
    sql = await openTestPglite();
    await sql.query(`CREATE TABLE table_helper_test (
      tenant_id text NOT NULL, id text NOT NULL, name text NOT NULL, note text, kind text NOT NULL,
      config jsonb NOT NULL, version int NOT NULL DEFAULT 1, created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL, PRIMARY KEY (tenant_id, id))`);
  });
  afterAll(() => sql.close());

  async function seed(tenant: string, n: number) {
    for (let i = 0; i < n; i++) {
      await sql.query(`INSERT INTO table_helper_test VALUES ($1, $2, $3, 'n', $4, '{"a":1}', 1, $5, $5)`, [
        tenant,
        `d${i}`,
        `name ${i}`,
        i % 2 ? 'odd' : 'even',
        new Date(T0 + i * 1000).toISOString(),
      ]);
    }
  }

  it('pages in the listing order with the total of the filtered listing, past the end too', async () => {
    const t = uniqueName('t');
    await seed(t, 5);
    await seed(uniqueName('other'), 3);
    const p1 = await table.page(sql, t, { limit: 2, offset: 0 });
    expect(p1.items.map((r) => r.id)).toEqual(['d0', 'd1']);
    expect(p1.total).toBe(5);
    const odd = await table.page(sql, t, { filters: { kind: 'odd' }, limit: 10, offset: 0 });
    expect(odd.items.map((r) => r.id)).toEqual(['d1', 'd3']);
    expect(odd.total).toBe(2);
    expect(await table.page(sql, t, { limit: 2, offset: 10 })).toEqual({ items: [], total: 5 });
    expect((await table.list(sql, t, { kind: undefined })).length).toBe(5);
  });

  it('lists across several tenants, or every tenant for an operator', async () => {
    const [a, b, c] = [uniqueName('a'), uniqueName('b'), uniqueName('c')];
    await seed(a, 2);
    await seed(b, 1);
    await seed(c, 1);
    const two = await table.page(sql, [a, b], { limit: 10, offset: 0 });
    expect(two.total).toBe(3);
    expect(new Set(two.items.map((r) => r.tenant_id))).toEqual(new Set([a, b]));
    const all = await table.list(sql, null, { kind: 'even' });
    expect(all.filter((r) => [a, b, c].includes(r.tenant_id)).length).toBe(3);
    expect((await table.page(sql, [], { limit: 10, offset: 0 })).total).toBe(0);
  });

  it('patches: undefined leaves a column, null clears it, jsonb is written, the version moves on a change only', async () => {
    const t = uniqueName('t');
    await seed(t, 1);
    const a = await table.patch(sql, t, 'd0', { name: 'renamed', note: undefined }, T0 + 5000);
    expect(a).toMatchObject({ name: 'renamed', note: 'n', version: 1 });
    expect(new Date(a!.updated_at).getTime()).toBe(T0 + 5000);
    const same = await table.patch(sql, t, 'd0', { config: { a: 1 } }, T0 + 6000);
    expect(same!.version).toBe(1);
    const changed = await table.patch(sql, t, 'd0', { config: { a: 2 }, note: null }, T0 + 7000);
    expect(changed).toMatchObject({ config: { a: 2 }, note: null, version: 2 });
  });

  it('never reaches another tenant, and answers null for what is not there', async () => {
    const t = uniqueName('t');
    const other = uniqueName('o');
    await seed(t, 1);
    await seed(other, 1);
    expect(await table.get(sql, other, 'd0')).toMatchObject({ tenant_id: other });
    expect(await table.patch(sql, t, 'missing', { name: 'x' }, T0)).toBeNull();
    expect(await table.remove(sql, t, 'd0')).toMatchObject({ tenant_id: t, id: 'd0' });
    expect(await table.get(sql, t, 'd0')).toBeNull();
    expect(await table.get(sql, other, 'd0')).not.toBeNull();
    expect(await table.remove(sql, t, 'd0')).toBeNull();
  });

  it('refuses to patch or filter on a column it does not declare', async () => {
    const t = uniqueName('t');
    await expect(
      table.patch(sql, t, 'd0', { tenant_id: 'x' } as unknown as Partial<Row>, T0),
    ).rejects.toThrow(/cannot patch tenant_id/);
    await expect(table.list(sql, t, { 'id; DROP TABLE x': 'y' } as never)).rejects.toThrow(/cannot filter/);
  });
});
