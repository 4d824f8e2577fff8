#!/usr/bin/env node
/**
 * The command-line entry: `npm run ludus -- <command>` (or `npm start` for `serve`).
 * Configuration and start-up failures print one line naming what to fix, never a stack trace.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { Command } from 'commander';
import { migrate } from '../adapters/sql/migrate';
import type { GatewayName } from '../http/gateway';
import { reservedTenantIds } from '../http/route';
import { schemas } from '../http/validate';
import { buildOpenApi } from '../http/openapi';
import { describeRoutes } from './routes';
import { ALL_SCOPES, FEATURES } from '../http/auth/scopes';
import { systemClock } from '../core/clock';
import { SecretBox } from '../core/tenancy/secrets';
import { TenancyError, TenantStore } from '../core/tenancy/store';
import { listDeadLetters } from '../core/dead-letters';
import { openApp } from './app';
import { localSecrets } from './secrets-files';
import { openSql, StartupError } from './compose';
import { welcome } from './welcome';
import { ConfigError, loadConfig, ROLES, type Config } from './config';
import { createLogger } from '../shared/logger';
import { startRoles } from './roles';
import { isFirstWorker, isWorker, superviseProcesses } from './processes';
import { mintToken, parseExpiresIn, type TokenKind } from './tokens';
import { version } from '../package.json';

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

async function serve(opts: { roles?: string; processes?: string }): Promise<void> {
  const cfg = config({ LUDUS_ROLES: opts.roles, LUDUS_PROCESSES: opts.processes });
  const log = createLogger(cfg.logLevel);
  if (cfg.processes > 1 && !isWorker()) return superviseProcesses(cfg.processes, log);
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
  if (isFirstWorker()) await welcome(app, running);
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
  // Before "ludus is up": whoever waits for that line may signal at once, and a signal that
  // arrives before its handler ends the process without a graceful stop.
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
  const urls = Object.fromEntries(running.listening.map((l) => [l.gateway, l.url]));
  log.info({ roles: running.roles, pid: process.pid, ...urls }, 'ludus is up');
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

const GATEWAYS: GatewayName[] = ['ingest', 'admin', 'query'];

const program = new Command();
program
  .name('ludus')
  .description('Ludus gamification back end')
  .version(version, '-V, --version', 'print the version')
  .showHelpAfterError()
  .configureOutput({ writeErr: (s) => process.stderr.write(s) });

program
  .command('serve')
  .description('Run the service. Without configuration: every role in one process on the embedded adapters.')
  .option('--roles <roles>', `comma-separated subset of: all, ${ROLES.join(', ')} (overrides LUDUS_ROLES)`)
  .option(
    '--processes <n>',
    'run the roles in n processes sharing the ports (distributed shape; overrides LUDUS_PROCESSES)',
  )
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

program
  .command('openapi <gateway>')
  .description(
    'Print the OpenAPI 3.1 document of a gateway (ingest, admin or query), as it serves at /openapi.json',
  )
  .action((gateway: string) => {
    if (!GATEWAYS.includes(gateway as GatewayName))
      return fail(new ConfigError('gateway', `must be one of ${GATEWAYS.join(', ')}`));
    process.stdout.write(
      `${JSON.stringify(buildOpenApi(gateway as GatewayName, describeRoutes(), version), null, 2)}\n`,
    );
  });

const tenants = program.command('tenants').description('Manage tenants in the configured store');
tenants
  .command('create <name>')
  .description('Create a tenant and print its secrets (shown once)')
  .option('--id <id>', 'readable id (lowercase letters, digits, _ and -); a UUID when omitted')
  .option('--json', 'print JSON')
  .action((name: string, opts: { id?: string; json?: boolean }) =>
    withTenantStore(async (store) => {
      // The gateway's rule (schemas/http/tenant.create.json), reserved words included.
      if (opts.id !== undefined && !schemas().get('tenant.create')({ name, id: opts.id })) {
        const reserved = [...reservedTenantIds()].join(', ');
        throw new ConfigError(
          '--id',
          `must be 2 to 63 lowercase letters, digits, _ or -, and none of: ${reserved}`,
        );
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

program
  .command('tokens')
  .description(
    'Mint a token (shown once): a tenant JWT (--tenant), an end-user JWT (--tenant and --user) or an admin JWT (--admin-key); prints the token alone, or JSON with --json',
  )
  .option(
    '--tenant <tenant_id>',
    'tenant token for the ingestion and query gateways, signed with its jwt_secret',
  )
  .option('--user <user_id>', 'with --tenant: an end-user token for this user')
  .option(
    '--admin-key <key_id>',
    'admin token for the admin gateway, signed with this API key (id from keys list)',
  )
  .option('--expires-in <duration>', 'lifetime: 90s, 15m, 1h, 30d (at most 366d)', '1h')
  .option('--json', 'print JSON')
  .action((opts: { tenant?: string; user?: string; adminKey?: string; expiresIn: string; json?: boolean }) =>
    withTenantStore(async (store) => {
      const expiresIn = parseExpiresIn('--expires-in', opts.expiresIn);
      if ((opts.tenant === undefined) === (opts.adminKey === undefined))
        throw new ConfigError('tokens', 'give either --tenant (with --user for an end user) or --admin-key');
      if (opts.user !== undefined && (opts.user === '' || Buffer.byteLength(opts.user) > 256))
        throw new ConfigError('--user', 'must be 1 to 256 bytes');
      let kind: TokenKind;
      let secret: string;
      if (opts.adminKey !== undefined) {
        if (opts.user !== undefined) throw new ConfigError('--user', 'goes with --tenant, not --admin-key');
        const found = await store.getApiKeyForJwt(opts.adminKey);
        if (!found) throw new ConfigError('--admin-key', `API key ${opts.adminKey} not found or revoked`);
        kind = { sub_type: 'admin', key_id: opts.adminKey };
        secret = found.plaintext;
      } else {
        const t = await store.getTenantSecrets(opts.tenant!);
        if (!t) throw new ConfigError('--tenant', `tenant ${opts.tenant} not found`);
        kind =
          opts.user === undefined
            ? { sub_type: 'tenant', tenant_id: t.tenant.id }
            : { sub_type: 'user', tenant_id: t.tenant.id, user_id: opts.user };
        secret = t.jwtSecret;
      }
      const minted = await mintToken(kind, secret, Math.floor(systemClock.now() / 1000), expiresIn);
      print(!!opts.json, { ...kind, ...minted }, () => minted.token);
    }).catch(fail),
  );

const deadLetters = program
  .command('dead-letters')
  .description('Records the consumers could not apply, with the reason (docs/operations.md "Dead letters")');
deadLetters
  .command('list')
  .description('List dead letters, newest first')
  .option('--consumer <group>', 'only this consumer group, e.g. ludus.pipeline')
  .option('--partition <n>', 'only this partition')
  .option('--limit <n>', 'page size, 1 to 1000', '100')
  .option('--cursor <cursor>', 'the next_cursor printed by the previous page')
  .option('--json', 'print JSON')
  .action((opts: { consumer?: string; partition?: string; limit: string; cursor?: string; json?: boolean }) =>
    (async () => {
      const int = (name: string, v: string, min: number, max: number) => {
        const n = Number(v);
        if (!/^[0-9]+$/.test(v) || n < min || n > max)
          throw new ConfigError(name, `must be an integer from ${min} to ${max}`);
        return n;
      };
      const filter = {
        consumer: opts.consumer,
        partition: opts.partition === undefined ? undefined : int('--partition', opts.partition, 0, 100000),
        limit: int('--limit', opts.limit, 1, 1000),
        cursor: opts.cursor,
      };
      if (filter.cursor !== undefined && !/^[0-9]{1,18}$/.test(filter.cursor))
        throw new ConfigError('--cursor', 'must be the next_cursor of a previous page');
      const cfg = config();
      const sql = await openSql(cfg);
      try {
        await migrate(sql);
        const page = await listDeadLetters(sql, filter);
        print(!!opts.json, page, () => {
          const rows = page.dead_letters.map((d) => ({
            ...d,
            reason: d.reason.length > 80 ? `${d.reason.slice(0, 77)}...` : d.reason,
          }));
          const t = table(rows as never, [
            'id',
            'consumer',
            'partition',
            'offset',
            'key',
            'reason',
            'created_at',
          ]);
          return page.next_cursor ? `${t}\nmore: --cursor ${page.next_cursor}` : t;
        });
      } finally {
        await sql.close();
      }
    })().catch(fail),
  );

program.parseAsync(process.argv).catch(fail);
