/**
 * Pipeline step: leaderboard scoring. For each event and each active board of its tenant, the
 * board's first matching rule gives points; the event's occurred_at picks the window; late events
 * land in their window while it is open (before its grace period ends) and are ignored after.
 * After the commit, the batch's final scores go to the rank index (./rank-sync.ts); replayed
 * records resync their users' open scores there.
 */
import type { Queryable } from '../../adapters/sql/types';
import { applyPoints } from '../../core/leaderboards/aggregate';
import {
  compileScorer,
  graceMs,
  type LeaderboardConfig,
  type Scorer,
} from '../../core/leaderboards/definition';
import {
  activeBoards,
  ensureWindows,
  scoreId,
  windowId,
  type ScoreKey,
  type ScoreRow,
} from '../../core/leaderboards/store';
import { CompileCache } from '../../core/rules/rules';
import { windowAt } from '../../core/windows';
import type { EventRecord } from '../../schemas/topics';
import { BatchState } from './batch-state';
import { openScoresOfUsers, type RankSync } from './rank-sync';
import {
  applied,
  nothing,
  type PipelineStep,
  type StepBatch,
  type StepEffect,
  type StepReport,
} from './step';

interface Contribution {
  key: ScoreKey;
  points: number;
  at: number;
  scorer: Scorer;
  eventIndex: number;
}

/** Scores of the batch's keys: locked in key order, written back in one statement. */
export const scores = new BatchState<ScoreRow>({
  table: 'leaderboard_scores',
  keys: [
    { column: 'tenant_id', type: 'text' },
    { column: 'leaderboard_id', type: 'text' },
    { column: 'window_key', type: 'text' },
    { column: 'user_id', type: 'text' },
  ],
  values: [
    { column: 'score', type: 'float8', merge: 'replace' },
    { column: 'total', type: 'float8', merge: 'replace' },
    { column: 'n', type: 'bigint', merge: 'replace' },
    { column: 'tiebreak', type: 'bigint', merge: 'replace' },
    { column: 'partition', type: 'int', merge: 'replace' },
  ],
});

/** The compiled scorers of the batch's tenants' active boards, by tenant. */
export type Scorers = Map<string, Scorer[]>;

export interface ScoringResult {
  effects: StepEffect[];
  /** Final rows of every score changed by the batch. */
  rows: ScoreRow[];
  /** Configs of the boards involved, by `tenant\0leaderboard`. */
  configs: Map<string, LeaderboardConfig>;
}

export class ScoringStep implements PipelineStep<Scorers> {
  readonly name = 'leaderboards';
  /** Compiled scorers by tenant, board and version: compiling is done once per definition version. */
  private readonly compiled = new CompileCache<Scorer>();

  /** `rankSync`: where the final scores go after the commit (none: SQL only, as in unit tests). */
  constructor(private readonly rankSync?: RankSync) {}

  async load(q: Queryable, batch: StepBatch): Promise<Scorers> {
    const byTenant: Scorers = new Map();
    if (batch.events.length === 0) return byTenant;
    for (const b of await activeBoards(q, [...batch.tenants])) {
      const s = this.compiled.get(`${b.tenant_id}\u0000${b.leaderboard_id}\u0000${b.version}`, () =>
        compileScorer(b),
      );
      byTenant.set(b.tenant_id, [...(byTenant.get(b.tenant_id) ?? []), s]);
    }
    return byTenant;
  }

  async apply(q: Queryable, batch: StepBatch, scorers: Scorers): Promise<StepReport> {
    const { effects, rows, configs } = await this.score(q, batch, scorers);
    // Replayed records were applied by an earlier transaction whose index update may be missing.
    const resync = await openScoresOfUsers(q, uniqueUsers(batch.replayed), configs);
    const all = [...resync, ...rows];
    const rankSync = this.rankSync;
    return {
      effects,
      afterCommit: rankSync
        ? () => rankSync.push(all, configs, batch.partition, batch.nextOffset, batch.firstOffset)
        : undefined,
    };
  }

  /** The batch's scores, written to SQL: one effect per event, the changed rows, their boards' configs. */
  async score(q: Queryable, batch: StepBatch, scorers: Scorers): Promise<ScoringResult> {
    const effects: StepEffect[] = batch.events.map(() => nothing);
    const configs = new Map<string, LeaderboardConfig>();
    if (batch.events.length === 0) return { effects, rows: [], configs };
    const late: StepEffect = { kind: 'none', reason: 'late: the window has closed' };
    const { now, partition } = batch;

    const contributions: Contribution[] = [];
    const windows = new Map<string, ScoreKey & { starts_at: number; ends_at: number; closes_at: number }>();
    batch.events.forEach(({ event, view }, i) => {
      const boards = scorers.get(event.tenant_id);
      if (!boards) return;
      for (const scorer of boards) {
        const points = scorer.points(view);
        if (points === null || Number.isNaN(points)) continue;
        const cfg = scorer.board.config;
        const w = windowAt(cfg.timeframe, event.occurred_at);
        const closesAt =
          w.end === Number.POSITIVE_INFINITY || w.end >= Number.MAX_SAFE_INTEGER
            ? Number.MAX_SAFE_INTEGER
            : w.end + graceMs(cfg);
        if (now >= closesAt) {
          effects[i] = late;
          continue;
        }
        const key: ScoreKey = {
          tenant_id: event.tenant_id,
          leaderboard_id: scorer.board.leaderboard_id,
          window_key: w.key,
          user_id: event.user_id,
        };
        windows.set(windowId(key), {
          ...key,
          starts_at: w.start,
          ends_at: Math.min(w.end, Number.MAX_SAFE_INTEGER),
          closes_at: closesAt,
        });
        contributions.push({ key, points, at: event.occurred_at, scorer, eventIndex: i });
      }
    });
    if (contributions.length === 0) return { effects, rows: [], configs };

    // In one order for every transaction: batches of different partitions create the same new
    // windows concurrently, and inserting them in each batch's event order deadlocked (issue 7).
    const windowRows = await ensureWindows(
      q,
      [...windows.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, w]) => w),
    );
    const live = contributions.filter((c) => {
      if (windowRows.get(windowId(c.key))?.status === 'closed') {
        effects[c.eventIndex] = late;
        return false;
      }
      return true;
    });

    const current = await scores.lock(
      q,
      live.map((c) => c.key),
    );
    const changed = new Map<string, ScoreRow>();
    for (const c of live) {
      const id = scoreId(c.key);
      const prev = changed.get(id) ?? current.get(id) ?? null;
      const next = applyPoints(c.scorer.board.config.scoring.aggregation, prev, c.points, c.at);
      changed.set(id, { ...c.key, ...next, partition });
      effects[c.eventIndex] = applied;
      configs.set(`${c.key.tenant_id}\u0000${c.key.leaderboard_id}`, c.scorer.board.config);
    }
    const rows = [...changed.values()];
    await scores.upsert(q, rows);
    return { effects, rows, configs };
  }
}

function uniqueUsers(events: readonly EventRecord[]): Array<{ tenant_id: string; user_id: string }> {
  const seen = new Map<string, { tenant_id: string; user_id: string }>();
  for (const e of events)
    seen.set(`${e.tenant_id}\u0000${e.user_id}`, { tenant_id: e.tenant_id, user_id: e.user_id });
  return [...seen.values()];
}
