/**
 * Admin routes of the wallet (scope wallet:read / wallet:write): currencies, earning rules,
 * loyalty tiers, grant and deduct. Every route is served under the three path forms SPEC.md lists:
 * `/v1/tenants/{tenant_id}/wallet/...`, `/v1/tenants/wallet/...?tenant_id`, `/v1/wallet/...?tenant_id`.
 */
import { randomUUID } from 'node:crypto';
import type { Sql } from '../../adapters/sql/types';
import type { Clock } from '../../core/clock';
import {
  createRule,
  deleteRule,
  getRule,
  listRules,
  updateRule,
  validateRule,
} from '../../core/wallet/earning';
import { toTier } from '../../core/wallet/tiers';
import type { Currency, Wallet } from '../../core/wallet/wallet';
import { scope } from '../../http/auth/scopes';
import { answerRefusals } from '../../http/domain-errors';
import { errors } from '../../http/errors';
import { route, type RouteSpec } from '../../http/route';

export interface WalletAdminDeps {
  sql: Sql;
  wallet: Wallet;
  clock: Clock;
}

const read = { kind: 'admin', scope: scope.read('wallet'), tenant: true } as const;
const write = { kind: 'admin', scope: scope.write('wallet'), tenant: true } as const;

/**
 * The three admin path forms of a wallet route declared at `/v1/wallet<suffix>` (e.g.
 * `/v1/wallet/currencies/:currency_id`), in this order: `/v1/tenants/:tenant_id/wallet<suffix>`,
 * `/v1/tenants/wallet<suffix>`, `/v1/wallet<suffix>`.
 */
export function walletForms(spec: RouteSpec): RouteSpec[] {
  const suffix = spec.path.replace(/^\/v1\/wallet/, '');
  return [`/v1/tenants/:tenant_id/wallet${suffix}`, `/v1/tenants/wallet${suffix}`, `/v1/wallet${suffix}`].map(
    (path) => ({ ...spec, path }),
  );
}

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

