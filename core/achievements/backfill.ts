/**
 * Backfill (docs/achievements.md "Backfill"): an achievement's progress computed from history,
 * handed over to live processing with no event counted twice and none missed.
 *
 * Sources, one phase of the job each, in this order:
 *   events      event_count and streak parts, from the event history of the analytics store (the
 *               port's `userEventHistory`); a streak from the user's matching days in day order,
 *               tenant-local days as the live step computes them, the same reset rule (applyEvent)
 *   balances    cumulative parts: lifetime earned (./sources.ts)
 *   milestones  streak_milestone parts: the highest milestone each user reached (./sources.ts)
 *   ranks       leaderboard_rank parts: the best final rank in the board's closed-window snapshots
 *               (the port's `bestSnapshotRanks`), once every closed window has been exported
 *   deferred    the streak events live processing deferred while the job ran, then the handover
 * Other features' state is read through ./sources.ts, read-only (the one accepted exception to
 * "features react through facts": a backfill reads history).
 *
 * The seam, for events:
 *   1. `start` runs in one transaction holding the tenant's row FOR UPDATE. The pipeline's
 *      achievement step takes that row FOR KEY SHARE before it loads the tenant's achievements,
 *      so every batch either committed before the start (its events are history: they are in
 *      the event log before the pipeline offsets the start records, the `seam`) or loads after
 *      it and sees the running backfill. The start also clears the achievement's event_count and
 *      streak progress of users not completed (whatever live counted before the seam is history,
 *      which the scan counts again).
 *   2. While the job runs, every event either side counts is claimed first in
 *      `achievement_backfill_live` (tenant, achievement, event_id; INSERT ... ON CONFLICT DO
 *      NOTHING): the pipeline step counts an event of a backfilling achievement only if its claim
 *      is new, and so does the scan. Each event is counted by exactly one side, whichever comes
 *      first (the analytics sink may be ahead of the pipeline or behind it).
 *   3. A streak depends on the order of its days, so for streak parts the pipeline step does not
 *      apply an event it claimed: it defers the day (`achievement_backfill_deferred`). The scan
 *      applies a user's history days and the days deferred so far together, in day order; the
 *      deferred phase applies the days deferred after that in arrival order, continuing from the
 *      stored state (last counted day and current run), as live processing would have.
 *   4. The scan starts only when the analytics sink has stored every event before the seam (its
 *      offsets have reached the seam's on every partition), so none is missed.
 *   5. The handover: the last deferred chunk takes the tenant's row FOR UPDATE (so every batch
 *      that saw the backfill running has committed its deferrals), applies what is left, marks
 *      the job done and deletes its claims: from then on live processing counts alone.
 * The seam, for the other sources: their measures are maxima (lifetime earned, milestone) or a
 * minimum (rank), so a value read by the backfill and advanced live is never counted twice. None
 * is missed: before leaving `pending` the job waits until every transaction in progress after the
 * start has ended (a reaction that ran without seeing the achievement committed its effect before
 * the state is read; every later one advances it live), and the ranks phase waits until every
 * closed window of the boards is exported.
 *
 * The job is durable: its state, seam and cursor (the phase and the last user done) are in SQL,
 * and each chunk is one transaction that advances progress (completions, rewards and webhooks
 * through the engine, exactly once) and the cursor together. Any process with the scheduler role
 * resumes it after a restart. A dry run reads the same sources and changes nothing.
 */
import type { Analytics, AnalyticsEvent } from '../../adapters/analytics/types';
import type { Queryable, Sql } from '../../adapters/sql/types';
import { eventView } from '../leaderboards/definition';
import type { Random } from '../random';
import { windowAt } from '../windows';
import {
  applyEvent,
  criteriaMet,
  dayNumber,
  EMPTY,
  leavesOf,
  partKey,
  type Leaf,
  type PartState,
  type StreakCriterion,
} from './criteria';
import type { AchievementEngine, PartChange } from './progress';
import { lifetimeEarned, milestonesReached, snapshotsPending, transactionsInFlightEnded } from './sources';
import { compiled, getAchievement, lockAchievement, type ActiveAchievement } from './store';

