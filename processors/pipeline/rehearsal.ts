/**
 * The pipeline's rehearsal (processors/warm-up.ts): a synthetic tenant with definitions for every
 * step (leaderboards of three timeframes, earning rules on two currencies, a daily streak,
 * achievements of three kinds), and synthetic events of a mix like a game's (matches, purchases,
 * logins) for users seen once and users seen again, in rounds of several partitions like the
 * framework's. All of it is written in the warm-up's transaction, which rolls back.
 *
 * The tenant's id is new for every rehearsal (`ludus-warm-up-<uuid>`), so that no real tenant's
 * cached definitions are touched and no two processes starting together share a row.
 */
import { randomUUID } from 'node:crypto';
import type { LogRecord } from '../../adapters/eventlog/types';
import type { Queryable } from '../../adapters/sql/types';
import { validateCriteria } from '../../core/achievements/criteria';
import { createAchievement } from '../../core/achievements/store';
import type { LeaderboardConfig } from '../../core/leaderboards/definition';
import { createBoard } from '../../core/leaderboards/store';
import { SeededRandom } from '../../core/random';
import { createDefinition } from '../../core/streaks/definitions';
import { createRule } from '../../core/wallet/earning';
import { EVENTS_TOPIC, eventKey, type EventRecord } from '../../schemas/topics';
import type { ApplyBatch } from '../framework';
import type { Rehearsal } from '../warm-up';

/** Events of one synthetic round (a steady load's rounds are a few hundred to a thousand). */
export const REHEARSAL_ROUND = 500;

const BOARDS: Array<{ id: string; config: LeaderboardConfig }> = [
  {
    id: 'kills',
    config: {
      timeframe: { type: 'weekly', timezone: 'UTC', reset_day: 'monday', reset_time: '00:00' },
      scoring: {
        rules: [
          {
            event_type: 'match_finished',
            conditions: { 'attrs.mode': { eq: 'ranked' } },
            points_expression: 'attrs.kills * 10 + max(attrs.assists, 0)',
          },
        ],
        aggregation: 'sum',
      },
    } as LeaderboardConfig,
  },
  {
    id: 'matches',
    config: {
      timeframe: { type: 'all_time' },
      scoring: { rules: [{ event_type: 'match_finished' }], aggregation: 'count' },
    } as LeaderboardConfig,
  },
  {
    id: 'spend',
    config: {
      timeframe: { type: 'monthly', timezone: 'UTC' },
      scoring: { rules: [{ event_type: 'purchase', points_expression: 'attrs.amount' }], aggregation: 'sum' },
    } as LeaderboardConfig,
  },
];

const RULES = [
  {
    currency_id: 'coins',
    event_type: 'purchase',
    calculation: { type: 'per_unit', points: 1, per: 1, field: 'amount' },
  },
  { currency_id: 'coins', event_type: 'login', calculation: { type: 'fixed', amount: 10 }, max_per_day: 10 },
  { currency_id: 'xp', event_type: 'match_finished', calculation: { type: 'fixed', amount: 1 } },
] as const;

const ACHIEVEMENTS = [
  { type: 'event_count', event_type: 'match_finished', conditions: { mode: { eq: 'ranked' } }, threshold: 5 },
  { type: 'cumulative', metric: 'xp', threshold: 20 },
  { type: 'streak', event_type: 'login', threshold: 2 },
];

