/**
 * The event pipeline: one consumer group over the events topic that applies every effect of an
 * event in one SQL transaction per batch: dedupe on (tenant, event_id), then each step
 * (leaderboard scoring now; earning rules, streaks, achievements as they land), then the offset
 * (processors/framework.ts). The rank index is updated after the commit (processors/pipeline/rank-sync.ts).
 */
import type { EventLog, LogRecord } from '../../adapters/eventlog/types';
import type { RankIndex } from '../../adapters/ranks/types';
import type { Queryable, Sql } from '../../adapters/sql/types';
import type { Clock } from '../../core/clock';
import { EVENTS_TOPIC, type EventRecord } from '../../schemas/topics';
import type { Logger } from '../../runtime/logger';
import type { Metrics } from '../../runtime/metrics';
import { eventView } from '../../core/leaderboards/definition';
import { applyEarningRules } from '../../core/wallet/earning';
import type { Wallet } from '../../core/wallet/wallet';
import { ok, skip, type Outcome, type Processor } from '../framework';
import { RankSync, openScoresOfUsers } from './rank-sync';
import { ScoringStep } from './scoring';

export const PIPELINE_GROUP = 'ludus.pipeline';

export interface PipelineDeps {
  sql: Sql;
  eventLog: EventLog;
  wallet: Wallet;
  ranks: RankIndex;
  clock: Clock;
  log: Logger;
  metrics?: Metrics;
}

/** What a step reports for one event: it changed something, or nothing applied. */
export type StepEffect = 'applied' | 'none';

export interface PipelineEvent {
  record: LogRecord<EventRecord>;
  event: EventRecord;
}

export function pipelineProcessor(deps: PipelineDeps): Processor<EventRecord> {
  const rankSync = new RankSync(deps, `${PIPELINE_GROUP}:${deps.eventLog.physicalName(EVENTS_TOPIC)}`);
  const scoring = new ScoringStep(deps.clock);
  return {
    group: PIPELINE_GROUP,
    topic: EVENTS_TOPIC,
    maxBatchSize: 1000,
    resumeFrom: (partitions, stored) => rankSync.resumeFrom(partitions, stored),
    maintain: (partitions, applied) => rankSync.repair(partitions, applied),
    async apply(q, batch) {
      const fresh = await dedupe(q, batch.fresh);
      const outcomes: Outcome[] = batch.fresh.map(() => skip('duplicate event_id'));
      const events: PipelineEvent[] = fresh.map((i) => ({
        record: batch.fresh[i]!,
        event: batch.fresh[i]!.value,
      }));

      const scored = await scoring.apply(q, events, batch.partition);
      const earned = await applyEarningRules(
        q,
        deps.wallet,
        events.map(({ event }) => ({
          tenant_id: event.tenant_id,
          event_id: event.event_id,
          user_id: event.user_id,
          occurred_at: event.occurred_at,
          view: eventView(event),
        })),
        deps.clock.now(),
      );
      fresh.forEach((recordIndex, i) => {
        const applied = scored.effects[i] === 'applied' || earned[i];
        outcomes[recordIndex] = applied ? ok : skip(scored.reasons[i] ?? 'no matching rule');
      });

      // Replayed records were applied by an earlier transaction whose index update may be missing.
      const replayedUsers = uniqueUsers(batch.replayed.map((r) => r.value));
      const resync = await openScoresOfUsers(q, replayedUsers, scored.configs);
      const rows = [...resync, ...scored.rows];
      const first = batch.fresh[0]?.offset ?? batch.replayed[0]?.offset ?? 0;
      return {
        outcomes,
        afterCommit: () => rankSync.push(rows, scored.configs, batch.partition, batch.nextOffset, first),
      };
    },
  };
}

/**
 * Marks events as processed; returns the indexes of the records seen for the first time
 * (a duplicate inside the batch keeps its first occurrence).
 */
async function dedupe(q: Queryable, records: LogRecord<EventRecord>[]): Promise<number[]> {
  if (records.length === 0) return [];
  const r = await q.query<{ tenant_id: string; event_id: string }>(
    `INSERT INTO processed_events (tenant_id, event_id, received_at)
     SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[]) ON CONFLICT DO NOTHING
     RETURNING tenant_id, event_id`,
    [
      records.map((x) => x.value.tenant_id),
      records.map((x) => x.value.event_id),
      records.map((x) => x.value.received_at),
    ],
  );
  const firstTime = new Set(r.rows.map((x) => `${x.tenant_id}\u0000${x.event_id}`));
  const out: number[] = [];
  records.forEach((x, i) => {
    const k = `${x.value.tenant_id}\u0000${x.value.event_id}`;
    if (firstTime.delete(k)) out.push(i);
  });
  return out;
}

function uniqueUsers(events: EventRecord[]): Array<{ tenant_id: string; user_id: string }> {
  const seen = new Map<string, { tenant_id: string; user_id: string }>();
  for (const e of events)
    seen.set(`${e.tenant_id}\u0000${e.user_id}`, { tenant_id: e.tenant_id, user_id: e.user_id });
  return [...seen.values()];
}

/** Purges dedupe rows older than the window plus an hour of processing lag (a scheduler job). */
export async function purgeProcessedEvents(q: Queryable, now: number, windowMs: number): Promise<number> {
  const r = await q.query('DELETE FROM processed_events WHERE received_at < $1', [now - windowMs - 3600_000]);
  return r.rowCount;
}
