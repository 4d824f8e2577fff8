/**
 * The dispatcher role: delivers webhooks from the outbox (docs/webhooks.md).
 *
 * Every `pollMs` it (1) fans new outbox rows out into deliveries, and (2) leases endpoints with
 * due deliveries, up to `concurrency` at a time. Each leased endpoint gets its own worker that
 * sends its due deliveries one at a time in order, records every attempt, renews the lease, and
 * gives the endpoint back when nothing is due (or after a fair share). So one endpoint's failures
 * and timeouts never hold up another's, and deliveries to one endpoint go out in order unless a
 * retry reorders them.
 *
 * At least once: a delivery is marked done only after the receiver answered 2xx, in a transaction
 * after the request. A dispatcher killed mid-request leaves its leases to expire; another instance
 * (or the restarted one) then sends the same delivery again, with the same id.
 */
import { randomUUID } from 'node:crypto';
import { Counter, Histogram } from 'prom-client';
import type { Sql } from '../adapters/sql/types';
import type { Clock } from '../core/clock';
import {
  claimEndpoints,
  dueDeliveries,
  fanOut,
  recordAttempt,
  releaseEndpoint,
  type AttemptResult,
} from '../core/webhooks/queue';
import { signatureHeaders } from '../core/webhooks/signing';
import type { DeliveryRow, WebhookRow, WebhookStore } from '../core/webhooks/store';
import type { WebhookConfig } from '../shared/settings';
import type { Logger } from '../shared/logger';
import type { Metrics } from '../shared/metrics';
import { deliveryHeaders, WebhookSender } from '../core/webhooks/sender';

export interface DispatcherDeps {
  sql: Sql;
  clock: Clock;
  log: Logger;
  store: WebhookStore;
  metrics?: Metrics;
  /** Product version, for the User-Agent header. */
  version: string;
}

/** Attempts one worker makes before it gives its endpoint back (fairness between endpoints). */
const FAIR_SHARE = 50;
/** After an endpoint's secret cannot be read (a misconfigured instance), leave it for this long. */
const SKIP_MS = 60_000;

export class Dispatcher {
  readonly id = randomUUID();
  private readonly sender: WebhookSender;
  private readonly log: Logger;
  private readonly workers = new Map<string, Promise<void>>();
  private readonly skipUntil = new Map<string, number>();
  private timer: NodeJS.Timeout | null = null;
  private ticking: Promise<void> | null = null;
  private stopped = true;
  private readonly attempts?: Counter<'outcome'>;
  private readonly seconds?: Histogram<string>;

  constructor(
    private readonly deps: DispatcherDeps,
    private readonly cfg: WebhookConfig,
  ) {
    this.log = deps.log.child({ component: 'dispatcher', dispatcher: this.id });
    this.sender = new WebhookSender({
      allowPrivate: cfg.allowPrivate,
      timeoutMs: cfg.timeoutMs,
      userAgent: `Ludus-Webhooks/${deps.version}`,
      keepAlive: true,
    });
    if (deps.metrics) {
      const registry = deps.metrics.registry;
      const registers = [registry];
      // One registry per process; a second dispatcher on it (tests) shares the metrics.
      this.attempts =
        (registry.getSingleMetric('ludus_webhook_attempts_total') as Counter<'outcome'> | undefined) ??
        new Counter({
          name: 'ludus_webhook_attempts_total',
          help: 'Webhook delivery attempts, by outcome (succeeded, retry, dead, failed)',
          labelNames: ['outcome'],
          registers,
        });
      this.seconds =
        (registry.getSingleMetric('ludus_webhook_attempt_seconds') as Histogram<string> | undefined) ??
        new Histogram({
          name: 'ludus_webhook_attempt_seconds',
          help: 'Duration of webhook delivery attempts',
          buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
          registers,
        });
    }
  }

  /** How long an endpoint lease lasts; renewed after every attempt, so > one attempt. */
  get leaseMs(): number {
    return 2 * this.cfg.timeoutMs + 5000;
  }

