/**
 * Admin routes of streaks (SPEC.md "Admin: streaks"; scope streaks:read / streaks:write), each
 * under `/v1/streaks?tenant_id=` and `/v1/tenants/{tenant_id}/streaks`: definitions (create, list,
 * get, update, status, delete = archive) and freezes granted to a user. `GET /v1/streaks` without
 * a tenant lists the definitions of every tenant the credential reaches (operator: all).
 */
import type { Queryable, Sql } from '../../adapters/sql/types';
import type { Clock } from '../../core/clock';
import type { Random } from '../../core/random';
import { lockConfigRef, lockItemRefs } from '../../core/rewards/references';
import {
  createDefinition,
  getDefinition,
  listDefinitions,
  milestoneItems,
  nameTaken,
  setStatus,
  updateDefinition,
  validateConfig,
  type StreakDefinition,
  type StreakStatus,
} from '../../core/streaks/definitions';
import type { StreakConfig } from '../../core/streaks/engine';
import { grantFreezes } from '../../core/streaks/freezes';
import { scope } from '../../http/auth/scopes';
import { answerRefusals } from '../../http/domain-errors';
import { errors } from '../../http/errors';
import { route, type RouteSpec } from '../../http/route';
import { bothForms } from '../forms';

export interface StreakAdminDeps {
  sql: Sql;
  clock: Clock;
  random: Random;
}

const read = { kind: 'admin', scope: scope.read('streaks'), tenant: true } as const;
const write = { kind: 'admin', scope: scope.write('streaks'), tenant: true } as const;
const common = { gateway: 'admin', tag: 'Streaks' } as const;

/** The definition as SPEC.md shows it. */
export function presentDefinition(d: StreakDefinition) {
  return {
    id: d.id,
    tenant_id: d.tenant_id,
    name: d.name,
    description: d.description,
    status: d.status,
    config: d.config,
    reward_config_id: d.reward_config_id,
    created_at: d.created_at,
    updated_at: d.updated_at,
  };
}

/** The schema's config as the engine's (the schema leaves window fields optional; validateConfig holds them). */
const asConfig = (c: unknown): StreakConfig => c as StreakConfig;

