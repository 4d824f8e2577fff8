/**
 * Fault test (distributed shape), in two steps over one stream:
 *
 * 1. Earning-rule credits across a processor crash: while events stream in through the ingestion
 *    gateway, the processor process is SIGKILLed in the middle of a batch and restarted. After the
 *    stream drains, the ledger equals the reference: every (rule, event) credited exactly once,
 *    every balance equal to what the rules give and to the sum of its ledger rows.
 * 2. Invariant 5 (determinism): replaying the same log into empty state rebuilds the same state.
 *    A fresh processor over the same topics, with a new Postgres schema (holding only the
 *    configuration: tenant, currency, rules, board) and a new Redis prefix, consumes the log from
 *    the start; its scores, balances and ledger equal the first run's.
 *
 * Layout as in pipeline.fault.test.ts: ingest and api in this process, the processors as a child
 * process of the real command line (so it can be SIGKILLed), found in pg_stat_activity by its
 * application name.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Sql } from '../../adapters/sql/types';
import { readOffsets } from '../../processors/offsets';
import { PIPELINE_GROUP } from '../../processors/pipeline/pipeline';
import { EVENTS_TOPIC } from '../../schemas/topics';
import {
  call,
  createKey,
  createTenant,
  shapeEnv,
  startTestApp,
  tenantToken,
  type TestApp,
} from '../support/app';
import { dropSchema } from '../support/cleanup';
import { childEnv, spawnCli, type Spawned } from '../support/process';
import { openTestPg, stack, uniqueName } from '../support/stack';
import { killAndWaitGone, progressMarker, sessionCount } from '../support/sessions';
import { waitFor } from '../support/wait';

const EVENTS = 600;
const USERS = 25;
const APP_NAME = `ludus-fault-ledger-${process.pid}`;
/** The rules: [name, event_type, fixed amount]. */
const RULES: Array<[string, string, number]> = [
  ['every event', '*', 2],
  ['b events', 'b', 5],
];
/** Configuration tables copied into the empty schema of the replay (everything else is state). */
const CONFIG_TABLES = ['tenants', 'currencies', 'earning_rules', 'leaderboards'];

const mark = progressMarker('ledger fault');
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Ev {
  event_id: string;
  type: string;
  user_id: string;
}