export interface BackfillView {
  backfill_id: string;
  achievement_id: string;
  dry_run: boolean;
  state: 'pending' | 'running' | 'done' | 'failed';
  users_done: number;
  users_total: number | null;
  events_read: number;
  would_complete: number;
  completed: number;
  error: string | null;
  created_at: string;
  updated_at: string;
  finished_at: string | null;
}

interface JobRow {
  tenant_id: string;
  achievement_id: string;
  id: string;
  dry_run: boolean;
  state: BackfillView['state'];
  cutoff: string | null;
  seam: Record<string, number> | null;
  cursor: string | null;
  users_done: number;
  users_total: number | null;
  events_read: string;
  would_complete: number;
  completed: number;
  error: string | null;
  created_at: string;
  updated_at: string;
  finished_at: string | null;
}

const iso = (ms: string | number | null) => (ms === null ? null : new Date(Number(ms)).toISOString());

const toView = (r: JobRow): BackfillView => ({
  backfill_id: r.id,
  achievement_id: r.achievement_id,
  dry_run: r.dry_run,
  state: r.state,
  users_done: r.users_done,
  users_total: r.users_total,
  events_read: Number(r.events_read),
  would_complete: r.would_complete,
  completed: r.completed,
  error: r.error,
  created_at: iso(r.created_at)!,
  updated_at: iso(r.updated_at)!,
  finished_at: iso(r.finished_at),
});

/** Why a backfill cannot start (the route answers 409 or 404). */
export class BackfillRefused extends Error {
  constructor(
    readonly kind: 'busy' | 'not_found',
    message: string,
  ) {
    super(message);
    this.name = 'BackfillRefused';
  }
}

/** A job that cannot go on (its achievement is gone): it fails. */
class BackfillGone extends Error {}

export interface BackfillDeps {
  sql: Sql;
  analytics: Analytics;
  engine: AchievementEngine;
  random: Pick<Random, 'uuid'>;
  /** The events topic as stored in consumer_offsets, and the groups of the pipeline and the analytics sink. */
  offsets: { topic: string; pipelineGroup: string; sinkGroup: string };
  /** Users per chunk (one transaction each). */
  chunkUsers?: number;
}

/** How long a dry run waits for the analytics sink to reach the pipeline. */
const DRY_RUN_WAIT_MS = 10_000;

/** How long one step waits for the transactions in progress after a start to end. */
const IN_FLIGHT_WAIT_MS = 2_000;

/** The phases of a real run, in order (the cursor names one and the last user done in it). */
const PHASES = ['events', 'balances', 'milestones', 'ranks', 'deferred'] as const;
type Phase = (typeof PHASES)[number];

function parseCursor(c: string | null): [Phase, string] {
  if (!c) return ['events', ''];
  const v: unknown = JSON.parse(c);
  if (Array.isArray(v) && PHASES.includes(v[0] as Phase) && typeof v[1] === 'string')
    return [v[0] as Phase, v[1]];
  throw new BackfillGone(`unreadable backfill cursor ${c}`);
}
const cursorText = (phase: Phase, after: string) => JSON.stringify([phase, after]);
const nextPhase = (p: Phase): Phase => PHASES[PHASES.indexOf(p) + 1] ?? 'deferred';

/** A deferred streak day (a row of achievement_backfill_deferred). */
interface DeferredRow {
  seq: string;
  user_id: string;
  part: string;
  day: string;
}

/**
 * The pipeline step's deferral (step 3 of the seam): streak days of events it claimed for a
 * backfilling achievement, in batch order, applied later by the job.
 */
export async function deferStreakDays(
  q: Queryable,
  rows: ReadonlyArray<{
    tenant_id: string;
    achievement_id: string;
    user_id: string;
    part: string;
    day: string;
  }>,
): Promise<void> {
  if (rows.length === 0) return;
  await q.query(
    `INSERT INTO achievement_backfill_deferred (tenant_id, achievement_id, user_id, part, day)
     SELECT t, a, u, p, d FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[])
       WITH ORDINALITY AS k(t, a, u, p, d, n) ORDER BY n`,
    [
      rows.map((r) => r.tenant_id),
      rows.map((r) => r.achievement_id),
      rows.map((r) => r.user_id),
      rows.map((r) => r.part),
      rows.map((r) => r.day),
    ],
  );
}

