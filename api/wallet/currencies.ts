/** Admin routes of currencies (wallet): create, list, get, update, deactivate. */
import type { Currency } from '../../core/wallet/wallet';
import { errors } from '../../http/errors';
import { route, type RouteSpec } from '../../http/route';
import { common, read, walletForms, write, type WalletAdminDeps } from './common';

const presentCurrency = (c: Currency) => ({
  id: c.id,
  tenant_id: c.tenant_id,
  name: c.name,
  symbol: c.symbol,
  is_spendable: c.is_spendable,
  decimal_places: c.decimal_places,
  active: c.active,
  created_at: new Date(c.created_at).toISOString(),
  updated_at: new Date(c.updated_at).toISOString(),
});

export function currencyRoutes(deps: WalletAdminDeps): RouteSpec[] {
  const { sql, clock } = deps;
  const now = () => new Date(clock.now()).toISOString();
  const mustCurrency = async (tenantId: string, id: string) => {
    const c = await deps.wallet.currency(sql, tenantId, id);
    if (!c) throw errors.notFound(`Currency ${id} not found`);
    return c;
  };
  return [
    ...walletForms(
      route({
        ...common,
        method: 'POST',
        path: '/v1/wallet/currencies',
        summary: 'Create a currency',
        response: 'currency.view',
        auth: write,
        body: 'currency.create',
        status: 201,
        handler: async ({ body: b, tenant }) => {
          const r = await sql.query<Currency>(
            `INSERT INTO currencies (tenant_id, id, name, symbol, is_spendable, decimal_places, created_at, updated_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $7) ON CONFLICT DO NOTHING RETURNING *`,
            [tenant.id, b.id, b.name, b.symbol ?? null, b.is_spendable, b.decimal_places, now()],
          );
          if (!r.rows[0]) throw errors.conflict(`Currency ${b.id} already exists`);
          return presentCurrency(r.rows[0]);
        },
      }),
    ),
    ...walletForms(
      route({
        ...common,
        method: 'GET',
        path: '/v1/wallet/currencies',
        summary: 'List currencies',
        response: 'currency.list.view',
        auth: read,
        handler: async ({ tenant }) => {
          const r = await sql.query<Currency>('SELECT * FROM currencies WHERE tenant_id = $1 ORDER BY id', [
            tenant.id,
          ]);
          return { currencies: r.rows.map(presentCurrency), total: r.rows.length };
        },
      }),
    ),
    ...walletForms(
      route({
        ...common,
        method: 'GET',
        path: '/v1/wallet/currencies/:currency_id',
        summary: 'Get a currency',
        response: 'currency.view',
        auth: read,
        handler: async ({ tenant, params }) =>
          presentCurrency(await mustCurrency(tenant.id, params.currency_id)),
      }),
    ),
    ...walletForms(
      route({
        ...common,
        method: 'PUT',
        path: '/v1/wallet/currencies/:currency_id',
        summary: 'Update a currency (name, symbol, active, ...)',
        response: 'currency.view',
        auth: write,
        body: 'currency.update',
        handler: async ({ tenant, params, body: b }) => {
          const r = await sql.query<Currency>(
            `UPDATE currencies SET name = COALESCE($3, name), symbol = CASE WHEN $4::boolean THEN $5 ELSE symbol END,
             is_spendable = COALESCE($6, is_spendable), decimal_places = COALESCE($7, decimal_places), active = COALESCE($8, active), updated_at = $9
           WHERE tenant_id = $1 AND id = $2 RETURNING *`,
            [
              tenant.id,
              params.currency_id,
              b.name ?? null,
              b.symbol !== undefined,
              b.symbol ?? null,
              b.is_spendable ?? null,
              b.decimal_places ?? null,
              b.active ?? null,
              now(),
            ],
          );
          if (!r.rows[0]) throw errors.notFound(`Currency ${params.currency_id} not found`);
          return presentCurrency(r.rows[0]);
        },
      }),
    ),
    ...walletForms(
      route({
        ...common,
        method: 'DELETE',
        path: '/v1/wallet/currencies/:currency_id',
        summary: 'Deactivate a currency (balances and ledger are kept)',
        response: 'currency.view',
        auth: write,
        handler: async ({ tenant, params }) => {
          const r = await sql.query<Currency>(
            'UPDATE currencies SET active = false, updated_at = $3 WHERE tenant_id = $1 AND id = $2 RETURNING *',
            [tenant.id, params.currency_id, now()],
          );
          if (!r.rows[0]) throw errors.notFound(`Currency ${params.currency_id} not found`);
          return presentCurrency(r.rows[0]);
        },
      }),
    ),
  ];
}
