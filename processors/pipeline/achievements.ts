/**
 * Pipeline step: achievements (core/achievements/). For every fresh event, every active
 * achievement of its tenant with event criteria (event_count, streak) whose leaf matches it (event
 * type and conditions, the one rules module) gets one change of that leaf's progress; the batch's
 * changes go through the achievement engine in one call (progress rows locked in key order,
 * written in one statement, completions with their rewards and `achievement.completed` facts), in
 * the batch's transaction: exactly once per event. The events' users are recorded as active users
 * of tenants with achievements (rarity's denominator), one statement per batch.
 *
 * Backfill seam (docs/achievements.md "Backfill", core/achievements/backfill.ts): while an
 * achievement's backfill runs, this step counts an event for it only when it claims the event
 * first; the history scan claims the events it counts the same way. A streak part's claimed event is
 * deferred (its day recorded for the backfill, which applies it in order with the history's).
 */
import type { Queryable } from '../../adapters/sql/types';
import { deferStreakDays } from '../../core/achievements/backfill';
import { applyEvent } from '../../core/achievements/criteria';
import { type AchievementEngine, type PartChange } from '../../core/achievements/progress';
import type { EventLeaf } from '../../core/achievements/criteria';
import { activeByRefs, type ActiveAchievement } from '../../core/achievements/store';
import { windowAt } from '../../core/windows';
import {
  applied,
  nothing,
  type PipelineStep,
  type StepBatch,
  type StepEffect,
  type StepReport,
} from './step';

export interface AchievementsLoaded {
  /** Active achievements by tenant (every one: tenants with any count their active users). */
  byTenant: Map<string, ActiveAchievement[]>;
  /** Achievements whose backfill runs (`tenant\u0000id`): their events are claimed before counting. */
  backfilling: Set<string>;
}

export class AchievementStep implements PipelineStep<AchievementsLoaded> {
  readonly name = 'achievements';

  constructor(private readonly engine: AchievementEngine) {}

  async load(q: Queryable, batch: StepBatch): Promise<AchievementsLoaded> {
    if (batch.events.length === 0) return { byTenant: new Map(), backfilling: new Set() };
    // The backfill seam: a backfill starts under FOR UPDATE of the tenant's row, so a batch
    // either loaded the tenant's achievements before that commit (and committed before it) or
    // after it, seeing what the backfill set up (docs/achievements.md "Backfill"). With
    // `definitions`, the pipeline took that lock before the steps ran (./definitions.ts), and a
    // tenant with no achievement (its count read under that lock) is not read.
    const defs = batch.definitions;
    if (!defs)
      await q.query('SELECT id FROM tenants WHERE id = ANY($1::text[]) ORDER BY id FOR KEY SHARE', [
        [...batch.tenants],
      ]);
    const tenants = defs
      ? batch.tenants.filter((t) => (defs.get(t)?.counts.achievements ?? 1) > 0)
      : batch.tenants;
    if (tenants.length === 0) return { byTenant: new Map(), backfilling: new Set() };
    const byTenant = await activeByRefs(q, tenants, null);
    const backfilling = new Set<string>();
    if (byTenant.size > 0) {
      const r = await q.query<{ tenant_id: string; achievement_id: string }>(
        `SELECT DISTINCT tenant_id, achievement_id FROM achievement_backfills
         WHERE tenant_id = ANY($1::text[]) AND state IN ('pending', 'running') AND NOT dry_run`,
        [[...byTenant.keys()]],
      );
      for (const x of r.rows) backfilling.add(`${x.tenant_id}\u0000${x.achievement_id}`);
    }
    return { byTenant, backfilling };
  }