describe('earning-rule credits across a processor SIGKILL; the log replayed into empty state [distributed]', () => {
  let app: TestApp;
  let dir: string;
  let env: Record<string, string>;
  const children: Spawned[] = [];
  let replayApp: TestApp | null = null;
  let replaySchema: string | null = null;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ludus-fault-ledger-'));
    env = {
      ...shapeEnv('distributed'),
      LUDUS_RATE_LIMITER: 'memory',
      LUDUS_RATE_LIMIT_INGEST: 'off',
      LUDUS_RATE_LIMIT_ADMIN: 'off',
      LUDUS_RATE_LIMIT_QUERY: 'off',
    };
    app = await startTestApp('distributed', { roles: 'ingest,api', env });
  }, 60_000);

  afterAll(async () => {
    for (const c of children) if (c.child.exitCode === null) c.child.kill('SIGKILL');
    await Promise.all(children.map((c) => c.exited));
    await replayApp?.stop().catch(() => undefined);
    if (replaySchema) await dropSchema(replaySchema).catch(() => undefined);
    await app?.stop().catch(() => undefined);
    if (dir) rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  async function startProcessors(): Promise<Spawned> {
    const p = spawnCli(
      ['serve', '--roles', 'processors'],
      childEnv({
        ...env,
        LUDUS_DATABASE_URL: `${stack.pgUrl}?application_name=${APP_NAME}`,
        LUDUS_DATA_DIR: dir,
        LUDUS_LOG_LEVEL: 'info',
      }),
    );
    children.push(p);
    await p.waitForLog((l) => l.msg === 'ludus is up', 60_000);
    return p;
  }

  /** Waits until the pipeline's stored offsets (in `sql`) reach the end of every partition. */
  async function drained(sql: Sql, what: string): Promise<void> {
    const log = app.ctx.adapters.eventLog;
    let last = '';
    await waitFor(
      async () => {
        const ends = await log.endOffsets(EVENTS_TOPIC);
        const stored = await readOffsets(sql, PIPELINE_GROUP, log.physicalName(EVENTS_TOPIC), [
          ...ends.keys(),
        ]);
        last = JSON.stringify({ ends: [...ends], stored: [...stored] });
        return [...ends].every(([p, end]) => (stored.get(p) ?? 0) >= end);
      },
      { timeoutMs: 45_000, intervalMs: 200, what, describe: () => last },
    );
  }

  /** The state the pipeline derives from the log, without ids and times of processing. */
  async function derivedState(sql: Sql, tenantId: string) {
    const rows = async (text: string) => (await sql.query<Record<string, unknown>>(text, [tenantId])).rows;
    return {
      scores: await rows(
        `SELECT leaderboard_id, window_key, user_id, score, total, n::int AS n, tiebreak::text AS tiebreak
           FROM leaderboard_scores WHERE tenant_id = $1 ORDER BY leaderboard_id, window_key, user_id`,
      ),
      balances: await rows(
        `SELECT user_id, currency_id, available::int AS available, lifetime_earned::int AS lifetime_earned
           FROM balances WHERE tenant_id = $1 ORDER BY user_id, currency_id`,
      ),
      ledger: await rows(
        `SELECT user_id, currency_id, amount::int AS amount, balance_after::int AS balance_after, source_type, source_ref
           FROM ledger WHERE tenant_id = $1 ORDER BY user_id, currency_id, balance_after, source_ref`,
      ),
      ledgerSums: await rows(
        `SELECT user_id, currency_id, sum(amount)::int AS total, count(*)::int AS n
           FROM ledger WHERE tenant_id = $1 GROUP BY user_id, currency_id ORDER BY user_id, currency_id`,
      ),
      processed: await rows('SELECT count(*)::int AS n FROM processed_events WHERE tenant_id = $1'),
    };
  }

  it('credits every (rule, event) exactly once across a SIGKILL, and a replay into empty state gives the same state', async () => {
    const sql = app.ctx.adapters.sql;
    const tenant = await createTenant(app);
    const key = (await createKey(app, [tenant.id])).key;
    const auth = { authorization: `Bearer ${await tenantToken(tenant)}` };
    const admin = (path: string, body: unknown) =>
      call('POST', `${app.url.admin}${path}?tenant_id=${tenant.id}`, { headers: { 'x-api-key': key }, body });
    expect(
      (
        await admin('/v1/wallet/currencies', {
          id: 'coins',
          name: 'Coins',
          is_spendable: true,
          decimal_places: 0,
        })
      ).status,
    ).toBe(201);
    for (const [name, event_type, amount] of RULES) {
      const r = await admin('/v1/wallet/earning-rules', {
        name,
        currency_id: 'coins',
        event_type,
        calculation: { type: 'fixed', amount },
      });
      expect([name, r.status]).toEqual([name, 201]);
    }
    const lb = await admin('/v1/leaderboards', {
      leaderboard_id: 'total',
      name: 'total',
      config: {
        timeframe: { type: 'all_time' },
        scoring: { rules: [{ event_type: '*', points_expression: 'attrs.p' }], aggregation: 'sum' },
      },
    });
    expect(lb.status).toBe(201);
    const ruleIds = new Map(
      (
        await sql.query<{ id: string; name: string }>(
          'SELECT id, name FROM earning_rules WHERE tenant_id = $1',
          [tenant.id],
        )
      ).rows.map((r) => [r.name, r.id]),
    );

    // The stream, in requests of 1 to 30 events; some requests are sent twice (a client retry).
    let x = 12345;
    const random = () => (x = (x * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const events: Ev[] = Array.from({ length: EVENTS }, (_, i) => ({
      event_id: `le-${i}`,
      type: random() < 0.4 ? 'b' : 'a',
      user_id: `u${Math.floor(random() * USERS)}`,
    }));
    const requests: Ev[][] = [];
    for (let i = 0; i < events.length;) {
      const n = Math.min(events.length - i, 1 + Math.floor(random() * 30));
      requests.push(events.slice(i, i + n));
      i += n;
    }
    const occurred = new Date(Date.now() - 60_000).toISOString();
    let sent = 0;
    let failure: Error | null = null;
    const send = async () => {
      for (const batch of requests) {
        for (let copy = 0; copy < (random() < 0.1 ? 2 : 1); copy++) {
          const r = await call('POST', `${app.url.ingest}/v1/events/bulk`, {
            headers: auth,
            body: {
              events: batch.map((e) => ({
                event_id: e.event_id,
                type: e.type,
                actor: { user_id: e.user_id },
                occurred_at: occurred,
                attrs: { p: Number(e.event_id.slice(3)) % 7 },
              })),
            },
          });
          if (r.status !== 202 || r.body.failed !== 0) throw new Error(`bulk answered ${r.status}`);
        }
        sent += batch.length;
        await pause(20); // a steady stream, not a burst
      }
    };
    let sender: Promise<void> = Promise.resolve();

    try {
      let processors = await startProcessors();
      mark('processors up');
      // The stream starts once the processors consume, so that the kill lands in the middle of it.
      sender = send().catch((err: Error) => {
        failure = err;
      });
      // SIGKILL while a batch transaction has written (an xid), then restart.
      let how = 'after the stream ended';
      await waitFor(
        async () => {
          if (sent < 100) return false;
          if ((await sessionCount(sql, APP_NAME, { writing: true })) > 0) how = 'mid-batch';
          return how === 'mid-batch' || sent >= EVENTS || failure;
        },
        { timeoutMs: 40_000, intervalMs: 1, what: 'a batch in progress' },
      );
      await killAndWaitGone(sql, processors, APP_NAME);
      mark(`processors killed ${how} (${sent} events sent)`);
      processors = await startProcessors();
      mark('processors restarted');
      await sender;
      if (failure) throw failure;
      await drained(sql, 'the pipeline to drain');
      mark('drained');

      // 1. The ledger equals the reference: each (rule, event) credited exactly once.
      const expectedRefs = events
        .flatMap((e) =>
          RULES.filter(([, t]) => t === '*' || t === e.type).map(
            ([name, , amount]) => [`${ruleIds.get(name)}:${e.event_id}`, e.user_id, amount] as const,
          ),
        )
        .sort((a, b) => (a[0] < b[0] ? -1 : 1));
      const ledger = await sql.query<{ source_ref: string; user_id: string; amount: string }>(
        "SELECT source_ref, user_id, amount FROM ledger WHERE tenant_id = $1 AND source_type = 'earning_rule' ORDER BY source_ref",
        [tenant.id],
      );
      const got = ledger.rows.map((r) => [r.source_ref, r.user_id, Number(r.amount)] as const);
      expect(got.length).toBe(expectedRefs.length);
      expect(got).toEqual(expectedRefs);
      const perUser = new Map<string, number>();
      for (const [, user, amount] of expectedRefs) perUser.set(user, (perUser.get(user) ?? 0) + amount);
      const state = await derivedState(sql, tenant.id);
      expect(state.balances.map((b) => [b.user_id, b.available, b.lifetime_earned])).toEqual(
        [...perUser].sort((a, b) => (a[0] < b[0] ? -1 : 1)).map(([u, n]) => [u, n, n]),
      );
      expect(state.ledgerSums.map((s) => [s.user_id, s.total])).toEqual(
        state.balances.map((b) => [b.user_id, b.available]),
      );
      expect(state.processed).toEqual([{ n: EVENTS }]);
      expect(processors.logs.filter((l) => l.level === 'fatal')).toEqual([]);
      mark('ledger equals the reference');

      // 2. Replay the same log into empty state: a new schema with only the configuration, a new
      // Redis prefix, the same topics (and group id: offsets live in SQL, so it starts at 0).
      processors.child.kill('SIGTERM');
      await processors.exited;
      replaySchema = uniqueName('replay');
      const fresh = await openTestPg(replaySchema);
      try {
        const from = app.ctx.config.databaseSchema!;
        for (const t of CONFIG_TABLES) {
          await fresh.exec(`INSERT INTO "${replaySchema}".${t} SELECT * FROM "${from}".${t}`);
        }
      } finally {
        await fresh.close();
      }
      replayApp = await startTestApp('distributed', {
        roles: 'processors',
        env: { ...env, LUDUS_DATABASE_SCHEMA: replaySchema, LUDUS_REDIS_PREFIX: `${uniqueName('replay')}:` },
      });
      const replaySql = replayApp.ctx.adapters.sql;
      await drained(replaySql, 'the replay to drain');
      mark('replay drained');
      const replayed = await derivedState(replaySql, tenant.id);
      expect(replayed.scores.length).toBeGreaterThan(0);
      expect(replayed).toEqual(state);
      mark('replayed state equals the first run');
    } finally {
      failure ??= new Error('test ended');
      await sender;
    }
  }, 120_000);
});
