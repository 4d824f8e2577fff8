/**
 * First embedded start: create a `demo` tenant and an API key for it, and print them once with a
 * ready-to-paste curl line per gateway. Also prints a root key generated on this start.
 *
 * The banner goes to stderr, never to stdout where the JSON logs go: a log pipeline or file
 * collecting stdout does not receive secrets.
 */
import { ALL_SCOPES } from '../http/auth/scopes';
import type { OpenedApp } from './app';
import type { RunningRoles } from './roles';
import { mintToken } from './tokens';

const DEMO_TENANT = 'demo';

export async function welcome(
  app: OpenedApp,
  running: RunningRoles,
  out: (s: string) => void = (s) => process.stderr.write(s),
): Promise<void> {
  const { ctx } = app;
  const lines: string[] = [];
  if (app.rootKeyCreated && ctx.config.rootKey === null) {
    lines.push(
      `Root key (operator routes /v1/tenants, /v1/api-keys; saved in ${ctx.config.dataDir}/root.key):`,
      `  ${app.rootKey}`,
      '',
    );
  }
  const url = (g: string) => running.listening.find((l) => l.gateway === g)?.url;
  if (ctx.config.shape === 'embedded' && (await ctx.services.tenants.listTenants()).length === 0) {
    const demo = await ctx.services.tenants.createTenant({ id: DEMO_TENANT, name: 'Demo' });
    const { plaintext } = await ctx.services.tenants.createApiKey({
      name: 'demo key',
      tenant_ids: [DEMO_TENANT],
      scopes: ALL_SCOPES.filter((s) => s === '*'),
    });
    const now = Math.floor(ctx.clock.now() / 1000);
    const { token: tenantJwt } = await mintToken(
      { sub_type: 'tenant', tenant_id: DEMO_TENANT },
      demo.jwtSecret,
      now,
      30 * 86400,
    );
    lines.push(
      `Demo tenant "${DEMO_TENANT}" created (shown once):`,
      `  API key (admin gateway):   ${plaintext}`,
      `  tenant jwt_secret:         ${demo.jwtSecret}`,
      `  tenant hmac_secret:        ${demo.hmacSecret}`,
      `  tenant JWT (30 days):      ${tenantJwt}`,
      '',
    );
    if (url('ingest')) {
      lines.push(
        'Send an event:',
        `  curl -X POST ${url('ingest')}/v1/events -H 'Authorization: Bearer ${tenantJwt}' -H 'Content-Type: application/json' \\`,
        `    -d '{"event_id":"e-1","type":"match_finished","actor":{"user_id":"alice"},"occurred_at":"${new Date(ctx.clock.now()).toISOString()}","attrs":{"score":42}}'`,
      );
    }
    if (url('admin'))
      lines.push(
        'Admin gateway (API reference):',
        `  curl -H 'X-API-Key: ${plaintext}' ${url('admin')}/openapi.json`,
      );
    if (url('query'))
      lines.push(
        'Query gateway (API reference):',
        `  curl -H 'Authorization: Bearer ${tenantJwt}' ${url('query')}/openapi.json`,
      );
    lines.push('');
  }
  if (lines.length) out(`\n${lines.join('\n')}\n`);
}
