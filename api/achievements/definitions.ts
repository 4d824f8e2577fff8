/**
 * Admin routes of achievement definitions (SPEC.md "Achievements", docs/achievements.md): create,
 * list (filter `active`), get, update (changed fields), DELETE (deactivates: progress and
 * completions are kept), under `?tenant_id` and `/v1/tenants/{tenant_id}/achievements`.
 * Criteria are checked field by field (core/achievements/criteria.ts) and the definitions they
 * name (currencies, leaderboards, streaks) and the reward config must exist in the tenant, checked
 * in the transaction that writes.
 */
import type { Queryable } from '../../adapters/sql/types';
import { validateCriteria, type Criterion, type Reference } from '../../core/achievements/criteria';
import { missingReference } from '../../core/achievements/references';
import {
  createAchievement,
  getAchievement,
  listAchievements,
  lockAchievement,
  updateAchievement,
  type Achievement,
} from '../../core/achievements/store';
import { lockConfigRef } from '../../core/rewards/references';
import { answerRefusals } from '../../http/domain-errors';
import { errors } from '../../http/errors';
import { route, type RouteSpec } from '../../http/route';
import { bothForms } from '../forms';
import { common, read, write, type AchievementDeps } from './common';

export function definitionRoutes(deps: AchievementDeps): RouteSpec[] {
  const { sql, clock } = deps;
  const checked = (raw: unknown): { criteria: Criterion; refs: Reference[] } => {
    const v = validateCriteria(raw);
    if (!v.ok) throw errors.validation(v.error);
    return { criteria: v.criteria, refs: v.refs };
  };
  /** Writes after the reward config (locked against deletion) and the criteria's references are checked. */
  const withRefs = <T>(
    tenantId: string,
    b: { reward_config_id?: string | null },
    refs: Reference[],
    write: (q: Queryable) => Promise<T>,
  ): Promise<T> =>
    answerRefusals(
      () =>
        sql.tx(async (q) => {
          const problem =
            (await lockConfigRef(q, tenantId, b.reward_config_id)) ??
            (await missingReference(q, tenantId, refs));
          if (problem) throw errors.validation(problem);
          return write(q);
        }),
      {
        foreignKey: () =>
          errors.validation(`body.reward_config_id: reward config ${b.reward_config_id} does not exist`),
      },
    );
  const found = (a: Achievement | null, id: string): Achievement => {
    if (!a) throw errors.notFound(`Achievement ${id} not found`);
    return a;
  };
  return [
    ...bothForms(
      route({
        ...common,
        method: 'POST',
        path: '/v1/achievements',
        summary: 'Create an achievement (optionally with a backfill over history, or its dry run)',
        auth: write,
        body: 'achievement.create',
        status: 201,
        response: 'achievement.view',
        handler: async ({ tenant, body: b }) => {
          const { criteria, refs } = checked(b.criteria);
          const a = await withRefs(tenant.id, b, refs, (q) =>
            createAchievement(q, deps.random, tenant.id, { ...b, criteria }, clock.now()),
          );
          if (b.backfill === undefined || b.backfill === false) return a;
          const dry = typeof b.backfill === 'object' && b.backfill.dry_run === true;
          // The achievement exists from here on; a backfill that cannot start says why (409: one runs already)
          // and leaves it in place (docs/achievements.md "Backfill").
          return { ...a, backfill: await deps.backfills.start(tenant.id, a.id, dry, clock.now()) };
        },
      }),
    ),
    ...bothForms(
      route({
        ...common,
        method: 'GET',
        path: '/v1/achievements',
        summary: 'List achievements (filter active), oldest first',
        auth: read,
        query: 'achievement.list.query',
        response: 'achievement.list.view',
        handler: async ({ tenant, query: q }) => ({
          ...(await listAchievements(sql, tenant.id, q)),
          limit: q.limit,
          offset: q.offset,
        }),
      }),
    ),
    ...bothForms(
      route({
        ...common,
        method: 'GET',
        path: '/v1/achievements/:achievement_id',
        summary: 'Get an achievement',
        auth: read,
        response: 'achievement.view',
        handler: async ({ tenant, params }) =>
          found(await getAchievement(sql, tenant.id, params.achievement_id), params.achievement_id),
      }),
    ),
    ...bothForms(
      route({
        ...common,
        method: 'PUT',
        path: '/v1/achievements/:achievement_id',
        summary:
          'Update an achievement (changed fields; a criteria change counts from now on and never un-completes anyone)',
        auth: write,
        body: 'achievement.update',
        response: 'achievement.view',
        handler: async ({ tenant, params, body: b }) => {
          const c = b.criteria !== undefined ? checked(b.criteria) : null;
          const updated = await withRefs(tenant.id, b, c?.refs ?? [], async (q) => {
            found(await lockAchievement(q, tenant.id, params.achievement_id), params.achievement_id);
            return updateAchievement(
              q,
              tenant.id,
              params.achievement_id,
              { ...b, criteria: c?.criteria },
              clock.now(),
            );
          });
          return found(updated, params.achievement_id);
        },
      }),
    ),
    ...bothForms(
      route({
        ...common,
        method: 'POST',
        path: '/v1/achievements/:achievement_id/backfill',
        summary:
          'Start a backfill of the achievement over history (a job), or its dry run ({dry_run: true}: how many would complete, changing nothing)',
        auth: write,
        body: 'achievement.backfill',
        status: 202,
        response: 'achievement.backfill.view',
        handler: async ({ tenant, params, body: b }) =>
          deps.backfills.start(tenant.id, params.achievement_id, b.dry_run, clock.now()),
      }),
    ),
    ...bothForms(
      route({
        ...common,
        method: 'GET',
        path: '/v1/achievements/:achievement_id/backfill',
        summary: "The achievement's latest backfill: state, users done and total, completions",
        auth: read,
        response: 'achievement.backfill.view',
        handler: async ({ tenant, params }) => {
          found(await getAchievement(sql, tenant.id, params.achievement_id), params.achievement_id);
          const b = await deps.backfills.latest(tenant.id, params.achievement_id);
          if (!b) throw errors.notFound(`Achievement ${params.achievement_id} has no backfill`);
          return b;
        },
      }),
    ),
    ...bothForms(
      route({
        ...common,
        method: 'DELETE',
        path: '/v1/achievements/:achievement_id',
        summary: 'Deactivate an achievement (it stops progressing; progress and completions are kept)',
        auth: write,
        response: 'achievement.view',
        handler: async ({ tenant, params }) =>
          found(
            await updateAchievement(sql, tenant.id, params.achievement_id, { active: false }, clock.now()),
            params.achievement_id,
          ),
      }),
    ),
  ];
}
