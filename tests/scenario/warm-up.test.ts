/**
 * Issue 19: the pipeline's warm-up (processors/warm-up.ts, processors/pipeline/rehearsal.ts), in
 * both shapes. The app starts with a warm-up (before it listens), and a further warm-up run here
 * applies synthetic rounds through every step in two transactions at once; afterwards no row of a
 * synthetic tenant is left in any table, no offset moved, no metric counted a synthetic record, no
 * rank key was written, and a real event is scored as usual.
 */
import { Redis } from 'ioredis';
import { warmUp } from '../../processors/warm-up';
import { buildPipeline } from '../../runtime/roles';
import {
  call,
  createKey,
  createTenant,
  SHAPES,
  startTestApp,
  tenantToken,
  type TestApp,
} from '../support/app';
import { stack } from '../support/stack';
import { waitFor } from '../support/wait';

const SYNTHETIC = 'ludus-warm-up-%';

describe.each(SHAPES)('pipeline warm-up [%s]', (shape) => {
  let app: TestApp;

  beforeAll(async () => {
    app = await startTestApp(shape, { env: { LUDUS_PIPELINE_WARM_UP_MS: '300' } });
  }, 120_000);
  afterAll(() => app?.stop());

  /** Rows of synthetic tenants in every table that has a tenant column, and in `tenants`. */
  async function syntheticRows(): Promise<Record<string, number>> {
    const sql = app.ctx.adapters.sql;
    const tables = await sql.query<{ table_name: string }>(
      `SELECT table_name FROM information_schema.columns
       WHERE table_schema = current_schema() AND column_name = 'tenant_id' ORDER BY table_name`,
    );
    expect(tables.rows.length).toBeGreaterThan(20);
    const out: Record<string, number> = {};
    for (const { table_name } of tables.rows) {
      const r = await sql.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM "${table_name}" WHERE tenant_id LIKE $1`,
        [SYNTHETIC],
      );
      if (r.rows[0]!.n > 0) out[table_name] = r.rows[0]!.n;
    }
    const t = await sql.query<{ n: number }>('SELECT count(*)::int AS n FROM tenants WHERE id LIKE $1', [
      SYNTHETIC,
    ]);
    if (t.rows[0]!.n > 0) out.tenants = t.rows[0]!.n;
    return out;
  }

  const consumerMetrics = async () =>
    (await (await fetch(`${app.url.ops}/metrics`)).text())
      .split('\n')
      .filter((l) => l.startsWith('ludus_consumer_records_total'))
      .join('\n');

  const offsets = async () =>
    (await app.ctx.adapters.sql.query('SELECT * FROM consumer_offsets ORDER BY group_id, topic, partition'))
      .rows;

  it('applies synthetic rounds through every step, then leaves nothing behind', async () => {
    const ctx = app.ctx;
    const metricsBefore = await consumerMetrics();
    const offsetsBefore = await offsets();
    const p = buildPipeline(ctx);
    // What the steps write, seen from inside the rehearsal's transaction before it rolls back.
    const seen = new Map<string, number>();
    const counting = {
      ...p,
      apply: async (q: Parameters<typeof p.apply>[0], batch: Parameters<typeof p.apply>[1]) => {
        const res = await p.apply(q, batch);
        for (const table of ['leaderboard_scores', 'ledger', 'streak_progress', 'achievement_progress']) {
          const r = await q.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM "${table}" WHERE tenant_id LIKE $1`,
            [SYNTHETIC],
          );
          seen.set(table, r.rows[0]!.n);
        }
        return res;
      },
    };
    const res = await warmUp({ sql: ctx.adapters.sql, log: ctx.log }, counting, {
      budgetMs: 200,
      transactions: 2,
    });
    expect(res.failed).toBeUndefined();
    // At least one round of 500 in each of the two transactions, every record with an outcome.
    expect(res.records).toBeGreaterThanOrEqual(1000);
    expect(res.records % 500).toBe(0);
    // The steps did write (inside the transaction): scores, credits.
    for (const table of ['leaderboard_scores', 'ledger', 'streak_progress', 'achievement_progress'])
      expect([table, seen.get(table)]).toEqual([table, expect.any(Number)]);
    expect(seen.get('leaderboard_scores')).toBeGreaterThan(0);
    expect(seen.get('ledger')).toBeGreaterThan(0);
    expect(seen.get('streak_progress')).toBeGreaterThan(0);
    expect(seen.get('achievement_progress')).toBeGreaterThan(0);

    expect(await syntheticRows()).toEqual({});
    expect(await offsets()).toEqual(offsetsBefore);
    expect(await consumerMetrics()).toBe(metricsBefore);
    if (shape === 'distributed') {
      const redis = new Redis(stack.redisUrl);
      try {
        expect(await redis.keys('*ludus-warm-up-*')).toEqual([]);
      } finally {
        redis.disconnect();
      }
    }
  }, 120_000);

  it('a real event is scored as usual after the warm-up', async () => {
    const t = await createTenant(app);
    const key = (await createKey(app, [t.id])).key;
    const board = await call('POST', `${app.url.admin}/v1/leaderboards?tenant_id=${t.id}`, {
      headers: { 'x-api-key': key },
      body: {
        leaderboard_id: 'points',
        name: 'points',
        config: {
          timeframe: { type: 'all_time' },
          scoring: { rules: [{ event_type: '*', points_expression: 'attrs.p' }], aggregation: 'sum' },
        },
      },
    });
    expect(board.status).toBe(201);
    const token = await tenantToken(t);
    const sent = await call('POST', `${app.url.ingest}/v1/events`, {
      headers: { authorization: `Bearer ${token}` },
      body: {
        event_id: 'after-warm-up',
        type: 'match',
        actor: { user_id: 'u1' },
        occurred_at: new Date().toISOString(),
        attrs: { p: 7 },
      },
    });
    expect(sent.status).toBe(202);
    let last: unknown;
    await waitFor(
      async () => {
        const r = await call('GET', `${app.url.query}/v1/leaderboards/points/score/u1`, {
          headers: { authorization: `Bearer ${token}` },
        });
        last = r.body;
        return r.body.found === true && r.body.score === 7;
      },
      { timeoutMs: 20000, what: 'score 7 of u1', describe: () => JSON.stringify(last) },
    );
    expect(await syntheticRows()).toEqual({});
  }, 60_000);
});
