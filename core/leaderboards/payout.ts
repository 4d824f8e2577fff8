/**
 * Leaderboard payouts: at window close each finalised rank is matched to the board's reward config
 * tiers and paid through the granting service, inside the closing transaction (so a crash pays
 * nothing and the retried close pays everyone, once). Grant keys are
 * `leaderboard:<board>:<window>:<user>`, so even a second close could not pay twice.
 */
import { getConfig, itemsForRank } from '../rewards/configs';
import type { Granter } from '../rewards/grant';
import { getItems } from '../rewards/items';
import type { PayoutHook } from './closing';

export function payoutHook(granter: Granter): PayoutHook {
  return async (q, board, w, standings, now) => {
    if (!board.reward_config_id) return [];
    const config = await getConfig(q, board.tenant_id, board.reward_config_id);
    if (!config) return [];
    const all = await getItems(q, board.tenant_id, [
      ...new Set(standings.flatMap((s) => itemsForRank(config, s.rank))),
    ]);
    const distribution = [];
    for (const s of standings) {
      const items = itemsForRank(config, s.rank)
        .map((id) => all.get(id))
        .filter((x) => x !== undefined);
      if (items.length === 0) continue;
      const granted = await granter.grant(q, {
        tenant_id: board.tenant_id,
        user_id: s.user_id,
        items,
        source_type: 'leaderboard_reward',
        source_ref: `${board.leaderboard_id}:${w.window_key}`,
        grant_key: `leaderboard:${board.leaderboard_id}:${w.window_key}:${s.user_id}`,
        now,
      });
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
    return distribution;
  };
}
