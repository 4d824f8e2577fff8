/**
 * Leaderboard payouts: the leaderboard's reaction to `leaderboard.rank_finalized` (core/facts.ts).
 * At window close each final rank is matched to the board's reward config tiers and paid through
 * the granting service, inside the closing transaction (so a crash pays nothing and the retried
 * close pays everyone, once). Grant keys are `leaderboard:<board>:<window>:<user>`, so even a
 * second close could not pay twice. The reply (what was paid, and why not in full) goes into the
 * window's `leaderboard.window_completed` webhook and its `payout_error`.
 */
import type { Queryable } from '../../adapters/sql/types';
import type { PayoutReport, Reactions, RankFinalized, RewardDistributionLine } from '../facts';
import { getConfig, itemsForRank } from '../rewards/configs';
import type { Granter } from '../rewards/grant';
import { getItems } from '../rewards/items';
import { mergeReports } from './closing';

/** What the leaderboard payout listens to. */
export function payoutReactions(granter: Granter): Reactions {
  return {
    feature: 'leaderboard-payouts',
    on: {
      'leaderboard.rank_finalized': async (q, ranks) => {
        const reports: PayoutReport[] = [];
        for (const group of byWindow(ranks)) reports.push(await payWindow(q, granter, group));
        return mergeReports(reports);
      },
    },
  };
}

/** Final ranks grouped by window (a close emits one window's), each group in rank order. */
function byWindow(ranks: readonly RankFinalized[]): RankFinalized[][] {
  const groups = new Map<string, RankFinalized[]>();
  for (const r of ranks) {
    const k = `${r.tenant_id}\u0000${r.leaderboard_id}\u0000${r.window_key}`;
    groups.set(k, [...(groups.get(k) ?? []), r]);
  }
  return [...groups.values()];
}

/** Pays one window's final ranks. */
async function payWindow(q: Queryable, granter: Granter, standings: RankFinalized[]): Promise<PayoutReport> {
  const w = standings[0]!;
  if (!w.reward_config_id) return { distribution: [], error: null };
  // The foreign keys (migration 009) keep both present for boards written since; a reference
  // dangling from before is reported, not skipped in silence.
  const config = await getConfig(q, w.tenant_id, w.reward_config_id);
  if (!config)
    return {
      distribution: [],
      error: `reward config ${w.reward_config_id} does not exist; nothing was paid`,
    };
  const wanted = [...new Set(standings.flatMap((s) => itemsForRank(config, s.rank)))];
  const all = await getItems(q, w.tenant_id, wanted);
  const problems: string[] = [];
  const missing = wanted.filter((id) => !all.has(id));
  if (missing.length) problems.push(`reward items ${missing.join(', ')} do not exist; they were not paid`);
  const failed: string[] = [];
  const distribution: RewardDistributionLine[] = [];
  for (const s of standings) {
    const items = itemsForRank(config, s.rank)
      .map((id) => all.get(id))
      .filter((x) => x !== undefined);
    if (items.length === 0) continue;
    const granted = await granter.grant(q, {
      tenant_id: w.tenant_id,
      user_id: s.user_id,
      items,
      source_type: 'leaderboard_reward',
      source_ref: `${w.leaderboard_id}:${w.window_key}`,
      grant_key: `leaderboard:${w.leaderboard_id}:${w.window_key}:${s.user_id}`,
      now: s.now,
    });
    for (const g of granted) if (g.status === 'failed') failed.push(`${s.user_id} (${g.item_id})`);
    distribution.push({
      user_id: s.user_id,
      rank: s.rank,
      score: s.score,
      items: granted.map((g) => ({
        item_id: g.item_id,
        name: g.name,
        reward_type: g.reward_type,
        payload: g.payload,
      })),
    });
  }
  if (failed.length)
    problems.push(
      `grants failed (recorded as failed in reward_grants) for ${failed.slice(0, 20).join(', ')}${failed.length > 20 ? ` and ${failed.length - 20} more` : ''}`,
    );
  return { distribution, error: problems.length ? problems.join('; ') : null };
}
