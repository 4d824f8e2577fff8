/**
 * The rank-index key of a board's window, `tenant:leaderboard:window` (opaque to the index,
 * adapters/ranks/types.ts). The one place that builds it: the pipeline writes under it
 * (processors/pipeline/rank-sync.ts), the query gateway reads it (./queries.ts) and closing a
 * window drops it (./closing.ts), so the three always agree.
 */
export function boardKey(k: { tenant_id: string; leaderboard_id: string; window_key: string }): string {
  return `${k.tenant_id}:${k.leaderboard_id}:${k.window_key}`;
}
