/** Path forms the admin routes of several features share. */
import type { RouteSpec } from '../http/route';

/** Both admin path forms of a route: `?tenant_id=` and `/v1/tenants/{tenant_id}/...`. */
export function bothForms(spec: RouteSpec): RouteSpec[] {
  return [spec, { ...spec, path: spec.path.replace(/^\/v1\//, '/v1/tenants/:tenant_id/') }];
}
