import { buildGateway } from './gateways';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { closeServer, listen, type Gateway, type GatewayName, type ListenerName } from '../http/gateway';
import { attachLiveLeaderboards, LIVE_DEFAULTS } from '../api/leaderboards/live';
import { LeaderboardQueries } from '../core/leaderboards/queries';
import { allRoutes } from './routes';
import { startAnalyticsSink } from '../processors/analytics-sink/sink';
import { startLedgerExport } from '../processors/analytics-sink/ledger-export';
import { Scheduler } from '../scheduler/scheduler';
import { closeWindowsJob, purgeDedupeJob } from '../scheduler/jobs';
import { expireOrdersJob } from '../scheduler/store';
import { FulfilmentWorker } from '../dispatcher/fulfilment';
import { streakDeadlinesJob } from '../scheduler/streaks';
import { achievementBackfillJob } from '../scheduler/achievements';
import { Dispatcher } from '../dispatcher/dispatcher';
import { webhookRetentionJob } from '../dispatcher/retention';
import { startProcessor } from '../processors/framework';
import { pipelineProcessor } from '../processors/pipeline/pipeline';
import { warmUp } from '../processors/warm-up';
import { warmUpIngest } from '../ingest/warm-up';
import { openWarmUpEventLog } from './compose';
import { EVENTS_TOPIC } from '../schemas/topics';
import type { Role } from './config';
import { closingDeps, type AppContext } from './context';
import { buildOpsListener } from './ops';
import { registerDeadLetterGauge, registerWebhookQueueGauge } from './store-metrics';

export interface Listening {
  /** A gateway, or `ops`: the operations listener (runtime/ops.ts). */
  gateway: ListenerName;
  server: Server;
  url: string;
}

export interface RunningRoles {
  roles: Role[];
  listening: Listening[];
  /** Graceful stop: HTTP first (finish requests), then consumers (finish in-flight batches), then jobs. */
  stop(): Promise<void>;
}

/** Builds the three gateways (without listening); tests use this too. */
export function buildGateways(ctx: AppContext): Record<GatewayName, Gateway> {
  const routes = allRoutes(ctx);
  return {
    ingest: buildGateway('ingest', ctx, routes),
    admin: buildGateway('admin', ctx, routes),
    query: buildGateway('query', ctx, routes),
  };
}

/** The event pipeline on an opened context's adapters and services; tests use this too. */
export function buildPipeline(ctx: AppContext) {
  return pipelineProcessor({
    ...ctx.adapters,
    wallet: ctx.services.wallet,
    facts: ctx.services.facts,
    granter: ctx.services.granter,
    clock: ctx.clock,
    log: ctx.log,
    metrics: ctx.metrics,
    achievements: ctx.services.achievements,
  });
}

