/**
 * Automatic generation (`config.auto_generate`): coupons react to the outcomes other features
 * emit as facts, in the emitter's transaction (core/facts.ts), and generate one coupon per
 * outcome and active definition whose trigger matches:
 *
 * | trigger | fact | matches when | outcome key |
 * |---|---|---|---|
 * | achievement_completed | achievement.completed | achievement_id | `achievement:<id>:<user>` |
 * | streak_milestone | streak.milestone_reached | streak_id and threshold = milestone_threshold | `streak:<id>:<threshold>:<user>:<time>` |
 * | leaderboard_rank | leaderboard.rank_finalized | leaderboard_id and rank <= rank_threshold | `leaderboard:<id>:<window>:<user>` |
 *
 * The outcome key is unique per definition (user_coupons_source), so a retried cause generates
 * nothing more; a paused or archived definition generates nothing. Each new coupon is emitted
 * as `coupon.generated` (the outbox turns it into the webhook of that name).
 */
import type { Queryable } from '../../adapters/sql/types';
import type { FactBus, Reactions } from '../facts';
import type { Random } from '../random';
import { toDefinition, type DefinitionRow, type Trigger } from './definitions';
import { generateCoupons } from './generate';

interface Outcome {
  tenant_id: string;
  user_id: string;
  key: string;
  now: number;
  matches(d: DefinitionRow): boolean;
}

async function activeAuto(q: Queryable, tenantId: string, trigger: Trigger): Promise<DefinitionRow[]> {
  const r = await q.query<Parameters<typeof toDefinition>[0]>(
    `SELECT * FROM coupon_definitions WHERE tenant_id = $1 AND status = 'active'
       AND (config->'auto_generate'->>'enabled')::boolean AND config->'auto_generate'->>'trigger' = $2
     ORDER BY created_at, id`,
    [tenantId, trigger],
  );
  return r.rows.map(toDefinition);
}

/** Generates the coupons of a batch of outcomes of one trigger (grouped by tenant and definition). */
async function generateFor(
  q: Queryable,
  facts: FactBus,
  random: Random,
  trigger: Trigger,
  outcomes: Outcome[],
): Promise<void> {
  const tenants = [...new Set(outcomes.map((o) => o.tenant_id))];
  for (const tenant of tenants) {
    const defs = await activeAuto(q, tenant, trigger);
    if (defs.length === 0) continue;
    const mine = outcomes.filter((o) => o.tenant_id === tenant);
    for (const d of defs) {
      const hit = mine.filter((o) => o.matches(d));
      if (hit.length === 0) continue;
      const now = hit[0]!.now;
      const out = await generateCoupons(
        q,
        random,
        d,
        hit.map((o) => o.user_id),
        { source: trigger, source_keys: hit.map((o) => o.key), now },
      );
      const fresh = out.coupons.filter((c) => c.created);
      await facts.emit(
        q,
        'coupon.generated',
        fresh.map((c) => ({
          tenant_id: tenant,
          user_id: c.user_id,
          definition_id: d.id,
          coupon_id: c.coupon_id,
          code: c.code,
          trigger,
          source_key: c.source_key ?? '',
          expires_at: d.config.expires_at ?? null,
          now,
        })),
      );
    }
  }
}

/** What coupons listen to: the three outcomes of automatic generation. */
export function couponReactions(facts: FactBus, random: Random): Reactions {
  return {
    feature: 'coupons',
    on: {
      'achievement.completed': (q, fs) =>
        generateFor(
          q,
          facts,
          random,
          'achievement_completed',
          fs.map((f) => ({
            tenant_id: f.tenant_id,
            user_id: f.user_id,
            key: `achievement:${f.achievement_id}:${f.user_id}`,
            now: f.now,
            matches: (d) => d.config.auto_generate?.trigger_config?.achievement_id === f.achievement_id,
          })),
        ),
      'streak.milestone_reached': (q, fs) =>
        generateFor(
          q,
          facts,
          random,
          'streak_milestone',
          fs.map((f) => ({
            tenant_id: f.tenant_id,
            user_id: f.user_id,
            key: `streak:${f.streak_id}:${f.threshold}:${f.user_id}:${f.now}`,
            now: f.now,
            matches: (d) => {
              const t = d.config.auto_generate?.trigger_config;
              return t?.streak_id === f.streak_id && t.milestone_threshold === f.threshold;
            },
          })),
        ),
      'leaderboard.rank_finalized': async (q, fs) => {
        await generateFor(
          q,
          facts,
          random,
          'leaderboard_rank',
          fs.map((f) => ({
            tenant_id: f.tenant_id,
            user_id: f.user_id,
            key: `leaderboard:${f.leaderboard_id}:${f.window_key}:${f.user_id}`,
            now: f.now,
            matches: (d) => {
              const t = d.config.auto_generate?.trigger_config;
              return t?.leaderboard_id === f.leaderboard_id && f.rank <= (t.rank_threshold ?? 0);
            },
          })),
        );
      },
    },
  };
}
