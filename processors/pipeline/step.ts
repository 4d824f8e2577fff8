/**
 * The pipeline step contract (issue 13, seam 1): what every feature that reacts to events
 * implements, and how the pipeline runs a list of them in the batch's one SQL transaction.
 *
 * A step, for one batch (the records of one or more partitions, applied in one transaction):
 *   1. `load(q, batch)`: reads what the batch's tenants need (its definitions), once per batch,
 *      compiling them once per definition version (core/rules `CompileCache`);
 *   2. `apply(q, batch, loaded)`: applies the batch's fresh events (their parsed views, the tenants'
 *      time zones and the batch's `now` come with the batch: no step parses an event or reads the
 *      clock itself), reading and writing its per-key state set-based (./batch-state.ts);
 *   3. reports one `StepEffect` per event it was given (applied, nothing with an optional reason,
 *      or a dead letter), and optionally work to do after the commit (derived indexes).
 *
 * The pipeline (`runSteps`) runs the steps in list order. An event one step dead-letters is not
 * given to the steps after it (the effects of the steps before it stay, and so does its dedupe
 * row: a step that can refuse an event belongs before the steps with effects). The record's outcome: dead letter if a step
 * dead-lettered it; else ok if any step applied something; else a skip with the first reason a
 * step gave, or `no matching rule`. After the commit, each step's `afterCommit` runs in list order;
 * one that throws stops the others and the batch is redelivered as replay (processors/framework.ts).
 *
 * Types shared by steps live here, so that steps import this module, never the pipeline.
 */
import type { LogRecord } from '../../adapters/eventlog/types';
import type { Queryable } from '../../adapters/sql/types';
import type { EventView } from '../../core/expressions';
import type { EventRecord } from '../../schemas/topics';
import { deadLetter, ok, skip, type Outcome, type PartRange } from '../framework';
import type { TenantDefinitions } from './definitions';

/** One fresh event of the batch (seen for the first time), parsed once. */
export interface StepEvent {
  /** Position among the batch's fresh records (`fresh[index]` of the framework's batch). */
  readonly index: number;
  readonly record: LogRecord<EventRecord>;
  readonly event: EventRecord;
  readonly view: EventView;
}

export interface StepBatch {
  /** The partitions of the batch and the offsets it covers of each (processors/framework.ts). */
  readonly parts: readonly PartRange[];
  /** The fresh events in log order (duplicates of an earlier event_id removed). */
  readonly events: readonly StepEvent[];
  /** Records an earlier transaction applied: no effects, only the resync of derived indexes. */
  readonly replayed: readonly EventRecord[];
  /** The tenants of the fresh events, each once. */
  readonly tenants: readonly string[];
  /** The IANA time zone of each tenant of `tenants` (a tenant without a row is missing). */
  readonly timezones: ReadonlyMap<string, string>;
  /** The batch's clock reading (Unix ms), the same for every step. */
  readonly now: number;
  /**
   * Set by the pipeline, which read the tenants' rows FOR KEY SHARE in this transaction before any
   * step ran (./definitions.ts): each tenant's definition versions and counts, so that a step skips
   * tenants without definitions and reloads only when a version moved. Absent (a batch built by a
   * test): steps load, and lock what they need, themselves.
   */
  readonly definitions?: ReadonlyMap<string, TenantDefinitions>;
}

export type StepEffect =
  | { kind: 'applied' }
  | { kind: 'none'; reason?: string }
  | { kind: 'dead_letter'; reason: string; reasonClass?: string };

export const applied: StepEffect = { kind: 'applied' };
export const nothing: StepEffect = { kind: 'none' };

export interface StepReport {
  /** One effect per event of `batch.events`, in the same order. */
  effects: StepEffect[];
  /** Runs after the batch's commit (derived indexes): see processors/framework.ts `afterCommit`. */
  afterCommit?: () => Promise<void>;
}

export interface PipelineStep<Loaded = unknown> {
  /** A short name for logs and docs (`leaderboards`, `earning_rules`). */
  readonly name: string;
  /** Reads what the batch's tenants need, once per batch, in the batch's transaction. */
  load(q: Queryable, batch: StepBatch): Promise<Loaded>;
  /** Applies the batch in its transaction; must report one effect per event of `batch.events`. */
  apply(q: Queryable, batch: StepBatch, loaded: Loaded): Promise<StepReport>;
}

/** Any step, whatever it loads (for lists of steps). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyStep = PipelineStep<any>;

export interface StepsResult {
  /** One outcome per event of `batch.events`, in the same order. */
  outcomes: Outcome[];
  afterCommit: () => Promise<void>;
}

/** Runs the steps over the batch (see the module comment for how effects combine). */
export async function runSteps(
  q: Queryable,
  steps: readonly AnyStep[],
  batch: StepBatch,
): Promise<StepsResult> {
  const n = batch.events.length;
  const appliedBy = new Array<boolean>(n).fill(false);
  const reasons = new Array<string | undefined>(n).fill(undefined);
  const dead = new Array<Outcome | undefined>(n).fill(undefined);
  const after: Array<() => Promise<void>> = [];
  // Positions in batch.events of the events still given to steps.
  let live = batch.events.map((_, i) => i);
  for (const step of steps) {
    const view: StepBatch =
      live.length === n ? batch : { ...batch, events: live.map((i) => batch.events[i]!) };
    const loaded: unknown = await step.load(q, view);
    const report = await step.apply(q, view, loaded);
    if (report.effects.length !== view.events.length)
      throw new Error(
        `pipeline step ${step.name}: ${report.effects.length} effects for ${view.events.length} events`,
      );
    let refused = false;
    report.effects.forEach((fx, k) => {
      const i = live[k]!;
      if (fx.kind === 'applied') appliedBy[i] = true;
      else if (fx.kind === 'dead_letter') {
        dead[i] = deadLetter(fx.reason, fx.reasonClass);
        refused = true;
      } else if (fx.reason !== undefined && reasons[i] === undefined) reasons[i] = fx.reason;
    });
    if (refused) live = live.filter((i) => dead[i] === undefined);
    if (report.afterCommit) after.push(report.afterCommit);
  }
  return {
    outcomes: batch.events.map(
      (_, i) => dead[i] ?? (appliedBy[i] ? ok : skip(reasons[i] ?? 'no matching rule')),
    ),
    afterCommit: async () => {
      for (const fn of after) await fn();
    },
  };
}
