/**
 * Pipeline step: achievements (core/achievements/). For every fresh event, every active
 * achievement of its tenant with event criteria (event_count, streak) whose leaf matches it (event
 * type and conditions, the one rules module) gets one change of that leaf's progress; the batch's
 * changes go through the achievement engine in one call (progress rows locked in key order,
 * written in one statement, completions with their rewards and `achievement.completed` facts), in
 * the batch's transaction: exactly once per event. The events' users are recorded as active users
 * of tenants with achievements (rarity's denominator), one statement per batch.
 *
 * Backfill seam (docs/achievements.md "Backfill"): while an achievement's backfill runs, the
 * events this step counts for it are recorded, and the history scan skips them.
 */
import type { Queryable } from '../../adapters/sql/types';
import { applyEvent } from '../../core/achievements/criteria';
import { type AchievementEngine, type PartChange } from '../../core/achievements/progress';
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
  /** Achievements whose backfill is running: the events counted live are recorded for them. */
  backfilling: Set<string>;
}

export class AchievementStep implements PipelineStep<AchievementsLoaded> {
  readonly name = 'achievements';

  constructor(private readonly engine: AchievementEngine) {}

  async load(q: Queryable, batch: StepBatch): Promise<AchievementsLoaded> {
    if (batch.events.length === 0) return { byTenant: new Map(), backfilling: new Set() };
    // The backfill seam: a backfill starts under FOR UPDATE of the tenant's row, so a batch
    // either loaded the tenant's achievements before that commit (and committed before it) or
    // after it, seeing what the backfill set up (docs/achievements.md "Backfill").
    await q.query('SELECT id FROM tenants WHERE id = ANY($1::text[]) ORDER BY id FOR KEY SHARE', [
      [...batch.tenants],
    ]);
    const byTenant = await activeByRefs(q, batch.tenants, null);
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
    const changes: PartChange[] = [];
    const eventOf: number[] = [];
    const live: Array<{ tenant_id: string; achievement_id: string; event_id: string }> = [];
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
      for (const a of list) {
        let counted = false;
        for (const l of a.eventLeaves) {
          if (!l.matchesType(view.type) || !l.condition.test(view)) continue;
          day ??= windowAt({ type: 'daily', timezone }, event.occurred_at).key;
          const d = day;
          changes.push({ a, user_id: event.user_id, part: l.key, apply: (s) => applyEvent(l.leaf, s, d) });
          eventOf.push(i);
          counted = true;
        }
        if (counted && loaded.backfilling.has(`${a.def.tenant_id}\u0000${a.def.id}`))
          live.push({ tenant_id: a.def.tenant_id, achievement_id: a.def.id, event_id: event.event_id });
      }
    });
    const result = await this.engine.advance(q, changes, batch.now);
    result.changed.forEach((c, k) => {
      if (c) effects[eventOf[k]!] = applied;
    });
    if (live.length)
      await q.query(
        `INSERT INTO achievement_backfill_live (tenant_id, achievement_id, event_id)
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[]) ON CONFLICT DO NOTHING`,
        [live.map((x) => x.tenant_id), live.map((x) => x.achievement_id), live.map((x) => x.event_id)],
      );
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
}
