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
  windowId,
  type ScoreKey,
  type ScoreRow,
  type WindowKey,
} from '../../core/leaderboards/store';
import { CompileCache } from '../../core/rules/rules';
import { WindowLookup } from '../../core/windows';
import type { EventRecord } from '../../schemas/topics';
import { BatchState } from './batch-state';
import { VersionedLoads } from './definitions';
import type { PartRange } from '../framework';
import { openScoresOfUsers, type RankSync } from './rank-sync';
import {
  applied,
  nothing,
  type PipelineStep,
  type StepBatch,
  type StepEffect,
  type StepReport,
} from './step';
import { groupBy } from '../../shared/group-by';

/** A window the batch writes to: its row and its id (`windowId`). */
interface BatchWindow {
  id: string;
  row: WindowKey & { starts_at: number; ends_at: number; closes_at: number };
  /** `tenant\0leaderboard`, set once the window's board config is in the batch's `configs`. */
  configKey?: string;
}

interface Contribution {
  key: ScoreKey;
  window: BatchWindow;
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
  /** The window lookup of each compiled scorer (its board's timeframe), kept as long as the scorer. */
  private readonly lookups = new WeakMap<Scorer, WindowLookup>();
  /** The scorers of each tenant, by its leaderboards version. */
  private readonly loaded = new VersionedLoads<Scorer>();

  /** `rankSync`: where the final scores go after the commit (none: SQL only, as in unit tests). */
  constructor(private readonly rankSync?: RankSync) {}

  async load(q: Queryable, batch: StepBatch): Promise<Scorers> {
    if (batch.events.length === 0) return new Map();
    // Per tenant, again only when its boards' version moved (./definitions.ts).
    return this.loaded.get(
      batch.tenants,
      (t) => batch.definitions?.get(t)?.versions.leaderboards,
      async (tenants) => {
        const scorers = (await activeBoards(q, tenants)).map((b) =>
          this.compiled.get(`${b.tenant_id}\u0000${b.leaderboard_id}\u0000${b.version}`, () =>
            compileScorer(b),
          ),
        );
        return groupBy(scorers, (s) => s.board.tenant_id);
      },
    );
  }

  async apply(q: Queryable, batch: StepBatch, scorers: Scorers): Promise<StepReport> {
    const { effects, rows, configs } = await this.score(q, batch, scorers);
    // Replayed records were applied by an earlier transaction whose index update may be missing.
    const resync = await openScoresOfUsers(q, uniqueUsers(batch.replayed), configs);
    const all = [...resync, ...rows];
    const rankSync = this.rankSync;
    return {
      effects,
      afterCommit: rankSync ? () => pushByPartition(rankSync, all, configs, batch.parts) : undefined,
    };
  }

  private lookupOf(scorer: Scorer): WindowLookup {
    let l = this.lookups.get(scorer);
    if (!l) this.lookups.set(scorer, (l = new WindowLookup(scorer.board.config.timeframe)));
    return l;
  }

