/** Operator: tenants (create with their secrets shown once, list, get, update, rotate secrets). */
import type { Tenant, TenantSecrets } from '../../core/tenancy/store';
import { validateTimeframe } from '../../core/windows';
import { errors } from '../../http/errors';
import { route, type RouteSpec } from '../../http/route';
import { mustFind, root, type OperatorDeps } from './common';

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

export function tenantRoutes(svc: OperatorDeps): RouteSpec[] {
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
  ];
}
