/**
 * Achievement progress and completion (docs/achievements.md). One engine, used by the pipeline
 * step (events: event_count, streak), by the reactions to other features' facts (wallet credits:
 * cumulative; streak milestones: streak_milestone; final ranks: leaderboard_rank) and by backfill,
 * always in the transaction of the cause, so progress advances exactly once per cause:
 *
 *   1. in memory, the (achievement, user) pairs the changes touch;
 *   2. one advisory lock per user of those pairs, in one order (every writer of progress takes it,
 *      so concurrent writers of one user's progress wait for each other and never deadlock);
 *   3. one statement reads every touched pair: completed or not, and its stored parts (by user:
 *      one probe per user, not per pair);
 *   4. the changes applied in order in memory, the changed rows written in one statement;
 *   5. every touched pair whose criteria are now met completes: rows in achievement_completions
 *      in one statement (the primary key makes it once per user, ever), the reward config paid
 *      through the one grant-from-config path (once per achievement, each user's grant keyed
 *      `achievement:<achievement>:<user>`), the items recorded in one statement, and the fact
 *      `achievement.completed` emitted once per completion (its webhook is rendered by the outbox).
 *
 * So a batch costs a fixed number of statements whatever the number of achievements and users it
 * touches (plus one grant per completion with a reward). Measured: docs/performance.md
 * "Achievements".
 *
 * A completed pair no longer progresses. Deactivated achievements are never loaded, so they stop.
 */
import { mayHave } from '../definitions/presence';
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

/** A touched (achievement, user) pair: completed already, or its parts as stored and changed. */
interface Pair {
  a: ActiveAchievement;
  user_id: string;
  done: boolean;
  parts: Map<string, PartState>;
}

const same = (a: PartState, b: PartState) =>
  a.value === b.value && a.best === b.best && a.last_day === b.last_day;

export class AchievementEngine {
  constructor(
    private readonly facts: FactBus,
    private readonly granter: Granter,
  ) {}

