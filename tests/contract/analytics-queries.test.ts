/**
 * The example queries of docs/analytics.md, read from the page itself, run against the real
 * ClickHouse (18.16 here), PGlite and Postgres on one seeded history written through the
 * Analytics port (some rows delivered twice, as a sink does after a crash, and a second tenant
 * that must not show). Each engine's answer must equal the answer computed here in plain code:
 * a query changed on the page is a query changed under test.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createClient, type ClickHouseClient } from '@clickhouse/client';
import { ClickHouseAnalytics } from '../../adapters/analytics/clickhouse';
import { SqlAnalytics } from '../../adapters/analytics/sql';
import type {
  Analytics,
  AnalyticsEvent,
  AnalyticsTransaction,
  SnapshotEntry,
} from '../../adapters/analytics/types';
import type { Sql } from '../../adapters/sql/types';
import { dropTestPg, openTestPg, openTestPglite, stack, uniqueName } from '../support/stack';

type Row = Record<string, unknown>;

interface Example {
  title: string;
  clickhouse: string;
  postgres: string;
}

/** Every "### N. title" section of the page with its two SQL blocks. */
function examples(): Example[] {
  const page = readFileSync(join(__dirname, '..', '..', 'docs', 'analytics.md'), 'utf8');
  const out: Example[] = [];
  for (const section of page.split(/^### /m).slice(1)) {
    const title = section.slice(0, section.indexOf('\n')).trim();
    const block = (dialect: string) =>
      new RegExp('```sql ' + dialect + '\\n([\\s\\S]*?)```').exec(section)?.[1]?.trim();
    const clickhouse = block('clickhouse');
    const postgres = block('postgres');
    if (clickhouse && postgres) out.push({ title, clickhouse, postgres });
  }
  return out;
}

// ---- the seeded history ---------------------------------------------------------------------

const T0 = Date.UTC(2026, 10, 20, 22, 15); // 2026-11-20 22:15 UTC: the next day follows soon
const MIN = 60_000;
const TYPES = ['match_finished', 'purchase', 'login'];

const events: AnalyticsEvent[] = [];
for (let i = 0; i < 40; i++) {
  const type = TYPES[i % 3];
  events.push({
    tenant_id: 'acme',
    event_id: `e${i}`,
    type,
    user_id: `u${(i * 7) % 6}`,
    occurred_at: T0 + i * 9 * MIN,
    received_at: T0 + i * 9 * MIN + 40,
    attrs_json: type === 'login' ? '{"device":"ios"}' : JSON.stringify({ points: (i % 5) * 2.5, level: 3 }),
  });
}
events.push({ ...events[0], tenant_id: 'other', event_id: 'x1' });

const SOURCES = ['earning_rule', 'leaderboard_reward', 'manual_grant'];
const transactions: AnalyticsTransaction[] = [];
{
  const balances = new Map<string, number>();
  for (let i = 0; i < 36; i++) {
    const user = `u${i % 5}`;
    const currency = i % 4 === 3 ? 'gems' : 'coins';
    const k = `${user}/${currency}`;
    const before = balances.get(k) ?? 0;
    // Users u0 and u2 spend coins now and then; everyone else only earns.
    const spend = currency === 'coins' && (user === 'u0' || user === 'u2') && before >= 30 && i % 3 === 0;
    const amount = spend ? -30 : 10 + ((i * 13) % 50);
    balances.set(k, before + amount);
    transactions.push({
      tenant_id: 'acme',
      transaction_id: `t${String(i).padStart(3, '0')}`,
      user_id: user,
      currency_id: currency,
      amount,
      balance_after: before + amount,
      source_type: spend ? 'manual_deduct' : SOURCES[i % 3],
      source_ref: spend ? null : `ref${i}`,
      created_at: T0 + i * 47 * MIN,
    });
  }
}
transactions.push({ ...transactions[1], tenant_id: 'other', transaction_id: 'x1' });

const snapshots: SnapshotEntry[] = [];
for (const [w, windowKey] of ['2026-W46', '2026-W47'].entries()) {
  const time = T0 + w * 7 * 86_400_000;
  const scores = [50 + w, 50 + w, 31.5, 20, 7];
  scores.forEach((score, i) =>
    snapshots.push({
      tenant_id: 'acme',
      leaderboard_id: 'weekly',
      window_key: windowKey,
      snapshot_time: time,
      user_id: `u${(i + w) % 5}`,
      rank: i < 2 ? 1 : i + 1, // shared rank 1
      score,
    }),
  );
}
snapshots.push({ ...snapshots[0], leaderboard_id: 'daily', window_key: '2026-11-20', rank: 1, score: 999 });
snapshots.push({ ...snapshots[0], tenant_id: 'other' });

// ---- the same answers in plain code -------------------------------------------------------------

const acmeEvents = events.filter((e) => e.tenant_id === 'acme');
const acmeTx = transactions.filter((t) => t.tenant_id === 'acme');
const byteOrder = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));
const utc = (ms: number) => new Date(ms).toISOString().replace('T', ' ').slice(0, 19);

