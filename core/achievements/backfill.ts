/**
 * Backfill (docs/achievements.md "Backfill"): an achievement's progress computed from history,
 * handed over to live processing with no event counted twice and none missed.
 *
 * Sources: event_count parts from the event history of the analytics store (the port's
 * `userEventHistory`), cumulative parts from current balances (lifetime earned). Streak,
 * streak_milestone and leaderboard_rank parts are not backfilled yet: a real run is refused for
 * criteria that have one; a dry run counts them as not met (and says so in the docs).
 *
 * The seam, for event_count:
 *   1. `start` runs in one transaction holding the tenant's row FOR UPDATE. The pipeline's
 *      achievement step takes that row FOR KEY SHARE before it loads the tenant's achievements,
 *      so every batch either committed before the start (its events are history: they are in
 *      the event log before the pipeline offsets the start records, the `seam`) or loads after
 *      it and sees the running backfill. The start also clears the achievement's event_count
 *      progress of users not completed (whatever live counted before the seam is history, which
 *      the scan counts again).
 *   2. While the job runs, every event either side counts is claimed first in
 *      `achievement_backfill_live` (tenant, achievement, event_id; INSERT ... ON CONFLICT DO
 *      NOTHING): the pipeline step counts an event of a backfilling achievement only if its claim
 *      is new, and so does the scan. Each event is counted by exactly one side, whichever comes
 *      first (the analytics sink may be ahead of the pipeline or behind it).
 *   3. The scan starts only when the analytics sink has stored every event before the seam (its
 *      offsets have reached the seam's on every partition), so none is missed.
 *   4. When the scan is through, the job is done and its claims are deleted: from then on live
 *      processing counts alone.
 *
 * The job is durable: its state, seam and cursor (the last user done) are in SQL, and each chunk
 * of users is one transaction that advances their progress (completions, rewards and webhooks
 * through the engine, exactly once) and the cursor together. Any process with the scheduler role
 * resumes it after a restart. A dry run reads the same history and changes nothing.
 */
import type { Analytics, AnalyticsEvent } from '../../adapters/analytics/types';
import type { Queryable, Sql } from '../../adapters/sql/types';
import { eventView } from '../leaderboards/definition';
import type { Random } from '../random';
import { windowAt } from '../windows';
import { applyEvent, criteriaMet, EMPTY, leavesOf, partKey, type PartState } from './criteria';
import type { AchievementEngine, PartChange } from './progress';
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

