/**
 * ARCHITECTURE.md invariant 3, checked straight in SQL by the scenario tests: every balance equals
 * the sum of its ledger rows and, where asked, its lifetime_earned the sum of its credits.
 */
import type { Queryable } from '../../adapters/sql/types';

/**
 * The balances of the tenants that break the invariant (none when it holds). `lifetime` also
 * checks lifetime_earned against the ledger's credits (features whose refunds are credits that do
 * not count as earned leave it off).
 */
export async function walletViolations(
  sql: Queryable,
  tenants: string | string[],
  opts: { lifetime?: boolean } = {},
): Promise<unknown[]> {
  const lifetime = opts.lifetime
    ? ' OR b.lifetime_earned <> COALESCE(sum(l.amount) FILTER (WHERE l.amount > 0), 0)'
    : '';
  const r = await sql.query(
    `SELECT b.tenant_id, b.user_id, b.currency_id, b.available, b.lifetime_earned,
            COALESCE(sum(l.amount), 0) AS total, COALESCE(sum(l.amount) FILTER (WHERE l.amount > 0), 0) AS credits
     FROM balances b
     LEFT JOIN ledger l ON l.tenant_id = b.tenant_id AND l.user_id = b.user_id AND l.currency_id = b.currency_id
     WHERE b.tenant_id = ANY($1::text[])
     GROUP BY b.tenant_id, b.user_id, b.currency_id, b.available, b.lifetime_earned
     HAVING b.available <> COALESCE(sum(l.amount), 0)${lifetime}`,
    [Array.isArray(tenants) ? tenants : [tenants]],
  );
  return r.rows;
}
