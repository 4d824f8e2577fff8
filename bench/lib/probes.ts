/**
 * Acceptance-to-visible-rank latency: probe events with known ids for users never seen before,
 * sent one at a time through the ingestion gateway while a steady load runs; each probe's clock
 * starts when the gateway answers 202 (accepted) and stops when the user is visible in the rank
 * index (`isVisible`, one batched check of the outstanding probes that are due). A probe is due
 * every `pollMs` while it is young, then every tenth of its age: the reading is at most 10 % (or
 * `pollMs`) late, never early, and the checks do not grow with the backlog they measure (in the
 * embedded shape each check is a request to the measured process itself: polling 20 slow probes
 * every 10 ms was 2,000 requests a second on the pipeline's thread).
 */
import { percentile, sleep } from './util';

export interface ProbeResult {
  sent: number;
  visible: number;
  lost: number;
  p50: number;
  p99: number;
  max: number;
  /**
   * p99 of the probes accepted after the first WARM_UP_S seconds of the run: the same load without
   * the start of the service under it (not a target, which counts the warm-up; it tells the two
   * apart). NaN when the run is too short to have such probes.
   */
  p99AfterWarmUp: number;
  samples: number[];
}

/** Seconds after the first probe that `p99AfterWarmUp` leaves out. */
export const WARM_UP_S = 5;

export async function runProbes(o: {
  ingestUrl: string;
  token: string;
  tag: string;
  perS: number;
  durationS: number;
  /** Which of these users are visible now (one batched check). */
  isVisible: (users: string[]) => Promise<boolean[]>;
  pollMs: number;
  /** How long to wait for the last probes after the load ends. */
  drainMs: number;
}): Promise<ProbeResult> {
  /** Accepted probes not yet visible: when accepted, and when to check again. */
  const outstanding = new Map<string, { accepted: number; due: number }>();
  const samples: number[] = [];
  const afterWarmUp: number[] = [];
  let sent = 0;
  let sending = true;
  const start = performance.now();
  const poller = (async () => {
    while (sending || outstanding.size > 0) {
      const checkedAt = performance.now();
      const users = [...outstanding].filter(([, x]) => x.due <= checkedAt).map(([u]) => u);
      if (users.length > 0) {
        const seen = await o.isVisible(users).catch(() => users.map(() => false));
        const now = performance.now();
        users.forEach((u, i) => {
          const { accepted } = outstanding.get(u)!;
          if (seen[i]) {
            samples.push(now - accepted);
            if (accepted - start >= WARM_UP_S * 1000) afterWarmUp.push(now - accepted);
            outstanding.delete(u);
          } else {
            outstanding.set(u, { accepted, due: now + Math.max(o.pollMs, (now - accepted) / 10) });
          }
        });
      }
      await sleep(o.pollMs);
    }
  })();
  const gap = 1000 / o.perS;
  for (let i = 0; performance.now() - start < o.durationS * 1000; i++) {
    const due = start + i * gap;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    const user = `probe_${o.tag}_${i}`;
    const r = await fetch(`${o.ingestUrl}/v1/events`, {
      method: 'POST',
      headers: { authorization: `Bearer ${o.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        event_id: `${o.tag}-probe-${i}`,
        type: 'match_finished',
        actor: { user_id: user },
        occurred_at: new Date().toISOString(),
        attrs: { mode: 'casual', kills: 1, assists: 0, region: 'eu', variant: 0 },
      }),
    });
    await r.arrayBuffer();
    if (r.status === 202) {
      const accepted = performance.now();
      outstanding.set(user, { accepted, due: accepted });
      sent++;
    }
  }
  const deadline = Date.now() + o.drainMs;
  while (outstanding.size > 0 && Date.now() < deadline) await sleep(50);
  const lost = outstanding.size;
  outstanding.clear();
  sending = false;
  await poller;
  return {
    sent,
    visible: samples.length,
    lost,
    p50: percentile(samples, 50),
    p99: percentile(samples, 99),
    max: samples.length ? Math.max(...samples) : NaN,
    p99AfterWarmUp: afterWarmUp.length ? percentile(afterWarmUp, 99) : NaN,
    samples: samples.map((x) => Math.round(x * 10) / 10),
  };
}
