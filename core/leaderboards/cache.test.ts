import type { Queryable } from '../../adapters/sql/types';
import { ManualClock } from '../clock';
import { LeaderboardCache } from './cache';

const key = { tenant_id: 't', leaderboard_id: 'lb', window_key: '2026-11-22' };

/** A fake SQL store that answers board and window reads from mutable rows and counts the reads. */
function fakeSql() {
  const state = {
    reads: 0,
    board: null as Record<string, unknown> | null,
    window: null as Record<string, unknown> | null,
  };
  const q: Queryable = {
    query: async <R>(text: string) => {
      state.reads++;
      const row = text.includes('FROM leaderboards ') ? state.board : state.window;
      return { rows: (row ? [row] : []) as R[], rowCount: row ? 1 : 0 };
    },
    exec: async () => undefined,
  };
  return { q, state };
}

const boardRow = (name: string) => ({
  tenant_id: 't',
  id: 'lb',
  name,
  description: null,
  reward_config_id: null,
  status: 'active',
  config: { timeframe: { type: 'daily', timezone: 'UTC' } },
  version: 1,
  created_at: 0,
  updated_at: 0,
});

const windowRow = (status: 'open' | 'closed') => ({
  ...key,
  starts_at: 0,
  ends_at: 1,
  closes_at: 1,
  status,
  closed_at: status === 'closed' ? 1 : null,
  entries: status === 'closed' ? 3 : null,
  exported: false,
});