  /**
   * Applies the changes in order and completes whoever now meets an achievement's criteria. Set
   * based: whatever the number of changes, one statement locks the users, one reads every touched
   * pair's parts with its completion, one writes the changed parts, and one records the completions
   * (then the rewards and the facts of those).
   */
  async advance(
    q: Queryable,
    changes: readonly PartChange[],
    now: number,
    via: 'live' | 'backfill' = 'live',
  ): Promise<AdvanceResult> {
    const changed = changes.map(() => false);
    if (changes.length === 0) return { changed, completed: [] };
    // 1. In memory: the (achievement, user) pairs the changes touch.
    const pairs = new Map<string, Pair>();
    const pairOf: Pair[] = [];
    for (const c of changes) {
      const id = pairId(c.a.def.tenant_id, c.a.def.id, c.user_id);
      let p = pairs.get(id);
      if (!p) pairs.set(id, (p = { a: c.a, user_id: c.user_id, done: false, parts: new Map() }));
      pairOf.push(p);
    }
    const list = [...pairs.values()];
    // 2. One writer per (tenant, user)'s achievements at a time: a pipeline batch and a reaction
    // in another transaction (an admin grant's credit) may advance different parts of the same
    // achievement, and each must see the other's before judging completion; and a row not stored
    // yet cannot be locked. One lock per user (not per achievement: a batch touches many
    // achievements of each user), taken in one order (the lock keys sorted), so two transactions
    // wait for each other instead of deadlocking. Every writer of progress takes it (the engine
    // is the only one; a backfill's start deletes parts under the tenant's row lock, which the
    // pipeline also takes), so the read below needs no row locks of its own.
    const users = new Set(list.map((p) => JSON.stringify(['achievements', p.a.def.tenant_id, p.user_id])));
    await q.query(
      `SELECT pg_advisory_xact_lock(h) FROM (
         SELECT DISTINCT hashtextextended(k, 0) AS h FROM unnest($1::text[]) AS k ORDER BY h) s`,
      [[...users]],
    );
    // 3. One statement reads, per touched user (one probe of each index by tenant and user, not
    // one per pair: a batch touches many achievements of each user), the completions and the
    // stored parts of the touched achievements; the pairs take theirs in memory.
    const byUser = new Map<string, { t: string; u: string }>();
    for (const p of list)
      byUser.set(`${p.a.def.tenant_id}\u0000${p.user_id}`, { t: p.a.def.tenant_id, u: p.user_id });
    const touched = [...new Set(list.map((p) => p.a.def.id))];
    const k = [...byUser.values()];
    const r = await q.query<{
      done: boolean;
      tenant_id: string;
      achievement_id: string;
      user_id: string;
      part: string | null;
      value: string | number | null;
      best: string | number | null;
      last_day: string | null;
    }>(
      `SELECT true AS done, c.tenant_id, c.achievement_id, c.user_id, NULL AS part, NULL::bigint AS value,
              NULL::bigint AS best, NULL AS last_day
       FROM unnest($1::text[], $2::text[]) AS k(t, u)
       JOIN achievement_completions c ON c.tenant_id = k.t AND c.user_id = k.u AND c.achievement_id = ANY($3::text[])
       UNION ALL
       SELECT false, p.tenant_id, p.achievement_id, p.user_id, p.part, p.value, p.best, p.last_day
       FROM unnest($1::text[], $2::text[]) AS k(t, u)
       JOIN achievement_progress p ON p.tenant_id = k.t AND p.user_id = k.u AND p.achievement_id = ANY($3::text[])`,
      [k.map((x) => x.t), k.map((x) => x.u), touched],
    );
    for (const row of r.rows) {
      const p = pairs.get(pairId(row.tenant_id, row.achievement_id, row.user_id));
      if (!p) continue;
      if (row.done) p.done = true;
      else
        p.parts.set(row.part!, {
          value: Number(row.value),
          best: Number(row.best),
          last_day: String(row.last_day),
        });
    }
    // 4. The changes applied in order in memory; the changed parts written in one statement.
    const dirty = new Map<string, ProgressRow>();
    changes.forEach((c, i) => {
      const p = pairOf[i]!;
      if (p.done) return;
      const before = p.parts.get(c.part) ?? EMPTY;
      const after = c.apply(before);
      if (same(before, after)) return;
      changed[i] = true;
      p.parts.set(c.part, after);
      const key = {
        tenant_id: c.a.def.tenant_id,
        achievement_id: c.a.def.id,
        user_id: c.user_id,
        part: c.part,
      };
      dirty.set(progressRows.id(key), { ...key, ...after, updated_at: now });
    });
    await progressRows.upsert(q, [...dirty.values()]);
    // 5. Completion: every touched pair not completed yet whose criteria its parts now meet (a
    // lowered threshold completes a user at the next change that touches the pair).
    const met = list.filter((p) => !p.done && criteriaMet(p.a.def.criteria, (part) => p.parts.get(part)));
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
    const won: Array<{ a: ActiveAchievement; user_id: string; items: AchievementCompleted['items'] }> = [];
    for (const p of pairs) {
      const id = pairId(p.a.def.tenant_id, p.a.def.id, p.user_id);
      if (!fresh.delete(id)) continue;
      won.push({ a: p.a, user_id: p.user_id, items: [] });
    }
    // Rewards: one grant-from-config call per (tenant, achievement) (the config and its items
    // looked up once), each user's grant idempotent on `achievement:<achievement>:<user>`.
    const byAchievement = new Map<string, typeof won>();
    for (const w of won)
      if (w.a.def.reward_config_id) {
        const k = `${w.a.def.tenant_id}\u0000${w.a.def.id}`;
        const l = byAchievement.get(k);
        if (l) l.push(w);
        else byAchievement.set(k, [w]);
      }
    for (const group of byAchievement.values()) {
      const d = group[0]!.a.def;
      const g = await grantFromConfig(
        q,
        this.granter,
        d.tenant_id,
        d.reward_config_id!,
        group.map((w) => ({
          w,
          user_id: w.user_id,
          source_type: 'achievement_completed',
          source_ref: d.id,
          grant_key: `achievement:${d.id}:${w.user_id}`,
          now,
        })),
        (config) => config.tiers.flatMap((t) => t.item_ids ?? []),
      );
      for (const x of g.granted)
        x.award.w.items = x.granted
          .filter((y) => y.status !== 'failed')
          .map((y) => ({ item_id: y.item_id, name: y.name, reward_type: y.reward_type, payload: y.payload }));
    }
    const withItems = won.filter((w) => w.items.length);
    if (withItems.length)
      await q.query(
        `UPDATE achievement_completions c SET items = k.items
         FROM unnest($1::text[], $2::text[], $3::text[], $4::jsonb[]) AS k(t, a, u, items)
         WHERE c.tenant_id = k.t AND c.achievement_id = k.a AND c.user_id = k.u`,
        [
          withItems.map((w) => w.a.def.tenant_id),
          withItems.map((w) => w.a.def.id),
          withItems.map((w) => w.user_id),
          withItems.map((w) => JSON.stringify(w.items)),
        ],
      );
    const out: AchievementCompleted[] = won.map(({ a: { def: d }, user_id, items }) => ({
      tenant_id: d.tenant_id,
      user_id,
      achievement_id: d.id,
      name: d.name,
      reward_config_id: d.reward_config_id,
      items,
      now,
    }));
    await this.facts.emit(q, 'achievement.completed', out);
    return out;
  }
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
    // A tenant the transaction read has no achievement (a pipeline batch) is not read.
    for (const t of byTenant.keys()) if (!mayHave(q, t, 'achievements')) byTenant.delete(t);
    if (byTenant.size === 0) return;
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
