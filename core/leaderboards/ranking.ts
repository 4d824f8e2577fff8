/** Rank numbers under each policy, for a run of entries already in board order. */
import type { RankPolicy } from './definition';

/**
 * Ranks of consecutive entries starting at 0-based position `start`, given what precedes them:
 * `above` entries with a strictly greater score than the first entry, and `distinctAbove` distinct
 * greater scores. unique: 1,2,3,4; shared: 1,2,2,4; dense: 1,2,2,3.
 */
export function rankRun(
  policy: RankPolicy,
  scores: number[],
  start: number,
  above: { entries: number; distinct: number },
): number[] {
  const out: number[] = [];
  let prevScore: number | undefined;
  let prevRank = 0;
  scores.forEach((s, i) => {
    let rank: number;
    if (policy === 'unique') rank = start + i + 1;
    else if (i === 0) rank = policy === 'shared' ? above.entries + 1 : above.distinct + 1;
    else if (s === prevScore) rank = prevRank;
    else rank = policy === 'shared' ? start + i + 1 : prevRank + 1;
    out.push(rank);
    prevScore = s;
    prevRank = rank;
  });
  return out;
}
