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
import { itemsForRank } from '../rewards/configs';
import { grantFromConfig } from '../rewards/from-config';
import type { Granter } from '../rewards/grant';
import { mergeReports } from './closing';
import { groupBy } from '../../shared/group-by';

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
  return [...groupBy(ranks, (r) => `${r.tenant_id}\u0000${r.leaderboard_id}\u0000${r.window_key}`).values()];
}

/** Pays one window's final ranks through the one grant-from-config path. */
async function payWindow(q: Queryable, granter: Granter, standings: RankFinalized[]): Promise<PayoutReport> {
  const w = standings[0]!;
  if (!w.reward_config_id) return { distribution: [], error: null };
  const { granted, problems } = await grantFromConfig(
    q,
    granter,
    w.tenant_id,
    w.reward_config_id,
    standings.map((s) => ({
      ...s,
      source_type: 'leaderboard_reward',
      source_ref: `${w.leaderboard_id}:${w.window_key}`,
      grant_key: `leaderboard:${w.leaderboard_id}:${w.window_key}:${s.user_id}`,
    })),
    (config, s) => itemsForRank(config, s.rank),
  );
  const distribution: RewardDistributionLine[] = granted.map(({ award: s, granted: g }) => ({
    user_id: s.user_id,
    rank: s.rank,
    score: s.score,
    items: g.map((x) => ({
      item_id: x.item_id,
      name: x.name,
      reward_type: x.reward_type,
      payload: x.payload,
    })),
  }));
  return { distribution, error: problems.length ? problems.join('; ') : null };
}
