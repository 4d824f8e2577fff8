/**
 * Credential checks: each gateway answers "who am I" for the credential it is given, so a client
 * can test its setup (and the auth tests can exercise every credential kind on every gateway).
 */
import { route, type RouteRequest, type RouteSpec } from '../../http/route';
import type { Principal } from '../../http/auth/authenticator';

function describe(p: Principal | null, tenantId: string | null) {
  if (!p) return { principal: null, tenant_id: tenantId };
  switch (p.kind) {
    case 'root':
      return { principal: 'root', tenant_id: tenantId };
    case 'api_key':
      return {
        principal: 'api_key',
        via: p.via,
        key_id: p.key.id,
        scopes: p.key.scopes,
        tenant_ids: p.key.tenant_ids,
        tenant_id: tenantId,
      };
    case 'tenant':
      return { principal: 'tenant', via: p.via, tenant_id: p.tenantId };
    case 'user':
      return { principal: 'user', via: p.via, tenant_id: p.tenantId, user_id: p.userId };
  }
}

export function authRoutes(): RouteSpec[] {
  const whoami = async ({ principal, tenant }: RouteRequest) => describe(principal, tenant?.id ?? null);
  return [
    route({
      gateway: 'admin',
      method: 'GET',
      path: '/v1/tenants/:tenant_id/whoami',
      summary: 'The credential and the tenant it may act on (checks tenant access)',
      tag: 'Auth',
      auth: { kind: 'admin', scope: null, tenant: true },
      response: 'whoami.view',
      handler: whoami,
    }),
    route({
      gateway: 'admin',
      method: 'GET',
      path: '/v1/whoami',
      summary: 'The credential; with ?tenant_id also checks access to that tenant',
      tag: 'Auth',
      auth: { kind: 'admin', scope: null, tenant: 'optional' },
      response: 'whoami.view',
      handler: whoami,
    }),
    route({
      gateway: 'query',
      method: 'GET',
      path: '/v1/whoami',
      summary: 'The tenant or end-user token and its tenant',
      tag: 'Auth',
      auth: { kind: 'tenant', signed: false },
      response: 'whoami.view',
      handler: whoami,
    }),
    route({
      gateway: 'query',
      method: 'GET',
      path: '/v1/whoami/:tenant_id',
      summary: 'Long form: a tenant or end-user token, or a signed request, for the tenant in the path',
      tag: 'Auth',
      auth: { kind: 'tenant', signed: true },
      response: 'whoami.view',
      handler: whoami,
    }),
    route({
      gateway: 'ingest',
      method: 'GET',
      path: '/v1/whoami',
      summary: 'The tenant or end-user token, or signed request, and its tenant',
      tag: 'Auth',
      auth: { kind: 'tenant', signed: true },
      response: 'whoami.view',
      handler: whoami,
    }),
  ];
}
