/**
 * Keeps the rank index (a derived index) in step with the SQL scores, partition by partition.
 *
 * Users are partitioned by the event log's key, so the members of every board that live on
 * partition p are written only by the consumer of p. The index stores a watermark per
 * (stream, partition) in the same atomic apply as the scores (ARCHITECTURE.md invariant 2):
 * - watermark == SQL offset: in step;
 * - watermark <  SQL offset: the index missed batches after their commit (a crash between the
 *   commit and the apply): resume the log from the watermark and re-push those users' SQL scores;
 * - no watermark but SQL has applied records: the index lost its state (Redis restarted without
 *   persistence, or a fresh in-memory index at start): rebuild the partition from SQL.
 *
 * A row the index refuses (adapters/ranks/validate.ts: a member over 512 UTF-8 bytes, a score that
 * is not finite, stored before the score range of core/leaderboards/aggregate.ts) is skipped with
 * a log line and `ludus_skipped_rows_total{stage="rank_sync"}`, and the watermark moves on: one
 * bad row never stops a partition. That user is then missing from the index (SQL still has it).
 */
import type { RankIndex, RankUpdate } from '../../adapters/ranks/types';
import { checkMember, checkUpdate } from '../../core/leaderboards/rank-input';
import { Mutex } from '../../shared/mutex';
import type { Queryable, Sql } from '../../adapters/sql/types';
import { boardKey } from '../../core/leaderboards/board-key';
import type { LeaderboardConfig } from '../../core/leaderboards/definition';
import { openScoresOfPartition, type ScoreRow } from '../../core/leaderboards/store';
import type { Logger } from '../../shared/logger';
import type { Metrics } from '../../shared/metrics';
import { reportRefused, splitRefused } from '../../core/refused';

export const REBUILD_CHUNK = 5000;

export function toUpdate(s: ScoreRow): RankUpdate {
  return { board: boardKey(s), member: s.user_id, score: s.score, tiebreak: s.tiebreak };
}

export class RankSync {
  /**
   * One writer per partition at a time: a batch's push, a rebuild at assignment and a repair
   * (which runs beside batches) never interleave, so a rebuild never writes scores older than
   * what a push already wrote.
   */
  private readonly locks = new Map<number, Mutex>();

  constructor(
    private readonly deps: { ranks: RankIndex; sql: Sql; log: Logger; metrics?: Metrics },
    readonly stream: string,
  ) {}

  private locked<T>(partition: number, fn: () => Promise<T>): Promise<T> {
    let m = this.locks.get(partition);
    if (!m) this.locks.set(partition, (m = new Mutex()));
    return m.run(fn);
  }

  /** The updates the index accepts; the others are logged, counted and skipped. */
  private acceptable(updates: RankUpdate[], partition: number): RankUpdate[] {
    const { accepted, refused } = splitRefused(updates, checkUpdate);
    reportRefused(this.deps, 'rank_sync', refused, (u) => ({ partition, board: u.board, user_id: u.member }));
    return accepted;
  }

  /** Where the log should resume for each partition, rebuilding partitions whose index state is lost. */
  async resumeFrom(partitions: number[], stored: Map<number, number>): Promise<Map<number, number>> {
    const out = new Map<number, number>();
    for (const p of partitions) {
      const sqlOffset = stored.get(p) ?? 0;
      await this.locked(p, async () => {
        const wm = await this.deps.ranks.watermark(this.stream, p);
        if (wm === null && sqlOffset > 0) {
          await this.rebuild(p, sqlOffset);
          out.set(p, sqlOffset);
        } else {
          out.set(p, Math.min(sqlOffset, wm ?? 0));
        }
      });
    }
    return out;
  }

  /**
   * Rebuilds owned partitions whose index state was lost while no batch came to notice it (Redis
   * restarted without persistence): without this, their users would be missing from the standings
   * until their next event. `applied`: the SQL offsets of the partitions.
   */
  async repair(partitions: number[], applied: Map<number, number>): Promise<void> {
    for (const p of partitions) {
      const sqlOffset = applied.get(p) ?? 0;
      if (sqlOffset === 0) continue;
      await this.locked(p, async () => {
        if ((await this.deps.ranks.watermark(this.stream, p)) === null) await this.rebuild(p, sqlOffset);
      });
    }
  }

