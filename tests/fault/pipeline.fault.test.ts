/**
 * Fault test (distributed shape): while events stream in through the ingestion gateway, the
 * processor process is killed with SIGKILL in the middle of a batch and restarted, Kafka is
 * restarted, and Redis is restarted (losing its data). After the stream drains, the standings of
 * every board and window equal the reference model's: no accepted event lost, none counted twice.
 * Then Redis loses its data once more with no event following: the rank index must come back
 * from SQL by itself.
 *
 * Layout: the ingest and api roles run in this process (startTestApp); the processors (and the
 * scheduler) run as a child process of the real command line, so that it can be SIGKILLed. Redis
 * is a private redis-server on a free port (the machine's Redis is shared with other suites);
 * Kafka is the stack's own, restarted with `ops/stack down kafka && ops/stack up kafka`, which is
 * why ops/test runs tests/fault alone, after the other suites. The sender behaves like a real
 * client: it retries a request with the same event ids until it is accepted, and sometimes
 * resends an accepted request.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readOffsets } from '../../processors/offsets';
import { PIPELINE_GROUP } from '../../processors/pipeline/pipeline';
import { EVENTS_TOPIC } from '../../schemas/topics';
import {
  call,
  createKey,
  createTenant,
  shapeEnv,
  startTestApp,
  tenantToken,
  type TestApp,
} from '../support/app';
import { childEnv, spawnCli, type Spawned } from '../support/process';
import { referenceStandings, type RefBoard, type RefEvent } from '../support/reference';
import { stack } from '../support/stack';
import { killAndWaitGone, progressMarker, sessionCount } from '../support/sessions';
import { waitFor } from '../support/wait';

const OPS_STACK = join(__dirname, '..', '..', 'ops', 'stack');
const EVENTS = 1800;
const USERS = 40;
const APP_NAME = `ludus-fault-pipeline-${process.pid}`;

/** [id, board, ranking.min_score]: entries under min_score are not ranked (and come last anyway). */
const BOARDS: Array<[string, RefBoard, number?]> = [
  [
    'total',
    { event_type: '*', field: 'p', aggregation: 'sum', timeframe: 'all_time', rank_policy: 'unique' },
  ],
  [
    'plays',
    { event_type: '*', field: 'p', aggregation: 'count', timeframe: 'daily_utc', rank_policy: 'shared' },
  ],
  ['best', { event_type: 'a', field: 'p', aggregation: 'max', timeframe: 'daily_utc', rank_policy: 'dense' }],
  ['mean', { event_type: '*', field: 'p', aggregation: 'avg', timeframe: 'all_time', rank_policy: 'unique' }],
  ['low', { event_type: 'b', field: 'p', aggregation: 'min', timeframe: 'all_time', rank_policy: 'dense' }],
  [
    'floor',
    { event_type: 'b', field: 'p', aggregation: 'max', timeframe: 'all_time', rank_policy: 'shared' },
    19,
  ],
];

const mark = progressMarker('pipeline fault');
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A small seeded generator, so that a failing stream can be replayed (the seed is printed). */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

/** PING over a raw socket: true when the server answers PONG. */
function redisPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.on('error', () => done(false));
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (d) => done(d.toString().startsWith('+PONG')));
  });
}

/** A private redis-server without persistence: a restart loses every key. */
class PrivateRedis {
  private proc: ChildProcess | null = null;
  constructor(readonly port: number) {}
  get url(): string {
    return `redis://127.0.0.1:${this.port}/0`;
  }
  async start(): Promise<void> {
    const args = ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];
    this.proc = spawn('redis-server', [...args, '--daemonize', 'no'], { stdio: 'ignore' });
    await waitFor(() => redisPing(this.port), {
      what: `redis-server on port ${this.port}`,
      timeoutMs: 10000,
    });
  }
  async kill(): Promise<void> {
    const p = this.proc;
    this.proc = null;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    const exited = new Promise((r) => p.once('exit', r));
    p.kill('SIGKILL');
    await exited;
  }
}

/** Whether something accepts TCP connections at host:port. */
function portOpen(hostPort: string): Promise<boolean> {
  const i = hostPort.lastIndexOf(':');
  return new Promise((resolve) => {
    const socket = connect(Number(hostPort.slice(i + 1)), hostPort.slice(0, i));
    const done = (open: boolean) => {
      socket.destroy();
      resolve(open);
    };
    socket.setTimeout(1000, () => done(false));
    socket.on('connect', () => done(true));
    socket.on('error', () => done(false));
  });
}

