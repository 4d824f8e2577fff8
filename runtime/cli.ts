#!/usr/bin/env node
/**
 * The command-line entry: `npm run ludus -- <command>` (or `npm start` for `serve`).
 * Configuration and start-up failures print one line naming what to fix, never a stack trace.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { Command } from 'commander';
import { migrate } from '../adapters/sql/migrate';
import { systemClock } from '../core/clock';
import { closeAdapters, openAdapters, openSql, StartupError } from './compose';
import { ConfigError, loadConfig, ROLES, type Config } from './config';
import { createLogger } from './logger';
import { Metrics } from './metrics';
import { startRoles } from './roles';

function fail(err: unknown): never {
  if (err instanceof ConfigError || err instanceof StartupError) {
    process.stderr.write(`ludus: ${err.message}\n`);
  } else {
    process.stderr.write(`ludus: unexpected error: ${(err as Error)?.stack ?? String(err)}\n`);
  }
  process.exit(1);
}

function config(overrides: Record<string, string | undefined> = {}): Config {
  return loadConfig({ ...process.env, ...Object.fromEntries(Object.entries(overrides).filter(([, v]) => v)) });
}

async function serve(opts: { roles?: string }): Promise<void> {
  const cfg = config({ LUDUS_ROLES: opts.roles });
  const log = createLogger(cfg.logLevel);
  log.info({ shape: cfg.shape, roles: cfg.roles, data_dir: cfg.shape === 'embedded' ? cfg.dataDir : undefined }, 'starting');
  const adapters = await openAdapters(cfg, log);
  const ctx = { config: cfg, log, metrics: new Metrics(), clock: systemClock, adapters };
  let running;
  try {
    running = await startRoles(ctx);
  } catch (err) {
    await closeAdapters(adapters);
    throw err;
  }
  const urls = Object.fromEntries(running.listening.map((l) => [l.gateway, l.url]));
  log.info({ roles: running.roles, ...urls }, 'ludus is up');

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down: finishing in-flight requests and batches');
    const hard = setTimeout(() => {
      log.error('shutdown timed out; exiting');
      process.exit(1);
    }, cfg.shutdownTimeoutMs + 5000);
    hard.unref();
    await running.stop();
    await closeAdapters(adapters);
    log.info('stopped');
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
}

async function runMigrate(): Promise<void> {
  const cfg = config();
  const sql = await openSql(cfg);
  try {
    const applied = await migrate(sql);
    process.stdout.write(applied.length ? `applied: ${applied.join(', ')}\n` : 'schema is up to date\n');
  } finally {
    await sql.close();
  }
}

function runStack(args: string[]): void {
  const script = join(__dirname, '..', 'ops', 'stack');
  const r = spawnSync('bash', [script, ...args], { stdio: 'inherit' });
  process.exit(r.status ?? 1);
}

const program = new Command();
program
  .name('ludus')
  .description('Ludus gamification back end')
  .showHelpAfterError()
  .configureOutput({ writeErr: (s) => process.stderr.write(s) });

program
  .command('serve')
  .description('Run the service. Without configuration: every role in one process on the embedded adapters.')
  .option('--roles <roles>', `comma-separated subset of: all, ${ROLES.join(', ')} (overrides LUDUS_ROLES)`)
  .action((opts) => serve(opts).catch(fail));

program
  .command('migrate')
  .description('Apply pending SQL migrations to the configured store (also done at start-up)')
  .action(() => runMigrate().catch(fail));

program
  .command('stack')
  .description('Provision and run the real stack without Docker (delegates to ops/stack): up | down | status | env | logs')
  .allowUnknownOption()
  .helpOption(false)
  .argument('[args...]', 'arguments for ops/stack')
  .action((args: string[]) => runStack(args));

program.parseAsync(process.argv).catch(fail);