/** Starts the configured roles on an opened context. */
export async function startRoles(ctx: AppContext, roles: Role[] = ctx.config.roles): Promise<RunningRoles> {
  const { config, log } = ctx;
  const listening: Listening[] = [];
  const consumers: Array<{ stop(): Promise<void> }> = [];
  const schedulers: Scheduler[] = [];
  const closers: Array<() => Promise<void>> = [];
  const stop = async () => {
    for (const c of closers) await c();
    await Promise.all(listening.map((l) => closeServer(l.server, config.shutdownTimeoutMs)));
    await Promise.all(consumers.map((c) => c.stop()));
    await Promise.all(schedulers.map((s) => s.stop()));
  };

  try {
    // The pipeline warms up before anything listens or consumes: load that arrives finds it warm.
    const pipeline = roles.includes('processors') ? buildPipeline(ctx) : null;
    if (pipeline)
      await warmUp({ sql: ctx.adapters.sql, log }, pipeline, {
        budgetMs: config.pipelineWarmUpMs,
        transactions: config.pipelineTransactions || 1,
      });
    const gateways = buildGateways(ctx);
    const serve = async (name: ListenerName, port: number) => {
      const app = name === 'ops' ? buildOpsListener(ctx, roles) : gateways[name];
      const server = await listen(app, config.host, port, config.http, log);
      const { port: bound } = server.address() as AddressInfo;
      const host = config.host === '0.0.0.0' ? '127.0.0.1' : config.host;
      listening.push({ gateway: name, server, url: `http://${host}:${bound}` });
    };
    if (roles.includes('ingest')) {
      await ctx.adapters.eventLog.ensureTopic(EVENTS_TOPIC);
      // Like the pipeline's: the gateway warms up before it listens (a readiness probe waits).
      await warmUpIngestGateway(ctx);
      await serve('ingest', config.ports.ingest);
    }
    if (roles.includes('api')) {
      await serve('admin', config.ports.admin);
      await serve('query', config.ports.query);
      const queries = new LeaderboardQueries({
        sql: ctx.adapters.sql,
        ranks: ctx.adapters.ranks,
        clock: ctx.clock,
        cache: ctx.services.leaderboards,
      });
      const live = attachLiveLeaderboards(
        listening.find((l) => l.gateway === 'query')!.server,
        {
          sql: ctx.adapters.sql,
          queries,
          auth: ctx.services.auth,
          log,
          clock: ctx.clock,
          rateLimiter: ctx.services.rateLimiter,
          rateLimit: config.rateLimits.query,
          registry: ctx.metrics.registry,
        },
        { ...LIVE_DEFAULTS, ...config.live },
      );
      closers.push(async () => live.close());
    }
    const gauges = { sql: ctx.adapters.sql, registry: ctx.metrics.registry, log };
    if (roles.includes('processors') || roles.includes('analytics')) registerDeadLetterGauge(gauges);
    if (roles.includes('dispatcher')) registerWebhookQueueGauge(gauges);
    if (config.opsPort !== null) await serve('ops', config.opsPort);
    if (pipeline) {
      consumers.push(
        await startProcessor({ ...ctx.adapters, log, metrics: ctx.metrics }, pipeline, {
          transactions: config.pipelineTransactions || undefined,
          maxRoundRecords: config.pipelineRoundRecords,
          gatherMs: config.pipelineGatherMs,
          maxRoundMs: config.pipelineRoundMs,
        }),
      );
    }
    if (roles.includes('analytics')) {
      consumers.push(await startAnalyticsSink({ ...ctx.adapters, log, metrics: ctx.metrics }));
      consumers.push(startLedgerExport({ ...ctx.adapters, log, metrics: ctx.metrics }));
    }
    if (roles.includes('scheduler')) {
      const closing = { ...closingDeps(ctx), log };
      const scheduler = new Scheduler(
        { sql: ctx.adapters.sql, clock: ctx.clock, log, metrics: ctx.metrics },
        [
          closeWindowsJob(closing),
          purgeDedupeJob(closing, config.dedupeWindowMs),
          webhookRetentionJob({ sql: ctx.adapters.sql, log }, config.webhooks.retentionMs),
          expireOrdersJob({ sql: ctx.adapters.sql, store: ctx.services.store, log }),
          streakDeadlinesJob({
            sql: ctx.adapters.sql,
            facts: ctx.services.facts,
            granter: ctx.services.granter,
            log,
          }),
          achievementBackfillJob({ backfills: ctx.services.backfills, log }),
        ],
        config.schedulerIntervalMs,
      );
      scheduler.start();
      schedulers.push(scheduler);
    }
    if (roles.includes('dispatcher')) {
      const dispatcher = new Dispatcher(
        {
          sql: ctx.adapters.sql,
          clock: ctx.clock,
          log,
          store: ctx.services.webhooks,
          metrics: ctx.metrics,
          version: ctx.version,
        },
        config.webhooks,
      );
      dispatcher.start();
      consumers.push(dispatcher);
      const fulfilment = new FulfilmentWorker(
        {
          sql: ctx.adapters.sql,
          clock: ctx.clock,
          log,
          orders: ctx.services.orders,
          fulfiller: ctx.services.fulfiller,
          tenants: ctx.services.tenants,
          version: ctx.version,
        },
        config.webhooks,
      );
      fulfilment.start();
      consumers.push(fulfilment);
    }
  } catch (err) {
    await stop().catch(() => undefined);
    throw err;
  }
  for (const l of listening) log.info({ gateway: l.gateway, url: l.url }, 'listening');
  return { roles, listening, stop };
}

/**
 * The ingest gateway's warm-up (ingest/warm-up.ts) on the log the composition root picks for it
 * (`openWarmUpEventLog`), which is disposed of afterwards. An optimisation, never a gate: a warm-up
 * log that cannot be opened or removed is a warning, and the gateway starts as it is.
 */
async function warmUpIngestGateway(ctx: AppContext): Promise<void> {
  const { config, log } = ctx;
  if (config.ingestWarmUpMs <= 0) return;
  const skipped = (what: string) => (err: unknown) => {
    log.warn({ err: err instanceof Error ? err.message : String(err) }, `ingest warm-up: ${what}`);
    return null;
  };
  const scratch = await openWarmUpEventLog(config, ctx.adapters, log).catch(
    skipped('its event log could not be opened; the gateway starts cold'),
  );
  if (!scratch) return;
  try {
    await warmUpIngest(
      { eventLog: scratch.eventLog, log, now: () => ctx.clock.now() },
      { budgetMs: config.ingestWarmUpMs },
    );
  } finally {
    await scratch.dispose().catch(skipped('its scratch log could not be removed'));
  }
}
