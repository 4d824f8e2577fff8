/**
 * Streak freezes: held per user and definition (`streak_progress.freezes`), used by the engine
 * instead of a break. Granted by the admin route and by reward items of type `streak_freeze`
 * (payload `{streak_id, count}`) through the granting service's holder port, each once per
 * idempotency key; a definition's `config.max_freezes` caps how many a user holds (the grant
 * gives what fits and says so).
 */
import type { Queryable } from '../../adapters/sql/types';
import type { RewardHolder } from '../rewards/grant';
import { getDefinition, StreakError } from './definitions';

export interface FreezeGrant {
  streak_id: string;
  user_id: string;
  requested: number;
  /** Freezes added (less than requested when the cap is reached). */
  granted: number;
  freezes_available: number;
  was_cached: boolean;
}

/** Grants freezes in the caller's transaction, once per `idempotencyKey` (a repeat answers the first result). */
export async function grantFreezes(
  q: Queryable,
  g: {
    tenant_id: string;
    streak_id: string;
    user_id: string;
    count: number;
    idempotency_key: string;
    source_type: string;
    now: number;
  },
): Promise<FreezeGrant> {
  const def = await getDefinition(q, g.tenant_id, g.streak_id);
  if (!def) throw new StreakError('not_found', `Streak definition ${g.streak_id} not found`);
  if (def.status === 'archived')
    throw new StreakError('conflict', `Streak definition ${g.streak_id} is archived; it takes no freezes`);
  await q.query(
    `INSERT INTO streak_progress (tenant_id, streak_id, user_id, current_count, longest_count, run, freezes,
       period_value, qualified, frozen, updated_at)
     VALUES ($1, $2, $3, 0, 0, 0, 0, 0, false, false, $4) ON CONFLICT DO NOTHING`,
    [g.tenant_id, g.streak_id, g.user_id, g.now],
  );
  const cur = await q.query<{ freezes: number }>(
    'SELECT freezes FROM streak_progress WHERE tenant_id = $1 AND streak_id = $2 AND user_id = $3 FOR UPDATE',
    [g.tenant_id, g.streak_id, g.user_id],
  );
  const seen = await q.query<{
    streak_id: string;
    user_id: string;
    requested: number;
    granted: number;
    freezes_after: number;
  }>('SELECT * FROM streak_freeze_grants WHERE tenant_id = $1 AND idempotency_key = $2', [
    g.tenant_id,
    g.idempotency_key,
  ]);
  const prev = seen.rows[0];
  if (prev) {
    if (prev.streak_id !== g.streak_id || prev.user_id !== g.user_id || Number(prev.requested) !== g.count)
      throw new StreakError(
        'conflict',
        `idempotency_key ${g.idempotency_key} was used for another freeze grant`,
      );
    return {
      streak_id: prev.streak_id,
      user_id: prev.user_id,
      requested: Number(prev.requested),
      granted: Number(prev.granted),
      freezes_available: Number(prev.freezes_after),
      was_cached: true,
    };
  }
  const before = Number(cur.rows[0]!.freezes);
  const cap = def.config.max_freezes ?? null;
  const after = cap === null ? before + g.count : Math.max(before, Math.min(cap, before + g.count));
  await q.query(
    'UPDATE streak_progress SET freezes = $4, updated_at = $5 WHERE tenant_id = $1 AND streak_id = $2 AND user_id = $3',
    [g.tenant_id, g.streak_id, g.user_id, after, g.now],
  );
  await q.query(
    `INSERT INTO streak_freeze_grants (tenant_id, idempotency_key, streak_id, user_id, requested, granted, freezes_after, source_type, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
    [
      g.tenant_id,
      g.idempotency_key,
      g.streak_id,
      g.user_id,
      g.count,
      after - before,
      after,
      g.source_type,
      g.now,
    ],
  );
  return {
    streak_id: g.streak_id,
    user_id: g.user_id,
    requested: g.count,
    granted: after - before,
    freezes_available: after,
    was_cached: false,
  };
}

/**
 * The granting service's holder of `streak_freeze` items: the payload names the definition and
 * the count. A definition that is missing or archived, or a malformed payload, makes the grant
 * `failed` (recorded as such in reward_grants), never an error of the granting transaction.
 */
export const streakFreezeHolder: RewardHolder = {
  async hold(q, g) {
    const p = g.item.payload as { streak_id?: unknown; count?: unknown };
    const count = p.count === undefined ? 1 : p.count;
    if (typeof p.streak_id !== 'string' || !Number.isSafeInteger(count) || (count as number) <= 0)
      return 'failed';
    try {
      await grantFreezes(q, {
        tenant_id: g.tenant_id,
        streak_id: p.streak_id,
        user_id: g.user_id,
        count: count as number,
        idempotency_key: `grant:${g.grant_key}`,
        source_type: g.source_type,
        now: g.now,
      });
      return 'credited';
    } catch (err) {
      if (err instanceof StreakError) return 'failed';
      throw err;
    }
  },
};
