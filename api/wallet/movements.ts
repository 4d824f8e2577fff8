/** Admin routes of balance movements (wallet): grant and deduct. */
import { route, type RouteSpec } from '../../http/route';
import { common, walletForms, write, type WalletAdminDeps } from './common';

export function movementRoutes(deps: WalletAdminDeps): RouteSpec[] {
  const { sql, clock } = deps;
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

  return [...movement('grant'), ...movement('deduct')];
}