const grow =
  (v: number) =>
  (s: PartState): PartState =>
    v > s.value ? { value: v, best: Math.max(s.best, v), last_day: s.last_day } : s;

const betterRank =
  (rank: number) =>
  (s: PartState): PartState =>
    rank >= 1 && (s.value === 0 || rank < s.value) ? { value: rank, best: rank, last_day: s.last_day } : s;

/** A streak's progress over these days (any order, repeats allowed): applied in day order. */
function streakOver(l: StreakCriterion, days: Iterable<string>) {
  const sorted = [...new Set(days)].sort((a, b) => dayNumber(a) - dayNumber(b));
  return (s: PartState): PartState => sorted.reduce((st, d) => applyEvent(l, st, d), s);
}

const metricsOf = (leaves: readonly Leaf[]) => ({
  currencies: [...new Set(leaves.flatMap((l) => (l.type === 'cumulative' ? [l.metric] : [])))],
  streaks: [...new Set(leaves.flatMap((l) => (l.type === 'streak_milestone' ? [l.streak_id] : [])))],
  boards: [...new Set(leaves.flatMap((l) => (l.type === 'leaderboard_rank' ? [l.leaderboard_id] : [])))],
});

export class Backfills {
  private readonly chunkUsers: number;

  constructor(private readonly deps: BackfillDeps) {
    this.chunkUsers = deps.chunkUsers ?? 500;
  }

  /**
   * Starts a backfill of an achievement (`dryRun`: computes and answers at once, changing no
   * progress). `q`: the transaction that created the achievement, when it starts with it.
   */
  async start(
    tenantId: string,
    achievementId: string,
    dryRun: boolean,
    now: number,
    q?: Queryable,
  ): Promise<BackfillView> {
    if (dryRun) return this.dryRun(tenantId, achievementId, now);
    const run = async (tx: Queryable) => {
      await tx.query('SELECT id FROM tenants WHERE id = $1 FOR UPDATE', [tenantId]);
      const def = await lockAchievement(tx, tenantId, achievementId);
      if (!def) throw new BackfillRefused('not_found', `Achievement ${achievementId} not found`);
      const busy = await tx.query(
        `SELECT 1 FROM achievement_backfills WHERE tenant_id = $1 AND achievement_id = $2 AND state IN ('pending', 'running') AND NOT dry_run`,
        [tenantId, achievementId],
      );
      if (busy.rowCount > 0)
        throw new BackfillRefused('busy', `a backfill of achievement ${achievementId} is running already`);
      const parts = leavesOf(def.criteria)
        .filter((l) => l.type === 'event_count' || l.type === 'streak')
        .map(partKey);
      await tx.query(
        `DELETE FROM achievement_progress p WHERE p.tenant_id = $1 AND p.achievement_id = $2 AND p.part = ANY($3::text[])
           AND NOT EXISTS (SELECT 1 FROM achievement_completions c
                           WHERE c.tenant_id = p.tenant_id AND c.achievement_id = p.achievement_id AND c.user_id = p.user_id)`,
        [tenantId, achievementId, parts],
      );
      await tx.query(
        'DELETE FROM achievement_backfill_deferred WHERE tenant_id = $1 AND achievement_id = $2',
        [tenantId, achievementId],
      );
      const o = this.deps.offsets;
      const seam = await tx.query<{ partition: number; next_offset: string }>(
        'SELECT partition, next_offset FROM consumer_offsets WHERE group_id = $1 AND topic = $2',
        [o.pipelineGroup, o.topic],
      );
      const r = await tx.query<JobRow>(
        `INSERT INTO achievement_backfills (tenant_id, achievement_id, id, dry_run, state, cutoff, seam, created_at, updated_at)
         VALUES ($1, $2, $3, false, 'pending', $4, $5, $4, $4) RETURNING *`,
        [
          tenantId,
          achievementId,
          this.deps.random.uuid(),
          now,
          JSON.stringify(
            Object.fromEntries(seam.rows.map((x) => [String(x.partition), Number(x.next_offset)])),
          ),
        ],
      );
      return toView(r.rows[0]!);
    };
    return q ? run(q) : this.deps.sql.tx(run);
  }

