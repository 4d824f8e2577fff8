/**
 * Pipeline step: leaderboard scoring. For each event and each active board of its tenant, the
 * board's first matching rule gives points; the event's occurred_at picks the window; late events
 * land in their window while it is open (before its grace period ends) and are ignored after.
 */
import type { Queryable } from '../../adapters/sql/types';
import type { Clock } from '../../core/clock';
import { applyPoints } from '../../core/leaderboards/aggregate';
import {
  compileScorer,
  eventView,
  graceMs,
  type LeaderboardConfig,
  type Scorer,
} from '../../core/leaderboards/definition';
import {
  activeBoards,
  ensureWindows,
  lockScores,
  scoreId,
  upsertScores,
  windowId,
  type ScoreKey,
  type ScoreRow,
} from '../../core/leaderboards/store';
import { windowAt } from '../../core/windows';
import type { PipelineEvent, StepEffect } from './pipeline';

interface Contribution {
  key: ScoreKey;
  points: number;
  at: number;
  scorer: Scorer;
  eventIndex: number;
}

export interface ScoringResult {
  effects: StepEffect[];
  reasons: Array<string | undefined>;
  /** Final rows of every score changed by the batch. */
  rows: ScoreRow[];
  /** Configs of the boards involved, by `tenant\0leaderboard`. */
  configs: Map<string, LeaderboardConfig>;
}

export class ScoringStep {
  /** Compiled scorers by tenant, board and version: compiling is done once per definition version. */
  private readonly compiled = new Map<string, Scorer>();

  constructor(private readonly clock: Clock) {}

  private scorersOf(boards: Awaited<ReturnType<typeof activeBoards>>): Map<string, Scorer[]> {
    const byTenant = new Map<string, Scorer[]>();
    for (const b of boards) {
      const k = `${b.tenant_id}\u0000${b.leaderboard_id}\u0000${b.version}`;
      let s = this.compiled.get(k);
      if (!s) {
        if (this.compiled.size > 10_000) this.compiled.clear();
        s = compileScorer(b);
        this.compiled.set(k, s);
      }
      byTenant.set(b.tenant_id, [...(byTenant.get(b.tenant_id) ?? []), s]);
    }
    return byTenant;
  }

  async apply(q: Queryable, events: PipelineEvent[], partition: number): Promise<ScoringResult> {
    const effects: StepEffect[] = events.map(() => 'none');
    const reasons: Array<string | undefined> = events.map(() => undefined);
    const configs = new Map<string, LeaderboardConfig>();
    if (events.length === 0) return { effects, reasons, rows: [], configs };

    const tenants = [...new Set(events.map((e) => e.event.tenant_id))];
    const scorers = this.scorersOf(await activeBoards(q, tenants));
    const now = this.clock.now();

    const contributions: Contribution[] = [];
    const windows = new Map<string, ScoreKey & { starts_at: number; ends_at: number; closes_at: number }>();
    events.forEach(({ event }, i) => {
      const boards = scorers.get(event.tenant_id);
      if (!boards) return;
      const view = eventView(event);
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
          reasons[i] = 'late: the window has closed';
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
    if (contributions.length === 0) return { effects, reasons, rows: [], configs };

    // In one order for every transaction: batches of different partitions create the same new
    // windows concurrently, and inserting them in each batch's event order deadlocked (issue 7).
    const windowRows = await ensureWindows(
      q,
      [...windows.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, w]) => w),
    );
    const live = contributions.filter((c) => {
      if (windowRows.get(windowId(c.key))?.status === 'closed') {
        reasons[c.eventIndex] = 'late: the window has closed';
        return false;
      }
      return true;
    });

    const keys = new Map<string, ScoreKey>();
    for (const c of live) keys.set(scoreId(c.key), c.key);
    const current = await lockScores(q, [...keys.values()]);
    const changed = new Map<string, ScoreRow>();
    for (const c of live) {
      const id = scoreId(c.key);
      const prev = changed.get(id) ?? current.get(id) ?? null;
      const next = applyPoints(c.scorer.board.config.scoring.aggregation, prev, c.points, c.at);
      changed.set(id, { ...c.key, ...next, partition });
      effects[c.eventIndex] = 'applied';
      configs.set(`${c.key.tenant_id}\u0000${c.key.leaderboard_id}`, c.scorer.board.config);
    }
    const rows = [...changed.values()];
    await upsertScores(q, rows);
    return { effects, reasons, rows, configs };
  }
}
