#!/usr/bin/env node
/**
 * The command-line entry: `npm run ludus -- <command>` (or `npm start` for `serve`).
 * Configuration and start-up failures print one line naming what to fix, never a stack trace.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { Command } from 'commander';
import { migrate } from '../adapters/sql/migrate';
import { ALL_SCOPES, FEATURES } from '../api/auth/scopes';
import { systemClock } from '../core/clock';
import { SecretBox } from '../core/tenancy/secrets';
import { TenancyError, TenantStore } from '../core/tenancy/store';
import { openApp } from './app';
import { localSecrets } from './secrets-files';
import { openSql, StartupError } from './compose';
import { welcome } from './welcome';
import { ConfigError, loadConfig, ROLES, type Config } from './config';
import { createLogger } from './logger';
import { startRoles } from './roles';

function fail(err: unknown): never {
  if (err instanceof ConfigError || err instanceof StartupError) {
    process.stderr.write(`ludus: ${err.message}\n`);
  } else if (err instanceof TenancyError) {
    process.stderr.write(`ludus: ${err.message}\n`);
  } else {
    process.stderr.write(`ludus: unexpected error: ${(err as Error)?.stack ?? String(err)}\n`);
  }
  process.exit(1);
}

function config(overrides: Record<string, string | undefined> = {}): Config {
  return loadConfig({
    ...process.env,
    ...Object.fromEntries(Object.entries(overrides).filter(([, v]) => v)),
  });
}

async function serve(opts: { roles?: string }): Promise<void> {
  const cfg = config({ LUDUS_ROLES: opts.roles });
  const log = createLogger(cfg.logLevel);
  log.info(
    { shape: cfg.shape, roles: cfg.roles, data_dir: cfg.shape === 'embedded' ? cfg.dataDir : undefined },
    'starting',
  );
  const app = await openApp(cfg, log);
  let running;
  try {
    running = await startRoles(app.ctx);
  } catch (err) {
    await app.close();
    throw err;
  }
  await welcome(app, running);
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
    await app.close();
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

/** Runs fn with a tenant store on the configured SQL store (migrated), then closes it. */
async function withTenantStore<T>(fn: (store: TenantStore) => Promise<T>): Promise<T> {
  const cfg = config();
  const keys = localSecrets(cfg.dataDir, cfg, false);
  const sql = await openSql(cfg);
  try {
    await migrate(sql);
    return await fn(new TenantStore(sql, new SecretBox(keys.secretKey), systemClock));
  } finally {
    await sql.close();
  }
}

/** Prints JSON with --json, else a short human table. */
function print(json: boolean, value: unknown, human: () => string): void {
  process.stdout.write(json ? `${JSON.stringify(value, null, 2)}\n` : `${human()}\n`);
}