  /** The achievement's latest backfill, or null. */
  async latest(tenantId: string, achievementId: string): Promise<BackfillView | null> {
    const r = await this.deps.sql.query<JobRow>(
      `SELECT * FROM achievement_backfills WHERE tenant_id = $1 AND achievement_id = $2 ORDER BY seq DESC LIMIT 1`,
      [tenantId, achievementId],
    );
    return r.rows[0] ? toView(r.rows[0]) : null;
  }

  /**
   * Runs open jobs for at most `budgetMs` (one chunk of users per transaction); answers whether
   * work remains. Called by the scheduler role on every tick (scheduler/jobs.ts).
   */
  async runFor(now: number, budgetMs: number, clock: () => number = Date.now): Promise<boolean> {
    const until = clock() + budgetMs;
    for (;;) {
      const more = await this.step(now);
      if (!more) return false;
      if (clock() >= until) return true;
    }
  }

  /** One chunk of one open job; false when no job could move. */
  async step(now: number): Promise<boolean> {
    const open = await this.deps.sql.query<JobRow>(
      `SELECT * FROM achievement_backfills WHERE state IN ('pending', 'running') ORDER BY seq LIMIT 20`,
    );
    for (const job of open.rows) {
      try {
        if (await this.advanceJob(job, now)) return true;
      } catch (err) {
        // A chunk that fails rolls back with its cursor: the job stays where it was and the next
        // run retries it (a crash, a lost connection). Only a job that cannot go on fails.
        if (!(err instanceof BackfillGone)) throw err;
        await this.deps.sql.query(
          `UPDATE achievement_backfills SET state = 'failed', error = $4, updated_at = $5, finished_at = $5
           WHERE tenant_id = $1 AND achievement_id = $2 AND id = $3 AND state IN ('pending', 'running')`,
          [job.tenant_id, job.achievement_id, job.id, err instanceof Error ? err.message : String(err), now],
        );
        await this.dropClaims(job);
        return true;
      }
    }
    return false;
  }

