/**
 * Leaderboard payouts: at window close each finalised rank is matched to the board's reward config
 * tiers and paid through the granting service, inside the closing transaction (so a crash pays
 * nothing and the retried close pays everyone, once). Grant keys are
 * `leaderboard:<board>:<window>:<user>`, so even a second close could not pay twice.
 */
import { getConfig, itemsForRank } from '../rewards/configs';
import type { Granter } from '../rewards/grant';
import { getItems } from '../rewards/items';
import type { PayoutHook, PayoutOutcome } from './closing';

export function payoutHook(granter: Granter): PayoutHook {
  return async (q, board, w, standings, now): Promise<PayoutOutcome> => {
    if (!board.reward_config_id) return { distribution: [], error: null };
    // The foreign keys (migration 009) keep both present for boards written since; a reference
    // dangling from before is reported, not skipped in silence.
    const config = await getConfig(q, board.tenant_id, board.reward_config_id);
    if (!config)
      return {
        distribution: [],
        error: `reward config ${board.reward_config_id} does not exist; nothing was paid`,
      };
    const wanted = [...new Set(standings.flatMap((s) => itemsForRank(config, s.rank)))];
    const all = await getItems(q, board.tenant_id, wanted);
    const problems: string[] = [];
    const missing = wanted.filter((id) => !all.has(id));
    if (missing.length) problems.push(`reward items ${missing.join(', ')} do not exist; they were not paid`);
    const failed: string[] = [];
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
  };
}
