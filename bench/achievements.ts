/**
 * A small stand-alone measurement of achievements (issue 15), not yet a workload of bench/run.ts:
 * on PGlite (the embedded store), in one process,
 *   1. the pipeline's dedupe + achievements step over batches of 1,000 events with 50 active
 *      achievements of mixed criteria (event_count with conditions, streak, combined, cumulative),
 *      against the same batches with no achievement (same-run baseline: dedupe and the step's load);
 *   2. a backfill's speed (events and users per second) over the history those events left in the
 *      embedded analytics tables.
 * Run: `npx tsx bench/achievements.ts [events]` (default 20,000). Prints JSON.
 */
import { SqlAnalytics } from '../adapters/analytics/sql';
import { PgliteSql } from '../adapters/sql/pglite';
import { migrate } from '../adapters/sql/migrate';
import type { Queryable, Sql } from '../adapters/sql/types';
import { Backfills } from '../core/achievements/backfill';
import { validateCriteria } from '../core/achievements/criteria';
import { AchievementEngine, achievementReactions } from '../core/achievements/progress';
import { createAchievement } from '../core/achievements/store';
import { markProcessed } from '../core/events/processed';
import { FactBus } from '../core/facts';
import { eventView } from '../core/leaderboards/definition';
import { outboxReactions } from '../core/outbox';
import { SeededRandom } from '../core/random';
import { Granter } from '../core/rewards/grant';
import { Wallet } from '../core/wallet/wallet';
import { AchievementStep } from '../processors/pipeline/achievements';
import { runSteps, type StepBatch } from '../processors/pipeline/step';
import type { EventRecord } from '../schemas/topics';

const DAY = 86_400_000;
const BASE = Date.UTC(2026, 10, 1);

async function runBatch(q: Queryable, step: AchievementStep, records: EventRecord[], offset: number) {
  const fresh = await markProcessed(q, records);
  const events = fresh.map((i) => ({
    index: i,
    record: {
      topic: 'ludus.events',
      partition: 0,
      offset: offset + i,
      key: '',
      value: records[i]!,
      timestamp: 0,
    },
    event: records[i]!,
    view: eventView(records[i]!),
  }));
  const batch: StepBatch = {
    partition: 0,
    nextOffset: offset + records.length,
    firstOffset: offset,
    events,
    replayed: [],
    tenants: [...new Set(records.map((r) => r.tenant_id))],
    timezones: new Map(records.map((r) => [r.tenant_id, 'UTC'])),
    now: BASE + 30 * DAY,
  };
  return runSteps(q, [step], batch);
}

function events(tenant: string, n: number, seed: number): EventRecord[] {
  let s = seed;
  const next = (m: number) => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0), (s >>> 8) % m);
  return Array.from({ length: n }, (_, i) => {
    const t = BASE + next(28) * DAY;
    return {
      tenant_id: tenant,
      event_id: `${tenant}-${i}`,
      type: ['play', 'win', 'login', 'buy'][next(4)]!,
      user_id: `u${next(2000)}`,
      occurred_at: t,
      received_at: t,
      attrs_json: JSON.stringify({ mode: next(2) ? 'ranked' : 'casual', level: next(10) }),
      actor_metadata_json: null,
      subject_json: null,
    };
  });
}

async function drain(sql: Sql, step: AchievementStep, recs: EventRecord[]): Promise<number> {
  const t0 = performance.now();
  for (let i = 0; i < recs.length; i += 1000)
    await sql.tx((q) => runBatch(q, step, recs.slice(i, i + 1000), i));
  return recs.length / ((performance.now() - t0) / 1000);
}