export function walletAdminRoutes(deps: WalletAdminDeps): RouteSpec[] {
  const { sql, clock } = deps;
  const common = { gateway: 'admin', tag: 'Wallet' } as const;
  const now = () => new Date(clock.now()).toISOString();
  const mustCurrency = async (tenantId: string, id: string) => {
    const c = await deps.wallet.currency(sql, tenantId, id);
    if (!c) throw errors.notFound(`Currency ${id} not found`);
    return c;
  };
  const checkCurrency = async (tenantId: string, id: string | undefined) => {
    if (id !== undefined && !(await deps.wallet.currency(sql, tenantId, id))) {
      throw errors.validation(`body.currency_id: currency ${id} does not exist`);
    }
  };

  const movement = (kind: 'grant' | 'deduct'): RouteSpec[] =>
    walletForms(
      route({
        ...common,
        method: 'POST',
        path: `/v1/wallet/${kind}`,
        summary:
          kind === 'grant'
            ? 'Credit a user (idempotent with idempotency_key)'
            : 'Debit a user; never below zero (idempotent)',
        auth: write,
        body: kind === 'grant' ? ('wallet.grant' as const) : ('wallet.deduct' as const),
        response: 'wallet.movement.view',
        // 402 INSUFFICIENT_BALANCE: a deduct below zero.
        ...(kind === 'deduct' ? { errors: [402] } : {}),
        // Wallet errors (402 INSUFFICIENT_BALANCE, 409, 400) answer as http/domain-errors.ts maps them.
        handler: async ({ body: b, tenant }) => {
          const r = await sql.tx((q) =>
            deps.wallet[kind === 'grant' ? 'credit' : 'debit'](q, {
              tenant_id: tenant.id,
              user_id: b.user_id,
              currency_id: b.currency_id,
              amount: b.amount,
              source_type: b.source_type ?? (kind === 'grant' ? 'manual_grant' : 'manual_deduct'),
              source_ref: b.source_ref ?? null,
              description: b.description ?? null,
              idempotency_key: b.idempotency_key ?? null,
              now: clock.now(),
              // An admin deduct is a correction (core/wallet/wallet.ts `debitRefusal`).
              purpose: 'correction',
            }),
          );
          return {
            transaction_id: r.transaction_id,
            balance_after: r.balance_after,
            was_cached: !r.created,
          };
        },
      }),
    );

  return [
    // ---- currencies ----
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
    // ---- earning rules ----
    ...walletForms(
      route({
        ...common,
        method: 'POST',
        path: '/v1/wallet/earning-rules',
        summary: 'Create an earning rule',
        response: 'earning_rule.view',
        auth: write,
        body: 'earning_rule.create',
        status: 201,
        handler: async ({ tenant, body: b }) => {
          const err = validateRule(b);
          if (err) throw errors.validation(err);
          await checkCurrency(tenant.id, b.currency_id);
          return createRule(
            sql,
            tenant.id,
            {
              name: b.name,
              currency_id: b.currency_id,
              event_type: b.event_type,
              event_filter: b.event_filter ?? null,
              calculation: b.calculation,
              max_per_event: b.max_per_event ?? null,
              max_per_day: b.max_per_day ?? null,
              max_per_week: b.max_per_week ?? null,
              priority: b.priority ?? 0,
              active: b.active ?? true,
            },
            clock.now(),
          );
        },
      }),
    ),
    ...walletForms(
      route({
        ...common,
        method: 'GET',
        path: '/v1/wallet/earning-rules',
        summary: 'List earning rules (highest priority first)',
        response: 'earning_rule.list.view',
        auth: read,
        handler: async ({ tenant }) => {
          const rules = await listRules(sql, tenant.id);
          return { earning_rules: rules, total: rules.length };
        },
      }),
    ),
    ...walletForms(
      route({
        ...common,
        method: 'GET',
        path: '/v1/wallet/earning-rules/:rule_id',
        summary: 'Get an earning rule',
        response: 'earning_rule.view',
        auth: read,
        handler: async ({ tenant, params }) => {
          const r = await getRule(sql, tenant.id, params.rule_id);
          if (!r) throw errors.notFound(`Earning rule ${params.rule_id} not found`);
          return r;
        },
      }),
    ),
    ...walletForms(
      route({
        ...common,
        method: 'PUT',
        path: '/v1/wallet/earning-rules/:rule_id',
        summary: 'Update an earning rule (changed fields, e.g. max_per_day, active)',
        response: 'earning_rule.view',
        auth: write,
        body: 'earning_rule.update',
        handler: async ({ tenant, params, body: b }) => {
          const cur = await getRule(sql, tenant.id, params.rule_id);
          if (!cur) throw errors.notFound(`Earning rule ${params.rule_id} not found`);
          const err = validateRule({ ...cur, ...b });
          if (err) throw errors.validation(err);
          await checkCurrency(tenant.id, b.currency_id);
          const updated = await updateRule(sql, tenant.id, params.rule_id, b, clock.now());
          if (!updated) throw errors.notFound(`Earning rule ${params.rule_id} not found`);
          return updated;
        },
      }),
    ),
    ...walletForms(
      route({
        ...common,
        method: 'DELETE',
        path: '/v1/wallet/earning-rules/:rule_id',
        summary: 'Delete an earning rule',
        response: 'earning_rule.view',
        auth: write,
        handler: async ({ tenant, params }) => {
          const r = await deleteRule(sql, tenant.id, params.rule_id);
          if (!r) throw errors.notFound(`Earning rule ${params.rule_id} not found`);
          return r;
        },
      }),
    ),
    // ---- tiers ----
    ...walletForms(
      route({
        ...common,
        method: 'POST',
        path: '/v1/wallet/tiers',
        summary: 'Create a loyalty tier',
        response: 'tier.view',
        auth: write,
        body: 'tier.create',
        status: 201,
        handler: async ({ tenant, body: b }) => {
          await checkCurrency(tenant.id, b.currency_id);
          const r = await sql.query<Parameters<typeof toTier>[0]>(
            `INSERT INTO tiers (tenant_id, id, tier_name, tier_level, min_lifetime_points, currency_id, icon_url, badge_color, benefits, created_at, updated_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10) ON CONFLICT DO NOTHING RETURNING *`,
            [
              tenant.id,
              randomUUID(),
              b.tier_name,
              b.tier_level,
              b.min_lifetime_points,
              b.currency_id,
              b.icon_url ?? null,
              b.badge_color ?? null,
              JSON.stringify(b.benefits ?? {}),
              now(),
            ],
          );
          if (!r.rows[0])
            throw errors.conflict(`A tier of level ${b.tier_level} already exists for ${b.currency_id}`);
          return toTier(r.rows[0]);
        },
      }),
    ),
    ...walletForms(
      route({
        ...common,
        method: 'GET',
        path: '/v1/wallet/tiers',
        summary: 'List loyalty tiers',
        response: 'tier.list.view',
        auth: read,
        handler: async ({ tenant }) => {
          const r = await sql.query<Parameters<typeof toTier>[0]>(
            'SELECT * FROM tiers WHERE tenant_id = $1 ORDER BY currency_id, tier_level',
            [tenant.id],
          );
          return { tiers: r.rows.map(toTier), total: r.rows.length };
        },
      }),
    ),
    ...walletForms(
      route({
        ...common,
        method: 'GET',
        path: '/v1/wallet/tiers/:tier_id',
        summary: 'Get a loyalty tier',
        response: 'tier.view',
        auth: read,
        handler: async ({ tenant, params }) => {
          const r = await sql.query<Parameters<typeof toTier>[0]>(
            'SELECT * FROM tiers WHERE tenant_id = $1 AND id = $2',
            [tenant.id, params.tier_id],
          );
          if (!r.rows[0]) throw errors.notFound(`Tier ${params.tier_id} not found`);
          return toTier(r.rows[0]);
        },
      }),
    ),
    ...walletForms(
      route({
        ...common,
        method: 'PUT',
        path: '/v1/wallet/tiers/:tier_id',
        summary: 'Update a loyalty tier',
        response: 'tier.view',
        auth: write,
        body: 'tier.update',
        handler: async ({ tenant, params, body: b }) => {
          await checkCurrency(tenant.id, b.currency_id);
          const update = () =>
            sql.query<Parameters<typeof toTier>[0]>(
              `UPDATE tiers SET tier_name = COALESCE($3, tier_name), tier_level = COALESCE($4, tier_level),
             min_lifetime_points = COALESCE($5, min_lifetime_points), currency_id = COALESCE($6, currency_id),
             icon_url = CASE WHEN $7::boolean THEN $8 ELSE icon_url END, badge_color = CASE WHEN $9::boolean THEN $10 ELSE badge_color END,
             benefits = COALESCE($11::jsonb, benefits), updated_at = $12
           WHERE tenant_id = $1 AND id = $2 RETURNING *`,
              [
                tenant.id,
                params.tier_id,
                b.tier_name ?? null,
                b.tier_level ?? null,
                b.min_lifetime_points ?? null,
                b.currency_id ?? null,
                b.icon_url !== undefined,
                b.icon_url ?? null,
                b.badge_color !== undefined,
                b.badge_color ?? null,
                b.benefits ? JSON.stringify(b.benefits) : null,
                now(),
              ],
            );
          // Another tier of the currency took that level meanwhile (the unique key): 409, as the create answers.
          const r = await answerRefusals(update, {
            unique: () => errors.conflict('Another tier of this currency already has that tier_level'),
          });
          if (!r.rows[0]) throw errors.notFound(`Tier ${params.tier_id} not found`);
          return toTier(r.rows[0]);
        },
      }),
    ),
    ...walletForms(
      route({
        ...common,
        method: 'DELETE',
        path: '/v1/wallet/tiers/:tier_id',
        summary: 'Delete a loyalty tier',
        response: 'tier.view',
        auth: write,
        handler: async ({ tenant, params }) => {
          const r = await sql.query<Parameters<typeof toTier>[0]>(
            'DELETE FROM tiers WHERE tenant_id = $1 AND id = $2 RETURNING *',
            [tenant.id, params.tier_id],
          );
          if (!r.rows[0]) throw errors.notFound(`Tier ${params.tier_id} not found`);
          return toTier(r.rows[0]);
        },
      }),
    ),
    // ---- grant and deduct ----
    ...movement('grant'),
    ...movement('deduct'),
  ];
}
