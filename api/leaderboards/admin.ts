/**
 * Admin routes of leaderboards (scope leaderboards:read / leaderboards:write), under
 * `/v1/leaderboards?tenant_id=` and `/v1/tenants/{tenant_id}/leaderboards`.
 */
import type { Queryable, Sql } from '../../adapters/sql/types';
import type { Clock } from '../../core/clock';
import { closeWindow, type ClosingDeps } from '../../core/leaderboards/closing';
import { validateConfig, type Leaderboard, type LeaderboardConfig } from '../../core/leaderboards/definition';
import { createBoard, getBoard, getWindow, listBoards, updateBoard } from '../../core/leaderboards/store';
import { lockConfigRef } from '../../core/rewards/references';
import { scope } from '../../http/auth/scopes';
import { answerRefusals } from '../../http/domain-errors';
import { errors } from '../../http/errors';
import { route, type RouteSpec } from '../../http/route';
import { bothForms } from '../forms';

export interface LeaderboardAdminDeps extends ClosingDeps {
  sql: Sql;
  clock: Clock;
}

const read = { kind: 'admin', scope: scope.read('leaderboards'), tenant: true } as const;
const write = { kind: 'admin', scope: scope.write('leaderboards'), tenant: true } as const;

export function presentBoard(b: Leaderboard) {
  return {
    leaderboard_id: b.leaderboard_id,
    tenant_id: b.tenant_id,
    name: b.name,
    description: b.description,
    reward_config_id: b.reward_config_id,
    status: b.status,
    config: b.config,
    version: b.version,
    created_at: b.created_at,
    updated_at: b.updated_at,
  };
}

function checkConfig(config: LeaderboardConfig | undefined): void {
  if (!config) return;
  const err = validateConfig(config);
  if (err) throw errors.validation(err.startsWith('config') ? `body.${err}` : err);
}

/**
 * Runs a board write in one transaction after checking its `reward_config_id` there (the config is
 * locked against deletion until the write commits); the foreign key refuses what slipped past.
 */
function withConfigRef<T>(
  deps: LeaderboardAdminDeps,
  tenantId: string,
  configId: string | null | undefined,
  write: (q: Queryable) => Promise<T>,
): Promise<T> {
  return answerRefusals(
    () =>
      deps.sql.tx(async (q) => {
        const problem = await lockConfigRef(q, tenantId, configId);
        if (problem) throw errors.validation(problem);
        return write(q);
      }),
    {
      foreignKey: () => errors.validation(`body.reward_config_id: reward config ${configId} does not exist`),
    },
  );
}

export function leaderboardAdminRoutes(deps: LeaderboardAdminDeps): RouteSpec[] {
  const mustGet = async (tenantId: string, id: string) => {
    const b = await getBoard(deps.sql, tenantId, id);
    if (!b) throw errors.notFound(`Leaderboard ${id} not found`);
    return b;
  };
  return [
    ...bothForms(
      route({
        gateway: 'admin',
        method: 'POST',
        path: '/v1/leaderboards',
        summary: 'Create a leaderboard',
        tag: 'Leaderboards',
        auth: write,
        body: 'leaderboard.create',
        status: 201,
        response: 'leaderboard.view',
        handler: async ({ body: b, tenant }) => {
          const config: LeaderboardConfig = b.config;
          checkConfig(config);
          const created = await withConfigRef(deps, tenant.id, b.reward_config_id, (q) =>
            createBoard(
              q,
              {
                tenant_id: tenant.id,
                leaderboard_id: b.leaderboard_id,
                name: b.name,
                description: b.description ?? null,
                reward_config_id: b.reward_config_id ?? null,
                config,
              },
              deps.clock.now(),
            ),
          );
          if (!created) throw errors.conflict(`Leaderboard ${b.leaderboard_id} already exists`);
          return presentBoard(created);
        },
      }),
    ),
    ...bothForms(
      route({
        gateway: 'admin',
        method: 'GET',
        path: '/v1/leaderboards',
        summary: 'List leaderboards',
        tag: 'Leaderboards',
        auth: read,
        query: 'leaderboard.list.query',
        response: 'leaderboard.list.view',
        handler: async ({ query: q, tenant }) => {
          const { items, total } = await listBoards(deps.sql, tenant.id, q);
          return { leaderboards: items.map(presentBoard), total, limit: q.limit, offset: q.offset };
        },
      }),
    ),
    ...bothForms(
      route({
        gateway: 'admin',
        method: 'GET',
        path: '/v1/leaderboards/:leaderboard_id',
        summary: 'Get a leaderboard definition',
        tag: 'Leaderboards',
        auth: read,
        response: 'leaderboard.view',
        handler: async ({ params, tenant }) => presentBoard(await mustGet(tenant.id, params.leaderboard_id)),
      }),
    ),
    ...bothForms(
      route({
        gateway: 'admin',
        method: 'PUT',
        path: '/v1/leaderboards/:leaderboard_id',
        summary: 'Update a leaderboard; a new config applies to future events only and bumps the version',
        tag: 'Leaderboards',
        auth: write,
        body: 'leaderboard.update',
        response: 'leaderboard.view',
        handler: async ({ params, body, tenant }) => {
          const patch = body;
          checkConfig(patch.config);
          const b = await withConfigRef(deps, tenant.id, patch.reward_config_id, (q) =>
            updateBoard(q, tenant.id, params.leaderboard_id, patch, deps.clock.now()),
          );
          deps.cache?.forgetBoard(tenant.id, params.leaderboard_id);
          if (!b) throw errors.notFound(`Leaderboard ${params.leaderboard_id} not found`);
          return presentBoard(b);
        },
      }),
    ),
    ...bothForms(
      route({
        gateway: 'admin',
        method: 'DELETE',
        path: '/v1/leaderboards/:leaderboard_id',
        summary: 'Retire a leaderboard (status archived); its data is kept',
        tag: 'Leaderboards',
        auth: write,
        response: 'leaderboard.view',
        handler: async ({ params, tenant }) => {
          const b = await updateBoard(
            deps.sql,
            tenant.id,
            params.leaderboard_id,
            { status: 'archived' },
            deps.clock.now(),
          );
          deps.cache?.forgetBoard(tenant.id, params.leaderboard_id);
          if (!b) throw errors.notFound(`Leaderboard ${params.leaderboard_id} not found`);
          return presentBoard(b);
        },
      }),
    ),
    ...bothForms(
      route({
        gateway: 'admin',
        method: 'POST',
        path: '/v1/leaderboards/:leaderboard_id/windows/:window_key/close',
        summary:
          'Finalise a window now, exactly as the scheduler does at its end (snapshot, rewards, webhook)',
        tag: 'Leaderboards',
        auth: write,
        response: 'window.close.view',
        handler: async ({ params, tenant }) => {
          await mustGet(tenant.id, params.leaderboard_id);
          const k = {
            tenant_id: tenant.id,
            leaderboard_id: params.leaderboard_id,
            window_key: params.window_key,
          };
          const r = await closeWindow(deps, k, deps.clock.now());
          if (r === 'not_found') throw errors.notFound(`Window ${k.window_key} has no scores`);
          const w = (await getWindow(deps.sql, k))!;
          return {
            leaderboard_id: k.leaderboard_id,
            window_key: k.window_key,
            status: w.status,
            already_closed: r === 'already_closed',
            closed_at: new Date(w.closed_at!).toISOString(),
            entries: w.entries,
            // Why the rewards could not be paid in full, or null (core/leaderboards/closing.ts).
            payout_error: w.payout_error ?? null,
          };
        },
      }),
    ),
  ];
}
