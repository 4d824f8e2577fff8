/**
 * Streaks benchmark (issue 14), on the real Postgres of the stack, in a schema of its own:
 *
 * 1. Pipeline steps: batches of 1000 events through the earning-rule step alone (the same-run
 *    baseline) and through the earning-rule step followed by the streak step with three active
 *    definitions (daily calendar in a DST zone, rolling, a sum with an expression), each batch in
 *    one transaction as the pipeline runs it. Figure: events per second.
 * 2. The deadline sweep: N users whose streak deadline has passed (each a break or a freeze), swept
 *    in batches of 1000 (`sweepDue`), against the same-run baseline of a bare batched update of the
 *    same rows (SELECT ... FOR UPDATE SKIP LOCKED then UPDATE, no engine, no history, no facts).
 *
 *   node --import tsx bench/streaks.ts [--events 20000] [--users 100000]
 *
 * Writes bench/results/streaks-<date>.json and prints a summary. Leaves nothing behind (drops its
 * schema).
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { migrate } from '../adapters/sql/migrate';
import { PgSql } from '../adapters/sql/pg';
import { FactBus } from '../core/facts';
import { eventView } from '../core/leaderboards/definition';
import { outboxReactions } from '../core/outbox';
import { Granter } from '../core/rewards/grant';
import { createDefinition } from '../core/streaks/definitions';
import { sweepDue } from '../core/streaks/sweep';
import { createRule } from '../core/wallet/earning';
import { Wallet } from '../core/wallet/wallet';
import { EarningStep } from '../processors/pipeline/earning';
import { runSteps, type AnyStep, type StepBatch } from '../processors/pipeline/step';
import { StreakStep } from '../processors/pipeline/streaks';
import type { EventRecord } from '../schemas/topics';

const arg = (name: string, dflt: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
};
const EVENTS = arg('events', 20_000);
const USERS = arg('users', 100_000);
const DAY = 86_400_000;
const T0 = Date.parse('2026-11-02T08:00:00Z');

function batchOf(from: number, n: number, tenant: string): StepBatch {
  const events = Array.from({ length: n }, (_, k) => {
    const i = from + k;
    const event: EventRecord = {
      tenant_id: tenant,
      event_id: `e${i}`,
      type: 'lesson',
      user_id: `u${i % 5000}`,
      occurred_at: T0 + Math.floor(i / 5000) * DAY + (i % 3600) * 1000,
      received_at: T0,
      attrs_json: JSON.stringify({ minutes: 10 + (i % 30), mode: i % 4 === 0 ? 'practice' : 'lesson' }),
      actor_metadata_json: null,
      subject_json: null,
    };
    return {
      index: k,
      record: {
        topic: 'bench',
        partition: 0,
        offset: i,
        key: `${tenant}:${event.user_id}`,
        value: event,
        timestamp: 0,
      },
      event,
      view: eventView(event),
    };
  });
  return {
    parts: [{ partition: 0, firstOffset: from, nextOffset: from + n }],
    events,
    replayed: [],
    tenants: [tenant],
    timezones: new Map([[tenant, 'UTC']]),
    now: T0 + 30 * DAY,
  };
}

async function timeSteps(sql: PgSql, steps: AnyStep[], tenant: string): Promise<number> {
  const started = performance.now();
  for (let i = 0; i < EVENTS; i += 1000) {
    const b = batchOf(i, Math.min(1000, EVENTS - i), tenant);
    await sql.tx((q) => runSteps(q, steps, b));
  }
  return EVENTS / ((performance.now() - started) / 1000);
}

async function main() {
  const schema = `bench_streaks_${randomBytes(4).toString('hex')}`;
  const url = process.env.LUDUS_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/ludus_test';
  const sql = new PgSql({ url, schema, max: 4 });
  await sql.init();
  const out: Record<string, unknown> = {
    date: new Date().toISOString(),
    note: 'busy machine, 5 builders running',
    events: EVENTS,
    users: USERS,
  };
  try {
    await migrate(sql);
    const facts = new FactBus().register(outboxReactions);
    const wallet = new Wallet(facts);
    const granter = new Granter(wallet);
    const deps = { facts, granter };
    for (const t of ['base', 'strk']) {
      await sql.query(
        `INSERT INTO currencies (tenant_id, id, name, is_spendable, decimal_places, created_at, updated_at)
         VALUES ($1, 'coins', 'c', true, 0, now(), now())`,
        [t],
      );
      await createRule(
        sql,
        t,
        {
          name: 'r',
          currency_id: 'coins',
          event_type: 'lesson',
          event_filter: null,
          calculation: { type: 'fixed', amount: 1 },
          max_per_event: null,
          max_per_day: null,
          max_per_week: null,
          priority: 0,
          active: true,
        },
        T0,
      );
    }
    const configs = [
      {
        event_types: ['lesson'],
        window: {
          type: 'calendar' as const,
          period: 'daily' as const,
          timezone: 'Europe/Berlin',
          reset_time: '04:00',
        },
        condition: { type: 'count' as const, min: 1 },
        milestones: [{ threshold: 3, reward_item_id: null, repeatable: true }],
        at_risk_seconds: 7200,
      },
      {
        event_types: ['*'],
        window: { type: 'rolling' as const, duration_seconds: 2 * 86400 },
        condition: { type: 'count' as const, min: 2 },
      },
      {
        event_types: ['lesson'],
        expression: { condition: { field: 'mode', operator: 'ne', value: 'practice' } },
        window: {
          type: 'calendar' as const,
          period: 'weekly' as const,
          timezone: 'America/New_York',
          reset_time: '06:00',
        },
        condition: { type: 'sum' as const, min: 60, field: 'minutes' },
      },
    ];
    for (const [i, c] of configs.entries())
      await createDefinition(sql, 'strk', { name: `s${i}`, config: c }, T0);

    const baseline = await timeSteps(sql, [new EarningStep(wallet)], 'base');
    const withStreaks = await timeSteps(sql, [new EarningStep(wallet), new StreakStep(deps)], 'strk');
    out.pipeline = {
      what: 'events/s through the steps, batches of 1000, one transaction each (no scoring step, no log)',
      baseline_earning_only: Math.round(baseline),
      earning_and_streaks_3_definitions: Math.round(withStreaks),
      ratio: Number((withStreaks / baseline).toFixed(2)),
    };
    process.stderr.write(`pipeline: ${JSON.stringify(out.pipeline)}\n`);

    // 2. The sweep: USERS streaks of 2 whose next period ended unqualified; 1 in 10 holds a freeze.
    const def = await createDefinition(sql, 'sweep', { name: 'sweep', config: configs[0]! }, T0);
    const fill = (streak: string) =>
      sql.query(
        `INSERT INTO streak_progress (tenant_id, streak_id, user_id, current_count, longest_count, run, freezes,
           period_key, period_start, period_end, period_value, qualified, frozen, at_risk_start, due_at, last_event_at, updated_at)
         SELECT 'sweep', $1, 'u' || g, 2, 2, 0, CASE WHEN g % 10 = 0 THEN 1 ELSE 0 END,
           '2026-11-01', $2::bigint, $3::bigint, 1, true, false, NULL, $4::bigint, $2::bigint, $2::bigint
         FROM generate_series(1, $5::int) g`,
        [
          streak,
          Date.parse('2026-11-01T03:00:00Z'),
          Date.parse('2026-11-02T03:00:00Z'),
          Date.parse('2026-11-03T01:00:00Z'),
          USERS,
        ],
      );
    await fill(def.id);
    const now = Date.parse('2026-11-04T12:00:00Z');
    let started = performance.now();
    const r = await sweepDue(sql, deps, now, { batch: 1000, maxBatches: 1_000_000 });
    const sweepMs = performance.now() - started;
    // Baseline: the same rows, a bare batched lock-and-update.
    await sql.query('DELETE FROM streak_progress WHERE tenant_id = $1', ['sweep']);
    await fill('baseline');
    started = performance.now();
    for (;;) {
      const n = await sql.tx(async (q) => {
        const rows = await q.query<{ user_id: string }>(
          `SELECT user_id FROM streak_progress WHERE due_at <= $1 ORDER BY due_at LIMIT 1000 FOR UPDATE SKIP LOCKED`,
          [now],
        );
        if (rows.rows.length === 0) return 0;
        await q.query(
          `UPDATE streak_progress SET current_count = 0, due_at = NULL WHERE tenant_id = 'sweep' AND streak_id = 'baseline' AND user_id = ANY($1::text[])`,
          [rows.rows.map((x) => x.user_id)],
        );
        return rows.rows.length;
      });
      if (n === 0) break;
    }
    const baseMs = performance.now() - started;
    const outbox = await sql.query<{ event_type: string; n: number }>(
      `SELECT event_type, count(*)::int AS n FROM outbox WHERE tenant_id = 'sweep' GROUP BY 1 ORDER BY 1`,
    );
    out.sweep = {
      what: `seconds to sweep ${USERS} expired streaks (batches of 1000)`,
      rows: r.rows,
      batches: r.batches,
      sweep_seconds: Number((sweepMs / 1000).toFixed(2)),
      baseline_bare_update_seconds: Number((baseMs / 1000).toFixed(2)),
      ratio: Number((sweepMs / baseMs).toFixed(2)),
      outbox: outbox.rows,
    };
    process.stderr.write(`sweep: ${JSON.stringify(out.sweep)}\n`);
    const dir = join(__dirname, 'results');
    mkdirSync(dir, { recursive: true });
    const file = join(dir, `streaks-${new Date().toISOString().slice(0, 10)}.json`);
    writeFileSync(file, JSON.stringify(out, null, 2) + '\n');
    process.stdout.write(`${JSON.stringify(out, null, 2)}\nwritten to ${file}\n`);
  } finally {
    await sql.exec(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
    await sql.close();
  }
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
