/**
 * Issue 19: the pipeline issues no statement for the features a tenant has not defined (tiers,
 * level systems, achievements, streaks), and a definition created between batches applies from
 * the next batch on. Here with the real services (wallet, facts, tier and level reactions): a
 * crediting batch before the tenant has a tier or a level system moves nothing and reads neither;
 * once they exist, the next crediting batch moves the user's tier and level.
 */
import type { LogRecord } from '../../adapters/eventlog/types';
import type { Queryable } from '../../adapters/sql/types';
import { buildPipeline } from '../../runtime/roles';
import type { EventRecord } from '../../schemas/topics';
import { startTestApp, type TestApp } from '../support/app';

let app: TestApp;
const T = 'feat';

async function admin(method: string, path: string, body?: unknown) {
  const r = await fetch(`${app.url.admin}/v1${path}?tenant_id=${T}`, {
    method,
    headers: { 'x-api-key': app.rootKey, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
}

beforeAll(async () => {
  app = await startTestApp('embedded', { roles: 'api,processors' });
  const r = await fetch(`${app.url.admin}/v1/tenants`, {
    method: 'POST',
    headers: { 'x-api-key': app.rootKey, 'content-type': 'application/json' },
    body: JSON.stringify({ id: T, name: T }),
  });
  expect(r.status).toBe(201);
  await admin('POST', '/wallet/currencies', { id: 'xp', name: 'xp', is_spendable: false, decimal_places: 0 });
  await admin('POST', '/wallet/earning-rules', {
    name: 'xp per login',
    currency_id: 'xp',
    event_type: 'login',
    calculation: { type: 'fixed', amount: 10 },
  });
}, 120_000);
afterAll(() => app?.stop());

test('tiers and levels: no statement while the tenant has none, applied from the next batch once created', async () => {
  const ctx = app.ctx;
  const p = buildPipeline(ctx);
  let offset = 0;
  const run = async (n: number) => {
    const log: string[] = [];
    const fresh: LogRecord<EventRecord>[] = Array.from({ length: n }, () => {
      const value: EventRecord = {
        tenant_id: T,
        event_id: `e${offset}`,
        type: 'login',
        user_id: 'u1',
        occurred_at: Date.now(),
        received_at: Date.now(),
        attrs_json: '{}',
        actor_metadata_json: null,
        subject_json: null,
      };
      return { topic: 't', partition: 7, offset: offset++, key: `${T}:u1`, value, timestamp: 0 };
    });
    const res = await ctx.adapters.sql.tx((q) => {
      const lq: Queryable = {
        query: (text, params) => {
          log.push(text.replace(/\s+/g, ' ').trim());
          return q.query(text, params);
        },
        exec: (s) => q.exec(s),
      };
      return p.apply(lq, {
        parts: [{ partition: 7, firstOffset: fresh[0]!.offset, nextOffset: offset }],
        fresh,
        replayed: [],
      });
    });
    await res.afterCommit?.();
    return { log, kinds: res.outcomes.map((o) => o.kind) };
  };
  const reads = (log: string[], table: string) => log.filter((s) => s.includes(`FROM ${table} `)).length;

  // Counted features (tiers, level systems, achievements) are never read for a tenant with none;
  // versioned ones (streak definitions, earning rules, boards) once per version, then not again.
  const first = await run(1);
  expect(first.kinds).toEqual(['ok']);
  for (const t of ['tiers', 'level_systems', 'achievements'])
    expect([t, reads(first.log, t)]).toEqual([t, 0]);
  expect(reads(first.log, 'streak_definitions')).toBe(1);
  const again = await run(1);
  for (const t of [
    'tiers',
    'level_systems',
    'achievements',
    'streak_definitions',
    'earning_rules',
    'leaderboards',
  ])
    expect([t, reads(again.log, t)]).toEqual([t, 0]);

  await admin('POST', '/wallet/tiers', {
    tier_name: 'Bronze',
    tier_level: 1,
    min_lifetime_points: 15,
    currency_id: 'xp',
  });
  await admin('POST', '/levels', {
    name: 'Main',
    currency_id: 'xp',
    levels: [
      { level: 1, xp_required: 0, name: 'one' },
      { level: 2, xp_required: 15, name: 'two' },
    ],
  });
  const second = await run(1);
  expect(reads(second.log, 'tiers')).toBe(1);
  expect(reads(second.log, 'level_systems')).toBe(1);
  const tier = await ctx.adapters.sql.query<{ tier_id: string | null }>(
    'SELECT tier_id FROM user_tiers WHERE tenant_id = $1 AND user_id = $2',
    [T, 'u1'],
  );
  expect(tier.rows.length).toBe(1);
  expect(tier.rows[0]!.tier_id).not.toBeNull();
  const level = await ctx.adapters.sql.query<{ level: number }>(
    'SELECT max(level) AS level FROM user_levels WHERE tenant_id = $1 AND user_id = $2',
    [T, 'u1'],
  );
  expect(Number(level.rows[0]!.level)).toBe(2);
  // The moves happened in the batch that credited 30 xp (third login), not later.
  expect(second.kinds).toEqual(['ok']);
});