  /** The batch's scores, written to SQL: one effect per event, the changed rows, their boards' configs. */
  async score(q: Queryable, batch: StepBatch, scorers: Scorers): Promise<ScoringResult> {
    const effects: StepEffect[] = batch.events.map(() => nothing);
    const configs = new Map<string, LeaderboardConfig>();
    if (batch.events.length === 0) return { effects, rows: [], configs };
    const late: StepEffect = { kind: 'none', reason: 'late: the window has closed' };
    const { now } = batch;

    const contributions: Contribution[] = [];
    // The batch's windows by board and window key: one entry (and one id string) per window, not
    // per event; the window of an event time comes from the board's WindowLookup (per UTC hour).
    const windows = new Map<string, BatchWindow>();
    const byBoard = new Map<Scorer, Map<string, BatchWindow | null>>();
    batch.events.forEach(({ event, view }, i) => {
      const boards = scorers.get(event.tenant_id);
      if (!boards) return;
      for (const scorer of boards) {
        const points = scorer.points(view);
        if (points === null || Number.isNaN(points)) continue;
        const w = this.lookupOf(scorer).at(event.occurred_at);
        let seen = byBoard.get(scorer);
        if (!seen) byBoard.set(scorer, (seen = new Map()));
        let bw = seen.get(w.key);
        if (bw === undefined) {
          const cfg = scorer.board.config;
          const closesAt =
            w.end === Number.POSITIVE_INFINITY || w.end >= Number.MAX_SAFE_INTEGER
              ? Number.MAX_SAFE_INTEGER
              : w.end + graceMs(cfg);
          // Closed by time: the same for every event of this window in the batch (one `now`).
          if (now >= closesAt) bw = null;
          else {
            const row = {
              tenant_id: event.tenant_id,
              leaderboard_id: scorer.board.leaderboard_id,
              window_key: w.key,
              starts_at: w.start,
              ends_at: Math.min(w.end, Number.MAX_SAFE_INTEGER),
              closes_at: closesAt,
            };
            bw = { id: windowId(row), row };
            windows.set(bw.id, bw);
          }
          seen.set(w.key, bw);
        }
        if (bw === null) {
          effects[i] = late;
          continue;
        }
        const key: ScoreKey = {
          tenant_id: event.tenant_id,
          leaderboard_id: bw.row.leaderboard_id,
          window_key: bw.row.window_key,
          user_id: event.user_id,
        };
        contributions.push({ key, window: bw, points, at: event.occurred_at, scorer, eventIndex: i });
      }
    });
    if (contributions.length === 0) return { effects, rows: [], configs };

    // In one order for every transaction: batches of different partitions create the same new
    // windows concurrently, and inserting them in each batch's event order deadlocked (issue 7).
    // The windows' read (FOR SHARE, first) and the scores' lock go out together: one round trip.
    // The scores of a window found closed stay locked to COMMIT, unwritten.
    const [windowRows, current] = await Promise.all([
      ensureWindows(
        q,
        [...windows.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)).map((w) => w.row),
      ),
      scores.lock(
        q,
        contributions.map((c) => c.key),
      ),
    ]);
    const live = contributions.filter((c) => {
      if (windowRows.get(c.window.id)?.status === 'closed') {
        effects[c.eventIndex] = late;
        return false;
      }
      return true;
    });

    const changed = new Map<string, ScoreRow>();
    for (const c of live) {
      const id = `${c.window.id}\u0000${c.key.user_id}`; // scoreId(c.key), from the window's id
      const prev = changed.get(id) ?? current.get(id) ?? null;
      const next = applyPoints(c.scorer.board.config.scoring.aggregation, prev, c.points, c.at);
      // Spelled out: spreading `c.key` and `next` here cost most of the step's CPU (profile).
      changed.set(id, {
        tenant_id: c.key.tenant_id,
        leaderboard_id: c.key.leaderboard_id,
        window_key: c.key.window_key,
        user_id: c.key.user_id,
        score: next.score,
        total: next.total,
        n: next.n,
        tiebreak: next.tiebreak,
        partition: batch.events[c.eventIndex]!.record.partition,
      });
      effects[c.eventIndex] = applied;
      if (c.window.configKey === undefined) {
        c.window.configKey = `${c.key.tenant_id}\u0000${c.key.leaderboard_id}`;
        configs.set(c.window.configKey, c.scorer.board.config);
      }
    }
    const rows = [...changed.values()];
    await scores.upsert(q, rows);
    return { effects, rows, configs };
  }
}

/**
 * The rank index's update of each partition of the batch, under that partition's watermark. A row
 * belongs to its user's partition (a user's events all come from one partition).
 */
async function pushByPartition(
  rankSync: RankSync,
  rows: ScoreRow[],
  configs: Map<string, LeaderboardConfig>,
  parts: readonly PartRange[],
): Promise<void> {
  const byPart = new Map<number, ScoreRow[]>(parts.map((p) => [p.partition, []]));
  for (const r of rows) (byPart.get(r.partition) ?? byPart.get(parts[0]!.partition)!).push(r);
  await Promise.all(
    parts.map((p) =>
      rankSync.push(byPart.get(p.partition)!, configs, p.partition, p.nextOffset, p.firstOffset),
    ),
  );
}

function uniqueUsers(events: readonly EventRecord[]): Array<{ tenant_id: string; user_id: string }> {
  const seen = new Map<string, { tenant_id: string; user_id: string }>();
  for (const e of events)
    seen.set(`${e.tenant_id}\u0000${e.user_id}`, { tenant_id: e.tenant_id, user_id: e.user_id });
  return [...seen.values()];
}
