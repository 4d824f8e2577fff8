/**
 * A property of the whole pipeline, in both shapes: for random event sequences sent through the
 * ingestion gateway (bulk and single requests, duplicates of an event_id with other content,
 * client retries, invalid events), against random boards (sum, count, max, min, avg; daily UTC
 * and all_time; unique, shared and dense ranks), the standings the query gateway serves for every
 * window equal the reference model's (tests/support/reference.ts) once the pipeline has drained.
 *
 * Each run has its own tenant and boards. The injected clock sits just after the events, with a
 * grace period that keeps every window open. fast-check prints the seed and the shrunk
 * counterexample of a failure; rerun one with `seed` and `path` in fc.assert's parameters.
 *
 * Duplicates keep the user of the event they repeat: the log is ordered per `tenant:user` only, so
 * a duplicate under another user lands on another partition and races its original (the dedupe
 * keeps the first one processed, which is the first accepted only within one partition).
 */
import fc from 'fast-check';
import { ManualClock } from '../../core/clock';
import { PIPELINE_GROUP } from '../../processors/pipeline/pipeline';
import { readOffsets } from '../../processors/offsets';
import { EVENTS_TOPIC } from '../../schemas/topics';
import {
  call,
  createKey,
  createTenant,
  SHAPES,
  startTestApp,
  tenantToken,
  type TestApp,
} from '../support/app';
import { referenceStandings, type RefBoard, type RefEntry, type RefEvent } from '../support/reference';
import { waitFor } from '../support/wait';

const DAY = 86_400_000;
const HOUR = 3_600_000;
/** Events fall on 2026-11-17, 18 and 19 (UTC); the clock is early on the 20th. */
const BASE = Date.parse('2026-11-17T00:00:00Z');
const NOW = BASE + 3 * DAY + 20 * 60_000;
const DAYS = ['2026-11-17', '2026-11-18', '2026-11-19', '2026-11-20'];
const NUM_RUNS = 15;

/** User ids whose byte order differs from their locale order (ties fall back to bytes). */
const USERS = ['ann', 'Bob', 'zoë', 'émile', 'u_1'];
const TYPES = ['a', 'b', 'c'];

interface Gen {
  type: string;
  user: string;
  /** Hours after BASE: coarse, so equal occurred_at (tiebreak ties) are common. */
  hour: number;
  /** Points, or undefined for an event without attrs.p (counts only on count boards). */
  p: number | undefined;
}

type Kind = 'new' | 'retry' | 'conflict' | 'invalid';
interface Step {
  kind: Kind;
  ev: Gen;
  /** Which earlier accepted event a retry or conflict repeats. */
  pick: number;
  /** Sent alone on POST /v1/events, or within a bulk request. */
  single: boolean;
  /** Ends the current bulk request after this event. */
  cut: boolean;
}

const genArb: fc.Arbitrary<Gen> = fc.record({
  type: fc.constantFrom(...TYPES),
  user: fc.constantFrom(...USERS),
  hour: fc.integer({ min: 0, max: 71 }),
  // A narrow range: equal scores (and so the tiebreak rules) come up often.
  p: fc.option(fc.oneof(fc.integer({ min: -2, max: 6 }), fc.constantFrom(0.5, 2.5)), {
    freq: 8,
    nil: undefined,
  }),
});

const stepArb: fc.Arbitrary<Step> = fc.record({
  kind: fc.constantFrom<Kind>('new', 'new', 'new', 'new', 'retry', 'conflict', 'invalid'),
  ev: genArb,
  pick: fc.nat(),
  single: fc.constantFrom(false, false, false, true),
  cut: fc.constantFrom(false, false, false, false, false, true),
});

const boardArb: fc.Arbitrary<RefBoard> = fc.record({
  event_type: fc.constantFrom('a', 'b', '*'),
  field: fc.constant('p'),
  aggregation: fc.constantFrom(
    'sum' as const,
    'count' as const,
    'max' as const,
    'min' as const,
    'avg' as const,
  ),
  timeframe: fc.constantFrom('daily_utc' as const, 'all_time' as const),
  rank_policy: fc.constantFrom('unique' as const, 'shared' as const, 'dense' as const),
});

const scenarioArb = fc.record({
  boards: fc.array(boardArb, { minLength: 1, maxLength: 4 }),
  // size 'max': lengths up to 160, not only fast-check's small default.
  steps: fc.array(stepArb, { minLength: 1, maxLength: 160, size: 'max' }),
});

