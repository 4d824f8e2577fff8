/**
 * Operator routes on the admin gateway (root key only): tenants, API keys and dead letters.
 * SPEC.md does not show them; docs/authentication.md describes them (dead letters:
 * docs/operations.md "Dead letters").
 */
import type { Queryable } from '../../adapters/sql/types';
import { listDeadLetters } from '../../core/dead-letters';
import type { Tenant, TenantSecrets, TenantStore } from '../../core/tenancy/store';
import type { Authenticator } from '../../http/auth/authenticator';
import { validateTimeframe } from '../../core/windows';
import { errors } from '../../http/errors';
import { route, type RouteSpec } from '../../http/route';

const root = { kind: 'root' } as const;

function presentCreated(s: TenantSecrets) {
  return { ...presentTenant(s.tenant), jwt_secret: s.jwtSecret, hmac_secret: s.hmacSecret };
}

export function presentTenant(t: Tenant) {
  return {
    id: t.id,
    name: t.name,
    status: t.status,
    timezone: t.timezone,
    idp: t.idp,
    created_at: t.created_at,
    updated_at: t.updated_at,
  };
}

/** What the operator routes use: the tenant store, and the authenticator's cache to drop a changed tenant. */
export interface OperatorDeps {
  tenants: TenantStore;
  auth: Pick<Authenticator, 'invalidate'>;
}

export function operatorRoutes(svc: OperatorDeps, deps: { sql: Queryable }): RouteSpec[] {
  const mustFind = <T>(v: T | null, what: string): T => {
    if (v === null) throw errors.notFound(`${what} not found`);
    return v;
  };
  return [
    route({
      gateway: 'admin',
      method: 'POST',
      path: '/v1/tenants',
      summary: 'Create a tenant; its jwt_secret and hmac_secret are shown once',
      tag: 'Operator',
      auth: root,
      response: 'tenant.secrets.view',
      body: 'tenant.create',
      status: 201,
      // A taken id (TenancyError 'conflict') answers 409 (http/domain-errors.ts).
      handler: async ({ body }) => presentCreated(await svc.tenants.createTenant(body)),
    }),
    route({
      gateway: 'admin',
      method: 'GET',
      path: '/v1/tenants',
      summary: 'List tenants',
      tag: 'Operator',
      auth: root,
      response: 'tenant.list.view',
      handler: async () => {
        const tenants = (await svc.tenants.listTenants()).map(presentTenant);
        return { tenants, total: tenants.length };
      },
    }),
    route({
      gateway: 'admin',
      method: 'GET',
      path: '/v1/tenants/:tenant_id',
      summary: 'Get a tenant',
      tag: 'Operator',
      auth: root,
      response: 'tenant.view',
      handler: async ({ params }) =>
        presentTenant(mustFind(await svc.tenants.getTenant(params.tenant_id), 'Tenant')),
    }),
    route({
      gateway: 'admin',
      method: 'PUT',
      path: '/v1/tenants/:tenant_id',
      summary: 'Update a tenant: name, status (active or suspended), identity provider',
      tag: 'Operator',
      auth: root,
      response: 'tenant.view',
      body: 'tenant.update',
      handler: async ({ params, body: b }) => {
        if (b.timezone !== undefined) {
          const err = validateTimeframe({ type: 'daily', timezone: b.timezone }, 'body');
          if (err) throw errors.validation(err);
        }
        const t = mustFind(await svc.tenants.updateTenant(params.tenant_id, b), 'Tenant');
        svc.auth.invalidate(t.id);
        return presentTenant(t);
      },
    }),
    route({
      gateway: 'admin',
      method: 'POST',
      path: '/v1/tenants/:tenant_id/rotate-secrets',
      summary: 'Replace the tenant JWT and HMAC secrets; the old ones stop working at once',
      tag: 'Operator',
      auth: root,
      response: 'tenant.secrets.view',
      handler: async ({ params }) => {
        const s = mustFind(await svc.tenants.rotateSecrets(params.tenant_id), 'Tenant');
        svc.auth.invalidate(s.tenant.id);
        return presentCreated(s);
      },
    }),
    route({
      gateway: 'admin',
      method: 'POST',
      path: '/v1/api-keys',
      summary: 'Create an API key; the key is shown once',
      tag: 'Operator',
      auth: root,
      response: 'apikey.created.view',
      body: 'apikey.create',
      status: 201,
      handler: async ({ body: b }) => {
        for (const t of b.tenant_ids) {
          if (t !== '*' && !(await svc.tenants.getTenant(t)))
            throw errors.validation(`body.tenant_ids: tenant ${t} not found`);
        }
        const { key, plaintext } = await svc.tenants.createApiKey(b);
        return {
          id: key.id,
          key: plaintext,
          name: key.name,
          tenant_ids: key.tenant_ids,
          scopes: key.scopes,
          created_at: key.created_at,
        };
      },
    }),
    route({
      gateway: 'admin',
      method: 'GET',
      path: '/v1/api-keys',
      summary: 'List API keys (never their values)',
      tag: 'Operator',
      auth: root,
      response: 'apikey.list.view',
      handler: async () => {
        const keys = await svc.tenants.listApiKeys();
        return { api_keys: keys, total: keys.length };
      },
    }),
    route({
      gateway: 'admin',
      method: 'DELETE',
      path: '/v1/api-keys/:key_id',
      summary: 'Revoke an API key at once',
      tag: 'Operator',
      auth: root,
      response: 'apikey.view',
      handler: async ({ params }) => mustFind(await svc.tenants.revokeApiKey(params.key_id), 'API key'),
    }),
    route({
      gateway: 'admin',
      method: 'GET',
      path: '/v1/operator/dead-letters',
      summary:
        'List dead letters (records a consumer could not apply, with the reason), newest first; filter by consumer and partition, page with cursor',
      tag: 'Operator',
      auth: root,
      response: 'deadletter.list.view',
      query: 'deadletters.query',
      handler: async ({ query }) => listDeadLetters(deps.sql, query),
    }),
  ];
}
