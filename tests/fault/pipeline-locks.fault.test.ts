/**
 * A backlog whose rounds take more locks than the store's lock table holds (processors/framework.ts
 * `isTooLarge`). The wallet takes one lock per idempotency key, so a tenant with many earning rules
 * on one event type needs `rules × events` locks per round: here 16 rules and 3,000 events, up to
 * 48,000 locks, past a default Postgres's (about 12,000–16,000) and PGlite's (16,000–32,000). The
 * events are accepted while no processor runs; then one starts and finds them all waiting, so its
 * first rounds are as large as rounds get (the embedded shape's time bound on rounds is off).
 * Before the framework split such rounds, the distributed pipeline retried the same round forever
 * and no event was ever credited; the embedded one got there by chance, after failed rounds, as
 * redelivered batches happened to form smaller rounds.
 *
 * A fault test (run alone, ops/test): the lock table is shared by every session of the Postgres, so
 * while this test fills it, another suite's transaction (a migration, say) fails with 53200.
 */
import { rmSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SHAPES, call, shapeEnv, startTestApp, tenantWithCredentials, type TestApp } from '../support/app';
import { removeStackState, stateOfEnv } from '../support/cleanup';
import { waitFor } from '../support/wait';

const RULES = 16;
const EVENTS = 3000;

describe.each(SHAPES)('a round too large for the lock table [%s]', (shape) => {
  // One deployment for both apps: the first only accepts events, the second only processes them.
  const env = {
    ...shapeEnv(shape),
    LUDUS_DATA_DIR: mkdtempSync(join(tmpdir(), 'ludus-locks-')),
    LUDUS_PIPELINE_ROUND_MS: '0',
  };
  let processors: TestApp | undefined;
  afterAll(async () => {
    await processors?.stop();
    rmSync(env.LUDUS_DATA_DIR, { recursive: true, force: true });
    if (shape === 'distributed') await removeStackState(stateOfEnv(env));
  });

  it(`credits every event once for ${RULES} rules on its type`, async () => {
    // Three apps, one after the other (the embedded store has one owner at a time, and its memory
    // rank index wants the api and processors roles together): the definitions, then the events
    // with no processor running, then the processors.
    const setup = await startTestApp(shape, { env, roles: 'api,processors', keepState: true });
    let tenant: Awaited<ReturnType<typeof tenantWithCredentials>>['tenant'];
    let token: string;
    try {
      const creds = await tenantWithCredentials(setup);
      ({ tenant, token } = creds);
      const admin = async (path: string, body: unknown) => {
        const r = await call('POST', `${setup.url.admin}/v1${path}?tenant_id=${tenant.id}`, {
          headers: { 'x-api-key': creds.key },
          body,
        });
        expect([path, r.status]).toEqual([path, 201]);
      };
      await admin('/wallet/currencies', { id: 'gems', name: 'Gems', is_spendable: true, decimal_places: 0 });
      for (let i = 0; i < RULES; i++)
        await admin('/wallet/earning-rules', {
          name: `rule ${i}`,
          currency_id: 'gems',
          event_type: 'match',
          calculation: { type: 'fixed', amount: 1 },
        });
    } finally {
      await setup.stop();
    }
    const ingest = await startTestApp(shape, { env, roles: 'ingest', keepState: true });
    try {
      for (let i = 0; i < EVENTS; i += 100) {
        const events = Array.from({ length: 100 }, (_, k) => ({
          event_id: `m${i + k}`,
          type: 'match',
          actor: { user_id: `u${i + k}` },
          occurred_at: new Date().toISOString(),
        }));
        const r = await call('POST', `${ingest.url.ingest}/v1/events/bulk`, {
          headers: { authorization: `Bearer ${token}` },
          body: { events },
        });
        expect([r.status, r.body.failed]).toEqual([202, 0]);
      }
    } finally {
      await ingest.stop();
    }
    const tenantId = tenant.id;

    processors = await startTestApp(shape, { env, roles: 'api,processors', keepState: true });
    const sql = processors.ctx.adapters.sql;
    const ledger = async () =>
      (
        await sql.query<{ rows: string; users: string; total: string }>(
          `SELECT count(*) AS rows, count(DISTINCT user_id) AS users, coalesce(sum(amount), 0) AS total
           FROM ledger WHERE tenant_id = $1`,
          [tenantId],
        )
      ).rows[0]!;
    await waitFor(async () => Number((await ledger()).rows) >= EVENTS * RULES, {
      what: `${EVENTS * RULES} ledger rows`,
      timeoutMs: 120_000,
      describe: async () => JSON.stringify(await ledger()),
    });
    // Exactly once: one credit per rule and event, every user at RULES, nothing dead-lettered.
    const l = await ledger();
    expect([Number(l.rows), Number(l.users), Number(l.total)]).toEqual([
      EVENTS * RULES,
      EVENTS,
      EVENTS * RULES,
    ]);
    const balances = await sql.query<{ available: string; n: string }>(
      `SELECT available, count(*) AS n FROM balances WHERE tenant_id = $1 GROUP BY available`,
      [tenantId],
    );
    expect(balances.rows.map((b) => [Number(b.available), Number(b.n)])).toEqual([[RULES, EVENTS]]);
    const dead = await sql.query<{ n: string }>('SELECT count(*) AS n FROM dead_letters');
    expect(Number(dead.rows[0]!.n)).toBe(0);
  }, 300_000);
});
