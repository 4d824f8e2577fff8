/**
 * The event pipeline: one consumer group over the events topic that applies every effect of an
 * event in one SQL transaction per batch: dedupe on (tenant, event_id), then the steps in list
 * order (./step.ts: leaderboard scoring, earning rules; streaks, achievements and the rest are one
 * more step each), then the offset (processors/framework.ts). The rank index is updated after the
 * commit (the scoring step's afterCommit, ./rank-sync.ts).
 */
import type { EventLog, LogRecord } from '../../adapters/eventlog/types';
import type { RankIndex } from '../../adapters/ranks/types';
import type { Queryable, Sql } from '../../adapters/sql/types';
import type { Clock } from '../../core/clock';
import { eventView } from '../../core/leaderboards/definition';
import type { Wallet } from '../../core/wallet/wallet';
import type { Logger } from '../../shared/logger';
import type { Metrics } from '../../shared/metrics';
import { EVENTS_TOPIC, type EventRecord } from '../../schemas/topics';
import { skip, type Outcome, type Processor } from '../framework';
import { EarningStep } from './earning';
import { RankSync } from './rank-sync';
import { ScoringStep } from './scoring';
import { runSteps, type AnyStep, type StepBatch, type StepEvent } from './step';

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

/** The steps of the pipeline, in order: a new feature adds its step here. */
export function pipelineSteps(deps: PipelineDeps, rankSync: RankSync): AnyStep[] {
  return [new ScoringStep(rankSync), new EarningStep(deps.wallet)];
}

export function pipelineProcessor(deps: PipelineDeps): Processor<EventRecord> {
  const rankSync = new RankSync(deps, `${PIPELINE_GROUP}:${deps.eventLog.physicalName(EVENTS_TOPIC)}`);
  const steps = pipelineSteps(deps, rankSync);
  return {
    group: PIPELINE_GROUP,
    topic: EVENTS_TOPIC,
    maxBatchSize: 1000,
    resumeFrom: (partitions, stored) => rankSync.resumeFrom(partitions, stored),
    maintain: (partitions, applied) => rankSync.repair(partitions, applied),
    async apply(q, batch) {
      const fresh = await dedupe(q, batch.fresh);
      const outcomes: Outcome[] = batch.fresh.map(() => skip('duplicate event_id'));
      const events: StepEvent[] = fresh.map((recordIndex) => {
        const record = batch.fresh[recordIndex]!;
        return { index: recordIndex, record, event: record.value, view: eventView(record.value) };
      });
      const tenants = [...new Set(events.map((e) => e.event.tenant_id))];
      const stepBatch: StepBatch = {
        partition: batch.partition,
        nextOffset: batch.nextOffset,
        firstOffset: batch.fresh[0]?.offset ?? batch.replayed[0]?.offset ?? 0,
        events,
        replayed: batch.replayed.map((r) => r.value),
        tenants,
        timezones: await tenantTimezones(q, tenants),
        now: deps.clock.now(),
      };
      const run = await runSteps(q, steps, stepBatch);
      events.forEach((e, i) => {
        outcomes[e.index] = run.outcomes[i]!;
      });
      return { outcomes, afterCommit: run.afterCommit };
    },
  };
}

/** The IANA time zone of each tenant (a tenant without a row is missing from the map). */
async function tenantTimezones(q: Queryable, tenants: string[]): Promise<Map<string, string>> {
  if (tenants.length === 0) return new Map();
  const r = await q.query<{ id: string; timezone: string }>(
    'SELECT id, timezone FROM tenants WHERE id = ANY($1::text[])',
    [tenants],
  );
  return new Map(r.rows.map((t) => [t.id, t.timezone]));
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

/** Purges dedupe rows older than the window plus an hour of processing lag (a scheduler job). */
export async function purgeProcessedEvents(q: Queryable, now: number, windowMs: number): Promise<number> {
  const r = await q.query('DELETE FROM processed_events WHERE received_at < $1', [now - windowMs - 3600_000]);
  return r.rowCount;
}
