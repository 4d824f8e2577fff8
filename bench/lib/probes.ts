/**
 * Acceptance-to-visible-rank latency: probe events with known ids for users never seen before,
 * sent one at a time through the ingestion gateway while a steady load runs; each probe's clock
 * starts when the gateway answers 202 (accepted) and stops when the user is visible in the rank
 * index (`isVisible`, polled every few milliseconds for every outstanding probe at once).
 */
import { percentile, sleep } from './util';

export interface ProbeResult {
  sent: number;
  visible: number;
  lost: number;
  p50: number;
  p99: number;
  max: number;
  samples: number[];
}

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
  const outstanding = new Map<string, number>();
  const samples: number[] = [];
  let sent = 0;
  let sending = true;
  const poller = (async () => {
    while (sending || outstanding.size > 0) {
      if (outstanding.size > 0) {
        const users = [...outstanding.keys()];
        const seen = await o.isVisible(users).catch(() => users.map(() => false));
        const now = performance.now();
        users.forEach((u, i) => {
          if (seen[i]) {
            samples.push(now - outstanding.get(u)!);
            outstanding.delete(u);
          }
        });
      }
      await sleep(o.pollMs);
    }
  })();
  const start = performance.now();
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
      outstanding.set(user, performance.now());
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
    samples: samples.map((x) => Math.round(x * 10) / 10),
  };
}
