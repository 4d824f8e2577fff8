/**
 * Achievement progress and completion (docs/achievements.md). One engine, used by the pipeline
 * step (events: event_count, streak), by the reactions to other features' facts (wallet credits:
 * cumulative; streak milestones: streak_milestone; final ranks: leaderboard_rank) and by backfill,
 * always in the transaction of the cause, so progress advances exactly once per cause:
 *
 *   1. the (achievement, user) pairs the changes touch that are not completed yet;
 *   2. their progress rows (every part of each pair) locked in key order (core/batch-state.ts);
 *   3. the changes applied in order in memory, the changed rows written in one statement;
 *   4. every pair whose criteria are now met completes: one row in achievement_completions (the
 *      primary key makes it once per user, ever), the reward config paid through the one
 *      grant-from-config path with the key `achievement:<achievement>:<user>`, and the fact
 *      `achievement.completed` emitted (its webhook is rendered by the outbox).
 *
 * A completed pair no longer progresses. Deactivated achievements are never loaded, so they stop.
 */
import type { Queryable } from '../../adapters/sql/types';
import { BatchState } from '../batch-state';
import type { AchievementCompleted, FactBus, Reactions } from '../facts';
import { grantFromConfig } from '../rewards/from-config';
import type { Granter } from '../rewards/grant';
import { criteriaMet, EMPTY, type PartState } from './criteria';
import { activeByRefs, type ActiveAchievement } from './store';

export interface ProgressRow extends PartState {
  tenant_id: string;
  achievement_id: string;
  user_id: string;
  part: string;
  updated_at: number;
}

export const progressRows = new BatchState<ProgressRow>({
  table: 'achievement_progress',
  keys: [
    { column: 'tenant_id', type: 'text' },
    { column: 'achievement_id', type: 'text' },
    { column: 'user_id', type: 'text' },
    { column: 'part', type: 'text' },
  ],
  values: [
    { column: 'value', type: 'bigint', merge: 'replace' },
    { column: 'best', type: 'bigint', merge: 'replace' },
    { column: 'last_day', type: 'text', merge: 'replace' },
    { column: 'updated_at', type: 'bigint', merge: 'replace' },
  ],
});

/** One change to one part of one user's progress. */
export interface PartChange {
  a: ActiveAchievement;
  user_id: string;
  /** The part key (criteria.ts `partKey`). */
  part: string;
  apply: (s: PartState) => PartState;
}

export interface AdvanceResult {
  /** Per change: whether it changed stored progress (false: no change, or already completed). */
  changed: boolean[];
  completed: AchievementCompleted[];
}

const pairId = (tenant: string, achievement: string, user: string) =>
  `${tenant}\u0000${achievement}\u0000${user}`;

const same = (a: PartState, b: PartState) =>
  a.value === b.value && a.best === b.best && a.last_day === b.last_day;

export class AchievementEngine {
  constructor(
    private readonly facts: FactBus,
    private readonly granter: Granter,
  ) {}

