/**
 * The definitions of other features that achievement criteria name must exist in the tenant
 * (checked on create and update, in the transaction that writes): a currency (cumulative
 * `metric`), a leaderboard (`leaderboard_id`), a streak definition (`streak_id`). These are
 * reads of definitions at configuration time only; progress never reads another feature's store
 * (it comes through facts, ./progress.ts).
 */
import type { Queryable } from '../../adapters/sql/types';
import type { Reference } from './criteria';

/** Whether the tenant has a currency with this id (active or not). */
async function currencyExists(q: Queryable, tenantId: string, id: string): Promise<boolean> {
  const r = await q.query('SELECT 1 FROM currencies WHERE tenant_id = $1 AND id = $2', [tenantId, id]);
  return r.rowCount > 0;
}

/** Whether the tenant has a leaderboard with this id (any status). */
async function leaderboardExists(q: Queryable, tenantId: string, id: string): Promise<boolean> {
  const r = await q.query('SELECT 1 FROM leaderboards WHERE tenant_id = $1 AND id = $2', [tenantId, id]);
  return r.rowCount > 0;
}

/** Whether the tenant has a streak definition with this id (any status). */
export async function streakExists(q: Queryable, tenantId: string, id: string): Promise<boolean> {
  const r = await q.query('SELECT 1 FROM streak_definitions WHERE tenant_id = $1 AND id = $2', [
    tenantId,
    id,
  ]);
  return r.rowCount > 0;
}

/** The first reference that names nothing in the tenant, as a message naming its field; else null. */
export async function missingReference(
  q: Queryable,
  tenantId: string,
  refs: readonly Reference[],
): Promise<string | null> {
  for (const ref of refs) {
    const exists =
      ref.kind === 'currency'
        ? await currencyExists(q, tenantId, ref.id)
        : ref.kind === 'leaderboard'
          ? await leaderboardExists(q, tenantId, ref.id)
          : await streakExists(q, tenantId, ref.id);
    if (!exists) return `${ref.where}: ${ref.kind} ${ref.id} does not exist`;
  }
  return null;
}
