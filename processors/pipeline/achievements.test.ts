/**
 * The achievements step on a real store (PGlite) against the reference model
 * (tests/support/achievements-reference.ts): for random event sequences (duplicates of an event_id,
 * whole batches redelivered, batches whose transaction fails after the step and is retried), split
 * into random batches and run the way the pipeline runs them (dedupe, then the step, in one
 * transaction), every user's completions and shown progress equal the model's, and each
 * completion paid and announced exactly once. fast-check prints the seed of a failure.
 */
import fc from 'fast-check';
import type { Sql } from '../../adapters/sql/types';
import { validateCriteria } from '../../core/achievements/criteria';
import { AchievementEngine, achievementReactions } from '../../core/achievements/progress';
import { createAchievement, type Achievement } from '../../core/achievements/store';
import { userViews } from '../../core/achievements/views';
import { markProcessed } from '../../core/events/processed';
import { FactBus } from '../../core/facts';
import { eventView } from '../../core/leaderboards/definition';
import { outboxReactions } from '../../core/outbox';
import { SeededRandom } from '../../core/random';
import { createConfig } from '../../core/rewards/configs';
import { Granter } from '../../core/rewards/grant';
import { createItem } from '../../core/rewards/items';
import { Wallet } from '../../core/wallet/wallet';
import type { EventRecord } from '../../schemas/topics';
import {
  nothingYet,
  referenceAchievements,
  type RefCriterion,
  type RefEvent,
  type RefProgress,
} from '../../tests/support/achievements-reference';
import { openTestPglite, uniqueName } from '../../tests/support/stack';
import { AchievementStep } from './achievements';
import { runSteps, type StepBatch } from './step';

const DAY = 86_400_000;
const BASE = Date.UTC(2026, 10, 1);
const USERS = ['u0', 'u1', 'u2'];

function toRecord(tenant: string, e: RefEvent): EventRecord {
  return {
    tenant_id: tenant,
    event_id: e.event_id,
    type: e.type,
    user_id: e.user_id,
    occurred_at: e.occurred_at,
    received_at: e.occurred_at,
    attrs_json: JSON.stringify(e.attrs),
    actor_metadata_json: null,
    subject_json: null,
  };
}

/** One pipeline batch: dedupe, then the step, in the caller's transaction. */
async function runBatch(
  q: Parameters<Parameters<Sql['tx']>[0]>[0],
  step: AchievementStep,
  records: EventRecord[],
  offset: number,
) {
  const fresh = await markProcessed(q, records);
  const events = fresh.map((i) => {
    const event = records[i]!;
    return {
      index: i,
      record: {
        topic: 'ludus.events',
        partition: 0,
        offset: offset + i,
        key: `${event.tenant_id}:${event.user_id}`,
        value: event,
        timestamp: 0,
      },
      event,
      view: eventView(event),
    };
  });
  const batch: StepBatch = {
    parts: [{ partition: 0, firstOffset: offset, nextOffset: offset + records.length }],
    events,
    replayed: [],
    tenants: [...new Set(events.map((e) => e.event.tenant_id))],
    timezones: new Map(records.map((r) => [r.tenant_id, 'UTC'])),
    now: BASE + 40 * DAY,
  };
  return runSteps(q, [step], batch);
}

const strip = (p: { current: number; parts?: unknown[] }): RefProgress =>
  p.parts
    ? { current: p.current, parts: (p.parts as Array<{ current: number }>).map(strip) }
    : { current: p.current };

