/**
 * The reference model: a small, obviously correct function from an event list to standings,
 * written independently of the pipeline (no shared code). Pipeline tests compare against it.
 *
 * Scope: boards whose rules are `{event_type, points_expression: "attrs.<field>"}` (or count),
 * daily UTC windows or all_time, any aggregation and rank policy.
 */
export interface RefEvent {
  event_id: string;
  type: string;
  user_id: string;
  /** Unix ms */
  occurred_at: number;
  attrs: Record<string, unknown>;
}

export interface RefBoard {
  event_type: string;
  /** The attrs field giving points; ignored for count. */
  field: string;
  aggregation: 'sum' | 'count' | 'max' | 'min' | 'avg';
  timeframe: 'daily_utc' | 'all_time';
  rank_policy?: 'unique' | 'shared' | 'dense';
}

export interface RefEntry {
  user_id: string;
  score: number;
  rank: number;
}

/** Standings per window key, in board order. Events are in log order; duplicates keep the first. */
export function referenceStandings(events: RefEvent[], board: RefBoard): Map<string, RefEntry[]> {
  const seen = new Set<string>();
  const perWindow = new Map<string, Map<string, { values: number[]; times: number[] }>>();
  for (const e of events) {
    if (seen.has(e.event_id)) continue;
    seen.add(e.event_id);
    if (board.event_type !== '*' && e.type !== board.event_type) continue;
    let value = 1;
    if (board.aggregation !== 'count') {
      const v = e.attrs[board.field];
      if (typeof v !== 'number' || !Number.isFinite(v)) continue;
      value = v;
    }
    const key =
      board.timeframe === 'all_time' ? 'all_time' : new Date(e.occurred_at).toISOString().slice(0, 10);
    const users = perWindow.get(key) ?? new Map<string, { values: number[]; times: number[] }>();
    perWindow.set(key, users);
    const u = users.get(e.user_id) ?? { values: [], times: [] };
    users.set(e.user_id, u);
    u.values.push(value);
    u.times.push(e.occurred_at);
  }

  const out = new Map<string, RefEntry[]>();
  for (const [key, users] of perWindow) {
    const rows = [...users].map(([user_id, { values, times }]) => {
      let score: number;
      let tiebreak: number;
      if (board.aggregation === 'max' || board.aggregation === 'min') {
        score = board.aggregation === 'max' ? Math.max(...values) : Math.min(...values);
        // Earliest moment the best value was reached.
        tiebreak = Math.min(...times.filter((_, i) => values[i] === score));
      } else {
        const sum = values.reduce((a, b) => a + b, 0);
        score =
          board.aggregation === 'count'
            ? values.length
            : board.aggregation === 'avg'
              ? sum / values.length
              : sum;
        tiebreak = Math.max(...times);
      }
      return { user_id, score, tiebreak };
    });
    rows.sort(
      (a, b) =>
        b.score - a.score ||
        a.tiebreak - b.tiebreak ||
        Buffer.compare(Buffer.from(a.user_id), Buffer.from(b.user_id)),
    );
    const policy = board.rank_policy ?? 'unique';
    const ranked: RefEntry[] = [];
    rows.forEach((r, i) => {
      let rank = i + 1;
      if (policy !== 'unique') {
        const higher = rows.filter((x) => x.score > r.score);
        rank = policy === 'shared' ? higher.length + 1 : new Set(higher.map((x) => x.score)).size + 1;
      }
      ranked.push({ user_id: r.user_id, score: r.score, rank });
    });
    out.set(key, ranked);
  }
  return out;
}
