/** What the achievement route files share: dependencies and auth rules. */
import type { Sql } from '../../adapters/sql/types';
import type { Backfills } from '../../core/achievements/backfill';
import type { Clock } from '../../core/clock';
import type { Random } from '../../core/random';
import { scope } from '../../http/auth/scopes';

export interface AchievementDeps {
  sql: Sql;
  clock: Clock;
  random: Random;
  backfills: Backfills;
}

export const read = { kind: 'admin', scope: scope.read('achievements'), tenant: true } as const;
export const write = { kind: 'admin', scope: scope.write('achievements'), tenant: true } as const;
export const common = { gateway: 'admin', tag: 'Achievements' } as const;
