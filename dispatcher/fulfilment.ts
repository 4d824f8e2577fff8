/**
 * The dispatcher's second job: automatic fulfilment of orders (core/store/fulfilment.ts). Every
 * `pollMs` it leases due orders (api calls, and wallet orders a grant left to it) and runs them,
 * up to `concurrency` at a time. The api call goes through the webhook sender (the same address
 * rules, timeout and no redirects) and is signed like a webhook with the tenant's hmac_secret.
 * A lease outlives one call; a dispatcher killed mid-call leaves it to expire, and the order is
 * called again with the same Idempotency-Key (at least once, docs/store.md).
 */
import { randomUUID } from 'node:crypto';
import type { Sql } from '../adapters/sql/types';
import type { Clock } from '../core/clock';
import { leaseDue, runDue, type Fulfiller } from '../core/store/fulfilment';
import type { OrderStore } from '../core/store/orders';
import type { TenantStore } from '../core/tenancy/store';
import { WebhookSender } from '../core/webhooks/sender';
import type { Logger } from '../shared/logger';
import type { WebhookConfig } from '../shared/settings';

export interface FulfilmentDeps {
  sql: Sql;
  clock: Clock;
  log: Logger;
  orders: OrderStore;
  fulfiller: Fulfiller;
  tenants: TenantStore;
  version: string;
}

export class FulfilmentWorker {
  readonly id = randomUUID();
  private readonly sender: WebhookSender;
  private readonly log: Logger;
  private timer: NodeJS.Timeout | null = null;
  private ticking: Promise<void> | null = null;
  private stopped = true;

  constructor(
    private readonly deps: FulfilmentDeps,
    private readonly cfg: WebhookConfig,
  ) {
    this.log = deps.log.child({ component: 'fulfilment', worker: this.id });
    this.sender = new WebhookSender({
      allowPrivate: cfg.allowPrivate,
      timeoutMs: cfg.timeoutMs,
      userAgent: `Ludus-Fulfilment/${deps.version}`,
      // A connection per call: a kept-alive agent queues calls behind its few sockets, and a call
      // waiting there would time out (and be repeated) while the endpoint is merely busy.
      keepAlive: false,
    });
  }

  /** A lease outlasts one call (its timeout) with room to record the result. */
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
        .then(() => undefined)
        .catch((err) => this.log.error({ err }, 'fulfilment tick failed; it runs again'))
        .finally(() => {
          this.ticking = null;
          this.schedule(this.cfg.pollMs);
        });
    }, ms);
  }

  /** Leases due orders and runs them (at most `concurrency` at once); returns how many ran. */
  async tick(): Promise<number> {
    const due = await leaseDue(
      this.deps.sql,
      this.id,
      this.deps.clock.now(),
      this.leaseMs,
      this.cfg.concurrency,
    );
    const callDeps = {
      sql: this.deps.sql,
      orders: this.deps.orders,
      fulfiller: this.deps.fulfiller,
      sender: this.sender,
      secret: async (tenantId: string) =>
        (await this.deps.tenants.getTenantSecrets(tenantId))?.hmacSecret ?? null,
      now: () => this.deps.clock.now(),
    };
    await Promise.all(
      due.map(async (o) => {
        try {
          const outcome = await runDue(callDeps, this.id, o);
          this.log.debug({ tenant_id: o.tenant_id, order_id: o.id, outcome }, 'order fulfilment attempt');
        } catch (err) {
          this.log.error(
            { err, tenant_id: o.tenant_id, order_id: o.id },
            'order fulfilment failed; retried after its lease',
          );
        }
      }),
    );
    return due.length;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.ticking) await this.ticking;
    this.sender.close();
  }
}