  /** Moves one job by one chunk; false when it has to wait (the analytics sink, in-flight transactions, exports). */
  private async advanceJob(job: JobRow, now: number): Promise<boolean> {
    if (job.state === 'pending') {
      if (!(await this.sinkPastSeam(job.seam ?? {}))) return false;
      if (!(await transactionsInFlightEnded(this.deps.sql, IN_FLIGHT_WAIT_MS))) return false;
      const def = await getAchievement(this.deps.sql, job.tenant_id, job.achievement_id);
      if (!def) throw new BackfillGone('the achievement is gone');
      await this.deps.sql.query(
        `UPDATE achievement_backfills SET state = 'running', updated_at = $4
         WHERE tenant_id = $1 AND achievement_id = $2 AND id = $3 AND state = 'pending'`,
        [job.tenant_id, job.achievement_id, job.id, now],
      );
      return true;
    }
    // The next chunk of history (events, snapshots) is read before the transaction (in the
    // embedded shape the analytics tables share the one SQL connection, which the transaction
    // holds); the transaction then checks that the cursor has not moved (another runner) before
    // writing.
    const def0 = await getAchievement(this.deps.sql, job.tenant_id, job.achievement_id);
    if (!def0) throw new BackfillGone('the achievement is gone');
    const [phase, after] = parseCursor(job.cursor);
    const a0 = compiled(def0);
    const m0 = metricsOf(leavesOf(def0.criteria));
    let history: AnalyticsEvent[] = [];
    let ranks: Array<{ leaderboard_id: string; user_id: string; rank: number }> = [];
    if (phase === 'events') {
      const types0 = eventTypes(a0);
      if (types0.length)
        history = await this.deps.analytics.userEventHistory(
          job.tenant_id,
          types0.includes('*') ? null : types0,
          after,
          this.chunkUsers,
        );
    } else if (phase === 'ranks' && m0.boards.length) {
      if (await snapshotsPending(this.deps.sql, job.tenant_id, m0.boards)) return false;
      ranks = await this.deps.analytics.bestSnapshotRanks(job.tenant_id, m0.boards, after, this.chunkUsers);
    }
    return this.deps.sql.tx(async (q) => {
      const r = await q.query<JobRow>(
        `SELECT * FROM achievement_backfills WHERE tenant_id = $1 AND achievement_id = $2 AND id = $3 AND state = 'running' FOR UPDATE SKIP LOCKED`,
        [job.tenant_id, job.achievement_id, job.id],
      );
      const cur = r.rows[0];
      if (!cur) return false;
      // Moved by another runner since it was read: read again next time.
      if ((cur.cursor ?? '') !== (job.cursor ?? '')) return true;
      const def = await getAchievement(q, cur.tenant_id, cur.achievement_id);
      if (!def) throw new BackfillGone('the achievement is gone');
      const a = compiled(def);
      const m = metricsOf(leavesOf(def.criteria));
      const advance = async (changes: PartChange[], users: number, events: number, cursor: string) => {
        const res = await this.deps.engine.advance(q, changes, now, 'backfill');
        await this.setCursor(q, cur, cursor, users, events, res.completed.length, res.completed.length, now);
        return true;
      };
      const moveOn = () =>
        this.setCursor(q, cur, cursorText(nextPhase(phase), ''), 0, 0, 0, 0, now).then(() => true);
      switch (phase) {
        case 'events': {
          if (history.length === 0) return moveOn();
          return this.eventsChunk(q, a, history, (changes, users) =>
            advance(
              changes,
              users,
              history.length,
              cursorText('events', history[history.length - 1]!.user_id),
            ),
          );
        }
        case 'balances': {
          const rows = await lifetimeEarned(q, cur.tenant_id, m.currencies, after, this.chunkUsers);
          if (rows.length === 0) return moveOn();
          const changes: PartChange[] = [];
          for (const b of rows)
            for (const [part, l] of a.leaves)
              if (l.type === 'cumulative' && l.metric === b.currency_id)
                changes.push({ a, user_id: b.user_id, part, apply: grow(b.value) });
          return advance(changes, 0, 0, cursorText('balances', rows[rows.length - 1]!.user_id));
        }
        case 'milestones': {
          const rows = await milestonesReached(q, cur.tenant_id, m.streaks, after, this.chunkUsers);
          if (rows.length === 0) return moveOn();
          const changes: PartChange[] = [];
          for (const x of rows)
            for (const [part, l] of a.leaves)
              if (l.type === 'streak_milestone' && l.streak_id === x.streak_id)
                changes.push({ a, user_id: x.user_id, part, apply: grow(x.value) });
          return advance(changes, 0, 0, cursorText('milestones', rows[rows.length - 1]!.user_id));
        }
        case 'ranks': {
          if (ranks.length === 0) return moveOn();
          const changes: PartChange[] = [];
          for (const x of ranks)
            for (const [part, l] of a.leaves)
              if (l.type === 'leaderboard_rank' && l.leaderboard_id === x.leaderboard_id)
                changes.push({ a, user_id: x.user_id, part, apply: betterRank(x.rank) });
          return advance(changes, 0, 0, cursorText('ranks', ranks[ranks.length - 1]!.user_id));
        }
        case 'deferred':
          return this.deferredChunk(q, a, cur, now);
      }
    });
  }

  /**
   * One chunk of the event history: its matching events claimed (those live counted first are
   * skipped), event_count parts counted, streak parts over the user's history days and the days
   * live deferred so far, in day order.
   */
  private async eventsChunk(
    q: Queryable,
    a: ActiveAchievement,
    history: readonly AnalyticsEvent[],
    advance: (changes: PartChange[], users: number) => Promise<boolean>,
  ): Promise<boolean> {
    const tenantId = a.def.tenant_id;
    const users = [...new Set(history.map((e) => e.user_id))];
    const claimed = await this.claim(q, a, history);
    const timezone = await tenantTimezone(q, tenantId);
    const { counts, days } = fromHistory(a, history, (e) => claimed.has(e.event_id), timezone);
    // Days live deferred for these users (committed before this statement; later ones are the
    // deferred phase's), taken out of the deferral table with this chunk.
    const deferred = await q.query<DeferredRow>(
      `DELETE FROM achievement_backfill_deferred WHERE tenant_id = $1 AND achievement_id = $2 AND user_id = ANY($3::text[])
       RETURNING seq::text, user_id, part, day`,
      [tenantId, a.def.id, users],
    );
    for (const d of deferred.rows) addDay(days, d.user_id, d.part, d.day);
    const changes: PartChange[] = [];
    for (const [user, parts] of counts)
      for (const [part, n] of parts)
        if (n > 0) changes.push({ a, user_id: user, part, apply: (s) => ({ ...s, value: s.value + n }) });
    for (const [user, parts] of days)
      for (const [part, set] of parts) {
        const l = a.leaves.get(part);
        if (l?.type === 'streak') changes.push({ a, user_id: user, part, apply: streakOver(l, set) });
      }
    return advance(changes, users.length);
  }