interface WireEvent {
  event_id: string;
  type: string;
  actor: { user_id: string };
  occurred_at: string;
  attrs: Record<string, unknown>;
}

/** Turns steps into requests (in order) and the accepted events in log order. */
function materialize(steps: Step[]): {
  requests: Array<{ single: boolean; events: Array<{ wire: WireEvent; valid: boolean }> }>;
  accepted: RefEvent[];
} {
  const accepted: RefEvent[] = [];
  const requests: Array<{ single: boolean; events: Array<{ wire: WireEvent; valid: boolean }> }> = [];
  let bulk: Array<{ wire: WireEvent; valid: boolean }> = [];
  const flush = () => {
    if (bulk.length) requests.push({ single: false, events: bulk });
    bulk = [];
  };
  let n = 0;
  steps.forEach((s) => {
    let ref: RefEvent;
    let valid = true;
    const fresh = (g: Gen, id: string): RefEvent => ({
      event_id: id,
      type: g.type,
      user_id: g.user,
      occurred_at: BASE + g.hour * HOUR,
      attrs: g.p === undefined ? {} : { p: g.p },
    });
    const earlier = accepted.length ? accepted[s.pick % accepted.length]! : null;
    if (s.kind === 'retry' && earlier) {
      ref = earlier; // the same event again, byte for byte
    } else if (s.kind === 'conflict' && earlier) {
      // The same event_id (and user) with other content: the first accepted one wins.
      ref = { ...fresh(s.ev, earlier.event_id), user_id: earlier.user_id };
    } else if (s.kind === 'invalid') {
      // Too far in the future: refused by the gateway, so never in the log.
      ref = { ...fresh(s.ev, `bad-${n++}`), occurred_at: NOW + 2 * HOUR };
      valid = false;
    } else {
      ref = fresh(s.ev, `e-${n++}`);
    }
    if (valid) accepted.push(ref);
    const wire: WireEvent = {
      event_id: ref.event_id,
      type: ref.type,
      actor: { user_id: ref.user_id },
      occurred_at: new Date(ref.occurred_at).toISOString(),
      attrs: ref.attrs,
    };
    if (s.single) {
      flush();
      requests.push({ single: true, events: [{ wire, valid }] });
    } else {
      bulk.push({ wire, valid });
      if (s.cut || bulk.length === 100) flush();
    }
  });
  flush();
  return { requests, accepted };
}

function boardConfig(b: RefBoard) {
  return {
    timeframe: {
      type: b.timeframe === 'all_time' ? 'all_time' : 'daily',
      timezone: 'UTC',
      grace_seconds: 30 * 86400,
    },
    scoring: {
      rules: [
        { event_type: b.event_type, ...(b.aggregation === 'count' ? {} : { points_expression: 'attrs.p' }) },
      ],
      aggregation: b.aggregation,
    },
    ranking: { rank_policy: b.rank_policy },
  };
}