  /** Loads every open-window score of the partition's users from SQL, then sets the watermark. */
  async rebuild(partition: number, sqlOffset: number): Promise<void> {
    const started = Date.now();
    const rows = await openScoresOfPartition(this.deps.sql, partition);
    const updates = this.acceptable(rows.map(toUpdate), partition);
    // Intermediate chunks go under a side stream (their own increasing watermarks); the last one
    // sets the real watermark, so a crash mid-rebuild simply rebuilds again.
    let i = 0;
    for (; i + REBUILD_CHUNK < updates.length; i += REBUILD_CHUNK) {
      await this.deps.ranks.apply(updates.slice(i, i + REBUILD_CHUNK), {
        stream: `${this.stream}#rebuild`,
        partition,
        nextOffset: started + i,
      });
    }
    await this.deps.ranks.apply(updates.slice(i), { stream: this.stream, partition, nextOffset: sqlOffset });
    this.deps.log.info(
      { partition, entries: rows.length, ms: Date.now() - started },
      'rank index partition rebuilt from SQL',
    );
  }

  /** Applies the batch's final scores; entries under a board's min_score leave the index. */
  async push(
    rows: ScoreRow[],
    configs: Map<string, LeaderboardConfig>,
    partition: number,
    nextOffset: number,
    firstOffset: number,
  ): Promise<void> {
    await this.locked(partition, () => this.pushLocked(rows, configs, partition, nextOffset, firstOffset));
  }

  private async pushLocked(
    rows: ScoreRow[],
    configs: Map<string, LeaderboardConfig>,
    partition: number,
    nextOffset: number,
    firstOffset: number,
  ): Promise<void> {
    const keep: RankUpdate[] = [];
    const drop = new Map<string, string[]>();
    for (const r of rows) {
      const min = configs.get(`${r.tenant_id}\u0000${r.leaderboard_id}`)?.ranking?.min_score;
      if (min !== undefined && r.score < min) {
        const b = boardKey(r);
        // A member the index would refuse cannot be in it: nothing to remove.
        if (splitRefused([r.user_id], checkMember).accepted.length) {
          const users = drop.get(b);
          if (users) users.push(r.user_id);
          else drop.set(b, [r.user_id]);
        }
      } else keep.push(toUpdate(r));
    }
    const updates = this.acceptable(keep, partition);
    const wm = { stream: this.stream, partition, nextOffset };
    // After the partition's first batch, the index must still hold the earlier batches: the check
    // is folded into the apply (one round trip); when the index lost that state, rebuild instead.
    if (firstOffset === 0) await this.deps.ranks.apply(updates, wm);
    else if ((await this.deps.ranks.applyAfter(updates, wm)) === 'lost') {
      await this.rebuild(partition, nextOffset);
      return;
    }
    for (const [b, members] of drop) await this.deps.ranks.remove(b, members);
  }
}

/**
 * Open-window scores of some users (resync of replayed records). The configs of their boards go
 * into `configs` (when missing), so that `push` drops the entries under a board's min_score.
 */
export async function openScoresOfUsers(
  q: Queryable,
  users: Array<{ tenant_id: string; user_id: string }>,
  configs: Map<string, LeaderboardConfig>,
): Promise<ScoreRow[]> {
  if (users.length === 0) return [];
  const r = await q.query<ScoreRow & { board_config: LeaderboardConfig | string }>(
    `SELECT s.*, b.config AS board_config FROM leaderboard_scores s
     JOIN unnest($1::text[], $2::text[]) AS u(t, uid) ON s.tenant_id = u.t AND s.user_id = u.uid
     JOIN leaderboard_windows w ON w.tenant_id = s.tenant_id AND w.leaderboard_id = s.leaderboard_id AND w.window_key = s.window_key
     JOIN leaderboards b ON b.tenant_id = s.tenant_id AND b.id = s.leaderboard_id
     WHERE w.status = 'open'`,
    [users.map((u) => u.tenant_id), users.map((u) => u.user_id)],
  );
  return r.rows.map(({ board_config, ...x }) => {
    const k = `${x.tenant_id}\u0000${x.leaderboard_id}`;
    if (!configs.has(k))
      configs.set(k, typeof board_config === 'string' ? JSON.parse(board_config) : board_config);
    return {
      ...x,
      score: Number(x.score),
      total: Number(x.total),
      n: Number(x.n),
      tiebreak: Number(x.tiebreak),
      partition: Number(x.partition),
    };
  });
}