  /**
   * The deferred phase: days live deferred after their user's history chunk, applied in arrival
   * order. The last chunk is the handover: under the tenant's row FOR UPDATE (every batch that
   * saw the backfill running has committed, and every later one sees it done) it applies the
   * rest, marks the job done and deletes its claims.
   */
  private async deferredChunk(
    q: Queryable,
    a: ActiveAchievement,
    cur: JobRow,
    now: number,
  ): Promise<boolean> {
    const limit = this.chunkUsers * 10;
    const take = async (max: number | null) =>
      (
        await q.query<DeferredRow>(
          `SELECT seq::text, user_id, part, day FROM achievement_backfill_deferred
           WHERE tenant_id = $1 AND achievement_id = $2 ORDER BY seq${max === null ? '' : ` LIMIT ${max}`}`,
          [cur.tenant_id, cur.achievement_id],
        )
      ).rows;
    let rows = await take(limit + 1);
    const last = rows.length <= limit;
    if (last) {
      await q.query('SELECT id FROM tenants WHERE id = $1 FOR UPDATE', [cur.tenant_id]);
      rows = await take(null);
    }
    const changes: PartChange[] = [];
    for (const d of rows) {
      const l = a.leaves.get(d.part);
      if (l?.type === 'streak')
        changes.push({ a, user_id: d.user_id, part: d.part, apply: (s) => applyEvent(l, s, d.day) });
    }
    const res = await this.deps.engine.advance(q, changes, now, 'backfill');
    if (rows.length)
      await q.query(
        'DELETE FROM achievement_backfill_deferred WHERE tenant_id = $1 AND achievement_id = $2 AND seq = ANY($3::bigint[])',
        [cur.tenant_id, cur.achievement_id, rows.map((d) => d.seq)],
      );
    await this.setCursor(
      q,
      cur,
      cursorText('deferred', ''),
      0,
      0,
      res.completed.length,
      res.completed.length,
      now,
    );
    if (!last) return true;
    await q.query(
      `UPDATE achievement_backfills SET state = 'done', users_total = users_done, updated_at = $4, finished_at = $4
       WHERE tenant_id = $1 AND achievement_id = $2 AND id = $3`,
      [cur.tenant_id, cur.achievement_id, cur.id, now],
    );
    await q.query('DELETE FROM achievement_backfill_live WHERE tenant_id = $1 AND achievement_id = $2', [
      cur.tenant_id,
      cur.achievement_id,
    ]);
    return true;
  }

  private async setCursor(
    q: Queryable,
    job: JobRow,
    cursor: string,
    users: number,
    events: number,
    would: number,
    completed: number,
    now: number,
  ) {
    await q.query(
      `UPDATE achievement_backfills SET cursor = $4, users_done = users_done + $5, events_read = events_read + $6,
         would_complete = would_complete + $7, completed = completed + $8, updated_at = $9
       WHERE tenant_id = $1 AND achievement_id = $2 AND id = $3`,
      [job.tenant_id, job.achievement_id, job.id, cursor, users, events, would, completed, now],
    );
  }

  /** Claims the matching events of a chunk; answers the event ids this scan counts. */
  private async claim(
    q: Queryable,
    a: ActiveAchievement,
    history: readonly AnalyticsEvent[],
  ): Promise<Set<string>> {
    const matching = history.filter((e) => matchesAny(a, e));
    if (matching.length === 0) return new Set();
    const r = await q.query<{ event_id: string }>(
      `INSERT INTO achievement_backfill_live (tenant_id, achievement_id, event_id)
       SELECT $1, $2, unnest($3::text[]) ON CONFLICT DO NOTHING RETURNING event_id`,
      [a.def.tenant_id, a.def.id, matching.map((e) => e.event_id)],
    );
    return new Set(r.rows.map((x) => x.event_id));
  }