describe('achievements step against the reference model [PGlite]', () => {
  let sql: Sql;
  let step: AchievementStep;
  const random = new SeededRandom('achievements-property');
  beforeAll(async () => {
    sql = await openTestPglite();
    const facts = new FactBus();
    const granter = new Granter(new Wallet(facts, random), random);
    const engine = new AchievementEngine(facts, granter);
    facts.register(outboxReactions, achievementReactions(engine));
    step = new AchievementStep(engine);
  });
  afterAll(() => sql.close());

  const arbEvent = fc.record({
    user: fc.integer({ min: 0, max: USERS.length - 1 }),
    type: fc.constantFrom('a', 'b'),
    mode: fc.constantFrom('x', 'y'),
    dayStep: fc.constantFrom(0, 1, 2),
  });

  it('matches the model for random streams with duplicates, redeliveries and failed batches', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(arbEvent, { maxLength: 50 }),
        fc.array(fc.nat(), { maxLength: 10 }),
        fc.array(
          fc.record({ size: fc.integer({ min: 1, max: 12 }), fail: fc.boolean(), redeliver: fc.boolean() }),
          {
            minLength: 1,
            maxLength: 12,
          },
        ),
        fc.tuple(
          fc.integer({ min: 1, max: 5 }),
          fc.integer({ min: 1, max: 4 }),
          fc.integer({ min: 1, max: 3 }),
          fc.integer({ min: 1, max: 4 }),
        ),
        async (raw, dupPicks, batches, [t1, t2, t3, t4]) => {
          const tenant = uniqueName('p');
          await sql.query(
            `INSERT INTO currencies (tenant_id, id, name, is_spendable, decimal_places, created_at, updated_at)
             VALUES ($1, 'coins', 'Coins', true, 0, now(), now())`,
            [tenant],
          );
          const item = await createItem(
            sql,
            tenant,
            { name: '1 coin', reward_type: 'currency', payload: { currency_id: 'coins', amount: 1 } },
            BASE,
          );
          const config = await createConfig(
            sql,
            tenant,
            {
              name: 'c',
              tiers: [
                {
                  condition: { type: 'milestone', metric: 'achievement', value: 1 },
                  item_ids: [item.item_id],
                },
              ],
            },
            BASE,
          );
          const criteria: RefCriterion[] = [
            { type: 'event_count', event_type: 'a', conditions: { mode: { eq: 'x' } }, threshold: t1 },
            { type: 'streak', event_type: 'b', threshold: t2 },
            {
              type: 'combined',
              operator: 'and',
              conditions: [
                { type: 'event_count', event_type: 'b', threshold: t3 },
                {
                  type: 'combined',
                  operator: 'and',
                  conditions: [{ type: 'streak', event_type: 'a', threshold: t4, reset_on_failure: false }],
                },
              ],
            },
          ];
          const defs: Achievement[] = [];
          for (const c of criteria) {
            const v = validateCriteria(c);
            if (!v.ok) throw new Error(v.error);
            defs.push(
              await createAchievement(
                sql,
                random,
                tenant,
                { name: 'p', criteria: v.criteria, reward_config_id: config.reward_config_id },
                BASE,
              ),
            );
          }
          // Each user's events in time order; duplicates (the same event again) come after it.
          const clock = USERS.map(() => BASE);
          const stream: RefEvent[] = raw.map((r, i) => {
            clock[r.user] = clock[r.user]! + r.dayStep * DAY + 1000;
            return {
              event_id: `e${i}`,
              user_id: USERS[r.user]!,
              type: r.type,
              occurred_at: clock[r.user]!,
              attrs: { mode: r.mode },
            };
          });
          for (const p of dupPicks)
            if (stream.length) {
              const at = p % stream.length;
              stream.splice(at + 1 + (p % 3), 0, stream[at]!);
            }
          let pos = 0;
          let offset = 0;
          for (const b of batches) {
            const records = stream.slice(pos, pos + b.size).map((e) => toRecord(tenant, e));
            if (b.fail)
              await expect(
                sql.tx(async (q) => {
                  await runBatch(q, step, records, offset);
                  throw new Error('crash after the step');
                }),
              ).rejects.toThrow('crash after the step');
            await sql.tx((q) => runBatch(q, step, records, offset));
            if (b.redeliver) await sql.tx((q) => runBatch(q, step, records, offset));
            pos += b.size;
            offset += records.length;
          }
          const rest = stream.slice(pos).map((e) => toRecord(tenant, e));
          await sql.tx((q) => runBatch(q, step, rest, offset));

          const model = referenceAchievements(
            defs.map((d, i) => ({ id: d.id, criteria: criteria[i]! })),
            stream,
          );
          let completions = 0;
          for (const user of USERS) {
            const views = await userViews(sql, tenant, user, defs, BASE + 40 * DAY);
            views.forEach((v, i) => {
              const want = model.get(`${user}\u0000${defs[i]!.id}`) ?? nothingYet(criteria[i]!);
              expect([user, i, v.completed, strip(v.progress)]).toEqual([
                user,
                i,
                want.completed,
                want.progress,
              ]);
              if (want.completed) completions++;
            });
          }
          const count = async (q: string) => Number((await sql.query<{ n: string }>(q, [tenant])).rows[0]!.n);
          expect(await count('SELECT count(*) AS n FROM achievement_completions WHERE tenant_id = $1')).toBe(
            completions,
          );
          expect(
            await count(
              "SELECT count(*) AS n FROM ledger WHERE tenant_id = $1 AND source_type = 'achievement_completed'",
            ),
          ).toBe(completions);
          expect(
            await count(
              "SELECT count(*) AS n FROM outbox WHERE tenant_id = $1 AND event_type = 'achievement.completed'",
            ),
          ).toBe(completions);
        },
      ),
      {
        numRuns: 60,
        examples: [
          // A streak broken by one missing day, and a retried event.
          [
            [
              { user: 0, type: 'b', mode: 'x', dayStep: 0 },
              { user: 0, type: 'b', mode: 'x', dayStep: 2 },
              { user: 0, type: 'a', mode: 'x', dayStep: 1 },
            ],
            [0],
            [{ size: 2, fail: true, redeliver: true }],
            [1, 2, 1, 2],
          ],
        ],
      },
    );
  });
});