  async apply(q: Queryable, batch: StepBatch, loaded: AchievementsLoaded): Promise<StepReport> {
    const effects: StepEffect[] = batch.events.map(() => nothing);
    if (loaded.byTenant.size === 0) return { effects };
    const matched: Array<{ i: number; a: ActiveAchievement; leaf: EventLeaf; day: string }> = [];
    const active = new Map<string, { tenant_id: string; user_id: string; at: number }>();
    batch.events.forEach(({ event, view }, i) => {
      const list = loaded.byTenant.get(event.tenant_id);
      if (!list) return;
      const u = `${event.tenant_id}\u0000${event.user_id}`;
      const at = Math.min(event.occurred_at, batch.now);
      if ((active.get(u)?.at ?? -1) < at)
        active.set(u, { tenant_id: event.tenant_id, user_id: event.user_id, at });
      const timezone = batch.timezones.get(event.tenant_id);
      if (timezone === undefined) return;
      let day: string | undefined;
      for (const a of list)
        for (const leaf of a.eventLeaves) {
          if (!leaf.matchesType(view.type) || !leaf.condition.test(view)) continue;
          day ??= windowAt({ type: 'daily', timezone }, event.occurred_at).key;
          matched.push({ i, a, leaf, day });
        }
    });
    // While an achievement's backfill runs, an event counts here only if this claim is new (the
    // history scan claims the events it counts the same way): core/achievements/backfill.ts.
    const claimed = await this.claim(q, batch, matched, loaded.backfilling);
    const changes: PartChange[] = [];
    const eventOf: number[] = [];
    const deferred: Parameters<typeof deferStreakDays>[1][number][] = [];
    for (const m of matched) {
      if (claimed && loaded.backfilling.has(`${m.a.def.tenant_id}\u0000${m.a.def.id}`)) {
        const e = batch.events[m.i]!.event;
        if (!claimed.has(`${m.a.def.tenant_id}\u0000${m.a.def.id}\u0000${e.event_id}`)) continue;
        // A streak part's day waits for the backfill (its order with the history's days matters).
        if (m.leaf.leaf.type === 'streak') {
          deferred.push({
            tenant_id: m.a.def.tenant_id,
            achievement_id: m.a.def.id,
            user_id: e.user_id,
            part: m.leaf.key,
            day: m.day,
          });
          effects[m.i] = applied;
          continue;
        }
      }
      const { leaf, day } = m;
      changes.push({
        a: m.a,
        user_id: batch.events[m.i]!.event.user_id,
        part: leaf.key,
        apply: (s) => applyEvent(leaf.leaf, s, day),
      });
      eventOf.push(m.i);
    }
    await deferStreakDays(q, deferred);
    const result = await this.engine.advance(q, changes, batch.now);
    result.changed.forEach((c, k) => {
      if (c) effects[eventOf[k]!] = applied;
    });
    const users = [...active.values()];
    if (users.length)
      await q.query(
        `INSERT INTO achievement_active_users AS u (tenant_id, user_id, last_active_at)
         SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[]) ORDER BY 1, 2
         ON CONFLICT (tenant_id, user_id) DO UPDATE SET last_active_at = EXCLUDED.last_active_at
         WHERE u.last_active_at < EXCLUDED.last_active_at - 3600000`,
        [users.map((x) => x.tenant_id), users.map((x) => x.user_id), users.map((x) => x.at)],
      );
    return { effects };
  }

  /** Claims the matched events of backfilling achievements; the claims that are new, or null when none was needed. */
  private async claim(
    q: Queryable,
    batch: StepBatch,
    matched: ReadonlyArray<{ i: number; a: ActiveAchievement }>,
    backfilling: ReadonlySet<string>,
  ): Promise<Set<string> | null> {
    if (backfilling.size === 0) return null;
    const rows = new Map<string, [string, string, string]>();
    for (const m of matched) {
      const k = `${m.a.def.tenant_id}\u0000${m.a.def.id}`;
      if (!backfilling.has(k)) continue;
      const id = batch.events[m.i]!.event.event_id;
      rows.set(`${k}\u0000${id}`, [m.a.def.tenant_id, m.a.def.id, id]);
    }
    if (rows.size === 0) return null;
    const r = await q.query<{ tenant_id: string; achievement_id: string; event_id: string }>(
      `INSERT INTO achievement_backfill_live (tenant_id, achievement_id, event_id)
       SELECT * FROM unnest($1::text[], $2::text[], $3::text[]) ON CONFLICT DO NOTHING
       RETURNING tenant_id, achievement_id, event_id`,
      [
        [...rows.values()].map((x) => x[0]),
        [...rows.values()].map((x) => x[1]),
        [...rows.values()].map((x) => x[2]),
      ],
    );
    return new Set(r.rows.map((x) => `${x.tenant_id}\u0000${x.achievement_id}\u0000${x.event_id}`));
  }
}