  private async dropClaims(job: JobRow) {
    await this.deps.sql.query(
      'DELETE FROM achievement_backfill_live WHERE tenant_id = $1 AND achievement_id = $2',
      [job.tenant_id, job.achievement_id],
    );
    await this.deps.sql.query(
      'DELETE FROM achievement_backfill_deferred WHERE tenant_id = $1 AND achievement_id = $2',
      [job.tenant_id, job.achievement_id],
    );
  }

  /** Whether the analytics sink has stored every event before the seam. */
  private async sinkPastSeam(seam: Record<string, number>): Promise<boolean> {
    const o = this.deps.offsets;
    const r = await this.deps.sql.query<{ partition: number; next_offset: string }>(
      'SELECT partition, next_offset FROM consumer_offsets WHERE group_id = $1 AND topic = $2',
      [o.sinkGroup, o.topic],
    );
    const sink = new Map(r.rows.map((x) => [Number(x.partition), Number(x.next_offset)]));
    return Object.entries(seam).every(([p, off]) => off === 0 || (sink.get(Number(p)) ?? 0) >= off);
  }

  /**
   * The dry run: every user's progress from the same sources as a real run (event_count and
   * streak parts from the event history, cumulative from balances, streak_milestone from the
   * milestones reached, leaderboard_rank from the snapshots), and how many of the users not
   * completed yet would meet the criteria. Changes nothing but its own job row.
   */
  private async dryRun(tenantId: string, achievementId: string, now: number): Promise<BackfillView> {
    const def = await getAchievement(this.deps.sql, tenantId, achievementId);
    if (!def) throw new BackfillRefused('not_found', `Achievement ${achievementId} not found`);
    // History as of now: what the pipeline has processed, once the analytics sink has it too
    // (waits up to DRY_RUN_WAIT_MS for the sink, then reads what it has).
    const o = this.deps.offsets;
    const seam = await this.deps.sql.query<{ partition: number; next_offset: string }>(
      'SELECT partition, next_offset FROM consumer_offsets WHERE group_id = $1 AND topic = $2',
      [o.pipelineGroup, o.topic],
    );
    const target = Object.fromEntries(seam.rows.map((x) => [String(x.partition), Number(x.next_offset)]));
    for (let waited = 0; waited < DRY_RUN_WAIT_MS && !(await this.sinkPastSeam(target)); waited += 50)
      await new Promise((r) => setTimeout(r, 50));
    const a = compiled(def);
    const states = new Map<string, Map<string, PartState>>();
    const stateOf = (user: string) => {
      let m = states.get(user);
      if (!m) states.set(user, (m = new Map()));
      return m;
    };
    const change = (user: string, part: string, f: (s: PartState) => PartState) => {
      const m = stateOf(user);
      m.set(part, f(m.get(part) ?? EMPTY));
    };
    const types = eventTypes(a);
    const timezone = await tenantTimezone(this.deps.sql, tenantId);
    let cursor = '';
    let events = 0;
    while (types.length) {
      const history = await this.deps.analytics.userEventHistory(
        tenantId,
        types.includes('*') ? null : types,
        cursor,
        this.chunkUsers,
      );
      if (history.length === 0) break;
      events += history.length;
      const { counts, days } = fromHistory(a, history, () => true, timezone);
      for (const [user, parts] of counts)
        for (const [part, n] of parts) change(user, part, (s) => ({ ...s, value: s.value + n }));
      for (const [user, parts] of days)
        for (const [part, set] of parts) {
          const l = a.leaves.get(part);
          if (l?.type === 'streak') change(user, part, streakOver(l, set));
        }
      cursor = history[history.length - 1]!.user_id;
    }
    const m = metricsOf(leavesOf(def.criteria));
    const page = async <T extends { user_id: string }>(
      read: (after: string) => Promise<T[]>,
      each: (x: T) => void,
    ) => {
      for (let after = ''; ;) {
        const rows = await read(after);
        if (rows.length === 0) return;
        rows.forEach(each);
        after = rows[rows.length - 1]!.user_id;
      }
    };
    const limit = this.chunkUsers * 10;
    await page(
      (after) => lifetimeEarned(this.deps.sql, tenantId, m.currencies, after, limit),
      (b) => {
        for (const [part, l] of a.leaves)
          if (l.type === 'cumulative' && l.metric === b.currency_id) change(b.user_id, part, grow(b.value));
      },
    );
    await page(
      (after) => milestonesReached(this.deps.sql, tenantId, m.streaks, after, limit),
      (x) => {
        for (const [part, l] of a.leaves)
          if (l.type === 'streak_milestone' && l.streak_id === x.streak_id)
            change(x.user_id, part, grow(x.value));
      },
    );
    if (m.boards.length)
      await page(
        (after) => this.deps.analytics.bestSnapshotRanks(tenantId, m.boards, after, limit),
        (x) => {
          for (const [part, l] of a.leaves)
            if (l.type === 'leaderboard_rank' && l.leaderboard_id === x.leaderboard_id)
              change(x.user_id, part, betterRank(x.rank));
        },
      );
    const done = await this.deps.sql.query<{ user_id: string }>(
      'SELECT user_id FROM achievement_completions WHERE tenant_id = $1 AND achievement_id = $2',
      [tenantId, achievementId],
    );
    const completed = new Set(done.rows.map((x) => x.user_id));
    let would = 0;
    for (const [user, parts] of states)
      if (!completed.has(user) && criteriaMet(def.criteria, (k) => parts.get(k))) would++;
    const r = await this.deps.sql.query<JobRow>(
      `INSERT INTO achievement_backfills (tenant_id, achievement_id, id, dry_run, state, cutoff, users_done, users_total,
         events_read, would_complete, created_at, updated_at, finished_at)
       VALUES ($1, $2, $3, true, 'done', $4, $5, $5, $6, $7, $4, $4, $4) RETURNING *`,
      [tenantId, achievementId, this.deps.random.uuid(), now, states.size, events, would],
    );
    return toView(r.rows[0]!);
  }
}

