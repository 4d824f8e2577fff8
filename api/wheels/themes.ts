/**
 * Admin routes of wheel themes: create, list (filters theme_type and status), the system
 * templates, and update (archive with status), under `?tenant_id` and `/v1/tenants/{tenant_id}/`.
 */
import { createTheme, listThemes, SYSTEM_TEMPLATES, updateTheme } from '../../core/wheels/themes';
import { scope } from '../../http/auth/scopes';
import { errors } from '../../http/errors';
import { route, type RouteSpec } from '../../http/route';
import { bothForms } from '../forms';
import { common, read, write, type WheelDeps } from './common';

export function wheelThemeRoutes(deps: WheelDeps): RouteSpec[] {
  const { sql, clock } = deps;
  return [
    ...bothForms(
      route({
        ...common,
        method: 'POST',
        path: '/v1/wheel-themes',
        summary: 'Create a wheel theme',
        response: 'wheel_theme.view',
        auth: write,
        body: 'wheel_theme.create',
        status: 201,
        handler: async ({ tenant, body: b }) => createTheme(sql, deps.random, tenant.id, b, clock.now()),
      }),
    ),
    ...bothForms(
      route({
        ...common,
        method: 'GET',
        path: '/v1/wheel-themes',
        summary: "The tenant's wheel themes (filters theme_type, status)",
        response: 'wheel_theme.list.view',
        auth: read,
        query: 'wheel_theme.list.query',
        handler: async ({ tenant, query: q }) => listThemes(sql, tenant.id, q),
      }),
    ),
    ...bothForms(
      route({
        ...common,
        method: 'GET',
        path: '/v1/wheel-themes/templates',
        summary: 'The system templates (the same for every tenant; a wheel may name one as theme_id)',
        response: 'wheel_theme.templates.view',
        auth: { kind: 'admin', scope: scope.read('wheels'), tenant: 'optional' },
        handler: async () => ({ templates: SYSTEM_TEMPLATES, total: SYSTEM_TEMPLATES.length }),
      }),
    ),
    ...bothForms(
      route({
        ...common,
        method: 'PUT',
        path: '/v1/wheel-themes/:theme_id',
        summary: 'Update a wheel theme (changed fields; status archived retires it from new wheels)',
        response: 'wheel_theme.view',
        auth: write,
        body: 'wheel_theme.update',
        handler: async ({ tenant, params, body: b }) => {
          if (SYSTEM_TEMPLATES.some((t) => t.id === params.theme_id))
            throw errors.forbidden('System templates cannot be changed; create a theme from one instead');
          const t = await updateTheme(sql, tenant.id, params.theme_id, b, clock.now());
          if (!t) throw errors.notFound(`Wheel theme ${params.theme_id} not found`);
          return t;
        },
      }),
    ),
  ];
}
