/**
 * Pipeline step: streaks (core/streaks/). For each fresh event, each active definition of its
 * tenant whose event types and expression match advances that user's streak in the event's period
 * (chosen by occurred_at), in the batch's transaction (with the offsets: exactly once). The batch's
 * (definition, user) rows are locked once in key order, moved in memory in log order
 * (core/streaks/engine.ts), written in one statement, and the moves' effects (history, milestones
 * granted, facts) recorded once per batch (core/streaks/progress.ts).
 */
import type { Queryable } from '../../adapters/sql/types';
import type { FactBus } from '../../core/facts';
import type { Granter } from '../../core/rewards/grant';
import { activeDefinitions, type CompiledStreak } from '../../core/streaks/definitions';
import { applyEvent, type Move, type Progress } from '../../core/streaks/engine';
import {
  keyId,
  lockProgress,
  recordMoves,
  toProgress,
  toRow,
  writeProgress,
  type ProgressKey,
  type UserMoves,
} from '../../core/streaks/progress';
import {
  applied,
  nothing,
  type PipelineStep,
  type StepBatch,
  type StepEffect,
  type StepReport,
} from './step';
import { VersionedLoads } from './definitions';

export const LATE = 'late: the streak period of occurred_at has ended';

export class StreakStep implements PipelineStep<Map<string, CompiledStreak[]>> {
  readonly name = 'streaks';

  constructor(private readonly deps: { facts: FactBus; granter: Granter }) {}

  /** The compiled definitions of each tenant, by its streak definitions version. */
  private readonly loaded = new VersionedLoads<CompiledStreak>();

  load(q: Queryable, batch: StepBatch): Promise<Map<string, CompiledStreak[]>> {
    if (batch.events.length === 0) return Promise.resolve(new Map());
    // Per tenant, again only when its definitions' version moved (./definitions.ts).
    return this.loaded.get(
      batch.tenants,
      (t) => batch.definitions?.get(t)?.versions.streak_definitions,
      (tenants) => activeDefinitions(q, tenants),
    );
  }

  async apply(q: Queryable, batch: StepBatch, defs: Map<string, CompiledStreak[]>): Promise<StepReport> {
    const effects: StepEffect[] = batch.events.map(() => nothing);
    if (defs.size === 0) return { effects };
    const candidates: Array<{ i: number; c: CompiledStreak; key: ProgressKey; t: number; amount: number }> =
      [];
    batch.events.forEach(({ event, view }, i) => {
      for (const c of defs.get(event.tenant_id) ?? []) {
        if (!c.matchesType(event.type) || !c.filter(view)) continue;
        const amount = c.amount(view);
        if (amount === null) continue;
        candidates.push({
          i,
          c,
          key: { tenant_id: event.tenant_id, streak_id: c.def.id, user_id: event.user_id },
          t: event.occurred_at,
          amount,
        });
      }
    });
    if (candidates.length === 0) return { effects };

    const stored = await lockProgress(
      q,
      candidates.map((x) => x.key),
    );
    const state = new Map<
      string,
      { key: ProgressKey; c: CompiledStreak; p: Progress; freezes0: number; moves: Move[] }
    >();
    for (const x of candidates) {
      const id = keyId(x.key);
      let s = state.get(id);
      if (!s) {
        const p = toProgress(stored.get(id));
        s = { key: x.key, c: x.c, p, freezes0: p.freezes, moves: [] };
        state.set(id, s);
      }
      if (applyEvent(x.c.def.config, s.p, x.t, x.amount, s.moves)) effects[x.i] = applied;
      else if (effects[x.i]!.kind === 'none') effects[x.i] = { kind: 'none', reason: LATE };
    }
    const rows = [...state.values()].map((s) => ({
      ...toRow(s.key, s.c.def.config, s.p, batch.now),
      freezeDelta: s.p.freezes - s.freezes0,
    }));
    await writeProgress(q, rows);
    const moved: UserMoves[] = [...state.values()]
      .filter((s) => s.moves.length > 0)
      .map((s) => ({ def: s.c.def, user_id: s.key.user_id, moves: s.moves }));
    await recordMoves(q, this.deps, moved, batch.now);
    return { effects };
  }
}
