import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * The process's Prometheus metrics. One registry per process (or per test app), passed down
 * explicitly: no module registers into a global.
 */
export class Metrics {
  readonly registry = new Registry();
  readonly httpRequests: Counter<'gateway' | 'method' | 'route' | 'status'>;
  readonly httpDuration: Histogram<'gateway' | 'method' | 'route'>;
  readonly consumerRecords: Counter<'group' | 'topic' | 'outcome'>;
  readonly consumerBatchSeconds: Histogram<'group' | 'topic'>;
  readonly consumerLag: Gauge<'group' | 'topic' | 'partition'>;
  readonly deadLetters: Counter<'group' | 'reason_class'>;
  readonly skippedRows: Counter<'stage' | 'reason_class'>;
  readonly schedulerJobFailures: Counter<'job'>;
  readonly schedulerJobBackoff: Gauge<'job'>;
  readonly schedulerItemFailures: Counter<'job'>;

  constructor(withDefaults = true) {
    if (withDefaults) collectDefaultMetrics({ register: this.registry, prefix: 'ludus_' });
    const registers = [this.registry];
    this.httpRequests = new Counter({
      name: 'ludus_http_requests_total',
      help: 'HTTP requests answered, by gateway, route and status',
      labelNames: ['gateway', 'method', 'route', 'status'],
      registers,
    });
    this.httpDuration = new Histogram({
      name: 'ludus_http_request_duration_seconds',
      help: 'HTTP request latency',
      labelNames: ['gateway', 'method', 'route'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers,
    });
    this.consumerRecords = new Counter({
      name: 'ludus_consumer_records_total',
      help: 'Records handled by consumers, by outcome (ok, skip, dead_letter)',
      labelNames: ['group', 'topic', 'outcome'],
      registers,
    });
    this.consumerBatchSeconds = new Histogram({
      name: 'ludus_consumer_batch_seconds',
      help: 'Time to apply one batch',
      labelNames: ['group', 'topic'],
      buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5],
      registers,
    });
    this.consumerLag = new Gauge({
      name: 'ludus_consumer_lag_records',
      help: 'End offset minus stored offset, per partition',
      labelNames: ['group', 'topic', 'partition'],
      registers,
    });
    this.deadLetters = new Counter({
      name: 'ludus_dead_letters_total',
      help: 'Records written to the dead_letters table, by consumer group and reason class (docs/operations.md "Dead letters")',
      labelNames: ['group', 'reason_class'],
      registers,
    });
    this.skippedRows = new Counter({
      name: 'ludus_skipped_rows_total',
      help: 'Rows a derived store (rank index, analytics) refused and that were skipped, by stage and reason class',
      labelNames: ['stage', 'reason_class'],
      registers,
    });
    this.schedulerJobFailures = new Counter({
      name: 'ludus_scheduler_job_failures_total',
      help: 'Scheduler job runs that failed as a whole',
      labelNames: ['job'],
      registers,
    });
    this.schedulerJobBackoff = new Gauge({
      name: 'ludus_scheduler_job_backoff_seconds',
      help: 'How long a failing scheduler job waits before its next run (0 when healthy)',
      labelNames: ['job'],
      registers,
    });
    this.schedulerItemFailures = new Counter({
      name: 'ludus_scheduler_item_failures_total',
      help: 'Items a scheduler job failed on and skipped (retried later with backoff), by job',
      labelNames: ['job'],
      registers,
    });
  }
}
