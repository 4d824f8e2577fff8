/**
 * A load generator for what wrk cannot do, run as its own process:
 *
 *   node --import tsx bench/lib/pacer.ts '<json options>'
 *
 * - mode "rate": open loop, bulk requests paced to `eventsPerS` for `durationS` (the steady load of
 *   the latency measurement), at most `maxInFlight` requests outstanding;
 * - mode "count": closed loop, `concurrency` requests outstanding until `events` were accepted (a
 *   backlog of exactly N events).
 * Event ids are unique (`idPrefix`), tenants and users as in bench/lib/events.ts.
 * Prints one line: PACER {"requests", "accepted", "errors", "seconds", "eventsPerS", "latencyMs"}.
 */
import { Agent, request } from 'node:http';
import { eventJson, generate } from './events';
import { percentile } from './util';

interface Options {
  mode: 'rate' | 'count';
  url: string;
  /** Tenant id -> bearer token. */
  tokens: Record<string, string>;
  users: number;
  seed: number;
  idPrefix: string;
  variants?: number;
  batch: number;
  eventsPerS?: number;
  durationS?: number;
  maxInFlight?: number;
  events?: number;
  concurrency?: number;
}

async function main(): Promise<void> {
  const o = JSON.parse(process.argv[2]!) as Options;
  const tenants = Object.keys(o.tokens);
  const pool = generate(o.batch * 64, {
    tenants,
    users: o.users,
    seed: o.seed,
    idPrefix: 'p',
    variants: o.variants,
  });
  const u = new URL(o.url);
  const agent = new Agent({
    keepAlive: true,
    maxSockets: Math.max(o.maxInFlight ?? 0, o.concurrency ?? 0, 1),
  });
  const latencies: number[] = [];
  let requests = 0;
  let accepted = 0;
  let errors = 0;
  let seq = 0;

  const send = () =>
    new Promise<void>((resolve) => {
      const s = seq++;
      const first = (s * o.batch) % pool.length;
      // One request carries events of one tenant (its token): the tenant of the batch's first event.
      const tenant = pool[first]!.tenant;
      const parts: string[] = [];
      for (let j = 0; j < o.batch; j++) {
        const e = pool[(first + j) % pool.length]!;
        parts.push(eventJson({ ...e, tenant }, `${o.idPrefix}-${s}-${j}`));
      }
      const body = `{"events":[${parts.join(',')}]}`;
      const t = performance.now();
      const req = request(
        {
          host: u.hostname,
          port: u.port,
          path: '/v1/events/bulk',
          method: 'POST',
          agent,
          headers: {
            authorization: `Bearer ${o.tokens[tenant]}`,
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            latencies.push(performance.now() - t);
            requests++;
            if (res.statusCode === 202) {
              const j = JSON.parse(Buffer.concat(chunks).toString()) as { accepted: number };
              accepted += j.accepted;
            } else errors++;
            resolve();
          });
        },
      );
      req.on('error', () => {
        errors++;
        resolve();
      });
      req.end(body);
    });

  const start = performance.now();
  if (o.mode === 'rate') {
    const perMs = o.eventsPerS! / o.batch / 1000;
    const end = start + o.durationS! * 1000;
    let inFlight = 0;
    let started = 0;
    const pending = new Set<Promise<void>>();
    while (performance.now() < end) {
      const due = Math.floor((performance.now() - start) * perMs);
      while (started < due && inFlight < (o.maxInFlight ?? 64)) {
        started++;
        inFlight++;
        const p = send().then(() => {
          inFlight--;
          pending.delete(p);
        });
        pending.add(p);
      }
      await new Promise((r) => setTimeout(r, 2));
    }
    await Promise.all(pending);
  } else {
    const target = o.events!;
    let issued = 0;
    await Promise.all(
      Array.from({ length: o.concurrency ?? 16 }, async () => {
        while (issued < target) {
          issued += o.batch;
          await send();
        }
      }),
    );
  }
  const seconds = (performance.now() - start) / 1000;
  process.stdout.write(
    `PACER ${JSON.stringify({
      requests,
      accepted,
      errors,
      seconds,
      eventsPerS: accepted / seconds,
      latencyMs: { p50: percentile(latencies, 50), p99: percentile(latencies, 99) },
    })}\n`,
  );
  agent.destroy();
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`pacer: ${(err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  },
);