function table(rows: Array<Record<string, unknown>>, cols: string[]): string {
  if (rows.length === 0) return '(none)';
  const cell = (v: unknown) =>
    Array.isArray(v) ? v.join(',') : v === null || v === undefined ? '-' : String(v);
  const widths = cols.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
  const line = (vals: string[]) =>
    vals
      .map((v, i) => v.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  return [line(cols.map((c) => c.toUpperCase())), ...rows.map((r) => line(cols.map((c) => cell(r[c]))))].join(
    '\n',
  );
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
  .description(
    'Provision and run the real stack without Docker (delegates to ops/stack): up | down | status | env | logs',
  )
  .allowUnknownOption()
  .helpOption(false)
  .argument('[args...]', 'arguments for ops/stack')
  .action((args: string[]) => runStack(args));

const tenants = program.command('tenants').description('Manage tenants in the configured store');
tenants
  .command('create <name>')
  .description('Create a tenant and print its secrets (shown once)')
  .option('--id <id>', 'readable id (lowercase letters, digits, _ and -); a UUID when omitted')
  .option('--json', 'print JSON')
  .action((name: string, opts: { id?: string; json?: boolean }) =>
    withTenantStore(async (store) => {
      if (opts.id !== undefined && !/^[a-z0-9][a-z0-9_-]{1,62}$/.test(opts.id)) {
        throw new ConfigError('--id', 'must be 2 to 63 lowercase letters, digits, _ or -');
      }
      const s = await store.createTenant({ name, id: opts.id });
      const out = { ...s.tenant, jwt_secret: s.jwtSecret, hmac_secret: s.hmacSecret };
      print(
        !!opts.json,
        out,
        () =>
          `tenant ${out.id} (${out.name}) created\n  jwt_secret:  ${out.jwt_secret}\n  hmac_secret: ${out.hmac_secret}`,
      );
    }).catch(fail),
  );
tenants
  .command('list')
  .description('List tenants')
  .option('--json', 'print JSON')
  .action((opts: { json?: boolean }) =>
    withTenantStore(async (store) => {
      const list = await store.listTenants();
      print(!!opts.json, list, () => table(list as never, ['id', 'name', 'status', 'created_at']));
    }).catch(fail),
  );
for (const [verb, status] of [
  ['suspend', 'suspended'],
  ['activate', 'active'],
] as const) {
  tenants
    .command(`${verb} <tenant_id>`)
    .description(`Set a tenant's status to ${status}`)
    .option('--json', 'print JSON')
    .action((id: string, opts: { json?: boolean }) =>
      withTenantStore(async (store) => {
        const t = await store.updateTenant(id, { status });
        if (!t) throw new ConfigError('tenant_id', `tenant ${id} not found`);
        print(!!opts.json, t, () => `tenant ${t.id} is ${t.status}`);
      }).catch(fail),
    );
}

const keys = program.command('keys').description('Manage API keys in the configured store');
keys
  .command('create')
  .description('Create an API key and print it (shown once)')
  .requiredOption('--name <name>', 'a name to tell keys apart')
  .requiredOption('--tenants <ids>', 'comma-separated tenant ids, or *')
  .option(
    '--scopes <scopes>',
    `comma-separated scopes (${FEATURES.join(', ')} with :read, :write or :*), or *`,
    '*',
  )
  .option('--json', 'print JSON')
  .action((opts: { name: string; tenants: string; scopes: string; json?: boolean }) =>
    withTenantStore(async (store) => {
      const tenant_ids = opts.tenants
        .split(',')
        .map((x) => x.trim())
        .filter(Boolean);
      const scopes = opts.scopes
        .split(',')
        .map((x) => x.trim())
        .filter(Boolean);
      for (const sc of scopes)
        if (!ALL_SCOPES.includes(sc)) throw new ConfigError('--scopes', `unknown scope ${sc}`);
      for (const t of tenant_ids)
        if (t !== '*' && !(await store.getTenant(t)))
          throw new ConfigError('--tenants', `tenant ${t} not found`);
      const { key, plaintext } = await store.createApiKey({ name: opts.name, tenant_ids, scopes });
      const out = {
        id: key.id,
        key: plaintext,
        name: key.name,
        tenant_ids,
        scopes,
        created_at: key.created_at,
      };
      print(!!opts.json, out, () => `API key ${out.id} created\n  key: ${out.key}`);
    }).catch(fail),
  );
keys
  .command('list')
  .description('List API keys (never their values)')
  .option('--json', 'print JSON')
  .action((opts: { json?: boolean }) =>
    withTenantStore(async (store) => {
      const list = await store.listApiKeys();
      print(!!opts.json, list, () =>
        table(list as never, ['id', 'name', 'hint', 'tenant_ids', 'scopes', 'revoked_at']),
      );
    }).catch(fail),
  );
keys
  .command('revoke <key_id>')
  .description('Revoke an API key at once')
  .option('--json', 'print JSON')
  .action((id: string, opts: { json?: boolean }) =>
    withTenantStore(async (store) => {
      const k = await store.revokeApiKey(id);
      if (!k) throw new ConfigError('key_id', `API key ${id} not found`);
      print(!!opts.json, k, () => `API key ${k.id} revoked at ${k.revoked_at}`);
    }).catch(fail),
  );

program.parseAsync(process.argv).catch(fail);