function opsStack(...args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile('bash', [OPS_STACK, ...args], { timeout: 180_000 }, (err, _stdout, stderr) =>
      err ? reject(new Error(`ops/stack ${args.join(' ')} failed: ${err.message}\n${stderr}`)) : resolve(),
    );
  });
}

interface WireEvent {
  event_id: string;
  type: string;
  actor: { user_id: string };
  occurred_at: string;
  attrs: { p: number };
}

describe('pipeline survives a processor SIGKILL, a Kafka restart and a Redis restart [distributed]', () => {
  let app: TestApp;
  let redis: PrivateRedis;
  let dir: string;
  let env: Record<string, string>;
  const children: Spawned[] = [];

  beforeAll(async () => {
    redis = new PrivateRedis(await freePort());
    await redis.start();
    dir = mkdtempSync(join(tmpdir(), 'ludus-fault-'));
    env = {
      ...shapeEnv('distributed'),
      LUDUS_REDIS_URL: redis.url,
      LUDUS_RATE_LIMITER: 'memory',
      LUDUS_RATE_LIMIT_INGEST: 'off',
      LUDUS_RATE_LIMIT_ADMIN: 'off',
      LUDUS_RATE_LIMIT_QUERY: 'off',
    };
    app = await startTestApp('distributed', { roles: 'ingest,api', env });
  }, 60_000);

  afterAll(async () => {
    for (const c of children) if (c.child.exitCode === null) c.child.kill('SIGKILL');
    await app?.stop().catch(() => undefined);
    await redis?.kill();
    if (dir) rmSync(dir, { recursive: true, force: true });
    // Whatever happened above, leave Kafka up for whoever runs next (a no-op when it is up).
    await opsStack('up', 'kafka');
  }, 200_000);

  /** The processors (and the scheduler) in a child process of the real command line. */
  async function startProcessors(): Promise<Spawned> {
    const p = spawnCli(
      ['serve', '--roles', 'processors,scheduler'],
      childEnv({
        ...env,
        LUDUS_DATABASE_URL: `${stack.pgUrl}?application_name=${APP_NAME}`,
        LUDUS_DATA_DIR: dir,
        LUDUS_LOG_LEVEL: 'info',
      }),
    );
    children.push(p);
    await p.waitForLog((l) => l.msg === 'ludus is up', 90_000);
    return p;
  }

  it('ends with the standings of the reference model', async () => {
    const seed = Date.now() % 2 ** 31;
    const random = rng(seed);
    const sql = app.ctx.adapters.sql;
    const tenant = await createTenant(app);
    const key = (await createKey(app, [tenant.id])).key;
    const auth = { authorization: `Bearer ${await tenantToken(tenant)}` };
    for (const [id, b, min] of BOARDS) {
      const r = await call('POST', `${app.url.admin}/v1/leaderboards?tenant_id=${tenant.id}`, {
        headers: { 'x-api-key': key },
        body: {
          leaderboard_id: id,
          name: id,
          config: {
            timeframe: {
              type: b.timeframe === 'all_time' ? 'all_time' : 'daily',
              timezone: 'UTC',
              grace_seconds: 30 * 86400,
            },
            scoring: {
              rules: [
                {
                  event_type: b.event_type,
                  ...(b.aggregation === 'count' ? {} : { points_expression: 'attrs.p' }),
                },
              ],
              aggregation: b.aggregation,
            },
            ranking: { rank_policy: b.rank_policy, ...(min === undefined ? {} : { min_score: min }) },
          },
        },
      });
      expect([id, r.status]).toEqual([id, 201]);
    }

    // The stream: unique events over two UTC days, in requests of 1 to 40 events.
    const now = Date.now();
    const events: RefEvent[] = Array.from({ length: EVENTS }, (_, i) => ({
      event_id: `ev-${i}`,
      type: random() < 0.5 ? 'a' : 'b',
      user_id: `player-${String(Math.floor(random() * USERS)).padStart(2, '0')}`,
      // Whole minutes: equal occurred_at (tiebreak ties) happen.
      occurred_at: Math.floor((now - random() * 30 * 3_600_000) / 60_000) * 60_000,
      attrs: { p: 1 + Math.floor(random() * 20) },
    }));
    const wire = (e: RefEvent): WireEvent => ({
      event_id: e.event_id,
      type: e.type,
      actor: { user_id: e.user_id },
      occurred_at: new Date(e.occurred_at).toISOString(),
      attrs: e.attrs as { p: number },
    });
    const requests: WireEvent[][] = [];
    for (let i = 0; i < events.length;) {
      const n = Math.min(events.length - i, 1 + Math.floor(random() * 40));
      requests.push(events.slice(i, i + n).map(wire));
      i += n;
    }

    // The sender: paced, gated by the phases below, retrying each request until it is accepted.
    const statuses = new Map<string, number>();
    let sent = 0;
    let allowed = 0;
    let failure: Error | null = null;
    const deliver = async (batch: WireEvent[]) => {
      const single = batch.length === 1 && random() < 0.5;
      const path = single ? '/v1/events' : '/v1/events/bulk';
      const body = JSON.stringify(single ? batch[0] : { events: batch });
      for (let attempt = 1; ; attempt++) {
        let status: string;
        try {
          const res = await fetch(`${app.url.ingest}${path}`, {
            method: 'POST',
            headers: { ...auth, 'content-type': 'application/json' },
            body,
            signal: AbortSignal.timeout(15_000),
          });
          const out = (await res.json().catch(() => null)) as Record<string, unknown> | null;
          status = String(res.status);
          if (res.status === 202) {
            const okBody = single
              ? out?.status === 'accepted'
              : out?.accepted === batch.length && out?.failed === 0;
            if (!okBody) throw new Error(`202 with ${JSON.stringify(out)}`);
            statuses.set(status, (statuses.get(status) ?? 0) + 1);
            return;
          }
          // Only "try again" answers are retried; anything else is a bug.
          if (res.status !== 503 && res.status < 500)
            throw new Error(`${path} answered ${res.status}: ${JSON.stringify(out)}`);
        } catch (err) {
          const e = err as Error;
          if (e.name !== 'TimeoutError' && e.name !== 'TypeError' && !/fetch failed/.test(e.message)) throw e;
          status = e.name;
        }
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
        if (attempt > 300)
          throw new Error(`${path} never accepted after ${attempt} attempts (last ${status})`);
        await pause(Math.min(50 * 2 ** attempt, 1000)); // the client's backoff
      }
    };
    const sender = (async () => {
      for (const batch of requests) {
        await waitFor(() => sent < allowed || failure, {
          timeoutMs: 170_000,
          intervalMs: 10,
          what: 'the next phase',
        });
        if (failure) return;
        await deliver(batch);
        // A client retry of a request that was accepted: the same events again.
        if (random() < 0.08) await deliver(batch);
        sent += batch.length;
        await pause(15); // a steady stream, not a burst
      }
    })().catch((err: Error) => {
      failure = err;
    });
    const reached = async (n: number) => {
      await waitFor(() => sent >= n || failure, {
        timeoutMs: 170_000,
        intervalMs: 10,
        what: `${n} events sent`,
      });
      if (failure) throw failure;
    };

    const sqlState = async () => {
      const log = app.ctx.adapters.eventLog;
      const ends = await log.endOffsets(EVENTS_TOPIC);
      const stored = await readOffsets(sql, PIPELINE_GROUP, log.physicalName(EVENTS_TOPIC), [...ends.keys()]);
      return { ends, stored };
    };

    try {
      let processors = await startProcessors();
      mark(`processors up (seed ${seed})`);

      // 1. SIGKILL the processor process while a batch transaction is open, then restart it.
      allowed = 700;
      await reached(150);
      let how = 'after the stream paused';
      await waitFor(
        async () => {
          // A transaction that has written (an xid): a batch under way, not a scheduler tick.
          if ((await sessionCount(sql, APP_NAME, { writing: true })) > 0) how = 'mid-batch';
          return how === 'mid-batch' || sent >= allowed;
        },
        { timeoutMs: 60_000, intervalMs: 1, what: 'a batch in progress' },
      );
      // The process is really gone (not a wrapper): Postgres saw its sessions end.
      await killAndWaitGone(sql, processors, APP_NAME);
      mark(`processors killed ${how} (${sent} events sent)`);
      processors = await startProcessors();
      mark('processors restarted');

      // 2. Restart Kafka while events stream in (the sender retries through it).
      allowed = 1300;
      await reached(850);
      await opsStack('down', 'kafka');
      // Really down (ops/stack leaves a broker it did not start running).
      expect(await portOpen(stack.kafkaBrokers[0]!)).toBe(false);
      mark(`kafka down (${sent} events sent)`);
      await opsStack('up', 'kafka');
      mark('kafka up');

      // 3. Restart Redis: it comes back empty.
      allowed = EVENTS;
      await reached(1450);
      await redis.kill();
      await redis.start();
      mark(`redis restarted empty (${sent} events sent)`);

      await sender;
      if (failure) throw failure;
      mark(`all ${EVENTS} events accepted; answers: ${JSON.stringify(Object.fromEntries(statuses))}`);

      // Drained: the pipeline stored the end of every partition.
      let last = '';
      await waitFor(
        async () => {
          const { ends, stored } = await sqlState();
          last = JSON.stringify({ ends: [...ends], stored: [...stored] });
          return [...ends].every(([p, end]) => (stored.get(p) ?? 0) >= end);
        },
        { timeoutMs: 90_000, intervalMs: 200, what: 'the pipeline to drain', describe: () => last },
      );
      mark('drained');

      // Nothing lost, nothing twice: every event deduplicated once, every standing as the model says.
      const seen = await sql.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM processed_events WHERE tenant_id = $1',
        [tenant.id],
      );
      expect(seen.rows[0]!.n).toBe(EVENTS);
      // The min_score board does leave some players out (else it would prove nothing).
      const floor = referenceStandings(events, BOARDS.find(([id]) => id === 'floor')![1]).get('all_time')!;
      expect(floor.some((e) => e.score < 20)).toBe(true);
      await expectStandings(tenant.id, auth, events, 'after the faults');
      mark('standings equal the reference');

      // 4. Redis loses its data again, and no event follows: the index is rebuilt from SQL anyway.
      await redis.kill();
      await redis.start();
      mark('redis restarted empty, no more events');
      await expectStandings(tenant.id, auth, events, 'after a Redis restart with no new events');
      mark('standings rebuilt');
      expect(processors.logs.filter((l) => l.level === 'fatal')).toEqual([]);
    } catch (err) {
      throw new Error(`${(err as Error).message}\n(stream seed ${seed})`);
    } finally {
      failure ??= new Error('test ended');
      await sender;
    }
  }, 175_000);

  /** Waits until every board's every window equals the reference (the rank index may lag). */
  async function expectStandings(
    tenantId: string,
    auth: Record<string, string>,
    events: RefEvent[],
    when: string,
  ): Promise<void> {
    let mismatch = '';
    await waitFor(
      async () => {
        for (const [id, b, min] of BOARDS) {
          const expected = referenceStandings(events, b);
          for (const [w, all] of expected) {
            const want = all.filter((e) => min === undefined || e.score >= min);
            const r = await call('GET', `${app.url.query}/v1/leaderboards/${id}?window_key=${w}&limit=1000`, {
              headers: auth,
            });
            const got = r.status === 200 ? r.body.entries : `HTTP ${r.status}`;
            if (JSON.stringify(got) !== JSON.stringify(want) || r.body.total_entries !== want.length) {
              mismatch = `${tenantId} board ${id} window ${w}: expected ${want.length} entries, got ${
                Array.isArray(got) ? got.length : got
              }; first difference at ${firstDifference(want, Array.isArray(got) ? got : [])}`;
              return false;
            }
          }
        }
        return true;
      },
      {
        timeoutMs: 40_000,
        intervalMs: 250,
        what: `standings equal to the reference ${when}`,
        describe: () => mismatch,
      },
    );
  }
});

function firstDifference(want: unknown[], got: unknown[]): string {
  for (let i = 0; i < Math.max(want.length, got.length); i++) {
    if (JSON.stringify(want[i]) !== JSON.stringify(got[i]))
      return `#${i}: expected ${JSON.stringify(want[i])}, got ${JSON.stringify(got[i])}`;
  }
  return 'none';
}