export function streakAdminRoutes(deps: StreakAdminDeps): RouteSpec[] {
  const { sql, clock } = deps;

  const checkConfig = (c: StreakConfig | undefined) => {
    if (!c) return;
    const err = validateConfig(c);
    if (err) throw errors.validation(err);
  };

  /**
   * A definition write in one transaction, after checking its references there (the reward
   * config and the milestones' items are locked against deletion until it commits) and the name;
   * the store's keys refuse what slipped past (a raced name: 409; a deleted config: 400).
   */
  const withChecks = <T>(
    tenantId: string,
    b: { name?: string; config?: StreakConfig; reward_config_id?: string | null },
    except: string | undefined,
    write: (q: Queryable) => Promise<T>,
  ): Promise<T> =>
    answerRefusals(
      () =>
        sql.tx(async (q) => {
          const problem = await lockConfigRef(q, tenantId, b.reward_config_id);
          if (problem) throw errors.validation(problem);
          if (b.config) {
            const wanted = milestoneItems(b.config);
            const found = await lockItemRefs(q, tenantId, wanted);
            const i = (b.config.milestones ?? []).findIndex(
              (m) => m.reward_item_id && !found.has(m.reward_item_id),
            );
            if (i >= 0)
              throw errors.validation(
                `body.config.milestones[${i}].reward_item_id: reward item ${b.config.milestones![i]!.reward_item_id} does not exist`,
              );
          }
          if (b.name !== undefined && (await nameTaken(q, tenantId, b.name, except)))
            throw errors.conflict(`A streak named ${JSON.stringify(b.name)} already exists in this tenant`);
          return write(q);
        }),
      {
        unique: () =>
          errors.conflict(`A streak named ${JSON.stringify(b.name)} already exists in this tenant`),
        foreignKey: () =>
          errors.validation(`body.reward_config_id: reward config ${b.reward_config_id} does not exist`),
      },
    );

  const mustGet = async (tenantId: string, id: string) => {
    const d = await getDefinition(sql, tenantId, id);
    if (!d) throw errors.notFound(`Streak definition ${id} not found`);
    return d;
  };

  const move = (tenantId: string, id: string, to: StreakStatus) =>
    sql.tx((q) => setStatus(q, tenantId, id, to, clock.now())).then(presentDefinition);

  return [
    ...bothForms(
      route({
        ...common,
        method: 'POST',
        path: '/v1/streaks',
        summary: 'Create a streak definition (status active)',
        auth: write,
        body: 'streak.create',
        response: 'streak.view',
        status: 201,
        handler: async ({ tenant, body: b }) => {
          const config = asConfig(b.config);
          checkConfig(config);
          return presentDefinition(
            await withChecks(tenant.id, { ...b, config }, undefined, (q) =>
              createDefinition(q, tenant.id, { ...b, config }, clock.now(), deps.random),
            ),
          );
        },
      }),
    ),
    ...bothForms(
      route({
        ...common,
        method: 'GET',
        path: '/v1/streaks',
        summary: 'List streak definitions; without a tenant, those of every tenant the credential reaches',
        auth: { kind: 'admin', scope: scope.read('streaks'), tenant: 'optional' },
        query: 'streak.list.query',
        response: 'streak.list.view',
        handler: async ({ tenant, principal, query: q }) => {
          let tenants: string[] | null = null;
          if (tenant) tenants = [tenant.id];
          else if (principal?.kind === 'api_key' && !principal.key.tenant_ids.includes('*'))
            tenants = principal.key.tenant_ids;
          const r = await listDefinitions(sql, tenants, q);
          return { definitions: r.definitions.map(presentDefinition), total: r.total };
        },
      }),
    ),
    ...bothForms(
      route({
        ...common,
        method: 'GET',
        path: '/v1/streaks/:definition_id',
        summary: 'Get a streak definition',
        auth: read,
        response: 'streak.view',
        handler: async ({ tenant, params }) =>
          presentDefinition(await mustGet(tenant.id, params.definition_id)),
      }),
    ),
    ...bothForms(
      route({
        ...common,
        method: 'PUT',
        path: '/v1/streaks/:definition_id',
        summary:
          'Update name, description or config (only the fields given; config applies to future events)',
        auth: write,
        body: 'streak.update',
        response: 'streak.view',
        handler: async ({ tenant, params, body: b }) => {
          const cur = await mustGet(tenant.id, params.definition_id);
          if (cur.status === 'archived')
            throw errors.conflict(`Streak definition ${cur.id} is archived; it cannot be changed`);
          const config = b.config ? asConfig(b.config) : undefined;
          checkConfig(config);
          const updated = await withChecks(tenant.id, { ...b, config }, cur.id, (q) =>
            updateDefinition(q, tenant.id, cur.id, { ...b, config }, clock.now()),
          );
          if (!updated) throw errors.notFound(`Streak definition ${params.definition_id} not found`);
          return presentDefinition(updated);
        },
      }),
    ),
    ...bothForms(
      route({
        ...common,
        method: 'PUT',
        path: '/v1/streaks/:definition_id/status',
        summary: 'Move the status: active, paused (streaks frozen) or archived (no processing, data kept)',
        auth: write,
        body: 'streak.status',
        response: 'streak.view',
        handler: async ({ tenant, params, body: b }) => move(tenant.id, params.definition_id, b.status),
      }),
    ),
    ...bothForms(
      route({
        ...common,
        method: 'DELETE',
        path: '/v1/streaks/:definition_id',
        summary: 'Archive a streak definition (soft delete); answers the archived record',
        auth: write,
        response: 'streak.view',
        handler: async ({ tenant, params }) => move(tenant.id, params.definition_id, 'archived'),
      }),
    ),
    ...bothForms(
      route({
        ...common,
        method: 'POST',
        path: '/v1/streaks/:definition_id/freezes',
        summary: "Grant freezes to a user's streak (once per idempotency_key; capped by max_freezes)",
        auth: write,
        body: 'streak.freezes.grant',
        response: 'streak.freezes.view',
        handler: async ({ tenant, params, body: b }) =>
          answerRefusals(
            () =>
              sql.tx((q) =>
                grantFreezes(q, {
                  tenant_id: tenant.id,
                  streak_id: params.definition_id,
                  user_id: b.user_id,
                  count: b.count,
                  idempotency_key: b.idempotency_key,
                  source_type: 'manual_grant',
                  now: clock.now(),
                }),
              ),
            {
              unique: () =>
                errors.conflict(`idempotency_key ${b.idempotency_key} was used by a concurrent freeze grant`),
            },
          ),
      }),
    ),
  ];
}
