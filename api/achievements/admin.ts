/** Achievement routes in document order: definitions (admin), then the user routes (query). */
import type { RouteSpec } from '../../http/route';
import type { AchievementDeps } from './common';
import { definitionRoutes } from './definitions';
import { userRoutes } from './user';

export function achievementRoutes(deps: AchievementDeps): RouteSpec[] {
  return [...definitionRoutes(deps), ...userRoutes(deps)];
}
