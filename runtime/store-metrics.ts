/**
 * Gauges read from the SQL store when /metrics is scraped (docs/operations.md "Metrics"): what a
 * store holds rather than what this process did, so they survive restarts and agree between
 * processes (aggregate them with max, not sum). Each is one indexed count. A store that does not
 * answer within STORE_READ_TIMEOUT_MS leaves the previous value and logs a warning: /metrics
 * itself still answers.
 */
import { Gauge, type Registry } from 'prom-client';
import type { Sql } from '../adapters/sql/types';
import type { Logger } from '../shared/logger';

const STORE_READ_TIMEOUT_MS = 2000;

interface Deps {
  sql: Sql;
  registry: Registry;
  log: Logger;
}

/** Webhook deliveries waiting for an attempt and dead (every attempt failed; replayable). */
export function registerWebhookQueueGauge(deps: Deps): void {
  storeGauge(deps, {
    name: 'ludus_webhook_deliveries',
    help: 'Webhook deliveries in the store by status: pending (waiting for their next attempt) and dead (every attempt failed, replayable; kept for the retention period)',
    labelNames: ['status'],
    read: async () => {
      // Two partial indexes (migrations 007, 008) make both counts index scans.
      const r = await deps.sql.query<{ pending: string; dead: string }>(
        `SELECT (SELECT count(*) FROM webhook_deliveries WHERE status = 'pending') AS pending,
                (SELECT count(*) FROM webhook_deliveries WHERE status = 'dead') AS dead`,
      );
      const row = r.rows[0]!;
      return [
        [{ status: 'pending' }, Number(row.pending)],
        [{ status: 'dead' }, Number(row.dead)],
      ];
    },
  });
}

/** Dead letters stored per consumer group (the table `ludus dead-letters list` reads). */
export function registerDeadLetterGauge(deps: Deps): void {
  storeGauge(deps, {
    name: 'ludus_dead_letters_stored',
    help: 'Rows in the dead_letters table, by consumer group (docs/operations.md "Dead letters")',
    labelNames: ['group'],
    read: async () => {
      const r = await deps.sql.query<{ group_id: string; n: string }>(
        'SELECT group_id, count(*) AS n FROM dead_letters GROUP BY group_id',
      );
      return r.rows.map((x) => [{ group: x.group_id }, Number(x.n)] as const);
    },
  });
}

function storeGauge(
  deps: Deps,
  spec: {
    name: string;
    help: string;
    labelNames: string[];
    read: () => Promise<ReadonlyArray<readonly [Record<string, string>, number]>>;
  },
): void {
  // One registry per process; a second start of the same role on it (tests) shares the gauge.
  if (deps.registry.getSingleMetric(spec.name)) return;
  const log = deps.log.child({ metric: spec.name });
  new Gauge({
    name: spec.name,
    help: spec.help,
    labelNames: spec.labelNames,
    registers: [deps.registry],
    async collect() {
      let timer: NodeJS.Timeout | undefined;
      try {
        const values = await Promise.race([
          spec.read(),
          new Promise<never>((_, reject) => {
            timer = setTimeout(
              () => reject(new Error(`no answer within ${STORE_READ_TIMEOUT_MS} ms`)),
              STORE_READ_TIMEOUT_MS,
            );
          }),
        ]);
        this.reset();
        for (const [labels, v] of values) this.set(labels, v);
      } catch (err) {
        log.warn({ err: (err as Error).message }, 'store gauge not refreshed; it keeps its last value');
      } finally {
        clearTimeout(timer);
      }
    },
  });
}
