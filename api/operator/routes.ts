/** The operator routes on the admin gateway (root key only), one file per resource. */
import type { Queryable } from '../../adapters/sql/types';
import type { RouteSpec } from '../../http/route';
import { apiKeyRoutes } from './api-keys';
import type { OperatorDeps } from './common';
import { deadLetterRoutes } from './dead-letters';
import { tenantRoutes } from './tenants';

export type { OperatorDeps } from './common';

export function operatorRoutes(svc: OperatorDeps, deps: { sql: Queryable }): RouteSpec[] {
  return [...tenantRoutes(svc), ...apiKeyRoutes(svc), ...deadLetterRoutes(deps)];
}
