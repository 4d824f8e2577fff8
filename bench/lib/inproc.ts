/**
 * A Ludus application started inside the bench process (as tests/support/app.ts does), used only
 * to set a deployment up through its admin gateway before the measured processes start: the
 * pipeline must not consume before its leaderboards and rules exist.
 */
import { openApp } from '../../runtime/app';
import { loadConfig, type Role } from '../../runtime/config';
import { createLogger } from '../../shared/logger';
import { startRoles } from '../../runtime/roles';
import { createBoard, createCurrency, createRule, createTenant, pool, type TenantSecrets } from './admin';
import { CURRENCY } from './events';
import { baseEnv } from './service';

export interface Definitions {
  tenants: string[];
  boards: object[];
  rules: object[];
}

/** Starts `roles` in-process, creates tenants, the currency, boards and rules, stops. */
export async function setUp(
  env: Record<string, string>,
  roles: Role[],
  rootKey: string,
  defs: Definitions,
): Promise<Map<string, TenantSecrets>> {
  const config = loadConfig({
    ...baseEnv({ ingest: 0, admin: 0, query: 0 }),
    LUDUS_ROOT_KEY: rootKey,
    LUDUS_TENANT_CACHE_MS: '0',
    ...env,
    LUDUS_ROLES: roles.join(','),
  });
  const app = await openApp(config, createLogger('silent'));
  const running = await startRoles(app.ctx, roles).catch(async (err) => {
    await app.close();
    throw err;
  });
  try {
    const admin = running.listening.find((l) => l.gateway === 'admin')!.url;
    const secrets = new Map<string, TenantSecrets>();
    await pool(defs.tenants, 8, async (t) => {
      secrets.set(t, await createTenant(admin, rootKey, t));
      if (defs.rules.length) await createCurrency(admin, rootKey, t, CURRENCY);
      for (const b of defs.boards) await createBoard(admin, rootKey, t, b);
      for (const r of defs.rules) await createRule(admin, rootKey, t, r);
    });
    return secrets;
  } finally {
    await running.stop();
    await app.close();
  }
}
