/**
 * Admin routes of spin wheels: create, list, get, update (changed fields; config fields replace
 * the stored ones) and delete (deactivates), under `?tenant_id` and `/v1/tenants/{tenant_id}/`.
 * The config is checked in full after every change (core/wheels/wheels.ts), what it names in the
 * transaction that writes it.
 */
import type { Queryable } from '../../adapters/sql/types';
import { spinHistory } from '../../core/wheels/spin';
import {
  checkReferences,
  createWheel,
  getWheel,
  listWheels,
  normalizeConfig,
  updateWheel,
  withThemes,
  type Wheel,
  type WheelConfig,
  type WheelConfigInput,
} from '../../core/wheels/wheels';
import { answerRefusals } from '../../http/domain-errors';
import { errors } from '../../http/errors';
import { route, type RouteSpec } from '../../http/route';
import { bothForms } from '../forms';
import { common, read, write, type WheelDeps } from './common';

export function wheelAdminRoutes(deps: WheelDeps): RouteSpec[] {
  const { sql, clock } = deps;
  const view = async (q: Queryable, tenantId: string, w: Wheel) => (await withThemes(q, tenantId, [w]))[0]!;
  /** Validates a whole config and writes it with what it names checked in the same transaction. */
  const writeChecked = (
    tenantId: string,
    config: WheelConfigInput | undefined,
    write: (q: Queryable, config: WheelConfig | undefined) => Promise<Wheel | null>,
  ) =>
    answerRefusals(
      () =>
        sql.tx(async (q) => {
          let normal: WheelConfig | undefined;
          if (config) {
            const n = normalizeConfig(config);
            if (!n.ok) throw errors.validation(n.error);
            const problem = await checkReferences(q, deps.wallet, tenantId, n.config);
            if (problem) throw errors.validation(problem);
            normal = n.config;
          }
          const w = await write(q, normal);
          return w ? view(q, tenantId, w) : null;
        }),
      // A reward item deleted between the check and the write.
      { foreignKey: () => errors.validation('body.config.segments: a reward item it names was deleted') },
    );
  return [
    ...bothForms(
      route({
        ...common,
        method: 'POST',
        path: '/v1/wheels',
        summary: 'Create a spin wheel',
        response: 'wheel.view',
        auth: write,
        body: 'wheel.create',
        status: 201,
        handler: async ({ tenant, body: b }) =>
          writeChecked(tenant.id, b.config, (q, config) =>
            createWheel(q, deps.random, tenant.id, { ...b, config: config! }, clock.now()),
          ),
      }),
    ),
    ...bothForms(
      route({
        ...common,
        method: 'GET',
        path: '/v1/wheels',
        summary: 'List spin wheels (with their resolved themes)',
        response: 'wheel.list.view',
        auth: read,
        query: 'wheel.list.query',
        handler: async ({ tenant, query: q }) => {
          const r = await listWheels(sql, tenant.id, q);
          return { wheels: await withThemes(sql, tenant.id, r.wheels), total: r.total };
        },
      }),
    ),
    ...bothForms(
      route({
        ...common,
        method: 'GET',
        path: '/v1/wheels/:wheel_id',
        summary: 'Get a spin wheel',
        response: 'wheel.view',
        auth: read,
        handler: async ({ tenant, params }) => {
          const w = await getWheel(sql, tenant.id, params.wheel_id);
          if (!w) throw errors.notFound(`Wheel ${params.wheel_id} not found`);
          return view(sql, tenant.id, w);
        },
      }),
    ),
    ...bothForms(
      route({
        ...common,
        method: 'PUT',
        path: '/v1/wheels/:wheel_id',
        summary: 'Update a spin wheel (changed fields; each config field replaces the stored one)',
        response: 'wheel.view',
        auth: write,
        body: 'wheel.update',
        handler: async ({ tenant, params, body: b }) => {
          const id = params.wheel_id;
          const out = await answerRefusals(
            () =>
              sql.tx(async (q) => {
                const cur = await getWheel(q, tenant.id, id, true);
                if (!cur) throw errors.notFound(`Wheel ${id} not found`);
                let config: WheelConfig | undefined;
                if (b.config) {
                  const n = normalizeConfig({ ...cur.config, ...b.config });
                  if (!n.ok) throw errors.validation(n.error);
                  const problem = await checkReferences(q, deps.wallet, tenant.id, n.config);
                  if (problem) throw errors.validation(problem);
                  config = n.config;
                }
                const w = await updateWheel(
                  q,
                  tenant.id,
                  id,
                  { name: b.name, description: b.description, active: b.active, config },
                  clock.now(),
                );
                return w ? view(q, tenant.id, w) : null;
              }),
            {
              foreignKey: () => errors.validation('body.config.segments: a reward item it names was deleted'),
            },
          );
          if (!out) throw errors.notFound(`Wheel ${id} not found`);
          return out;
        },
      }),
    ),
    ...bothForms(
      route({
        ...common,
        method: 'DELETE',
        path: '/v1/wheels/:wheel_id',
        summary:
          'Delete a spin wheel: deactivates it (its spins stay readable; PUT active: true restores it)',
        response: 'wheel.view',
        auth: write,
        handler: async ({ tenant, params }) => {
          const w = await writeChecked(tenant.id, undefined, (q) =>
            updateWheel(q, tenant.id, params.wheel_id, { active: false }, clock.now()),
          );
          if (!w) throw errors.notFound(`Wheel ${params.wheel_id} not found`);
          return w;
        },
      }),
    ),
    ...bothForms(
      route({
        ...common,
        method: 'GET',
        path: '/v1/wheels/:wheel_id/spins',
        summary: "A wheel's spins with their audit fields, newest first (user_id filter), for operators",
        response: 'wheel.history.view',
        auth: read,
        query: 'wheel.spins.query',
        handler: async ({ tenant, params, query: q }) => {
          if (!(await getWheel(sql, tenant.id, params.wheel_id)))
            throw errors.notFound(`Wheel ${params.wheel_id} not found`);
          return spinHistory(sql, tenant.id, { ...q, wheel_id: params.wheel_id });
        },
      }),
    ),
    ...bothForms(
      route({
        ...common,
        method: 'GET',
        path: '/v1/wheels/user/:user_id/history',
        summary: "A user's spins with their audit fields, newest first (wheel_id filter)",
        response: 'wheel.history.view',
        auth: read,
        query: 'wheel.history.query',
        handler: async ({ tenant, params, query: q }) =>
          spinHistory(sql, tenant.id, { ...q, user_id: params.user_id }),
      }),
    ),
  ];
}