describe('LeaderboardCache', () => {
  test('boards: cached for the TTL, forgotten on update, misses not cached', async () => {
    const clock = new ManualClock(1000);
    const cache = new LeaderboardCache({ clock, ttlMs: 500 });
    const { q, state } = fakeSql();

    expect(await cache.board(q, 't', 'lb')).toBeNull();
    state.board = boardRow('one');
    expect((await cache.board(q, 't', 'lb'))?.name).toBe('one');
    expect(state.reads).toBe(2);

    state.board = boardRow('two');
    clock.advance(499);
    expect((await cache.board(q, 't', 'lb'))?.name).toBe('one');
    clock.advance(1);
    expect((await cache.board(q, 't', 'lb'))?.name).toBe('two');

    state.board = boardRow('three');
    cache.forgetBoard('t', 'lb');
    expect((await cache.board(q, 't', 'lb'))?.name).toBe('three');
    expect(state.reads).toBe(4);
    expect(await cache.board(q, 't', 'other')).not.toBeNull(); // the fake answers any id
    expect(state.reads).toBe(5);
  });

  test('windows: open rows for the TTL, closed rows kept, forgotten on close', async () => {
    const clock = new ManualClock(1000);
    const cache = new LeaderboardCache({ clock, ttlMs: 500 });
    const { q, state } = fakeSql();

    expect(await cache.window(q, key)).toBeNull();
    state.window = windowRow('open');
    expect((await cache.window(q, key))?.status).toBe('open');

    state.window = windowRow('closed');
    expect((await cache.window(q, key))?.status).toBe('open');
    cache.forgetWindow(key);
    expect((await cache.window(q, key))?.status).toBe('closed');

    const reads = state.reads;
    clock.advance(86_400_000);
    expect((await cache.window(q, key))?.status).toBe('closed');
    expect(state.reads).toBe(reads);
  });

  test('TTL 0 reads open rows and boards every time', async () => {
    const cache = new LeaderboardCache({ clock: new ManualClock(1000), ttlMs: 0 });
    const { q, state } = fakeSql();
    state.board = boardRow('one');
    state.window = windowRow('open');
    await cache.board(q, 't', 'lb');
    await cache.board(q, 't', 'lb');
    await cache.window(q, key);
    await cache.window(q, key);
    expect(state.reads).toBe(4);
  });

  test('an entry from the future (clock set back) is read again', async () => {
    const clock = new ManualClock(10_000);
    const cache = new LeaderboardCache({ clock, ttlMs: 500 });
    const { q, state } = fakeSql();
    state.board = boardRow('one');
    await cache.board(q, 't', 'lb');
    clock.set(5_000);
    state.board = boardRow('two');
    expect((await cache.board(q, 't', 'lb'))?.name).toBe('two');
  });

  test('concurrent misses of one entry share one read; a forget drops the read in flight', async () => {
    const clock = new ManualClock(1000);
    const cache = new LeaderboardCache({ clock, ttlMs: 500 });
    const { q, state } = fakeSql();
    state.board = boardRow('one');
    state.window = windowRow('open');
    const boards = await Promise.all(Array.from({ length: 20 }, () => cache.board(q, 't', 'lb')));
    const windows = await Promise.all(Array.from({ length: 20 }, () => cache.window(q, key)));
    expect(boards.every((b) => b?.name === 'one')).toBe(true);
    expect(windows.every((w) => w?.status === 'open')).toBe(true);
    expect(state.reads).toBe(2);

    // Expired: again one read for many callers, and the new value for all of them.
    clock.advance(500);
    state.board = boardRow('two');
    const again = await Promise.all(Array.from({ length: 10 }, () => cache.board(q, 't', 'lb')));
    expect(again.map((b) => b?.name)).toEqual(Array(10).fill('two'));
    expect(state.reads).toBe(3);

    // A forget while a read is in flight: that read's value is not remembered, the next call reads.
    clock.advance(500);
    const inFlight = cache.board(q, 't', 'lb');
    cache.forgetBoard('t', 'lb');
    state.board = boardRow('three');
    expect((await inFlight)?.name).toBe('two');
    expect((await cache.board(q, 't', 'lb'))?.name).toBe('three');
    expect(state.reads).toBe(5);
  });

  test('closed windows: a page (up to 100 entries) and the size are read once per process, whatever the TTL', async () => {
    const cache = new LeaderboardCache({ clock: new ManualClock(1000), ttlMs: 0 });
    const texts: string[] = [];
    const score = (user_id: string, s: number) => ({
      ...key,
      user_id,
      score: s,
      total: s,
      n: 1,
      tiebreak: 0,
      partition: 0,
    });
    const q: Queryable = {
      query: async <R>(text: string, params?: unknown[]) => {
        texts.push(text);
        if (text.includes('count(*)')) return { rows: [{ n: 3 }] as R[], rowCount: 1 };
        const offset = Number(params?.[4]);
        const rows = [score('a', 3), score('b', 2), score('c', 1)].slice(
          offset,
          offset + Number(params?.[3]),
        );
        return { rows: rows as R[], rowCount: rows.length };
      },
      exec: async () => undefined,
    };
    const first = await cache.closedPage(q, key, 0, 2);
    expect(first.rows.map((r) => r.user_id)).toEqual(['a', 'b']);
    expect(first.total).toBe(3);
    expect(texts).toHaveLength(2);
    expect(await cache.closedPage(q, key, 0, 2)).toEqual(first);
    expect(await cache.closedSize(q, key)).toBe(3);
    expect(texts).toHaveLength(2);
    // Another page is another read (its size is known).
    expect((await cache.closedPage(q, key, 2, 2)).rows.map((r) => r.user_id)).toEqual(['c']);
    expect(texts).toHaveLength(3);
    // Another window is another read.
    await cache.closedSize(q, { ...key, window_key: '2026-11-21' });
    expect(texts).toHaveLength(4);
    // Another tenant's window of the same board id and key is its own entry (never shared).
    await cache.closedPage(q, { ...key, tenant_id: 'other' }, 0, 2);
    expect(texts).toHaveLength(6);
    // A page longer than 100 entries is read each time (memory is bounded by entries kept).
    await cache.closedPage(q, key, 0, 101);
    await cache.closedPage(q, key, 0, 101);
    expect(texts).toHaveLength(8);
  });
});