  /** Applies the changes in order and completes whoever now meets an achievement's criteria. */
  async advance(
    q: Queryable,
    changes: readonly PartChange[],
    now: number,
    via: 'live' | 'backfill' = 'live',
  ): Promise<AdvanceResult> {
    const changed = changes.map(() => false);
    if (changes.length === 0) return { changed, completed: [] };
    const pairs = new Map<string, { a: ActiveAchievement; user_id: string }>();
    for (const c of changes) pairs.set(pairId(c.a.def.tenant_id, c.a.def.id, c.user_id), c);
    // One writer per (tenant, user)'s achievements at a time: a pipeline batch and a reaction in
    // another transaction (an admin grant's credit) may advance different parts of the same
    // achievement, and each must see the other's before judging completion. One lock per user
    // (not per achievement: a batch touches many achievements of each user), in one order.
    const users = new Set(
      [...pairs.values()].map((p) => JSON.stringify(['achievements', p.a.def.tenant_id, p.user_id])),
    );
    await q.query(
      `SELECT pg_advisory_xact_lock(h) FROM (
         SELECT DISTINCT hashtextextended(k, 0) AS h FROM unnest($1::text[]) AS k ORDER BY h) s`,
      [[...users]],
    );
    const done = await completedPairs(q, [...pairs.values()]);
    for (const k of done) pairs.delete(k);
    if (pairs.size === 0) return { changed, completed: [] };

    const keys: Array<Omit<ProgressRow, keyof PartState | 'updated_at'>> = [];
    for (const { a, user_id } of pairs.values())
      for (const part of a.leaves.keys())
        keys.push({ tenant_id: a.def.tenant_id, achievement_id: a.def.id, user_id, part });
    const stored = await progressRows.lock(q, keys);
    const state = new Map<string, PartState>();
    for (const [k, row] of stored) state.set(k, { value: row.value, best: row.best, last_day: row.last_day });
    const dirty = new Map<string, ProgressRow>();
    changes.forEach((c, i) => {
      const tenant_id = c.a.def.tenant_id;
      if (!pairs.has(pairId(tenant_id, c.a.def.id, c.user_id))) return;
      const key = { tenant_id, achievement_id: c.a.def.id, user_id: c.user_id, part: c.part };
      const id = progressRows.id(key);
      const before = state.get(id) ?? EMPTY;
      const after = c.apply(before);
      if (same(before, after)) return;
      changed[i] = true;
      state.set(id, after);
      dirty.set(id, { ...key, ...after, updated_at: now });
    });
    await progressRows.upsert(q, [...dirty.values()]);

    const met: Array<{ a: ActiveAchievement; user_id: string }> = [];
    for (const p of pairs.values()) {
      const partOf = (part: string) =>
        state.get(
          progressRows.id({
            tenant_id: p.a.def.tenant_id,
            achievement_id: p.a.def.id,
            user_id: p.user_id,
            part,
          }),
        );
      if (criteriaMet(p.a.def.criteria, partOf)) met.push(p);
    }
    return { changed, completed: await this.complete(q, met, now, via) };
  }

  /**
   * Completes these (achievement, user) pairs once each: the completion row, the rewards, the fact.
   * Pairs already completed are left as they are. Answers the new completions.
   */
  async complete(
    q: Queryable,
    pairs: ReadonlyArray<{ a: ActiveAchievement; user_id: string }>,
    now: number,
    via: 'live' | 'backfill',
  ): Promise<AchievementCompleted[]> {
    if (pairs.length === 0) return [];
    const r = await q.query<{ tenant_id: string; achievement_id: string; user_id: string }>(
      `INSERT INTO achievement_completions (tenant_id, achievement_id, user_id, completed_at, via)
       SELECT t, a, u, $4, $5 FROM unnest($1::text[], $2::text[], $3::text[]) AS k(t, a, u)
       ON CONFLICT DO NOTHING RETURNING tenant_id, achievement_id, user_id`,
      [
        pairs.map((p) => p.a.def.tenant_id),
        pairs.map((p) => p.a.def.id),
        pairs.map((p) => p.user_id),
        now,
        via,
      ],
    );
    const fresh = new Set(r.rows.map((x) => pairId(x.tenant_id, x.achievement_id, x.user_id)));
    const out: AchievementCompleted[] = [];
    for (const p of pairs) {
      if (!fresh.has(pairId(p.a.def.tenant_id, p.a.def.id, p.user_id))) continue;
      fresh.delete(pairId(p.a.def.tenant_id, p.a.def.id, p.user_id));
      const d = p.a.def;
      let items: AchievementCompleted['items'] = [];
      if (d.reward_config_id) {
        const g = await grantFromConfig(
          q,
          this.granter,
          d.tenant_id,
          d.reward_config_id,
          [
            {
              user_id: p.user_id,
              source_type: 'achievement_completed',
              source_ref: d.id,
              grant_key: `achievement:${d.id}:${p.user_id}`,
              now,
            },
          ],
          (config) => config.tiers.flatMap((t) => t.item_ids ?? []),
        );
        items = (g.granted[0]?.granted ?? [])
          .filter((x) => x.status !== 'failed')
          .map((x) => ({ item_id: x.item_id, name: x.name, reward_type: x.reward_type, payload: x.payload }));
        if (items.length)
          await q.query(
            'UPDATE achievement_completions SET items = $4 WHERE tenant_id = $1 AND achievement_id = $2 AND user_id = $3',
            [d.tenant_id, d.id, p.user_id, JSON.stringify(items)],
          );
      }
      out.push({
        tenant_id: d.tenant_id,
        user_id: p.user_id,
        achievement_id: d.id,
        name: d.name,
        reward_config_id: d.reward_config_id,
        items,
        now,
      });
    }
    await this.facts.emit(q, 'achievement.completed', out);
    return out;
  }
}

