/**
 * Admin routes of outbound webhooks (scope webhooks:read / webhooks:write), under
 * `/v1/webhooks?tenant_id=` and `/v1/tenants/{tenant_id}/webhooks` (docs/webhooks.md), one file per
 * resource: endpoints (./endpoints.ts) and their deliveries (./deliveries.ts).
 */
import type { RouteSpec } from '../../http/route';
import type { WebhookAdminDeps } from './common';
import { webhookDeliveryRoutes } from './deliveries';
import { webhookEndpointRoutes } from './endpoints';

export type { WebhookAdminDeps } from './common';

export function webhookAdminRoutes(deps: WebhookAdminDeps): RouteSpec[] {
  return [...webhookEndpointRoutes(deps), ...webhookDeliveryRoutes(deps)];
}