/** Writes the synthetic tenant and its definitions (every write of the warm-up's transaction). */
async function prepareTenant(q: Queryable, tenant: string, now: number): Promise<void> {
  await q.query(
    `INSERT INTO tenants (id, name, jwt_secret_enc, hmac_secret_enc, created_at, updated_at)
     VALUES ($1, 'warm-up (rolled back)', '-', '-', now(), now())`,
    [tenant],
  );
  await q.query(
    `INSERT INTO currencies (tenant_id, id, name, is_spendable, decimal_places, created_at, updated_at)
     VALUES ($1, 'coins', 'Coins', true, 0, now(), now()), ($1, 'xp', 'XP', false, 0, now(), now())`,
    [tenant],
  );
  for (const b of BOARDS)
    await createBoard(
      q,
      {
        tenant_id: tenant,
        leaderboard_id: b.id,
        name: b.id,
        description: null,
        reward_config_id: null,
        config: b.config,
      },
      now,
    );
  for (const [i, r] of RULES.entries())
    await createRule(
      q,
      tenant,
      {
        name: `rule ${i}`,
        currency_id: r.currency_id,
        event_type: r.event_type,
        event_filter: null,
        calculation: r.calculation as never,
        max_per_event: null,
        max_per_day: 'max_per_day' in r ? r.max_per_day : null,
        max_per_week: null,
        priority: 0,
        active: true,
      },
      now,
    );
  await createDefinition(
    q,
    tenant,
    {
      name: 'daily login',
      config: {
        event_types: ['login'],
        window: { type: 'calendar', period: 'daily', timezone: 'UTC', reset_time: '00:00' },
        condition: { type: 'count', min: 1 },
        milestones: [{ threshold: 3, reward_item_id: null, repeatable: true }],
      },
    },
    now,
  );
  const random = new SeededRandom(tenant);
  for (const [i, c] of ACHIEVEMENTS.entries()) {
    const v = validateCriteria(c);
    if (!v.ok) throw new Error(`warm-up achievement ${i}: ${v.error}`);
    await createAchievement(q, random, tenant, { name: `achievement ${i}`, criteria: v.criteria }, now);
  }
}

/**
 * Round `n` (from 0) of `tenant`'s synthetic events: REHEARSAL_ROUND events over every partition,
 * of users drawn from a pool that grows with the rounds (about four events per user: both a user's
 * first event, whose rows are inserted, and later ones, whose rows are updated).
 */
function round(tenant: string, n: number, now: number): ApplyBatch<EventRecord> {
  const random = new SeededRandom(`${tenant}-${n}`);
  const users = Math.ceil(((n + 1) * REHEARSAL_ROUND) / 4);
  const byPartition = new Map<number, LogRecord<EventRecord>[]>();
  for (let k = 0; k < REHEARSAL_ROUND; k++) {
    const i = n * REHEARSAL_ROUND + k;
    const u = random.int(0, users);
    const pick = random.float();
    const type = pick < 0.6 ? 'match_finished' : pick < 0.85 ? 'purchase' : 'login';
    const attrs =
      type === 'match_finished'
        ? {
            mode: random.float() < 0.5 ? 'ranked' : 'casual',
            kills: random.int(0, 21),
            assists: random.int(0, 11),
          }
        : type === 'purchase'
          ? { amount: random.int(1, 101) }
          : {};
    // One event every millisecond, the last of round n at `now` minus what the later rounds take.
    const at = now - 3_600_000 + i;
    const value: EventRecord = {
      tenant_id: tenant,
      event_id: `warm-up-${i}`,
      type,
      user_id: `u${u}`,
      occurred_at: at,
      received_at: at,
      attrs_json: JSON.stringify(attrs),
      actor_metadata_json: null,
      subject_json: null,
    };
    const partition = u % EVENTS_TOPIC.partitions;
    const list = byPartition.get(partition) ?? [];
    list.push({
      topic: EVENTS_TOPIC.name,
      partition,
      offset: i,
      key: eventKey(tenant, value.user_id),
      value,
      timestamp: at,
    });
    byPartition.set(partition, list);
  }
  const partitions = [...byPartition.keys()].sort((a, b) => a - b);
  return {
    parts: partitions.map((p) => {
      const list = byPartition.get(p)!;
      return { partition: p, firstOffset: list[0]!.offset, nextOffset: list[list.length - 1]!.offset + 1 };
    }),
    fresh: partitions.flatMap((p) => byPartition.get(p)!),
    replayed: [],
  };
}

/** A rehearsal: a new synthetic tenant, its definitions, and its rounds of events. */
export function pipelineRehearsal(now: number): Rehearsal<EventRecord> {
  const tenant = `ludus-warm-up-${randomUUID()}`;
  return { prepare: (q) => prepareTenant(q, tenant, now), round: (n) => round(tenant, n, now) };
}
