/**
 * The scheduler against real components (PGlite, the SQL analytics store, the in-memory rank
 * index): a job that fails on one item skips it and goes on with the others, retrying it with a
 * per-item backoff; a job that keeps failing backs off as a whole; both show in the metrics. The
 * backoff runs on real time, moved by hand here.
 */
import { SqlAnalytics } from '../adapters/analytics/sql';
import { MemoryRankIndex } from '../adapters/ranks/memory';
import type { Sql } from '../adapters/sql/types';
import { ManualClock } from '../core/clock';
import { FactBus } from '../core/facts';
import { createBoard, ensureWindows, getWindow, upsertScores } from '../core/leaderboards/store';
import { createLogger } from '../shared/logger';
import { Metrics } from '../shared/metrics';
import { openTestPglite, uniqueName } from '../tests/support/stack';
import { closeWindowsJob } from './jobs';
import { Scheduler, type ScheduledJob } from './scheduler';

const log = createLogger('silent');

async function metricValue(m: Metrics, name: string, labels: Record<string, string>): Promise<number> {
  const all = await m.registry.getMetricsAsJSON();
  const metric = all.find((x) => x.name === name);
  const v = metric?.values.find((x) => Object.entries(labels).every(([k, l]) => x.labels[k] === l));
  return v?.value ?? 0;
}

describe('scheduler [PGlite]', () => {
  let sql: Sql;
  beforeAll(async () => {
    sql = await openTestPglite();
  });
  afterAll(() => sql.close());

  it('skips a window that fails to close, closes the others, and retries it with backoff', async () => {
    const tenant = uniqueName('t');
    const boards = ['a', 'b', 'c'];
    for (const id of boards) {
      await createBoard(
        sql,
        {
          tenant_id: tenant,
          leaderboard_id: id,
          name: id,
          description: null,
          reward_config_id: null,
          config: {
            timeframe: { type: 'daily', timezone: 'UTC' },
            scoring: { rules: [{ event_type: 'x', points_expression: 'attrs.p' }], aggregation: 'sum' },
          },
        },
        0,
      );
      const w = { tenant_id: tenant, leaderboard_id: id, window_key: '1970-01-01' };
      await ensureWindows(sql, [{ ...w, starts_at: 0, ends_at: 1000, closes_at: 1000 }]);
      await upsertScores(sql, [{ ...w, user_id: 'u', score: 1, total: 1, n: 1, tiebreak: 1, partition: 0 }]);
    }
    // Board b's reward payout is broken (a bad reward configuration, say) until it is fixed.
    let broken = true;
    const attempts: string[] = [];
    const facts = new FactBus().register({
      feature: 'payout',
      on: {
        'leaderboard.rank_finalized': async (_q, [rank]) => {
          attempts.push(rank!.leaderboard_id);
          if (broken && rank!.leaderboard_id === 'b') throw new Error('reward config broken');
        },
      },
    });
    const metrics = new Metrics(false);
    let time = 1_000_000;
    const job = closeWindowsJob(
      { sql, analytics: new SqlAnalytics(sql), ranks: new MemoryRankIndex(), facts, log, metrics },
      100,
      () => time,
    );
    const status = async (id: string) =>
      (await getWindow(sql, { tenant_id: tenant, leaderboard_id: id, window_key: '1970-01-01' }))!;

    await job.run(2000);
    expect((await status('a')).status).toBe('closed');
    expect((await status('b')).status).toBe('open');
    expect((await status('c')).status).toBe('closed');
    expect((await status('c')).exported).toBe(true);
    expect(await metricValue(metrics, 'ludus_scheduler_item_failures_total', {})).toBe(1);

    // Within its backoff (1 s) the failing window is not tried again.
    attempts.length = 0;
    time += 999;
    await job.run(2000);
    expect(attempts).toEqual([]);
    // Then it is, and fails again: the next wait doubles (2 s).
    time += 1;
    await job.run(2000);
    expect(attempts).toEqual(['b']);
    time += 1999;
    await job.run(2000);
    expect(attempts).toEqual(['b']);
    // Fixed: the next retry closes and exports it.
    broken = false;
    time += 1;
    await job.run(2000);
    expect(await status('b')).toMatchObject({ status: 'closed', exported: true });
    expect(await metricValue(metrics, 'ludus_scheduler_item_failures_total', {})).toBe(2);
    const snap = await new SqlAnalytics(sql).listSnapshots(tenant, 'b', 0, 10_000, 10);
    expect(snap).toHaveLength(1);
  });

  it('backs a failing job off exponentially (capped) while the other jobs run every tick', async () => {
    let time = 5_000_000;
    const runs = { bad: 0, good: 0 };
    let failing = true;
    const jobs: ScheduledJob[] = [
      {
        name: 'bad',
        run: async () => {
          runs.bad++;
          if (failing) throw new Error('store unavailable');
        },
      },
      { name: 'good', run: async () => void runs.good++ },
    ];
    const metrics = new Metrics(false);
    const scheduler = new Scheduler({ sql, clock: new ManualClock(0), log, metrics }, jobs, 1000, 15_000, {
      initialMs: 100,
      maxMs: 400,
      time: () => time,
    });
    const ticks = async (n: number, step: number) => {
      for (let i = 0; i < n; i++) {
        expect(await scheduler.tick()).toBe(true);
        time += step;
      }
    };
    // Failures at t = 0, 100, 300, 700, 1100 (waits 100, 200, 400, 400: capped).
    await ticks(120, 10);
    expect(runs.good).toBe(120);
    expect(runs.bad).toBe(5);
    expect(await metricValue(metrics, 'ludus_scheduler_job_failures_total', { job: 'bad' })).toBe(5);
    expect(await metricValue(metrics, 'ludus_scheduler_job_backoff_seconds', { job: 'bad' })).toBe(0.4);
    // Recovered: it runs every tick again and the gauge drops to 0.
    failing = false;
    time += 400;
    await ticks(3, 10);
    expect(runs.bad).toBe(8);
    expect(await metricValue(metrics, 'ludus_scheduler_job_backoff_seconds', { job: 'bad' })).toBe(0);
    await scheduler.stop();
  });
});