/** The pairs among these that are completed already (by pairId). */
async function completedPairs(
  q: Queryable,
  pairs: ReadonlyArray<{ a: ActiveAchievement; user_id: string }>,
): Promise<Set<string>> {
  const r = await q.query<{ tenant_id: string; achievement_id: string; user_id: string }>(
    `SELECT c.tenant_id, c.achievement_id, c.user_id FROM achievement_completions c
     JOIN unnest($1::text[], $2::text[], $3::text[]) AS k(t, a, u)
       ON c.tenant_id = k.t AND c.achievement_id = k.a AND c.user_id = k.u`,
    [pairs.map((p) => p.a.def.tenant_id), pairs.map((p) => p.a.def.id), pairs.map((p) => p.user_id)],
  );
  return new Set(r.rows.map((x) => pairId(x.tenant_id, x.achievement_id, x.user_id)));
}

/** Changes of every leaf of `type` naming `ref` in these achievements, for one user. */
function leafChanges(
  list: readonly ActiveAchievement[],
  user_id: string,
  match: (l: import('./criteria').Leaf) => boolean,
  apply: (s: PartState) => PartState,
): PartChange[] {
  const out: PartChange[] = [];
  for (const a of list) for (const [part, l] of a.leaves) if (match(l)) out.push({ a, user_id, part, apply });
  return out;
}

const grow =
  (v: number) =>
  (s: PartState): PartState =>
    v > s.value ? { value: v, best: Math.max(s.best, v), last_day: s.last_day } : s;

const betterRank =
  (rank: number) =>
  (s: PartState): PartState =>
    rank >= 1 && (s.value === 0 || rank < s.value) ? { value: rank, best: rank, last_day: s.last_day } : s;

/**
 * What achievements listen to (docs/achievements.md "Progress from other features"):
 * - `wallet.credited`: cumulative criteria on the credited currency take its lifetime earned;
 * - `streak.milestone_reached`: streak_milestone criteria on that streak take its streak_days;
 * - `leaderboard.rank_finalized`: leaderboard_rank criteria on that board take the best final rank.
 * Each runs in the emitter's transaction, so it happens exactly once with its cause.
 */
export function achievementReactions(engine: AchievementEngine): Reactions {
  const run = async (
    q: Queryable,
    byTenant: Map<
      string,
      Array<{
        user_id: string;
        ref: string;
        match: (l: import('./criteria').Leaf) => boolean;
        apply: (s: PartState) => PartState;
        now: number;
      }>
    >,
  ) => {
    const refs = [...new Set([...byTenant.values()].flat().map((x) => x.ref))];
    const defs = await activeByRefs(q, [...byTenant.keys()], refs);
    if (defs.size === 0) return;
    for (const [tenant, items] of byTenant) {
      const list = defs.get(tenant);
      if (!list) continue;
      const changes = items.flatMap((x) => leafChanges(list, x.user_id, x.match, x.apply));
      if (changes.length) await engine.advance(q, changes, items[items.length - 1]!.now);
    }
  };
  const group = <T extends { tenant_id: string }, X>(facts: readonly T[], f: (t: T) => X) => {
    const m = new Map<string, X[]>();
    for (const x of facts) {
      const l = m.get(x.tenant_id);
      if (l) l.push(f(x));
      else m.set(x.tenant_id, [f(x)]);
    }
    return m;
  };
  return {
    feature: 'achievements',
    on: {
      'wallet.credited': (q, credits) =>
        run(
          q,
          group(credits, (c) => ({
            user_id: c.user_id,
            ref: `cumulative:${c.currency_id}`,
            match: (l) => l.type === 'cumulative' && l.metric === c.currency_id,
            apply: grow(c.lifetime_earned),
            now: c.now,
          })),
        ),
      'streak.milestone_reached': (q, reached) =>
        run(
          q,
          group(reached, (m) => ({
            user_id: m.user_id,
            ref: `streak_milestone:${m.streak_id}`,
            match: (l) => l.type === 'streak_milestone' && l.streak_id === m.streak_id,
            apply: grow(m.streak_days),
            now: m.now,
          })),
        ),
      'leaderboard.rank_finalized': async (q, ranks) => {
        await run(
          q,
          group(ranks, (r) => ({
            user_id: r.user_id,
            ref: `leaderboard_rank:${r.leaderboard_id}`,
            match: (l) => l.type === 'leaderboard_rank' && l.leaderboard_id === r.leaderboard_id,
            apply: betterRank(r.rank),
            now: r.now,
          })),
        );
      },
    },
  };
}