describe.each(SHAPES)('pipeline property: standings equal the reference model [%s]', (shape) => {
  let app: TestApp;
  const clock = new ManualClock(NOW);
  let run = 0;

  beforeAll(async () => {
    app = await startTestApp(shape, {
      clock,
      env: { LUDUS_RATE_LIMIT_INGEST: 'off', LUDUS_RATE_LIMIT_ADMIN: 'off', LUDUS_RATE_LIMIT_QUERY: 'off' },
    });
  });
  afterAll(() => app?.stop());

  /**
   * The pipeline has stored, for every partition, the end of the log, and the rank index has
   * applied it too (its watermark, written after the commit): the standings are final.
   */
  async function drained(): Promise<boolean> {
    const { eventLog: log, sql, ranks } = app.ctx.adapters;
    const topic = log.physicalName(EVENTS_TOPIC);
    const ends = await log.endOffsets(EVENTS_TOPIC);
    const stored = await readOffsets(sql, PIPELINE_GROUP, topic, [...ends.keys()]);
    for (const [p, end] of ends) {
      if (end === 0) continue;
      if ((stored.get(p) ?? 0) < end) return false;
      if (((await ranks.watermark(`${PIPELINE_GROUP}:${topic}`, p)) ?? 0) < end) return false;
    }
    return true;
  }

  async function check(boards: RefBoard[], steps: Step[]): Promise<void> {
    const id = ++run;
    const tenant = await createTenant(app);
    const key = (await createKey(app, [tenant.id])).key;
    const token = await tenantToken(tenant);
    const auth = { authorization: `Bearer ${token}` };
    for (const [i, b] of boards.entries()) {
      const r = await call('POST', `${app.url.admin}/v1/leaderboards?tenant_id=${tenant.id}`, {
        headers: { 'x-api-key': key },
        body: { leaderboard_id: `b${i}`, name: `run ${id} board ${i}`, config: boardConfig(b) },
      });
      if (r.status !== 201) throw new Error(`board ${i}: ${r.status} ${JSON.stringify(r.body)}`);
    }

    const { requests, accepted } = materialize(steps);
    for (const req of requests) {
      if (req.single) {
        const { wire, valid } = req.events[0]!;
        const r = await call('POST', `${app.url.ingest}/v1/events`, { headers: auth, body: wire });
        expect([r.status, r.body]).toEqual(
          valid
            ? [202, { status: 'accepted', event_id: wire.event_id }]
            : [400, { error: expect.objectContaining({ code: 'VALIDATION_ERROR' }) }],
        );
      } else {
        const r = await call('POST', `${app.url.ingest}/v1/events/bulk`, {
          headers: auth,
          body: { events: req.events.map((e) => e.wire) },
        });
        expect(r.status).toBe(202);
        expect(r.body.results.map((x: { status: string }) => x.status)).toEqual(
          req.events.map((e) => (e.valid ? 'accepted' : 'failed')),
        );
      }
    }

    await waitFor(drained, { timeoutMs: 30_000, what: 'the pipeline to drain' });

    // Every window of every board: the reference's standings, or nothing.
    const expected = boards.map((b) => referenceStandings(accepted, b));
    const windowsOf = (b: RefBoard) => (b.timeframe === 'all_time' ? ['all_time'] : DAYS);
    const read = async (i: number, w: string): Promise<RefEntry[] | string> => {
      const r = await call('GET', `${app.url.query}/v1/leaderboards/b${i}?window_key=${w}&limit=1000`, {
        headers: auth,
      });
      if (r.status === 404) return [];
      if (r.status !== 200) return `HTTP ${r.status} ${JSON.stringify(r.body)}`;
      if (r.body.total_entries !== r.body.entries.length) return `total_entries ${r.body.total_entries}`;
      return r.body.entries as RefEntry[];
    };
    let mismatch = '';
    await waitFor(
      async () => {
        mismatch = '';
        for (const [i, b] of boards.entries()) {
          for (const w of windowsOf(b)) {
            const want = expected[i]!.get(w) ?? [];
            const got = await read(i, w);
            if (JSON.stringify(got) !== JSON.stringify(want)) {
              mismatch = `board ${i} ${JSON.stringify(b)} window ${w}:\n  expected ${JSON.stringify(want)}\n  got      ${JSON.stringify(got)}`;
              return false;
            }
          }
        }
        return true;
      },
      // Drained means final: a short grace only, so that a failing case shrinks fast.
      { timeoutMs: 500, intervalMs: 50, what: 'standings equal to the reference', describe: () => mismatch },
    );

    // Rank and score lookups (latest window: only all_time boards have one with entries).
    for (const [i, b] of boards.entries()) {
      if (b.timeframe !== 'all_time') continue;
      const entries = expected[i]!.get('all_time') ?? [];
      for (const user of USERS) {
        const r = await call(
          'GET',
          `${app.url.query}/v1/leaderboards/b${i}/rank/${encodeURIComponent(user)}`,
          {
            headers: auth,
          },
        );
        const e = entries.find((x) => x.user_id === user);
        expect([user, r.status, r.body.found, r.body.rank, r.body.score]).toEqual([
          user,
          200,
          !!e,
          e?.rank ?? 0,
          e?.score ?? 0,
        ]);
      }
    }
  }

  it(`holds for ${NUM_RUNS} random runs`, async () => {
    await fc.assert(
      fc.asyncProperty(scenarioArb, async ({ boards, steps }) => {
        await check(boards, steps);
      }),
      { numRuns: NUM_RUNS, interruptAfterTimeLimit: 150_000, markInterruptAsFailure: true },
    );
  }, 200_000);
});
