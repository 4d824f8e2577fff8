/**
 * A user's achievements as the query gateway shows them (docs/achievements.md "User routes"):
 * each achievement with `completed`, `completed_at`, `progress` (`{current, target, percentage}`,
 * and each part's for combined criteria) and `rarity`: the share of the tenant's active users who
 * completed it. Active users: users with an event (occurred_at, at most now) in the last
 * ACTIVE_DAYS days in a tenant that has achievements, as the pipeline step records them.
 */
import type { Queryable } from '../../adapters/sql/types';
import { progressOf, type PartState, type ProgressView } from './criteria';
import { compiled, type Achievement } from './store';

export const ACTIVE_DAYS = 30;
const DAY_MS = 86_400_000;

export interface UserAchievementView {
  achievement_id: string;
  name: string;
  description: string | null;
  badge_url: string | null;
  completed: boolean;
  completed_at: string | null;
  progress: ProgressView;
  rarity: { completed_users: number; active_users: number; percentage: number };
}

export interface Rarity {
  active: number;
  completed: Map<string, number>;
}

/** Active users of the tenant and, per achievement, how many of them completed it. */
export async function rarity(q: Queryable, tenantId: string, now: number): Promise<Rarity> {
  const since = now - ACTIVE_DAYS * DAY_MS;
  const [active, done] = await Promise.all([
    q.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM achievement_active_users WHERE tenant_id = $1 AND last_active_at >= $2',
      [tenantId, since],
    ),
    q.query<{ achievement_id: string; n: number }>(
      `SELECT c.achievement_id, count(*)::int AS n FROM achievement_completions c
       JOIN achievement_active_users u ON u.tenant_id = c.tenant_id AND u.user_id = c.user_id AND u.last_active_at >= $2
       WHERE c.tenant_id = $1 GROUP BY c.achievement_id`,
      [tenantId, since],
    ),
  ]);
  return {
    active: active.rows[0]?.n ?? 0,
    completed: new Map(done.rows.map((r) => [r.achievement_id, r.n])),
  };
}

/** The views of these achievements for one user, in their order. */
export async function userViews(
  q: Queryable,
  tenantId: string,
  userId: string,
  defs: readonly Achievement[],
  now: number,
): Promise<UserAchievementView[]> {
  if (defs.length === 0) return [];
  const ids = defs.map((d) => d.id);
  const [parts, done, r] = await Promise.all([
    q.query<{ achievement_id: string; part: string; value: string; best: string; last_day: string }>(
      `SELECT achievement_id, part, value, best, last_day FROM achievement_progress
       WHERE tenant_id = $1 AND user_id = $2 AND achievement_id = ANY($3::text[])`,
      [tenantId, userId, ids],
    ),
    q.query<{ achievement_id: string; completed_at: string }>(
      `SELECT achievement_id, completed_at FROM achievement_completions
       WHERE tenant_id = $1 AND user_id = $2 AND achievement_id = ANY($3::text[])`,
      [tenantId, userId, ids],
    ),
    rarity(q, tenantId, now),
  ]);
  const state = new Map<string, PartState>();
  for (const p of parts.rows)
    state.set(`${p.achievement_id}\u0000${p.part}`, {
      value: Number(p.value),
      best: Number(p.best),
      last_day: p.last_day,
    });
  const completedAt = new Map(done.rows.map((x) => [x.achievement_id, Number(x.completed_at)]));
  return defs.map((d) => {
    const at = completedAt.get(d.id);
    const progress = progressOf(compiled(d).def.criteria, (part) => state.get(`${d.id}\u0000${part}`));
    const n = r.completed.get(d.id) ?? 0;
    return {
      achievement_id: d.id,
      name: d.name,
      description: d.description,
      badge_url: d.badge_url,
      completed: at !== undefined,
      completed_at: at !== undefined ? new Date(at).toISOString() : null,
      // A completion stays whatever the criteria became since: its progress shows as met in full.
      progress: at !== undefined ? fullProgress(progress) : progress,
      rarity: {
        completed_users: n,
        active_users: r.active,
        percentage: r.active > 0 ? Math.round((n / r.active) * 10000) / 100 : 0,
      },
    };
  });
}

function fullProgress(p: ProgressView): ProgressView {
  return {
    ...p,
    current: p.target,
    percentage: 100,
    met: true,
    ...(p.parts ? { parts: p.parts.map(fullProgress) } : {}),
  };
}