function groupBy<T>(rows: T[], key: (r: T) => string): Map<string, T[]> {
  const m = new Map<string, T[]>();
  for (const r of rows) m.set(key(r), [...(m.get(key(r)) ?? []), r]);
  return m;
}
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
const points = (e: AnalyticsEvent) => (JSON.parse(e.attrs_json) as { points?: number }).points ?? 0;

const expected: Record<number, () => Row[]> = {
  1: () =>
    [...groupBy(acmeEvents, (e) => `${utc(Math.floor(e.occurred_at / 3_600_000) * 3_600_000)}|${e.type}`)]
      .map(([k, rs]) => ({ hour: k.split('|')[0], type: k.split('|')[1], events: rs.length }))
      .sort((a, b) => byteOrder(a.hour, b.hour) || byteOrder(a.type, b.type)),
  2: () =>
    [...groupBy(acmeEvents, (e) => utc(Math.floor(e.occurred_at / 86_400_000) * 86_400_000).slice(0, 10))]
      .map(([day, rs]) => ({ day, users: new Set(rs.map((r) => r.user_id)).size, events: rs.length }))
      .sort((a, b) => byteOrder(a.day, b.day)),
  3: () =>
    [
      ...groupBy(
        acmeTx,
        (t) => `${utc(Math.floor(t.created_at / 86_400_000) * 86_400_000).slice(0, 10)}|${t.currency_id}`,
      ),
    ]
      .map(([k, rs]) => ({
        day: k.split('|')[0],
        currency_id: k.split('|')[1],
        earned: sum(rs.filter((r) => r.amount > 0).map((r) => r.amount)),
        spent: sum(rs.filter((r) => r.amount < 0).map((r) => -r.amount)),
        transactions: rs.length,
      }))
      .sort((a, b) => byteOrder(a.day, b.day) || byteOrder(a.currency_id, b.currency_id)),
  4: () =>
    [
      ...groupBy(
        acmeTx.filter((t) => t.currency_id === 'coins' && t.amount > 0),
        (t) => t.user_id,
      ),
    ]
      .map(([user_id, rs]) => ({ user_id, earned: sum(rs.map((r) => r.amount)) }))
      .sort((a, b) => b.earned - a.earned || byteOrder(a.user_id, b.user_id))
      .slice(0, 10),
  5: () =>
    [
      ...groupBy(
        acmeTx.filter((t) => t.currency_id === 'coins'),
        (t) => t.user_id,
      ),
    ]
      .filter(([, rs]) => rs.every((r) => r.amount >= 0) && rs.some((r) => r.amount > 0))
      .map(([user_id, rs]) => ({ user_id, balance: sum(rs.map((r) => r.amount)) }))
      .sort((a, b) => byteOrder(a.user_id, b.user_id)),
  6: () =>
    [
      ...groupBy(
        acmeTx.filter((t) => t.amount > 0),
        (t) => `${t.currency_id}|${t.source_type}`,
      ),
    ]
      .map(([k, rs]) => ({
        currency_id: k.split('|')[0],
        source_type: k.split('|')[1],
        credits: rs.length,
        total: sum(rs.map((r) => r.amount)),
      }))
      .sort((a, b) => byteOrder(a.currency_id, b.currency_id) || byteOrder(a.source_type, b.source_type)),
  7: () =>
    acmeTx
      .filter((t) => t.user_id === 'u1')
      .sort((a, b) => b.created_at - a.created_at || byteOrder(b.transaction_id, a.transaction_id))
      .slice(0, 20)
      .map((t) => ({
        transaction_id: t.transaction_id,
        currency_id: t.currency_id,
        amount: t.amount,
        balance_after: t.balance_after,
        source_type: t.source_type,
        created_ms: t.created_at,
      })),
  8: () =>
    [...groupBy(acmeEvents, (e) => e.type)]
      .map(([type, rs]) => ({ type, events: rs.length, points: sum(rs.map(points)) }))
      .sort((a, b) => byteOrder(a.type, b.type)),
  9: () => {
    const weekly = snapshots.filter((s) => s.tenant_id === 'acme' && s.leaderboard_id === 'weekly');
    return [...groupBy(weekly, (s) => `${s.window_key}|${s.snapshot_time}`)]
      .map(([k, rs]) => ({
        window_key: k.split('|')[0],
        snapshot_time_ms: Number(k.split('|')[1]),
        entries: rs.length,
        top_score: Math.max(...rs.map((r) => r.score)),
        winner: rs
          .filter((r) => r.rank === 1)
          .map((r) => r.user_id)
          .sort(byteOrder)[0],
      }))
      .sort((a, b) => a.snapshot_time_ms - b.snapshot_time_ms);
  },
  10: () => {
    const weekly = snapshots.filter((s) => s.tenant_id === 'acme' && s.leaderboard_id === 'weekly');
    const latest = Math.max(...weekly.map((s) => s.snapshot_time));
    return weekly
      .filter((s) => s.snapshot_time === latest && s.rank <= 3)
      .sort((a, b) => a.rank - b.rank || byteOrder(a.user_id, b.user_id))
      .map((s) => ({ rank: s.rank, user_id: s.user_id, score: s.score }));
  },
};

