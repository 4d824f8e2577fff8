/** What the wheels' route files share: the dependencies and the auth rules. */
import type { Sql } from '../../adapters/sql/types';
import type { Clock } from '../../core/clock';
import type { Random } from '../../core/random';
import type { Granter } from '../../core/rewards/grant';
import type { Wallet } from '../../core/wallet/wallet';
import { scope } from '../../http/auth/scopes';

export interface WheelDeps {
  sql: Sql;
  clock: Clock;
  random: Random;
  wallet: Wallet;
  granter: Granter;
}

export const read = { kind: 'admin', scope: scope.read('wheels'), tenant: true } as const;
export const write = { kind: 'admin', scope: scope.write('wheels'), tenant: true } as const;
export const common = { gateway: 'admin', tag: 'Wheels' } as const;
