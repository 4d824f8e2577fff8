/**
 * Poison input (issue 11 items 2 and 6), in both shapes: no record or row may stop a partition or
 * a job. Each test sends the hostile input, then shows the same partition scoring the next event
 * (for another user on the same partition) and the process serving:
 * - scores that overflow (two 1e308 events on a sum and on an avg board) saturate at 1e300;
 * - a row the rank index refuses (a 600-byte member, stored before ingestion limited ids in bytes)
 *   is skipped by rank sync;
 * - a subnormal score (1e-310, and one already stored in SQL) lets windows close and export, by
 *   hand and by the scheduler, one after the other;
 * - a record the store rejects (NUL in its event id: Postgres text cannot hold NUL) is dead-lettered
 *   with its reason and shown by the operator route, the metric and `ludus dead-letters list`.
 * Records that ingestion refuses today are appended to the event log directly: they stand for
 * records accepted by an earlier version, which is how they still reach the pipeline.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ManualClock } from '../../core/clock';
import { MAX_SCORE } from '../../core/leaderboards/aggregate';
import { PIPELINE_GROUP } from '../../processors/pipeline/pipeline';
import { EVENTS_TOPIC, type EventRecord } from '../../schemas/topics';
import {
  call,
  SHAPES,
  startTestApp,
  tenantWithCredentials,
  type TenantInfo,
  type TestApp,
} from '../support/app';
import { childEnv } from '../support/process';
import { waitFor } from '../support/wait';

const run = promisify(execFile);
const ROOT = join(__dirname, '..', '..');
const T0 = Date.parse('2026-11-20T10:00:00Z');
const DAY = 86_400_000;

describe.each(SHAPES)('poison records and rows [%s]', (shape) => {
  let app: TestApp;
  let stopped = false;
  let dataDir: string;
  let clock: ManualClock;
  let tenant: TenantInfo;
  let key: string;
  let token: string;
  let seq = 0;

  beforeAll(async () => {
    clock = new ManualClock(T0);
    dataDir = mkdtempSync(join(tmpdir(), 'ludus-poison-'));
    app = await startTestApp(shape, {
      clock,
      roles: 'all',
      env: { LUDUS_SCHEDULER_INTERVAL_MS: '100', LUDUS_DATA_DIR: dataDir },
    });
    ({ tenant, key, token } = await tenantWithCredentials(app));
  });
  afterAll(async () => {
    if (!stopped) await app.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const admin = (method: string, path: string, body?: unknown) =>
    call(method, `${app.url.admin}${path}${path.includes('?') ? '&' : '?'}tenant_id=${tenant.id}`, {
      headers: { 'x-api-key': key },
      body,
    });
  const query = (path: string) =>
    call('GET', `${app.url.query}${path}`, { headers: { authorization: `Bearer ${token}` } });

  /** A board scoring `attrs.p` of events of type `type` (each test has its own type). */
  async function board(id: string, type: string, aggregation: string, timeframe: Record<string, unknown>) {
    const r = await admin('POST', '/v1/leaderboards', {
      leaderboard_id: id,
      name: id,
      config: {
        timeframe,
        scoring: { rules: [{ event_type: type, points_expression: 'attrs.p' }], aggregation },
      },
    });
    expect(r.status).toBe(201);
  }

  const ev = (type: string, user: string, p: number, at = clock.now()) => ({
    event_id: `e${++seq}`,
    type,
    actor: { user_id: user },
    occurred_at: new Date(at).toISOString(),
    attrs: { p },
  });

  async function send(...events: unknown[]) {
    const r = await call('POST', `${app.url.ingest}/v1/events/bulk`, {
      headers: { authorization: `Bearer ${token}` },
      body: { events },
    });
    expect(r.status).toBe(202);
    expect(r.body.failed).toBe(0);
  }

  /** A record as an earlier version of the ingestion gateway would have appended it. */
  async function appendRaw(type: string, user: string, eventId: string, p: number) {
    const value: EventRecord = {
      tenant_id: tenant.id,
      event_id: eventId,
      type,
      user_id: user,
      occurred_at: clock.now(),
      received_at: clock.now(),
      attrs_json: JSON.stringify({ p }),
      actor_metadata_json: null,
      subject_json: null,
    };
    await app.ctx.adapters.eventLog.append(EVENTS_TOPIC, [{ key: `${tenant.id}:${user}`, value }]);
  }

  const partitionOf = (user: string) =>
    app.ctx.adapters.eventLog.partitionFor(EVENTS_TOPIC, `${tenant.id}:${user}`);

  /** A user id on the same partition as `user`. */
  function neighbour(user: string, prefix: string): string {
    for (let i = 0; ; i++) if (partitionOf(`${prefix}${i}`) === partitionOf(user)) return `${prefix}${i}`;
  }

  async function standings(id: string, windowKey: string): Promise<Array<[string, number, number]>> {
    const r = await query(`/v1/leaderboards/${id}?window_key=${encodeURIComponent(windowKey)}&limit=100`);
    if (r.status !== 200) return [];
    return (r.body.entries as Array<{ user_id: string; score: number; rank: number }>).map((e) => [
      e.user_id,
      e.score,
      e.rank,
    ]);
  }

  async function expectStandings(id: string, windowKey: string, want: Array<[string, number, number]>) {
    let last: unknown;
    await waitFor(
      async () => {
        last = await standings(id, windowKey);
        return JSON.stringify(last) === JSON.stringify(want);
      },
      { what: `standings of ${id} ${windowKey}`, describe: () => `last ${JSON.stringify(last)}` },
    );
  }

  async function metricsText(): Promise<string> {
    const r = await call('GET', `${app.url.admin}/metrics`);
    expect(r.status).toBe(200);
    return String(r.body);
  }

  async function serving() {
    expect((await call('GET', `${app.url.admin}/health`)).status).toBe(200);
    expect((await admin('GET', '/v1/leaderboards')).status).toBe(200);
  }

  it('saturates overflowing sums and averages at 1e300, and the partition scores the next event', async () => {
    await board('big-sum', 'big', 'sum', { type: 'all_time' });
    await board('big-avg', 'big', 'avg', { type: 'all_time' });
    const next = neighbour('huge', 'after');
    await send(ev('big', 'huge', 1e308), ev('big', 'huge', 1e308));
    await send(ev('big', next, 3));
    for (const id of ['big-sum', 'big-avg']) {
      await expectStandings(id, 'all_time', [
        ['huge', MAX_SCORE, 1],
        [next, 3, 2],
      ]);
      // SQL and the rank index agree: both hold the saturated score.
      const ranked = await app.ctx.adapters.ranks.get(`${tenant.id}:${id}:all_time`, next);
      expect(ranked).toMatchObject({ member: next, score: 3, position: 1 });
      const big = await app.ctx.adapters.ranks.get(`${tenant.id}:${id}:all_time`, 'huge');
      expect(big?.score).toBe(MAX_SCORE);
    }
    const sql = await app.ctx.adapters.sql.query<{ score: number }>(
      "SELECT score FROM leaderboard_scores WHERE tenant_id = $1 AND user_id = 'huge'",
      [tenant.id],
    );
    expect(sql.rows.map((r) => Number(r.score))).toEqual([MAX_SCORE, MAX_SCORE]);
    await serving();
  });

  it('skips a row the rank index refuses (a 600-byte member) and moves on', async () => {
    await board('wide', 'wide', 'sum', { type: 'all_time' });
    const long = '排'.repeat(200); // 200 characters, 600 UTF-8 bytes: over the index's 512
    const next = neighbour(long, 'later');
    await appendRaw('wide', long, `long-${shape}`, 7);
    await send(ev('wide', next, 5));
    await expectStandings('wide', 'all_time', [[next, 5, 1]]);
    expect(await app.ctx.adapters.ranks.get(`${tenant.id}:wide:all_time`, next)).toMatchObject({
      score: 5,
    });
    // SQL has the long member's score; the index skipped it, counted.
    const sql = await app.ctx.adapters.sql.query<{ score: number }>(
      "SELECT score FROM leaderboard_scores WHERE tenant_id = $1 AND user_id = $2 AND leaderboard_id = 'wide'",
      [tenant.id, long],
    );
    expect(sql.rows.map((r) => Number(r.score))).toEqual([7]);
    expect(await metricsText()).toMatch(
      /ludus_skipped_rows_total\{stage="rank_sync",reason_class="RankInputError"\} [1-9]/,
    );
    await serving();
  });

  it('closes windows with subnormal scores, by hand and by the scheduler, one after the other', async () => {
    await board('tiny', 'tiny', 'sum', { type: 'daily', timezone: 'UTC', grace_seconds: 0 });
    await send(ev('tiny', 'sub', 1e-310), ev('tiny', 'two', 2), ev('tiny', 'legacy', 1));
    await expectStandings('tiny', '2026-11-20', [
      ['two', 2, 1],
      ['legacy', 1, 2],
      ['sub', 0, 3],
    ]);
    // A subnormal score stored by an earlier version (SQL holds it; ClickHouse 18.16 cannot read it).
    await app.ctx.adapters.sql.query(
      "UPDATE leaderboard_scores SET score = 1e-310, total = 1e-310 WHERE tenant_id = $1 AND leaderboard_id = 'tiny' AND user_id = 'legacy'",
      [tenant.id],
    );

    const closed = await admin('POST', '/v1/leaderboards/tiny/windows/2026-11-20/close');
    expect(closed.status).toBe(200);
    expect(closed.body).toMatchObject({ status: 'closed', entries: 3 });
    const snaps = await waitFor(
      async () => {
        const r = await query('/v1/snapshots/tiny');
        return r.body.snapshots?.length === 1 ? r.body.snapshots : null;
      },
      { what: 'the first snapshot' },
    );
    const first = await query(`/v1/snapshots/tiny/${snaps[0].snapshot_time}`);
    expect(first.status).toBe(200);
    expect(first.body.entries).toEqual([
      { user_id: 'two', score: 2, rank: 1 },
      { user_id: 'legacy', score: 0, rank: 2 },
      { user_id: 'sub', score: 0, rank: 3 },
    ]);

    // The next day: a subnormal again, then the scheduler closes that window at its end.
    clock.set(T0 + DAY);
    await send(ev('tiny', 'sub', 1e-310), ev('tiny', 'two', 4));
    await expectStandings('tiny', '2026-11-21', [
      ['two', 4, 1],
      ['sub', 0, 2],
    ]);
    clock.set(T0 + 2 * DAY);
    const later = await waitFor(
      async () => {
        const r = await query('/v1/snapshots/tiny');
        return r.body.snapshots?.length === 2 ? r.body.snapshots : null;
      },
      { what: 'the scheduler to close and export the second window' },
    );
    expect(later.map((s: { window_key: string }) => s.window_key)).toEqual(['2026-11-21', '2026-11-20']);
    const second = await query(`/v1/snapshots/tiny/${later[0].snapshot_time}`);
    expect(second.body.entries).toEqual([
      { user_id: 'two', score: 4, rank: 1 },
      { user_id: 'sub', score: 0, rank: 2 },
    ]);
    const m = await metricsText();
    expect(m).not.toMatch(/ludus_scheduler_job_failures_total\{[^}]*\} [1-9]/);
    expect(m).not.toMatch(/ludus_scheduler_item_failures_total\{[^}]*\} [1-9]/);
    await serving();
  });

  it('dead-letters a record the store rejects, applies the rest, and shows it to operators', async () => {
    await board('dl', 'dl', 'sum', { type: 'all_time' });
    const badUser = 'nul-sender';
    const next = neighbour(badUser, 'fine');
    const badId = `bad\u0000id-${shape}`;
    await appendRaw('dl', badUser, badId, 1);
    await send(ev('dl', next, 9));
    await expectStandings('dl', 'all_time', [[next, 9, 1]]);

    const root = { 'x-api-key': app.rootKey };
    const url = `${app.url.admin}/v1/operator/dead-letters?consumer=${PIPELINE_GROUP}&partition=${partitionOf(badUser)}`;
    const page = await waitFor(
      async () => {
        const r = await call('GET', url, { headers: root });
        return r.status === 200 && r.body.dead_letters.length > 0 ? r.body : null;
      },
      { what: 'the dead letter' },
    );
    expect(page.dead_letters).toEqual([
      expect.objectContaining({
        consumer: PIPELINE_GROUP,
        partition: partitionOf(badUser),
        key: `${tenant.id}:${badUser}`,
        reason: expect.stringMatching(/^sql_22021: /),
        payload: expect.objectContaining({ event_id: badId, user_id: badUser }),
      }),
    ]);
    expect(page.next_cursor).toBeNull();
    // Root only; bad filters are a 400.
    expect((await call('GET', url, { headers: { 'x-api-key': key } })).status).toBe(403);
    expect((await call('GET', `${url}&limit=0`, { headers: root })).status).toBe(400);
    expect(await metricsText()).toMatch(
      new RegExp(`ludus_dead_letters_total\\{group="${PIPELINE_GROUP}",reason_class="sql_22021"\\} 1`),
    );
    // Exactly once, and the partition goes on.
    const after = neighbour(badUser, 'then');
    await send(ev('dl', after, 1));
    await expectStandings('dl', 'all_time', [
      [next, 9, 1],
      [after, 1, 2],
    ]);
    const all = await call('GET', `${app.url.admin}/v1/operator/dead-letters`, { headers: root });
    expect(
      all.body.dead_letters.filter((d: { payload: { event_id: string } }) => d.payload.event_id === badId),
    ).toHaveLength(1);
    await serving();

    // The command line shows it too (on the embedded data directory once the server has stopped).
    const env: Record<string, string> =
      shape === 'embedded'
        ? { LUDUS_DATA_DIR: dataDir }
        : {
            LUDUS_SQL: 'pg',
            LUDUS_DATABASE_URL: app.ctx.config.databaseUrl!,
            LUDUS_DATABASE_SCHEMA: app.ctx.config.databaseSchema!,
          };
    if (shape === 'embedded') {
      await app.stop();
      stopped = true;
    }
    const ludus = async (...args: string[]) =>
      (
        await run(join(ROOT, 'node_modules', '.bin', 'tsx'), [join(ROOT, 'runtime', 'cli.ts'), ...args], {
          cwd: ROOT,
          env: childEnv(env),
        })
      ).stdout;
    const listed = JSON.parse(await ludus('dead-letters', 'list', '--json', '--consumer', PIPELINE_GROUP));
    expect(listed.dead_letters).toEqual([
      expect.objectContaining({ payload: expect.objectContaining({ event_id: badId }) }),
    ]);
    const human = await ludus('dead-letters', 'list');
    expect(human).toContain('sql_22021');
    expect(human).toContain(`${tenant.id}:${badUser}`);
  });
});
