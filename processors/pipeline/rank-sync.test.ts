/**
 * The rank sync's push after the commit (./rank-sync.ts): one call to the index per batch, its
 * watermark check folded into the apply (`applyAfter`, issue 19), and a partition whose index
 * state was lost (no watermark after the first batch) rebuilt from SQL instead of applied.
 */
import { MemoryRankIndex } from '../../adapters/ranks/memory';
import type { RankIndex } from '../../adapters/ranks/types';
import type { Sql } from '../../adapters/sql/types';
import { eventView } from '../../core/leaderboards/definition';
import { createBoard } from '../../core/leaderboards/store';
import type { EventRecord } from '../../schemas/topics';
import { createLogger } from '../../shared/logger';
import { openTestPglite } from '../../tests/support/stack';
import { RankSync } from './rank-sync';
import { ScoringStep } from './scoring';
import { runSteps, type StepBatch } from './step';

const T0 = Date.parse('2026-11-20T10:00:00Z');

function batchAt(offset: number, user: string, partition = 0): StepBatch {
  const event: EventRecord = {
    tenant_id: 'acme',
    event_id: `e${offset}`,
    type: 'match',
    user_id: user,
    occurred_at: T0,
    received_at: T0,
    attrs_json: '{}',
    actor_metadata_json: null,
    subject_json: null,
  };
  const record = { topic: 't', partition, offset, key: `acme:${user}`, value: event, timestamp: 0 };
  return {
    parts: [{ partition, firstOffset: offset, nextOffset: offset + 1 }],
    events: [{ index: 0, record, event, view: eventView(event) }],
    replayed: [],
    tenants: ['acme'],
    timezones: new Map([['acme', 'UTC']]),
    now: T0 + 1000,
  };
}

describe('rank sync push [PGlite, memory index]', () => {
  let sql: Sql;
  beforeAll(async () => {
    sql = await openTestPglite();
    await createBoard(
      sql,
      {
        tenant_id: 'acme',
        leaderboard_id: 'games',
        name: 'games',
        description: null,
        reward_config_id: null,
        config: {
          timeframe: { type: 'all_time', timezone: 'UTC' },
          scoring: { rules: [{ event_type: 'match' }], aggregation: 'count' },
        },
      },
      T0,
    );
  });
  afterAll(() => sql.close());

  it('applies each batch in one index call; rebuilds from SQL when the index lost the partition', async () => {
    const deps: { ranks: RankIndex; sql: Sql; log: ReturnType<typeof createLogger> } = {
      ranks: new MemoryRankIndex(),
      sql,
      log: createLogger('silent'),
    };
    const sync = new RankSync(deps, 'pipeline:events');
    const step = new ScoringStep(sync);
    const push = async (offset: number, user: string) => {
      const r = await sql.tx((q) => runSteps(q, [step], batchAt(offset, user)));
      await r.afterCommit();
    };
    await push(0, 'u1');
    const calls = {
      watermark: jest.spyOn(deps.ranks, 'watermark'),
      after: jest.spyOn(deps.ranks, 'applyAfter'),
    };
    await push(1, 'u2');
    expect(calls.watermark).not.toHaveBeenCalled();
    expect(calls.after).toHaveBeenCalledTimes(1);
    expect(await deps.ranks.watermark('pipeline:events', 0)).toBe(2);
    expect(await deps.ranks.count('acme:games:all_time')).toBe(2);

    // The index loses its state (a Redis restarted empty): the next batch rebuilds the partition.
    deps.ranks = new MemoryRankIndex();
    await push(2, 'u3');
    expect(await deps.ranks.watermark('pipeline:events', 0)).toBe(3);
    const top = await deps.ranks.range('acme:games:all_time', 0, 10);
    expect(top.map((e) => e.member).sort()).toEqual(['u1', 'u2', 'u3']);
  });

  it('updates each partition of a round under its own watermark, with its own users', async () => {
    const ranks = new MemoryRankIndex();
    const sync = new RankSync({ ranks, sql, log: createLogger('silent') }, 'pipeline:round');
    const step = new ScoringStep(sync);
    // One batch of two partitions (a round): partition 3 at offsets 0-1, partition 5 at offset 7.
    const a = batchAt(0, 'r1', 3);
    const b = batchAt(1, 'r1', 3);
    const c = batchAt(7, 'r2', 5);
    const round: StepBatch = {
      ...a,
      parts: [
        { partition: 3, firstOffset: 0, nextOffset: 2 },
        { partition: 5, firstOffset: 7, nextOffset: 8 },
      ],
      events: [a, b, c].map((x, index) => ({ ...x.events[0]!, index })),
    };
    const r = await sql.tx((q) => runSteps(q, [step], round));
    await r.afterCommit();
    expect(await ranks.watermark('pipeline:round', 3)).toBe(2);
    expect(await ranks.watermark('pipeline:round', 5)).toBe(8);
    const rows = await sql.query<{ user_id: string; partition: number }>(
      `SELECT user_id, partition FROM leaderboard_scores WHERE user_id IN ('r1', 'r2') ORDER BY user_id`,
    );
    expect(rows.rows.map((x) => [x.user_id, Number(x.partition)])).toEqual([
      ['r1', 3],
      ['r2', 5],
    ]);
    expect((await ranks.get('acme:games:all_time', 'r1'))?.score).toBe(2);
    expect((await ranks.get('acme:games:all_time', 'r2'))?.score).toBe(1);
  });
});
