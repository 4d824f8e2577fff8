/** What the rewards' admin route files share: the dependencies, the auth rules, the in-use answer. */
import type { Sql } from '../../adapters/sql/types';
import type { Clock } from '../../core/clock';
import type { CatalogOps } from '../store/catalog';
import { scope } from '../../http/auth/scopes';
import { answerRefusals } from '../../http/domain-errors';
import { errors } from '../../http/errors';

export interface RewardAdminDeps {
  sql: Sql;
  clock: Clock;
  /** Catalog rewards, which share the `/v1/rewards-catalog?tenant_id` family (api/store/catalog.ts). */
  catalog?: CatalogOps;
}

export const read = { kind: 'admin', scope: scope.read('rewards'), tenant: true } as const;
export const write = { kind: 'admin', scope: scope.write('rewards'), tenant: true } as const;
export const common = { gateway: 'admin', tag: 'Rewards' } as const;

/**
 * A delete the foreign keys refused: a user attached itself between the in-use check and the
 * delete (core/rewards/references.ts). Answered like the check would have: 409 naming the users.
 */
export function inUseOnRace<T>(run: () => Promise<T>, users: () => Promise<string | null>): Promise<T> {
  return answerRefusals(run, {
    foreignKey: async () => errors.conflict((await users()) ?? 'It is still used; detach it first'),
  });
}
