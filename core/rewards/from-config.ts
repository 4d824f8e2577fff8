/**
 * The one grant-from-config path: reward config -> the items it gives each recipient -> a grant of
 * those items with an idempotency key. Leaderboard payouts (rank -> rank tiers) and level rewards
 * (level -> milestone and threshold tiers) use it; streaks, achievements, coupons and wheels will.
 *
 * The caller says, per award, who receives, under which grant key and source, and how to read the
 * config for it (`pick`: the config's item ids for this award). One read of the config and one of
 * all the items the awards name, then one grant per award that has items, in the awards' order,
 * through the granting service (core/rewards/grant.ts; idempotent on `grant_key`). What could not
 * be granted is reported, never thrown: the config does not exist (nothing granted), items it
 * names do not exist (left out), a grant failed (recorded as failed in reward_grants).
 */
import type { Queryable } from '../../adapters/sql/types';
import { getConfig, type RewardConfig } from './configs';
import type { Granted, Granter } from './grant';
import { getItems } from './items';

export interface ConfigAward {
  user_id: string;
  source_type: string;
  source_ref: string | null;
  /** Unique per logical grant (for example `level:<system>:<user>:<level>`). */
  grant_key: string;
  now: number;
}

export interface ConfigGrantResult<A extends ConfigAward> {
  /** The awards that had items to grant, in order, with what each item became. */
  granted: Array<{ award: A; granted: Granted[] }>;
  /** Why not everything was granted, in the order found; empty when all was. */
  problems: string[];
}

/** How many failed grants a problem names before it counts the rest. */
const FAILED_NAMED = 20;

export async function grantFromConfig<A extends ConfigAward>(
  q: Queryable,
  granter: Granter,
  tenantId: string,
  rewardConfigId: string,
  awards: readonly A[],
  pick: (config: RewardConfig, award: A) => string[],
): Promise<ConfigGrantResult<A>> {
  // The foreign keys (migration 009) keep configs and items present for references written
  // since; a reference dangling from before is reported, not skipped in silence.
  const config = await getConfig(q, tenantId, rewardConfigId);
  if (!config)
    return { granted: [], problems: [`reward config ${rewardConfigId} does not exist; nothing was paid`] };
  const picked = awards.map((a) => pick(config, a));
  const wanted = [...new Set(picked.flat())];
  const all = await getItems(q, tenantId, wanted);
  const problems: string[] = [];
  const missing = wanted.filter((id) => !all.has(id));
  if (missing.length) problems.push(`reward items ${missing.join(', ')} do not exist; they were not paid`);
  const failed: string[] = [];
  const granted: ConfigGrantResult<A>['granted'] = [];
  for (const [i, award] of awards.entries()) {
    const items = picked[i]!.map((id) => all.get(id)).filter((x) => x !== undefined);
    if (items.length === 0) continue;
    const g = await granter.grant(q, {
      tenant_id: tenantId,
      user_id: award.user_id,
      items,
      source_type: award.source_type,
      source_ref: award.source_ref,
      grant_key: award.grant_key,
      now: award.now,
    });
    for (const x of g) if (x.status === 'failed') failed.push(`${award.user_id} (${x.item_id})`);
    granted.push({ award, granted: g });
  }
  if (failed.length)
    problems.push(
      `grants failed (recorded as failed in reward_grants) for ${failed.slice(0, FAILED_NAMED).join(', ')}${failed.length > FAILED_NAMED ? ` and ${failed.length - FAILED_NAMED} more` : ''}`,
    );
  return { granted, problems };
}
