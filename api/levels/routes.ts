/**
 * Level systems (SPEC.md "Levels"). Admin (scope levels:*, `?tenant_id`): create, update, list,
 * get, and the user-facing reads. Query gateway (tenant from the JWT): the same reads, an end-user
 * token for its own user only. `level_system_id` picks a system; default: the tenant's first.
 */
import type { Queryable, Sql } from '../../adapters/sql/types';
import type { Clock } from '../../core/clock';
import { lockConfigRef } from '../../core/rewards/references';
import {
  createSystem,
  getSystem,
  levelDetail,
  listSystems,
  normalizeLevels,
  progression,
  updateSystem,
  userLevelView,
  type LevelDef,
} from '../../core/levels/levels';
import type { Wallet } from '../../core/wallet/wallet';
import { scope } from '../../http/auth/scopes';
import { answerRefusals } from '../../http/domain-errors';
import { errors } from '../../http/errors';
import { route, type RouteSpec } from '../../http/route';

const read = { kind: 'admin', scope: scope.read('levels'), tenant: true } as const;
const write = { kind: 'admin', scope: scope.write('levels'), tenant: true } as const;
const query = { kind: 'tenant', signed: false } as const;

export function levelRoutes(deps: { sql: Sql; clock: Clock; wallet: Wallet }): RouteSpec[] {
  const { sql, clock } = deps;
  const system = async (tenantId: string, id?: string) => {
    const s = await getSystem(sql, tenantId, id);
    if (!s) throw errors.notFound(id ? `Level system ${id} not found` : 'The tenant has no level system');
    return s;
  };
  /**
   * Checks the references in the transaction that writes them: the reward config is locked against
   * deletion until it commits, and its foreign key refuses what slipped past (references.ts).
   */
  const withRefs = async <T>(
    tenantId: string,
    b: { currency_id?: string; reward_config_id?: string | null },
    write: (q: Queryable) => Promise<T>,
  ): Promise<T> => {
    if (b.currency_id !== undefined && !(await deps.wallet.currency(sql, tenantId, b.currency_id))) {
      throw errors.validation(`body.currency_id: currency ${b.currency_id} does not exist`);
    }
    return answerRefusals(
      () =>
        sql.tx(async (q) => {
          const problem = await lockConfigRef(q, tenantId, b.reward_config_id);
          if (problem) throw errors.validation(problem);
          return write(q);
        }),
      {
        foreignKey: () =>
          errors.validation(`body.reward_config_id: reward config ${b.reward_config_id} does not exist`),
      },
    );
  };
  const reads = (gateway: 'admin' | 'query', auth: typeof read | typeof query): RouteSpec[] => [
    route({
      gateway,
      method: 'GET',
      path: '/v1/levels/user/:user_id',
      summary: "A user's level",
      tag: 'Levels',
      auth,
      query: 'levels.query',
      response: 'level.user.view',
      handler: async ({ tenant, params, query: q }) =>
        userLevelView(sql, await system(tenant.id, q.level_system_id), params.user_id),
    }),
    route({
      gateway,
      method: 'GET',
      path: '/v1/levels/level/:level_number',
      summary: 'A level with the rewards of reaching it',
      tag: 'Levels',
      auth,
      query: 'levels.query',
      response: 'level.detail.view',
      handler: async ({ tenant, params, query: q }) => {
        if (!/^\d{1,6}$/.test(params.level_number))
          throw errors.validation('level_number must be a positive integer');
        const d = await levelDetail(
          sql,
          await system(tenant.id, q.level_system_id),
          Number(params.level_number),
        );
        if (!d) throw errors.notFound(`Level ${params.level_number} not found`);
        return d;
      },
    }),
    route({
      gateway,
      method: 'GET',
      path: '/v1/levels/progression',
      summary: "A user's achieved levels and progress to the next",
      tag: 'Levels',
      auth,
      query: 'levels.query',
      response: 'level.progression.view',
      handler: async (req) => {
        const q = req.query;
        const user = q.user_id ?? (req.principal?.kind === 'user' ? req.principal.userId : undefined);
        if (!user) throw errors.validation('query.user_id is required');
        return progression(sql, await system(req.tenant.id, q.level_system_id), user);
      },
    }),
  ];
  return [
    ...reads('admin', read),
    ...reads('query', query),
    route({
      gateway: 'admin',
      method: 'POST',
      path: '/v1/levels',
      summary: 'Create a level system (level 1 at 0 is added when missing)',
      tag: 'Levels',
      auth: write,
      body: 'level_system.create',
      status: 201,
      response: 'level_system.view',
      handler: async ({ tenant, body: b }) => {
        const levels = normalizeLevels(b.levels);
        if (!levels.ok) throw errors.validation(levels.error);
        const currency_id = b.currency_id ?? 'xp';
        return withRefs(tenant.id, { ...b, currency_id }, (q) =>
          createSystem(q, tenant.id, { ...b, currency_id, levels: levels.levels }, clock.now()),
        );
      },
    }),
    route({
      gateway: 'admin',
      method: 'GET',
      path: '/v1/levels',
      summary: 'List level systems',
      tag: 'Levels',
      auth: read,
      response: 'level_system.list.view',
      handler: async ({ tenant }) => {
        const systems = await listSystems(sql, tenant.id);
        return { level_systems: systems, total: systems.length };
      },
    }),
    route({
      gateway: 'admin',
      method: 'GET',
      path: '/v1/levels/systems/:level_id',
      summary: 'Get a level system',
      tag: 'Levels',
      auth: read,
      response: 'level_system.view',
      handler: async ({ tenant, params }) => system(tenant.id, params.level_id),
    }),
    route({
      gateway: 'admin',
      method: 'PUT',
      path: '/v1/levels/:level_id',
      summary: 'Update a level system (changed fields)',
      tag: 'Levels',
      auth: write,
      body: 'level_system.update',
      response: 'level_system.view',
      handler: async ({ tenant, params, body: b }) => {
        await system(tenant.id, params.level_id);
        let levels: LevelDef[] | undefined;
        if (b.levels) {
          const n = normalizeLevels(b.levels);
          if (!n.ok) throw errors.validation(n.error);
          levels = n.levels;
        }
        const updated = await withRefs(tenant.id, b, (q) =>
          updateSystem(q, tenant.id, params.level_id, { ...b, levels }, clock.now()),
        );
        if (!updated) throw errors.notFound(`Level system ${params.level_id} not found`);
        return updated;
      },
    }),
  ];
}