/** Why a backfill cannot start (the route answers 400 or 409). */
export class BackfillRefused extends Error {
  constructor(
    readonly kind: 'unsupported' | 'busy' | 'not_found',
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

/** The leaf types backfill computes (the others keep their live progress). */
const BACKFILLED = new Set(['event_count', 'cumulative']);

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
      const odd = leavesOf(def.criteria).find((l) => !BACKFILLED.has(l.type));
      if (odd)
        throw new BackfillRefused(
          'unsupported',
          `a backfill computes event_count and cumulative criteria so far; this achievement has a ${odd.type} criterion`,
        );
      const busy = await tx.query(
        `SELECT 1 FROM achievement_backfills WHERE tenant_id = $1 AND achievement_id = $2 AND state IN ('pending', 'running') AND NOT dry_run`,
        [tenantId, achievementId],
      );
      if (busy.rowCount > 0)
        throw new BackfillRefused('busy', `a backfill of achievement ${achievementId} is running already`);
      const parts = leavesOf(def.criteria)
        .filter((l) => l.type === 'event_count')
        .map(partKey);
      await tx.query(
        `DELETE FROM achievement_progress p WHERE p.tenant_id = $1 AND p.achievement_id = $2 AND p.part = ANY($3::text[])
           AND NOT EXISTS (SELECT 1 FROM achievement_completions c
                           WHERE c.tenant_id = p.tenant_id AND c.achievement_id = p.achievement_id AND c.user_id = p.user_id)`,
        [tenantId, achievementId, parts],
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

  /** Moves one job by one chunk; false when it has to wait (the analytics sink is behind the seam). */
  private async advanceJob(job: JobRow, now: number): Promise<boolean> {
    if (job.state === 'pending') {
      if (!(await this.sinkPastSeam(job.seam ?? {}))) return false;
      const def = await getAchievement(this.deps.sql, job.tenant_id, job.achievement_id);
      if (!def) throw new BackfillGone('the achievement is gone');
      await this.deps.sql.query(
        `UPDATE achievement_backfills SET state = 'running', updated_at = $4
         WHERE tenant_id = $1 AND achievement_id = $2 AND id = $3 AND state = 'pending'`,
        [job.tenant_id, job.achievement_id, job.id, now],
      );
      return true;
    }
    // The next chunk of history is read before the transaction (in the embedded shape the
    // analytics tables share the one SQL connection, which the transaction holds); the
    // transaction then checks that the cursor has not moved (another runner) before writing.
    const def0 = await getAchievement(this.deps.sql, job.tenant_id, job.achievement_id);
    if (!def0) throw new BackfillGone('the achievement is gone');
    const cursor0 = job.cursor ?? '';
    const types0 = eventTypes(compiled(def0));
    const history =
      !cursor0.startsWith('balances:') && types0.length
        ? await this.deps.analytics.userEventHistory(
            job.tenant_id,
            types0.includes('*') ? null : types0,
            cursor0,
            this.chunkUsers,
          )
        : [];
    return this.deps.sql.tx(async (q) => {
      const r = await q.query<JobRow>(
        `SELECT * FROM achievement_backfills WHERE tenant_id = $1 AND achievement_id = $2 AND id = $3 AND state = 'running' FOR UPDATE SKIP LOCKED`,
        [job.tenant_id, job.achievement_id, job.id],
      );
      const cur = r.rows[0];
      if (!cur) return false;
      // Moved by another runner since it was read: read again next time.
      if ((cur.cursor ?? '') !== cursor0) return true;
      const def = await getAchievement(q, cur.tenant_id, cur.achievement_id);
      if (!def) throw new BackfillGone('the achievement is gone');
      const a = compiled(def);
      const cursor = cursor0;
      const phase = cursor.startsWith('balances:') ? 'balances' : 'events';
      if (phase === 'events') {
        if (history.length === 0) {
          await this.setCursor(q, cur, 'balances:', 0, 0, 0, 0, now);
          return true;
        }
        const claimed = await this.claim(q, a, history);
        const counts = countFromHistory(a, history, (e) => claimed.has(e.event_id));
        const changes: PartChange[] = [];
        for (const [user, parts] of counts)
          for (const [part, n] of parts)
            if (n > 0) changes.push({ a, user_id: user, part, apply: (s) => ({ ...s, value: s.value + n }) });
        const users = new Set(history.map((e) => e.user_id));
        const res = await this.deps.engine.advance(q, changes, now, 'backfill');
        await this.setCursor(
          q,
          cur,
          history[history.length - 1]!.user_id,
          users.size,
          history.length,
          res.completed.length,
          res.completed.length,
          now,
        );
        return true;
      }
      // Cumulative parts from current balances (lifetime earned), by user after the cursor; also
      // completes users whose event parts the scan already met (their combined criteria).
      const after = cursor.slice('balances:'.length);
      const currencies = [
        ...new Set(leavesOf(def.criteria).flatMap((l) => (l.type === 'cumulative' ? [l.metric] : []))),
      ];
      const users = await q.query<{ user_id: string; currency_id: string; lifetime_earned: string }>(
        `WITH u AS (
           SELECT user_id FROM balances WHERE tenant_id = $1 AND currency_id = ANY($2::text[]) AND user_id COLLATE "C" > $3
           GROUP BY user_id ORDER BY user_id COLLATE "C" LIMIT $4)
         SELECT b.user_id, b.currency_id, b.lifetime_earned FROM balances b JOIN u ON u.user_id = b.user_id
         WHERE b.tenant_id = $1 AND b.currency_id = ANY($2::text[]) ORDER BY b.user_id COLLATE "C"`,
        [cur.tenant_id, currencies, after, this.chunkUsers],
      );
      if (users.rows.length === 0) {
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
      const changes: PartChange[] = [];
      for (const b of users.rows)
        for (const [part, l] of a.leaves)
          if (l.type === 'cumulative' && l.metric === b.currency_id) {
            const v = Number(b.lifetime_earned);
            changes.push({
              a,
              user_id: b.user_id,
              part,
              apply: (s) => (v > s.value ? { value: v, best: Math.max(s.best, v), last_day: s.last_day } : s),
            });
          }
      const res = await this.deps.engine.advance(q, changes, now, 'backfill');
      const last = users.rows[users.rows.length - 1]!.user_id;
      await this.setCursor(q, cur, `balances:${last}`, 0, 0, res.completed.length, res.completed.length, now);
      return true;
    });
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
   * The dry run: every user's progress from history alone (event_count and streak parts from the
   * event history, cumulative parts from balances), and how many of the users not completed yet
   * would meet the criteria. Changes nothing but its own job row.
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
    const types = eventTypes(a);
    let cursor = '';
    let events = 0;
    const tz = await this.deps.sql.query<{ timezone: string }>('SELECT timezone FROM tenants WHERE id = $1', [
      tenantId,
    ]);
    const timezone = tz.rows[0]?.timezone ?? 'UTC';
    while (types.length) {
      const history = await this.deps.analytics.userEventHistory(
        tenantId,
        types.includes('*') ? null : types,
        cursor,
        this.chunkUsers,
      );
      if (history.length === 0) break;
      events += history.length;
      for (const e of history) {
        const view = eventView({ ...e, actor_metadata_json: null, subject_json: null });
        for (const l of a.eventLeaves) {
          if (!l.matchesType(view.type) || !l.condition.test(view)) continue;
          const m = stateOf(e.user_id);
          m.set(
            l.key,
            applyEvent(
              l.leaf,
              m.get(l.key) ?? EMPTY,
              windowAt({ type: 'daily', timezone }, e.occurred_at).key,
            ),
          );
        }
      }
      cursor = history[history.length - 1]!.user_id;
    }
    const currencies = [
      ...new Set(leavesOf(def.criteria).flatMap((l) => (l.type === 'cumulative' ? [l.metric] : []))),
    ];
    if (currencies.length) {
      const b = await this.deps.sql.query<{ user_id: string; currency_id: string; lifetime_earned: string }>(
        'SELECT user_id, currency_id, lifetime_earned FROM balances WHERE tenant_id = $1 AND currency_id = ANY($2::text[])',
        [tenantId, currencies],
      );
      for (const row of b.rows)
        for (const [part, l] of a.leaves)
          if (l.type === 'cumulative' && l.metric === row.currency_id) {
            const v = Number(row.lifetime_earned);
            stateOf(row.user_id).set(part, { value: v, best: v, last_day: '' });
          }
    }
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

/** The event types the achievement's event parts read (`*` when one reads every type). */
function eventTypes(a: ActiveAchievement): string[] {
  return [...new Set(a.eventLeaves.map((l) => l.leaf.event_type))].sort();
}

function matchesAny(a: ActiveAchievement, e: AnalyticsEvent): boolean {
  const view = eventView({ ...e, actor_metadata_json: null, subject_json: null });
  return a.eventLeaves.some(
    (l) => l.leaf.type === 'event_count' && l.matchesType(view.type) && l.condition.test(view),
  );
}

/** Per user and event_count part: how many of the counted (claimed) events match. */
function countFromHistory(
  a: ActiveAchievement,
  history: readonly AnalyticsEvent[],
  counted: (e: AnalyticsEvent) => boolean,
): Map<string, Map<string, number>> {
  const out = new Map<string, Map<string, number>>();
  for (const e of history) {
    if (!counted(e)) continue;
    const view = eventView({ ...e, actor_metadata_json: null, subject_json: null });
    for (const l of a.eventLeaves) {
      if (l.leaf.type !== 'event_count' || !l.matchesType(view.type) || !l.condition.test(view)) continue;
      let m = out.get(e.user_id);
      if (!m) out.set(e.user_id, (m = new Map()));
      m.set(l.key, (m.get(l.key) ?? 0) + 1);
    }
  }
  return out;
}
