/**
 * What every operator route shares: the root-key auth rule, the services they use, and 404 for
 * what is not there. The routes, one file per resource: tenants.ts, api-keys.ts, dead-letters.ts.
 * SPEC.md does not show them; docs/authentication.md describes them (dead letters:
 * docs/operations.md "Dead letters").
 */
import type { TenantStore } from '../../core/tenancy/store';
import type { Authenticator } from '../../http/auth/authenticator';
import { errors } from '../../http/errors';

export const root = { kind: 'root' } as const;

/** What the operator routes use: the tenant store, and the authenticator's cache to drop a changed tenant. */
export interface OperatorDeps {
  tenants: TenantStore;
  auth: Pick<Authenticator, 'invalidate'>;
}

export function mustFind<T>(v: T | null, what: string): T {
  if (v === null) throw errors.notFound(`${what} not found`);
  return v;
}