async function tenantTimezone(q: Queryable, tenantId: string): Promise<string> {
  const tz = await q.query<{ timezone: string | null }>('SELECT timezone FROM tenants WHERE id = $1', [
    tenantId,
  ]);
  return tz.rows[0]?.timezone ?? 'UTC';
}

/** The event types the achievement's event parts read (`*` when one reads every type). */
function eventTypes(a: ActiveAchievement): string[] {
  return [...new Set(a.eventLeaves.map((l) => l.leaf.event_type))].sort();
}

function matchesAny(a: ActiveAchievement, e: AnalyticsEvent): boolean {
  const view = eventView({ ...e, actor_metadata_json: null, subject_json: null });
  return a.eventLeaves.some((l) => l.matchesType(view.type) && l.condition.test(view));
}

type DaysByUser = Map<string, Map<string, Set<string>>>;

function addDay(days: DaysByUser, user: string, part: string, day: string) {
  let m = days.get(user);
  if (!m) days.set(user, (m = new Map()));
  let s = m.get(part);
  if (!s) m.set(part, (s = new Set()));
  s.add(day);
}

/**
 * Per user and part, from the counted (claimed) events: event_count parts' matching events, and
 * streak parts' tenant-local days (the daily window of the tenant's time zone, as the live step).
 */
function fromHistory(
  a: ActiveAchievement,
  history: readonly AnalyticsEvent[],
  counted: (e: AnalyticsEvent) => boolean,
  timezone: string,
): { counts: Map<string, Map<string, number>>; days: DaysByUser } {
  const counts = new Map<string, Map<string, number>>();
  const days: DaysByUser = new Map();
  for (const e of history) {
    if (!counted(e)) continue;
    const view = eventView({ ...e, actor_metadata_json: null, subject_json: null });
    let day: string | undefined;
    for (const l of a.eventLeaves) {
      if (!l.matchesType(view.type) || !l.condition.test(view)) continue;
      if (l.leaf.type === 'streak') {
        day ??= windowAt({ type: 'daily', timezone }, e.occurred_at).key;
        addDay(days, e.user_id, l.key, day);
        continue;
      }
      let m = counts.get(e.user_id);
      if (!m) counts.set(e.user_id, (m = new Map()));
      m.set(l.key, (m.get(l.key) ?? 0) + 1);
    }
  }
  return { counts, days };
}
