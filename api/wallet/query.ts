/**
 * Query routes of the wallet: balances, one balance, transactions and the tier view, in the long
 * form (`/v1/wallet/{tenant_id}/...`: tenant JWT or signed request) and the short form (tenant from
 * the JWT). An end-user token reads only its own user; `user_id` defaults to it.
 */
import type { Sql } from '../../adapters/sql/types';
import type { Tenant } from '../../core/tenancy/store';
import { userTierView } from '../../core/wallet/tiers';
import { errors } from '../../http/errors';
import { route, type RouteRequest, type RouteSpec } from '../../http/route';

const short = { kind: 'tenant', signed: false } as const;
const long = { kind: 'tenant', signed: true } as const;

/** The user a wallet query is about: `user_id`, defaulting to an end-user token's own user. */
export function queriedUser(req: RouteRequest<unknown, { user_id?: string }>): string {
  const u = req.query.user_id ?? (req.principal?.kind === 'user' ? req.principal.userId : undefined);
  if (!u) throw errors.validation('query.user_id is required');
  return u;
}

interface BalanceRow {
  currency_id: string;
  currency_name: string;
  currency_symbol: string | null;
  available: number;
  lifetime_earned: number;
}

interface TxRow {
  id: string;
  currency_id: string;
  amount: number;
  balance_after: number;
  source_type: string;
  source_ref: string | null;
  description: string | null;
  created_at: number;
}

export function walletQueryRoutes(deps: { sql: Sql }): RouteSpec[] {
  const { sql } = deps;
  const balances = async (tenantId: string, userId: string, currencyId?: string): Promise<BalanceRow[]> => {
    const r = await sql.query<BalanceRow>(
      `SELECT c.id AS currency_id, c.name AS currency_name, c.symbol AS currency_symbol,
              COALESCE(b.available, 0) AS available, COALESCE(b.lifetime_earned, 0) AS lifetime_earned
       FROM currencies c LEFT JOIN balances b ON b.tenant_id = c.tenant_id AND b.currency_id = c.id AND b.user_id = $2
       WHERE c.tenant_id = $1 AND (c.active OR b.available IS NOT NULL) AND ($3::text IS NULL OR c.id = $3)
       ORDER BY c.id`,
      [tenantId, userId, currencyId ?? null],
    );
    return r.rows.map((x) => ({
      ...x,
      available: Number(x.available),
      lifetime_earned: Number(x.lifetime_earned),
    }));
  };
  const transactions = async (
    tenantId: string,
    q: { currency_id?: string; limit: number; offset: number },
    userId: string,
  ) => {
    const where = 'tenant_id = $1 AND user_id = $2 AND ($3::text IS NULL OR currency_id = $3)';
    const params = [tenantId, userId, q.currency_id ?? null];
    const [rows, total] = await Promise.all([
      sql.query<TxRow>(`SELECT * FROM ledger WHERE ${where} ORDER BY seq DESC LIMIT $4 OFFSET $5`, [
        ...params,
        q.limit,
        q.offset,
      ]),
      sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM ledger WHERE ${where}`, params),
    ]);
    return {
      transactions: rows.rows.map((t) => ({
        id: t.id,
        currency_id: t.currency_id,
        amount: Number(t.amount),
        balance_after: Number(t.balance_after),
        source_type: t.source_type,
        source_ref: t.source_ref,
        description: t.description,
        created_at: new Date(Number(t.created_at)).toISOString(),
      })),
      total: total.rows[0]?.n ?? 0,
    };
  };
  const common = { gateway: 'query', method: 'GET', tag: 'Wallet' } as const;
  const view = async (req: RouteRequest<unknown, { user_id?: string }, Tenant>) => {
    const user = queriedUser(req);
    return { tenant_id: req.tenant.id, user_id: user, balances: await balances(req.tenant.id, user) };
  };
  const tier = (req: RouteRequest<unknown, { user_id?: string }, Tenant>) =>
    userTierView(sql, req.tenant.id, queriedUser(req));

  return [
    // `/v1/wallet/balances/<x>` (x = balances, transactions or tier) also matches a long form with
    // tenant_id "balances": a reserved tenant id, which the long forms pass on (http/route.ts
    // `reservedTenantIds`), so such a URL is always the balance of the currency <x>. Listed first
    // too, so the router and the document's path order agree without that rule.
    route({
      ...common,
      path: '/v1/wallet/balances/:currency_id',
      summary: "A user's balance in one currency",
      response: 'wallet.balance.view',
      auth: short,
      query: 'wallet.user.query',
      handler: async (req) => {
        const b = (await balances(req.tenant.id, queriedUser(req), req.params.currency_id))[0];
        if (!b) throw errors.notFound(`Currency ${req.params.currency_id} not found`);
        return b;
      },
    }),
    route({
      ...common,
      path: '/v1/wallet/:tenant_id/balances',
      summary: "A user's balances (long form)",
      response: 'wallet.balances.view',
      auth: long,
      query: 'wallet.user.query',
      handler: view,
    }),
    route({
      ...common,
      path: '/v1/wallet/balances',
      summary: "A user's balances",
      response: 'wallet.balances.view',
      auth: short,
      query: 'wallet.user.query',
      handler: view,
    }),
    route({
      ...common,
      path: '/v1/wallet/:tenant_id/transactions',
      summary: "A user's transactions, newest first (long form: an array; default 100, max 1000)",
      response: 'transaction.array.view',
      auth: long,
      query: 'wallet.tx.long.query',
      handler: async (req) => (await transactions(req.tenant.id, req.query, queriedUser(req))).transactions,
    }),
    route({
      ...common,
      path: '/v1/wallet/transactions',
      summary: "A user's transactions, newest first ({transactions, total}; default 50, max 100)",
      response: 'transaction.list.view',
      auth: short,
      query: 'wallet.tx.short.query',
      handler: async (req) => transactions(req.tenant.id, req.query, queriedUser(req)),
    }),
    route({
      ...common,
      path: '/v1/wallet/:tenant_id/tier',
      summary: "A user's loyalty tier, or null (long form)",
      response: 'tier.user.view',
      auth: long,
      query: 'wallet.user.query',
      handler: tier,
    }),
    route({
      ...common,
      path: '/v1/wallet/tier',
      summary: "A user's loyalty tier, or null",
      response: 'tier.user.view',
      auth: short,
      query: 'wallet.user.query',
      handler: tier,
    }),
  ];
}
