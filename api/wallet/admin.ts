/**
 * Admin routes of the wallet (scope wallet:read / wallet:write), one file per resource:
 * currencies, earning rules, loyalty tiers, grant and deduct. Every route is served under the three
 * path forms SPEC.md lists: `/v1/tenants/{tenant_id}/wallet/...`, `/v1/tenants/wallet/...?tenant_id`,
 * `/v1/wallet/...?tenant_id` (./common.ts `walletForms`).
 */
import type { RouteSpec } from '../../http/route';
import type { WalletAdminDeps } from './common';
import { currencyRoutes } from './currencies';
import { earningRuleRoutes } from './earning-rules';
import { movementRoutes } from './movements';
import { tierRoutes } from './tiers';

export type { WalletAdminDeps } from './common';

export function walletAdminRoutes(deps: WalletAdminDeps): RouteSpec[] {
  return [...currencyRoutes(deps), ...earningRuleRoutes(deps), ...tierRoutes(deps), ...movementRoutes(deps)];
}