  start(): void {
    this.stopped = false;
    this.schedule(0);
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.ticking = this.tick()
        .catch((err) => this.log.error({ err }, 'dispatcher tick failed; it runs again'))
        .finally(() => {
          this.ticking = null;
          this.schedule(this.cfg.pollMs);
        });
    }, ms);
  }

  /** One round: fan out new outbox rows, then lease endpoints for free workers. */
  async tick(): Promise<void> {
    for (let i = 0; i < 10 && !this.stopped; i++) {
      const r = await fanOut(this.deps.sql, this.deps.clock.now());
      if (r.events === 0) break;
      this.log.debug({ events: r.events, deliveries: r.deliveries }, 'outbox fanned out');
    }
    const free = this.cfg.concurrency - this.workers.size;
    if (this.stopped || free <= 0) return;
    const now = this.deps.clock.now();
    for (const [id, until] of this.skipUntil) if (until <= now) this.skipUntil.delete(id);
    const ids = await claimEndpoints(this.deps.sql, this.id, now, this.leaseMs, free, [
      ...this.workers.keys(),
      ...this.skipUntil.keys(),
    ]);
    for (const id of ids) {
      const w = this.work(id).finally(() => this.workers.delete(id));
      this.workers.set(id, w);
    }
  }

  /** Delivers an endpoint's due deliveries in order, then gives the lease back. */
  private async work(webhookId: string): Promise<void> {
    let budget = FAIR_SHARE;
    try {
      while (!this.stopped && budget > 0) {
        const endpoint = await this.deps.store.byId(webhookId);
        if (!endpoint || !endpoint.active) return;
        const due = await dueDeliveries(
          this.deps.sql,
          webhookId,
          this.deps.clock.now(),
          Math.min(10, budget),
        );
        if (due.length === 0) return;
        for (const d of due) {
          if (this.stopped) return;
          budget--;
          const r = await this.attempt(endpoint, d);
          if (!r.leaseHeld) {
            this.log.warn({ webhook_id: webhookId }, 'endpoint lease lost; another instance took over');
            return;
          }
          if (r.disabledReason) {
            this.log.warn({ webhook_id: webhookId, reason: r.disabledReason }, 'webhook endpoint disabled');
            return;
          }
        }
      }
    } catch (err) {
      this.log.error({ err, webhook_id: webhookId }, 'webhook worker failed; the endpoint is retried later');
      this.skipUntil.set(webhookId, this.deps.clock.now() + Math.min(SKIP_MS, this.leaseMs));
    } finally {
      await releaseEndpoint(this.deps.sql, webhookId, this.id, this.deps.clock.now()).catch(() => undefined);
    }
  }

  private async attempt(endpoint: WebhookRow, d: DeliveryRow) {
    const startedAt = this.deps.clock.now();
    const secrets = this.deps.store.signingSecrets(endpoint, startedAt);
    const headers = {
      ...signatureHeaders(secrets, d.id, startedAt / 1000, d.body),
      ...deliveryHeaders(d.event_type, d.attempts + 1),
    };
    const result: AttemptResult = await this.sender.send(endpoint.url, headers, d.body);
    const rec = await recordAttempt(this.deps.sql, d, result, startedAt, this.deps.clock.now(), {
      scheduleMs: this.cfg.retryScheduleMs,
      disableAfterMs: this.cfg.disableAfterMs,
      lease: { owner: this.id, ms: this.leaseMs },
    });
    this.attempts?.inc({ outcome: rec.status === 'pending' ? 'retry' : rec.status });
    this.seconds?.observe(result.durationMs / 1000);
    this.log.debug(
      {
        webhook_id: d.webhook_id,
        delivery_id: d.id,
        event_type: d.event_type,
        status_code: result.statusCode,
        error: result.error,
        status: rec.status,
      },
      'webhook attempt',
    );
    return rec;
  }

  /** Stops polling, lets each worker finish its current attempt, gives leases back. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.ticking) await this.ticking;
    await Promise.all([...this.workers.values()]);
    this.sender.close();
  }
}