/** Engines differ in how they return numbers (64-bit integers as strings, bigint, numeric). */
function normalise(rows: Row[]): Row[] {
  return rows.map((r) =>
    Object.fromEntries(
      Object.entries(r).map(([k, v]) => [
        k,
        typeof v === 'bigint'
          ? Number(v)
          : typeof v === 'string' && /^-?\d+(\.\d+)?$/.test(v)
            ? Number(v)
            : v,
      ]),
    ),
  );
}

// ---- the engines ------------------------------------------------------------------------------

interface Engine {
  analytics: Analytics;
  run(query: string): Promise<Row[]>;
  dialect: 'clickhouse' | 'postgres';
  cleanup(): Promise<void>;
}

const engines: Array<[string, () => Promise<Engine>]> = [
  [
    'clickhouse',
    async () => {
      const database = uniqueName('ludus_test_q');
      const analytics = new ClickHouseAnalytics({ url: stack.clickhouseUrl, database });
      let client: ClickHouseClient | null = null;
      return {
        analytics,
        dialect: 'clickhouse',
        run: async (query) => {
          client ??= createClient({ url: stack.clickhouseUrl, database });
          const rs = await client.query({ query, format: 'JSONEachRow' });
          return rs.json<Row>();
        },
        cleanup: async () => {
          await client?.close();
          await analytics.close();
          const admin = createClient({ url: stack.clickhouseUrl });
          try {
            await admin.command({ query: `DROP DATABASE IF EXISTS ${database}` });
          } finally {
            await admin.close();
          }
        },
      };
    },
  ],
  [
    'sql/pglite',
    async () => {
      const sql = await openTestPglite();
      const analytics = new SqlAnalytics(sql, { closeSql: true });
      return { analytics, dialect: 'postgres', run: runSql(sql), cleanup: () => analytics.close() };
    },
  ],
  [
    'sql/pg',
    async () => {
      const schema = uniqueName('aq');
      const sql = await openTestPg(schema);
      const analytics = new SqlAnalytics(sql);
      return {
        analytics,
        dialect: 'postgres',
        run: runSql(sql),
        cleanup: async () => {
          await analytics.close();
          await dropTestPg(sql, schema);
        },
      };
    },
  ],
];

function runSql(sql: Sql) {
  return async (query: string) => (await sql.query<Row>(query)).rows;
}

const EXAMPLES = examples();

test('docs/analytics.md holds ten examples, each in both dialects', () => {
  expect(EXAMPLES.map((e) => e.title.split('.')[0])).toEqual(Object.keys(expected));
});

describe.each(engines)('docs/analytics.md examples [%s]', (_name, open) => {
  let engine: Engine;

  beforeAll(async () => {
    engine = await open();
    await engine.analytics.ensureSchema();
    // Delivered twice, in two batches, as the sink does after a crash: every query must count once.
    for (let round = 0; round < 2; round++) {
      await engine.analytics.insertEvents(events);
      await engine.analytics.insertTransactions(transactions);
      await engine.analytics.insertSnapshot(snapshots);
    }
  }, 120_000);

  afterAll(async () => {
    await engine?.cleanup();
  });

  test.each(EXAMPLES.map((e) => [e.title, e] as const))('%s', async (title, example) => {
    const want = expected[Number(title.split('.')[0])]();
    expect(want.length).toBeGreaterThan(0);
    const got = normalise(
      await engine.run(engine.dialect === 'clickhouse' ? example.clickhouse : example.postgres),
    );
    expect(got).toEqual(want);
  });
});
