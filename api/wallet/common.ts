/**
 * What the wallet's admin route files share: the dependencies, the auth rules, the three path
 * forms SPEC.md lists for every wallet route, and the check of a currency a body names.
 */
import type { Queryable, Sql } from '../../adapters/sql/types';
import type { Clock } from '../../core/clock';
import type { Wallet } from '../../core/wallet/wallet';
import { scope } from '../../http/auth/scopes';
import { errors } from '../../http/errors';
import type { RouteSpec } from '../../http/route';

export interface WalletAdminDeps {
  sql: Sql;
  wallet: Wallet;
  clock: Clock;
}

export const read = { kind: 'admin', scope: scope.read('wallet'), tenant: true } as const;
export const write = { kind: 'admin', scope: scope.write('wallet'), tenant: true } as const;
export const common = { gateway: 'admin', tag: 'Wallet' } as const;

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

/** A currency_id in a body must name a currency of the tenant (400 naming the field). */
export async function checkCurrency(
  deps: WalletAdminDeps,
  tenantId: string,
  id: string | undefined,
  q: Queryable = deps.sql,
) {
  if (id !== undefined && !(await deps.wallet.currency(q, tenantId, id))) {
    throw errors.validation(`body.currency_id: currency ${id} does not exist`);
  }
}
