/**
 * Gauges read from the SQL store when /metrics is scraped (docs/operations.md "Metrics"): what a
 * store holds rather than what this process did, so they survive restarts and agree between
 * processes (aggregate them with max, not sum). Each is one indexed count.
 *
 * A scrape never waits long for the store: it starts a read (unless one is still running) and
 * waits for it at most SCRAPE_WAIT_MS; a slower read finishes in the background and its values are
 * shown from the next scrape on. Meanwhile the gauge keeps the last values read. So during a
 * pipeline drain, when the store's session is busy with the pipeline's transactions, /metrics
 * still answers at once (issue 19). A read that fails logs a warning and changes nothing.
 */
import { Gauge, type Registry } from 'prom-client';
import type { Sql } from '../adapters/sql/types';
import type { Logger } from '../shared/logger';

const SCRAPE_WAIT_MS = 20;

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
  type Values = Awaited<ReturnType<typeof spec.read>>;
  let latest: Values | null = null;
  let reading: Promise<void> | null = null;
  new Gauge({
    name: spec.name,
    help: spec.help,
    labelNames: spec.labelNames,
    registers: [deps.registry],
    async collect() {
      reading ??= spec
        .read()
        .then(
          (values) => void (latest = values),
          (err: unknown) =>
            log.warn({ err: (err as Error).message }, 'store gauge not refreshed; it keeps its last value'),
        )
        .finally(() => (reading = null));
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([reading, new Promise((r) => (timer = setTimeout(r, SCRAPE_WAIT_MS)))]);
      clearTimeout(timer);
      if (!latest) return;
      this.reset();
      for (const [labels, v] of latest) this.set(labels, v);
    },
  });
}
