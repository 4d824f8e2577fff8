/** Operator: API keys (create with the key shown once, list without values, revoke). */
import { errors } from '../../http/errors';
import { route, type RouteSpec } from '../../http/route';
import { mustFind, root, type OperatorDeps } from './common';

export function apiKeyRoutes(svc: OperatorDeps): RouteSpec[] {
  return [
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
  ];
}
