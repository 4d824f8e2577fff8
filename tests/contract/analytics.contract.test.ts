/**
 * Analytics contract: the same suite against ClickHouse (the real 18.16 server, a database of its
 * own per run, dropped afterwards), and the SQL adapter on PGlite and on the real Postgres (a
 * schema of its own, dropped afterwards).
 */
import { createClient } from '@clickhouse/client';
import { ClickHouseAnalytics } from '../../adapters/analytics/clickhouse';
import { SqlAnalytics } from '../../adapters/analytics/sql';
import type {
  Analytics,
  AnalyticsEvent,
  AnalyticsTransaction,
  SnapshotEntry,
} from '../../adapters/analytics/types';
import { dropTestPg, openTestPg, openTestPglite, stack, uniqueName } from '../support/stack';

interface Harness {
  analytics: Analytics;
  cleanup: () => Promise<void>;
}

const adapters: Array<[string, () => Promise<Harness>]> = [
  [
    'clickhouse',
    async () => {
      const database = uniqueName('ludus_test');
      const analytics = new ClickHouseAnalytics({ url: stack.clickhouseUrl, database });
      return {
        analytics,
        cleanup: async () => {
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
      return { analytics, cleanup: () => analytics.close() };
    },
  ],
  [
    'sql/pg',
    async () => {
      const schema = uniqueName('an');
      const sql = await openTestPg(schema);
      const analytics = new SqlAnalytics(sql);
      return {
        analytics,
        cleanup: async () => {
          await analytics.close(); // leaves the pool open: the suite owns it
          await dropTestPg(sql, schema);
        },
      };
    },
  ],
];

const DAY = 86_400_000;
const D1 = Date.UTC(2026, 0, 31); // 2026-01-31T00:00:00Z, a month boundary follows
const D2 = D1 + DAY; // 2026-02-01
const D3 = D2 + DAY; // 2026-02-02

const HOSTILE = [
  "'",
  "''",
  '\\',
  "\\'",
  "'); DROP TABLE events; --",
  'line1\nline2',
  '\r\n\t',
  '\u0001\u001f\u007f',
  'é',
  '\u{1F600}',
  '\uFFFD',
  '日本語',
  '%_*?',
  '{x:String}',
  '$1',
  '"quoted"',
  '/* c */ -- c',
];

describe.each(adapters)('Analytics contract [%s]', (name, open) => {
  let h: Harness;
  let a: Analytics;
  let n = 0;
  /** A fresh tenant per test: tests never see each other's rows. */
  const tenant = () => `ten${++n}`;

  const ev = (
    t: string,
    id: string,
    type: string,
    user: string,
    at: number,
    extra: Partial<AnalyticsEvent> = {},
  ): AnalyticsEvent => ({
    tenant_id: t,
    event_id: id,
    type,
    user_id: user,
    occurred_at: at,
    received_at: at + 5,
    attrs_json: '{"k":1}',
    ...extra,
  });
  const tx = (
    t: string,
    id: string,
    user: string,
    currency: string,
    amount: number,
    extra: Partial<AnalyticsTransaction> = {},
  ): AnalyticsTransaction => ({
    tenant_id: t,
    transaction_id: id,
    user_id: user,
    currency_id: currency,
    amount,
    balance_after: 0,
    source_type: 'grant',
    source_ref: null,
    created_at: D1 + 1000,
    ...extra,
  });
  const snap = (
    t: string,
    lb: string,
    time: number,
    user: string,
    rank: number,
    score: number,
    window = 'w1',
  ): SnapshotEntry => ({
    tenant_id: t,
    leaderboard_id: lb,
    window_key: window,
    snapshot_time: time,
    user_id: user,
    rank,
    score,
  });

  beforeAll(async () => {
    h = await open();
    a = h.analytics;
    await a.ensureSchema();
  });
  afterAll(async () => {
    await h?.cleanup();
  });

  it(`reports its kind, answers ping, and ensureSchema is idempotent`, async () => {
    expect(a.kind).toBe(name.startsWith('sql') ? 'sql' : 'clickhouse');
    await a.ping();
    await a.ensureSchema();
    await a.ensureSchema();
    expect(await a.eventCounts(tenant(), 0, D3)).toEqual([]);
  });

  it('counts events per UTC day and type with distinct users, day boundaries exact', async () => {
    const t = tenant();
    await a.insertEvents([
      ev(t, 'e1', 'login', 'u1', D1),
      ev(t, 'e2', 'login', 'u1', D1 + 1000),
      ev(t, 'e3', 'login', 'u2', D2 - 1), // 23:59:59.999 on day 1
      ev(t, 'e4', 'purchase', 'u1', D1 + 5000),
      ev(t, 'e5', 'login', 'u3', D2), // 00:00:00.000 on day 2
      ev(t, 'e6', 'Login', 'u3', D2 + 10), // types compare by bytes: 'Login' < 'login'
      ev(t, 'e7', 'purchase', 'u2', D3 + 3600_000),
    ]);
    expect(await a.eventCounts(t, 0, D3 + DAY)).toEqual([
      { day: '2026-01-31', type: 'login', events: 3, users: 2 },
      { day: '2026-01-31', type: 'purchase', events: 1, users: 1 },
      { day: '2026-02-01', type: 'Login', events: 1, users: 1 },
      { day: '2026-02-01', type: 'login', events: 1, users: 1 },
      { day: '2026-02-02', type: 'purchase', events: 1, users: 1 },
    ]);
  });

  it('counts a duplicate insert once (same batch twice, and duplicates inside one batch)', async () => {
    const t = tenant();
    const batch = [ev(t, 'a', 'x', 'u1', D1), ev(t, 'b', 'x', 'u2', D1 + 1), ev(t, 'c', 'y', 'u1', D2)];
    await a.insertEvents(batch);
    await a.insertEvents(batch);
    await a.insertEvents([batch[0], batch[0], ev(t, 'd', 'x', 'u3', D1 + 2)]);
    expect(await a.eventCounts(t, D1, D3)).toEqual([
      { day: '2026-01-31', type: 'x', events: 3, users: 3 },
      { day: '2026-02-01', type: 'y', events: 1, users: 1 },
    ]);
    await a.insertEvents([]);
    // Duplicates that only ever arrived together, in one insert (one ClickHouse part).
    const t2 = tenant();
    await a.insertEvents([
      ev(t2, 'a', 'x', 'u1', D1),
      ev(t2, 'a', 'x', 'u1', D1),
      ev(t2, 'a', 'x', 'u1', D1),
    ]);
    await a.insertSnapshot([snap(t2, 'lb', D2, 'u1', 1, 5), snap(t2, 'lb', D2, 'u1', 1, 5)]);
    await a.insertTransactions([tx(t2, 'tx', 'u1', 'gold', 5), tx(t2, 'tx', 'u1', 'gold', 5)]);
    expect(await a.eventCounts(t2, D1, D3)).toEqual([{ day: '2026-01-31', type: 'x', events: 1, users: 1 }]);
    expect(await a.snapshotEntries(t2, 'lb', D2, 0, 10)).toEqual([snap(t2, 'lb', D2, 'u1', 1, 5)]);
    expect(await a.listSnapshots(t2, 'lb', 0, D3, 10)).toEqual([
      { leaderboard_id: 'lb', window_key: 'w1', snapshot_time: D2, entries: 1 },
    ]);
    expect([...(await a.transactionTotals(t2, 'gold'))]).toEqual([['u1', 5]]);
  });

  it('bounds eventCounts to [from, to)', async () => {
    const t = tenant();
    await a.insertEvents([
      ev(t, 'e1', 'k', 'u1', D1 + 100),
      ev(t, 'e2', 'k', 'u2', D1 + 200),
      ev(t, 'e3', 'k', 'u3', D1 + 300),
    ]);
    const c = async (from: number, to: number) => (await a.eventCounts(t, from, to)).map((r) => r.events);
    expect(await c(D1 + 100, D1 + 300)).toEqual([2]); // 100 in, 300 out
    expect(await c(D1 + 101, D1 + 301)).toEqual([2]);
    expect(await c(D1 + 300, D1 + 301)).toEqual([1]);
    expect(await c(D1 + 300, D1 + 300)).toEqual([]);
    expect(await c(D1 + 400, D1 + 100)).toEqual([]);
    expect(await c(-5 * DAY, D1 + 150)).toEqual([1]);
    expect(await c(D1 + 150, Number.MAX_SAFE_INTEGER)).toEqual([2]);
    expect(await c(-Number.MAX_SAFE_INTEGER, 0)).toEqual([]);
    await expect(a.eventCounts(t, 0.5, 10)).rejects.toThrow(/from/);
    await expect(a.eventCounts(t, 0, NaN)).rejects.toThrow(/to/);
  });

  it('never shows another tenant’s rows, whatever the method', async () => {
    const t1 = tenant();
    const t2 = tenant();
    // The same natural keys in both tenants: both are kept, each in its own tenant.
    await a.insertEvents([
      ev(t1, 'same', 'k', 'u1', D1),
      ev(t2, 'same', 'k', 'u1', D1),
      ev(t2, 'other', 'k', 'u2', D1),
    ]);
    await a.insertTransactions([tx(t1, 'tx1', 'u1', 'gold', 10), tx(t2, 'tx1', 'u1', 'gold', 99)]);
    await a.insertSnapshot([
      snap(t1, 'lb', D2, 'u1', 1, 5),
      snap(t2, 'lb', D2, 'u1', 1, 7),
      snap(t2, 'lb', D2, 'u2', 2, 6),
    ]);
    expect(await a.eventCounts(t1, 0, D3)).toEqual([{ day: '2026-01-31', type: 'k', events: 1, users: 1 }]);
    expect([...(await a.transactionTotals(t1, 'gold'))]).toEqual([['u1', 10]]);
    expect(await a.listSnapshots(t1, 'lb', 0, D3, 10)).toEqual([
      { leaderboard_id: 'lb', window_key: 'w1', snapshot_time: D2, entries: 1 },
    ]);
    expect(await a.snapshotEntries(t1, 'lb', D2, 0, 10)).toEqual([snap(t1, 'lb', D2, 'u1', 1, 5)]);
    expect(await a.snapshotUser(t1, 'lb', D2, 'u2')).toBeNull();
    expect(await a.snapshotUser(t1, 'lb', D2, 'u1')).toEqual(snap(t1, 'lb', D2, 'u1', 1, 5));
    // A tenant id that is a prefix, or empty-ish lookalikes, matches nothing.
    expect(await a.eventCounts(t1.slice(0, -1), 0, D3)).toEqual([]);
    expect(await a.eventCounts(`${t1} `, 0, D3)).toEqual([]);
    expect(await a.eventCounts("' OR '1'='1", 0, D3)).toEqual([]);
    expect((await a.transactionTotals(`${t1}%`, 'gold')).size).toBe(0);
  });

  it('sums transactions per user for a tenant and currency, duplicates once', async () => {
    const t = tenant();
    const rows = [
      tx(t, 't1', 'bob', 'gold', 100),
      tx(t, 't2', 'bob', 'gold', -30),
      tx(t, 't3', 'alice', 'gold', 5, { source_ref: "ref'1", created_at: D3 }),
      tx(t, 't4', 'alice', 'silver', 1000),
      tx(t, 't5', 'Zed', 'gold', -7),
      tx(t, 't6', 'carl', 'gold', 0),
      tx(t, 't7', 'dora', 'gold', Number.MAX_SAFE_INTEGER - 1),
    ];
    await a.insertTransactions(rows);
    await a.insertTransactions(rows.slice(0, 3));
    await a.insertTransactions([]);
    const totals = await a.transactionTotals(t, 'gold');
    // Keys in byte order: 'Zed' (Z = 0x5A) before lower case.
    expect([...totals]).toEqual([
      ['Zed', -7],
      ['alice', 5],
      ['bob', 70],
      ['carl', 0],
      ['dora', Number.MAX_SAFE_INTEGER - 1],
    ]);
    expect([...(await a.transactionTotals(t, 'silver'))]).toEqual([['alice', 1000]]);
    expect((await a.transactionTotals(t, 'copper')).size).toBe(0);
  });

  it('refuses a total beyond 2^53 - 1 instead of returning a rounded number', async () => {
    const t = tenant();
    await a.insertTransactions([
      tx(t, 'a', 'u', 'gold', Number.MAX_SAFE_INTEGER),
      tx(t, 'b', 'u', 'gold', 2),
    ]);
    await expect(a.transactionTotals(t, 'gold')).rejects.toThrow(/2\^53/);
  });

  it('lists snapshots newest first, bounded, limited, with entry counts', async () => {
    const t = tenant();
    const times = [D1, D1 + 60_000, D2, D3];
    for (const [i, time] of times.entries()) {
      await a.insertSnapshot(
        Array.from({ length: i + 1 }, (_, k) =>
          snap(t, 'weekly', time, `u${k}`, k + 1, 100 - k, `2026-W0${i + 1}`),
        ),
      );
    }
    await a.insertSnapshot([snap(t, 'daily', D2, 'u1', 1, 3, 'd')]);
    const all = await a.listSnapshots(t, 'weekly', 0, D3 + 1, 100);
    expect(all).toEqual([
      { leaderboard_id: 'weekly', window_key: '2026-W04', snapshot_time: D3, entries: 4 },
      { leaderboard_id: 'weekly', window_key: '2026-W03', snapshot_time: D2, entries: 3 },
      { leaderboard_id: 'weekly', window_key: '2026-W02', snapshot_time: D1 + 60_000, entries: 2 },
      { leaderboard_id: 'weekly', window_key: '2026-W01', snapshot_time: D1, entries: 1 },
    ]);
    expect((await a.listSnapshots(t, 'weekly', D1 + 1, D3, 100)).map((s) => s.snapshot_time)).toEqual([
      D2,
      D1 + 60_000,
    ]);
    expect((await a.listSnapshots(t, 'weekly', D1, D1 + 60_000, 100)).map((s) => s.snapshot_time)).toEqual([
      D1,
    ]);
    expect((await a.listSnapshots(t, 'weekly', 0, D3 + 1, 2)).map((s) => s.snapshot_time)).toEqual([D3, D2]);
    expect(await a.listSnapshots(t, 'weekly', 0, D3 + 1, 0)).toEqual([]);
    expect(await a.listSnapshots(t, 'weekly', D3, D1, 10)).toEqual([]);
    expect(await a.listSnapshots(t, 'monthly', 0, D3 + 1, 10)).toEqual([]);
    expect(await a.listSnapshots(t, 'daily', 0, D3 + 1, 10)).toEqual([
      { leaderboard_id: 'daily', window_key: 'd', snapshot_time: D2, entries: 1 },
    ]);
    // A redelivered snapshot counts once.
    await a.insertSnapshot(
      Array.from({ length: 4 }, (_, k) => snap(t, 'weekly', D3, `u${k}`, k + 1, 100 - k, '2026-W04')),
    );
    expect((await a.listSnapshots(t, 'weekly', D3, D3 + 1, 10))[0].entries).toBe(4);
    await expect(a.listSnapshots(t, 'weekly', 0, D3, -1)).rejects.toThrow(/limit/);
  });

  it('breaks ties deterministically: snapshots at one time by window_key, entries by rank then user_id bytes', async () => {
    const t = tenant();
    await a.insertSnapshot([
      snap(t, 'lb', D2, 'x1', 1, 9, 'b-window'),
      snap(t, 'lb', D2, 'x2', 2, 8, 'B-window'),
      snap(t, 'lb', D2, 'x3', 3, 8, 'a-window'),
    ]);
    expect((await a.listSnapshots(t, 'lb', 0, D3, 10)).map((s) => [s.window_key, s.entries])).toEqual([
      ['B-window', 1],
      ['a-window', 1],
      ['b-window', 1],
    ]);
    const t2 = tenant();
    await a.insertSnapshot([
      snap(t2, 'lb', D2, 'zoe', 2, 50),
      snap(t2, 'lb', D2, 'amy', 2, 50),
      snap(t2, 'lb', D2, 'Bea', 2, 50),
      snap(t2, 'lb', D2, 'top', 1, 60),
      snap(t2, 'lb', D2, 'é', 2, 50),
      snap(t2, 'lb', D2, 'last', 5, 10),
    ]);
    expect((await a.snapshotEntries(t2, 'lb', D2, 0, 10)).map((e) => e.user_id)).toEqual([
      'top',
      'Bea',
      'amy',
      'zoe',
      'é',
      'last',
    ]);
  });

  it("answers each user's best final rank per board over every snapshot, paged by user_id bytes (backfill)", async () => {
    const t = tenant();
    const hostile = "o'; DROP TABLE x; --";
    await a.insertSnapshot([
      snap(t, 'lb', D1, 'amy', 3, 10, 'd1'),
      snap(t, 'lb', D2, 'amy', 1, 12, 'd2'),
      snap(t, 'lb', D2, 'amy', 1, 12, 'd2'), // inserted twice: once
      snap(t, 'lb', D1, 'Bea', 2, 11, 'd1'),
      snap(t, 'lb', D3, 'Bea', 7, 1, 'd3'),
      snap(t, 'lb', D1, 'zoe', 4, 5, 'd1'),
      snap(t, 'other', D1, 'amy', 9, 5, 'd1'),
      snap(t, 'other', D1, 'cid', 2, 5, 'd1'),
      snap(t, hostile, D1, 'dan', 1, 5, 'd1'),
      snap(t, 'unasked', D1, 'eve', 1, 5, 'd1'),
      snap(tenant(), 'lb', D1, 'amy', 1, 99, 'd1'),
    ]);
    const all = [
      { leaderboard_id: 'lb', user_id: 'Bea', rank: 2 },
      { leaderboard_id: 'lb', user_id: 'amy', rank: 1 },
      { leaderboard_id: 'other', user_id: 'amy', rank: 9 },
      { leaderboard_id: 'other', user_id: 'cid', rank: 2 },
      { leaderboard_id: hostile, user_id: 'dan', rank: 1 },
      { leaderboard_id: 'lb', user_id: 'zoe', rank: 4 },
    ];
    const boards = ['lb', 'other', hostile];
    expect(await a.bestSnapshotRanks(t, boards, '', 100)).toEqual(all);
    // Pages of two users: Bea, amy | cid, dan | zoe.
    expect(await a.bestSnapshotRanks(t, boards, '', 2)).toEqual(all.slice(0, 3));
    expect(await a.bestSnapshotRanks(t, boards, 'amy', 2)).toEqual(all.slice(3, 5));
    expect(await a.bestSnapshotRanks(t, boards, 'dan', 2)).toEqual(all.slice(5));
    expect(await a.bestSnapshotRanks(t, boards, 'zoe', 2)).toEqual([]);
    expect(await a.bestSnapshotRanks(t, ['lb'], '', 100)).toEqual(
      all.filter((x) => x.leaderboard_id === 'lb'),
    );
    expect(await a.bestSnapshotRanks(t, [], '', 100)).toEqual([]);
    expect(await a.bestSnapshotRanks(t, boards, '', 0)).toEqual([]);
  });

  it('reads event history by user in user_id byte order, each user whole, deduplicated (backfill)', async () => {
    const t = tenant();
    await a.insertEvents([
      ev(t, 'e3', 'play', 'amy', D2),
      ev(t, 'e1', 'play', 'amy', D1),
      ev(t, 'e1', 'play', 'amy', D1), // twice: once
      ev(t, 'e2', 'other', 'amy', D1 + 5),
      ev(t, 'e4', 'play', 'Bea', D3),
      ev(t, 'e5', 'skip', 'cid', D1),
      ev(t, 'e6', 'play', 'dan', D1),
      ev(tenant(), 'e7', 'play', 'amy', D1),
    ]);
    const ids = (rows: AnalyticsEvent[]) => rows.map((e) => `${e.user_id}:${e.event_id}`);
    expect(ids(await a.userEventHistory(t, ['play', 'other'], '', 2))).toEqual([
      'Bea:e4',
      'amy:e1',
      'amy:e2',
      'amy:e3',
    ]);
    expect(ids(await a.userEventHistory(t, ['play', 'other'], 'amy', 2))).toEqual(['dan:e6']);
    expect(ids(await a.userEventHistory(t, null, 'amy', 10))).toEqual(['cid:e5', 'dan:e6']);
    expect(await a.userEventHistory(t, ['play'], '', 0)).toEqual([]);
  });

  it('pages snapshot entries in rank order and finds one user', async () => {
    const t = tenant();
    const rows = Array.from({ length: 25 }, (_, k) =>
      snap(t, 'lb', D2, `user${String(k).padStart(2, '0')}`, k + 1, 1000 - k * 1.5),
    );
    await a.insertSnapshot([...rows].reverse());
    expect(await a.snapshotEntries(t, 'lb', D2, 0, 3)).toEqual(rows.slice(0, 3));
    expect(await a.snapshotEntries(t, 'lb', D2, 10, 5)).toEqual(rows.slice(10, 15));
    expect(await a.snapshotEntries(t, 'lb', D2, 20, 100)).toEqual(rows.slice(20));
    expect(await a.snapshotEntries(t, 'lb', D2, 25, 10)).toEqual([]);
    expect(await a.snapshotEntries(t, 'lb', D2, 0, 0)).toEqual([]);
    expect(await a.snapshotEntries(t, 'lb', D2 + 1, 0, 10)).toEqual([]);
    expect(await a.snapshotUser(t, 'lb', D2, 'user07')).toEqual(rows[7]);
    expect(await a.snapshotUser(t, 'lb', D2, 'nobody')).toBeNull();
    expect(await a.snapshotUser(t, 'lb', D2 - 1, 'user07')).toBeNull();
    await expect(a.snapshotEntries(t, 'lb', D2, -1, 10)).rejects.toThrow(/offset/);
    await expect(a.snapshotEntries(t, 'lb', D2, 0, 1.5)).rejects.toThrow(/limit/);
  });

  it('keeps scores exact: fractions, negatives, extremes', async () => {
    const t = tenant();
    const scores = [
      0.1 + 0.2,
      -2.5,
      1 / 3,
      1.7976931348623157e308,
      -1.7976931348623157e308,
      2.2250738585072014e-308,
      2 ** 53,
      0,
      -0,
    ];
    await a.insertSnapshot(scores.map((s, k) => snap(t, 'lb', D2, `u${k}`, k + 1, s)));
    const got = await a.snapshotEntries(t, 'lb', D2, 0, 100);
    expect(got.map((e) => e.score)).toEqual(scores.map((s) => (s === 0 ? 0 : s)));
    expect(Object.is(got[8].score, 0)).toBe(true);
  });

  it('round-trips hostile strings exactly in every text field and in lookups', async () => {
    for (const [i, s] of HOSTILE.entries()) {
      const t = `${tenant()}${s}`;
      await a.insertSnapshot([
        snap(t, `lb${s}`, D2, `user${s}`, 1, i, `win${s}`),
        snap(t, `lb${s}`, D2, s, 2, i - 1, `win${s}`),
      ]);
      await a.insertEvents([
        ev(t, `id${s}`, `type${s}`, `user${s}`, D1, { attrs_json: JSON.stringify({ s }) }),
      ]);
      await a.insertTransactions([
        tx(t, `tx${s}`, `user${s}`, `cur${s}`, 3, { source_type: `src${s}`, source_ref: s }),
      ]);
      expect(await a.snapshotEntries(t, `lb${s}`, D2, 0, 10)).toEqual([
        snap(t, `lb${s}`, D2, `user${s}`, 1, i, `win${s}`),
        snap(t, `lb${s}`, D2, s, 2, i - 1, `win${s}`),
      ]);
      expect(await a.snapshotUser(t, `lb${s}`, D2, s)).toEqual(snap(t, `lb${s}`, D2, s, 2, i - 1, `win${s}`));
      expect(await a.listSnapshots(t, `lb${s}`, 0, D3, 10)).toEqual([
        { leaderboard_id: `lb${s}`, window_key: `win${s}`, snapshot_time: D2, entries: 2 },
      ]);
      expect(await a.eventCounts(t, 0, D3)).toEqual([
        { day: '2026-01-31', type: `type${s}`, events: 1, users: 1 },
      ]);
      expect([...(await a.transactionTotals(t, `cur${s}`))]).toEqual([[`user${s}`, 3]]);
    }
  });

  it('rejects bad rows before writing any row of the batch', async () => {
    const t = tenant();
    const good = ev(t, 'ok', 'k', 'u', D1);
    const badEvents: Array<[AnalyticsEvent, RegExp]> = [
      [ev(t, 'x', 'k', 'u\u0000', D1), /user_id.*NUL/],
      [ev(t, 'x', 'k', '\uD800', D1), /user_id.*surrogate/],
      [ev(t, '', 'k', 'u', D1), /event_id/],
      [ev('', 'x', 'k', 'u', D1), /tenant_id/],
      [ev(t, 'x', 'k', 'u', -1), /occurred_at/],
      [ev(t, 'x', 'k', 'u', 4_294_967_296_000), /occurred_at/],
      [ev(t, 'x', 'k', 'u', D1 + 0.5), /occurred_at/],
      [ev(t, 'x', 'k', 'u', D1, { attrs_json: 'a\u0000' }), /attrs_json/],
      [{ ...ev(t, 'x', 'k', 'u', D1), type: 5 } as unknown as AnalyticsEvent, /type/],
    ];
    for (const [bad, msg] of badEvents) await expect(a.insertEvents([good, bad])).rejects.toThrow(msg);
    expect(await a.eventCounts(t, 0, D3)).toEqual([]);
    await expect(a.insertTransactions([tx(t, 'a', 'u', 'gold', 1.5)])).rejects.toThrow(/amount/);
    await expect(a.insertTransactions([tx(t, 'a', 'u', 'gold', 2 ** 53)])).rejects.toThrow(/amount/);
    await expect(
      a.insertTransactions([tx(t, 'a', 'u', 'gold', 1, { source_ref: 'a\u0000' })]),
    ).rejects.toThrow(/source_ref/);
    expect((await a.transactionTotals(t, 'gold')).size).toBe(0);
    for (const bad of [NaN, Infinity, 5e-324]) {
      await expect(
        a.insertSnapshot([snap(t, 'lb', D2, 'u1', 1, 1), snap(t, 'lb', D2, 'u2', 2, bad)]),
      ).rejects.toThrow(/score/);
    }
    await expect(a.insertSnapshot([snap(t, 'lb', D2, 'u1', -1, 1)])).rejects.toThrow(/rank/);
    await expect(a.insertSnapshot([snap(t, 'lb', D2, 'u1', 2 ** 31, 1)])).rejects.toThrow(/rank/);
    expect(await a.listSnapshots(t, 'lb', 0, D3, 10)).toEqual([]);
    await expect(a.eventCounts('a\u0000', 0, D3)).rejects.toThrow(/tenantId/);
    await expect(a.snapshotUser(t, 'lb', D2, '')).rejects.toThrow(/userId/);
  });

  it('handles a larger batch (2,000 events, 500 users) with the same counts', async () => {
    const t = tenant();
    const rows = Array.from({ length: 2000 }, (_, k) =>
      ev(t, `e${k}`, k % 3 === 0 ? 'a' : 'b', `u${k % 500}`, D1 + ((k * 7919) % (3 * DAY))),
    );
    await a.insertEvents(rows);
    await a.insertEvents(rows.slice(500, 1500));
    const expected = new Map<string, { events: number; users: Set<string> }>();
    for (const r of rows) {
      const key = `${new Date(r.occurred_at).toISOString().slice(0, 10)}|${r.type}`;
      const e = expected.get(key) ?? { events: 0, users: new Set<string>() };
      e.events++;
      e.users.add(r.user_id);
      expected.set(key, e);
    }
    const want = [...expected.entries()]
      .sort(([x], [y]) => (x < y ? -1 : 1))
      .map(([k, v]) => ({
        day: k.split('|')[0],
        type: k.split('|')[1],
        events: v.events,
        users: v.users.size,
      }));
    expect(await a.eventCounts(t, 0, D3 + DAY)).toEqual(want);
  });
});
