/**
 * The event pipeline: one consumer group over the events topic that applies every effect of an
 * event in one SQL transaction per batch (of one partition, or of a round of partitions): dedupe on (tenant, event_id), then the steps in list
 * order (./step.ts: leaderboard scoring, earning rules; streaks, achievements and the rest are one
 * more step each), then the offset (processors/framework.ts). The rank index is updated after the
 * commit (the scoring step's afterCommit, ./rank-sync.ts).
 */
import type { EventLog } from '../../adapters/eventlog/types';
import type { RankIndex } from '../../adapters/ranks/types';
import type { Sql } from '../../adapters/sql/types';
import { forgetCounts, rememberCounts } from '../../core/definitions/presence';
import type { AchievementEngine } from '../../core/achievements/progress';
import type { Clock } from '../../core/clock';
import { eventView } from '../../core/leaderboards/definition';
import type { FactBus } from '../../core/facts';
import type { Granter } from '../../core/rewards/grant';
import type { Wallet } from '../../core/wallet/wallet';
import type { Logger } from '../../shared/logger';
import type { Metrics } from '../../shared/metrics';
import { EVENTS_TOPIC, type EventRecord } from '../../schemas/topics';
import { skip, type Outcome, type Processor } from '../framework';
import type { Rehearsal } from '../warm-up';
import { AchievementStep } from './achievements';
import { EarningStep } from './earning';
import { markAndReadTenants } from './definitions';
import { RankSync } from './rank-sync';
import { pipelineRehearsal } from './rehearsal';
import { ScoringStep } from './scoring';
import { StreakStep } from './streaks';
import { runSteps, type AnyStep, type StepBatch, type StepEvent } from './step';

export const PIPELINE_GROUP = 'ludus.pipeline';

export interface PipelineDeps {
  sql: Sql;
  eventLog: EventLog;
  wallet: Wallet;
  /** The fact bus and the granting service (streaks: milestones, breaks, freezes). */
  facts: FactBus;
  granter: Granter;
  ranks: RankIndex;
  clock: Clock;
  log: Logger;
  metrics?: Metrics;
  /** Achievement progress and completion (core/achievements/progress.ts). */
  achievements: AchievementEngine;
}

/** The steps of the pipeline, in order: a new feature adds its step here. */
export function pipelineSteps(deps: PipelineDeps, rankSync: RankSync): AnyStep[] {
  return [
    new ScoringStep(rankSync),
    new EarningStep(deps.wallet),
    new StreakStep({ facts: deps.facts, granter: deps.granter }),
    new AchievementStep(deps.achievements),
  ];
}

export function pipelineProcessor(
  deps: PipelineDeps,
): Processor<EventRecord> & { rehearsal(): Rehearsal<EventRecord> } {
  const rankSync = new RankSync(deps, `${PIPELINE_GROUP}:${deps.eventLog.physicalName(EVENTS_TOPIC)}`);
  const steps = pipelineSteps(deps, rankSync);
  return {
    group: PIPELINE_GROUP,
    topic: EVENTS_TOPIC,
    maxBatchSize: 1000,
    resumeFrom: (partitions, stored) => rankSync.resumeFrom(partitions, stored),
    maintain: (partitions, applied) => rankSync.repair(partitions, applied),
    rehearsal: () => pipelineRehearsal(deps.clock.now()),
    async apply(q, batch) {
      // One statement: the dedupe, and the rows of the records' tenants FOR KEY SHARE with their
      // time zones and definition versions (./definitions.ts).
      const { fresh, definitions } = await markAndReadTenants(
        q,
        batch.fresh.map((r) => r.value),
      );
      const outcomes: Outcome[] = batch.fresh.map(() => skip('duplicate event_id'));
      const events: StepEvent[] = fresh.map((recordIndex) => {
        const record = batch.fresh[recordIndex]!;
        return { index: recordIndex, record, event: record.value, view: eventView(record.value) };
      });
      const tenants = [...new Set(events.map((e) => e.event.tenant_id))];
      rememberCounts(q, new Map([...definitions].map(([t, d]) => [t, d.counts])));
      const stepBatch: StepBatch = {
        parts: batch.parts,
        events,
        replayed: batch.replayed.map((r) => r.value),
        tenants,
        timezones: new Map([...definitions].map(([t, d]) => [t, d.timezone])),
        now: deps.clock.now(),
        definitions,
      };
      let run;
      try {
        run = await runSteps(q, steps, stepBatch);
      } finally {
        forgetCounts(q);
      }
      events.forEach((e, i) => {
        outcomes[e.index] = run.outcomes[i]!;
      });
      return { outcomes, afterCommit: run.afterCommit };
    },
  };
}
