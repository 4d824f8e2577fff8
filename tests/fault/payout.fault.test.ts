/**
 * Fault test (distributed shape): the scheduler is killed with SIGKILL in the middle of paying a
 * closing leaderboard window (its transaction open in Postgres), then restarted. Every winner is
 * paid exactly once, and the window completes once.
 */
import { childEnv, spawnCli, type Spawned } from '../support/process';
import {
  call,
  createKey,
  createTenant,
  shapeEnv,
  startTestApp,
  tenantToken,
  type TestApp,
} from '../support/app';
import { stack } from '../support/stack';
import { killAndWaitGone, progressMarker, sessionCount } from '../support/sessions';
import { waitFor } from '../support/wait';

const WINNERS = 1000;
const APP_NAME = `ludus-payout-${process.pid}`;

describe('payout survives a scheduler killed mid-payout [distributed]', () => {
  let app: TestApp;
  let env: Record<string, string>;
  const children: Spawned[] = [];

  beforeAll(async () => {
    env = {
      ...shapeEnv('distributed'),
      LUDUS_RATE_LIMIT_INGEST: 'off',
      LUDUS_RATE_LIMIT_ADMIN: 'off',
      LUDUS_RATE_LIMIT_QUERY: 'off',
    };
    app = await startTestApp('distributed', { roles: 'ingest,api,processors', env });
  });
  afterAll(async () => {
    for (const c of children) c.child.kill('SIGKILL');
    await app.stop();
  });

  const scheduler = () => {
    const p = spawnCli(
      ['serve', '--roles', 'scheduler'],
      childEnv({
        ...env,
        LUDUS_DATABASE_URL: `${stack.pgUrl}?application_name=${APP_NAME}`,
        LUDUS_SCHEDULER_INTERVAL_MS: '200',
      }),
    );
    children.push(p);
    return p;
  };

  it('pays every winner exactly once', async () => {
    const mark = progressMarker('payout fault');
    const sql = app.ctx.adapters.sql;
    const t = await createTenant(app);
    const key = (await createKey(app, [t.id])).key;
    const admin = async (path: string, body: unknown) => {
      const r = await call('POST', `${app.url.admin}${path}?tenant_id=${t.id}`, {
        headers: { 'x-api-key': key },
        body,
      });
      expect([path, r.status]).toEqual([path, 201]);
      return r.body;
    };
    await admin('/v1/wallet/currencies', {
      id: 'coins',
      name: 'Coins',
      is_spendable: true,
      decimal_places: 0,
    });
    const item = await admin('/v1/reward-items', {
      name: '1 coin',
      reward_type: 'currency',
      payload: { currency_id: 'coins', amount: 1 },
    });
    const cfg = await admin('/v1/rewards-catalog', {
      name: 'all',
      tiers: [{ condition: { type: 'rank_range', start: 1, end: WINNERS }, item_ids: [item.item_id] }],
    });
    await admin('/v1/leaderboards', {
      leaderboard_id: 'cup',
      name: 'Cup',
      reward_config_id: cfg.reward_config_id,
      config: {
        timeframe: { type: 'all_time' },
        scoring: { rules: [{ event_type: 'play', points_expression: 'attrs.p' }], aggregation: 'sum' },
        ranking: { size: WINNERS },
      },
    });
    const token = await tenantToken(t);
    for (let i = 0; i < WINNERS; i += 100) {
      const events = Array.from({ length: 100 }, (_, j) => ({
        event_id: `e${i + j}`,
        type: 'play',
        actor: { user_id: `u${i + j}` },
        occurred_at: new Date().toISOString(),
        attrs: { p: i + j },
      }));
      const r = await call('POST', `${app.url.ingest}/v1/events/bulk`, {
        headers: { authorization: `Bearer ${token}` },
        body: { events },
      });
      expect(r.body.accepted).toBe(100);
    }
    const win = { tenant_id: t.id, leaderboard_id: 'cup', window_key: 'all_time' };
    await waitFor(
      async () => {
        const r = await sql.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM leaderboard_scores WHERE tenant_id = $1',
          [t.id],
        );
        return r.rows[0]?.n === WINNERS;
      },
      { what: `${WINNERS} scores`, timeoutMs: 60000 },
    );
    mark('scores in');
    // The window is due now (an all_time window would never end on its own).
    await sql.query(
      "UPDATE leaderboard_windows SET closes_at = 0 WHERE tenant_id = $1 AND leaderboard_id = 'cup'",
      [t.id],
    );

    // 1. Kill the scheduler while its closing transaction is open.
    const first = scheduler();
    await waitFor(async () => (await sessionCount(sql, APP_NAME, { openLongerThanMs: 300 })) > 0, {
      what: 'the payout transaction in progress',
      timeoutMs: 60000,
      intervalMs: 20,
    });
    mark('payout in progress');
    await killAndWaitGone(sql, first, APP_NAME);
    const status = async () =>
      (
        await sql.query<{ status: string }>(
          'SELECT status FROM leaderboard_windows WHERE tenant_id = $1 AND leaderboard_id = $2 AND window_key = $3',
          [win.tenant_id, win.leaderboard_id, win.window_key],
        )
      ).rows[0]?.status;
    // Postgres rolled the killed transaction back: nothing was paid, the window is still open.
    expect(await status()).toBe('open');
    const paidBefore = await sql.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM ledger WHERE tenant_id = $1 AND source_type = 'leaderboard_reward'",
      [t.id],
    );
    expect(paidBefore.rows[0]!.n).toBe(0);

    mark('killed and rolled back');
    // 2. Restart: the window closes and everyone is paid, once.
    const second = scheduler();
    await waitFor(async () => (await status()) === 'closed', { what: 'the window closed', timeoutMs: 60000 });
    mark('closed after the restart');
    second.child.kill('SIGTERM');
    await second.exited;
    const paid = await sql.query<{ user_id: string; n: number; total: number }>(
      `SELECT user_id, count(*)::int AS n, sum(amount)::int AS total FROM ledger
       WHERE tenant_id = $1 AND source_type = 'leaderboard_reward' GROUP BY user_id`,
      [t.id],
    );
    expect(paid.rows).toHaveLength(WINNERS);
    expect(paid.rows.every((r) => r.n === 1 && r.total === 1)).toBe(true);
    const balances = await sql.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM balances WHERE tenant_id = $1 AND currency_id = 'coins' AND available = 1 AND lifetime_earned = 1",
      [t.id],
    );
    expect(balances.rows[0]!.n).toBe(WINNERS);
    const completed = await sql.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM outbox WHERE tenant_id = $1 AND event_type = 'leaderboard.window_completed'",
      [t.id],
    );
    expect(completed.rows[0]!.n).toBe(1);
  }, 240_000);
});