async function main() {
  const n = Number(process.argv[2] ?? 20_000);
  const sql = await PgliteSql.open();
  await migrate(sql);
  const random = new SeededRandom('bench');
  const facts = new FactBus();
  const engine = new AchievementEngine(facts, new Granter(new Wallet(facts, random), random));
  facts.register(outboxReactions, achievementReactions(engine));
  const step = new AchievementStep(engine);
  await sql.query(
    `INSERT INTO tenants (id, name, jwt_secret_enc, hmac_secret_enc, created_at, updated_at)
     VALUES ('base', 'base', 'x', 'x', now(), now()), ('ach', 'ach', 'x', 'x', now(), now())`,
  );
  await sql.query(
    `INSERT INTO currencies (tenant_id, id, name, is_spendable, decimal_places, created_at, updated_at)
     VALUES ('ach', 'xp', 'XP', false, 0, now(), now())`,
  );
  const kinds = (i: number): unknown => {
    const type = ['play', 'win', 'login', 'buy'][i % 4]!;
    switch (i % 5) {
      case 0:
        return { type: 'event_count', event_type: type, threshold: 5 + i };
      case 1:
        return {
          type: 'event_count',
          event_type: type,
          conditions: { mode: { eq: 'ranked' } },
          threshold: 3 + i,
        };
      case 2:
        return { type: 'streak', event_type: type, threshold: 3 + (i % 4) };
      case 3:
        return {
          type: 'combined',
          operator: 'and',
          conditions: [
            { type: 'event_count', event_type: type, threshold: 10 },
            {
              type: 'combined',
              operator: 'and',
              conditions: [{ type: 'streak', event_type: 'login', threshold: 2 }],
            },
          ],
        };
      default:
        return { type: 'cumulative', metric: 'xp', threshold: 100 + i };
    }
  };
  for (let i = 0; i < 50; i++) {
    const v = validateCriteria(kinds(i));
    if (!v.ok) throw new Error(v.error);
    await createAchievement(sql, random, 'ach', { name: `a${i}`, criteria: v.criteria }, BASE);
  }
  const baseline = await drain(sql, step, events('base', n, 1));
  const withAchievements = await drain(sql, step, events('ach', n, 1));

  // Backfill speed: the same events as history of a new tenant with one event_count achievement.
  const analytics = new SqlAnalytics(sql);
  const hist = events('hist', n, 2);
  for (let i = 0; i < hist.length; i += 1000)
    await analytics.insertEvents(
      hist.slice(i, i + 1000).map(({ actor_metadata_json: _a, subject_json: _s, ...e }) => e),
    );
  await sql.query(
    `INSERT INTO tenants (id, name, jwt_secret_enc, hmac_secret_enc, created_at, updated_at) VALUES ('hist', 'hist', 'x', 'x', now(), now())`,
  );
  const v = validateCriteria({
    type: 'event_count',
    event_type: 'play',
    conditions: { mode: { eq: 'ranked' } },
    threshold: 5,
  });
  if (!v.ok) throw new Error(v.error);
  const a = await createAchievement(sql, random, 'hist', { name: 'h', criteria: v.criteria }, BASE);
  const backfills = new Backfills({
    sql,
    analytics,
    engine,
    random,
    offsets: { topic: 'none', pipelineGroup: 'none', sinkGroup: 'none' },
  });
  await backfills.start('hist', a.id, false, BASE);
  const t0 = performance.now();
  while (await backfills.step(BASE)) {
    /* chunk by chunk */
  }
  const s = (performance.now() - t0) / 1000;
  const job = await backfills.latest('hist', a.id);
  console.log(
    JSON.stringify(
      {
        note: 'PGlite in one process; busy machine, 5 builders running',
        events: n,
        step_events_per_s: {
          baseline_no_achievements: Math.round(baseline),
          with_50_achievements: Math.round(withAchievements),
          ratio: +(withAchievements / baseline).toFixed(2),
        },
        backfill: {
          events_read: job?.events_read,
          users: job?.users_done,
          completed: job?.completed,
          seconds: +s.toFixed(2),
          events_per_s: Math.round((job?.events_read ?? 0) / s),
          users_per_s: Math.round((job?.users_done ?? 0) / s),
        },
      },
      null,
      2,
    ),
  );
  await sql.close();
}

void main();
