/** Admin routes of earning rules (wallet): create, list, get, update, delete. */
import {
  createRule,
  deleteRule,
  getRule,
  listRules,
  updateRule,
  validateRule,
} from '../../core/wallet/earning';
import { errors } from '../../http/errors';
import { route, type RouteSpec } from '../../http/route';
import { checkCurrency, common, read, walletForms, write, type WalletAdminDeps } from './common';

export function earningRuleRoutes(deps: WalletAdminDeps): RouteSpec[] {
  const { sql, clock } = deps;
  return [
    ...walletForms(
      route({
        ...common,
        method: 'POST',
        path: '/v1/wallet/earning-rules',
        summary: 'Create an earning rule (a tenant holds at most 100)',
        response: 'earning_rule.view',
        auth: write,
        body: 'earning_rule.create',
        status: 201,
        errors: [409],
        // The limit is counted under the tenant row's lock: racing creates are counted in turn.
        transaction: true,
        handler: async ({ tenant, body: b, q }) => {
          const err = validateRule(b);
          if (err) throw errors.validation(err);
          await checkCurrency(deps, tenant.id, b.currency_id, q);
          return createRule(
            q,
            tenant.id,
            {
              name: b.name,
              currency_id: b.currency_id,
              event_type: b.event_type,
              event_filter: b.event_filter ?? null,
              calculation: b.calculation,
              max_per_event: b.max_per_event ?? null,
              max_per_day: b.max_per_day ?? null,
              max_per_week: b.max_per_week ?? null,
              priority: b.priority ?? 0,
              active: b.active ?? true,
            },
            clock.now(),
          );
        },
      }),
    ),
    ...walletForms(
      route({
        ...common,
        method: 'GET',
        path: '/v1/wallet/earning-rules',
        summary: 'List earning rules (highest priority first)',
        response: 'earning_rule.list.view',
        auth: read,
        handler: async ({ tenant }) => {
          const rules = await listRules(sql, tenant.id);
          return { earning_rules: rules, total: rules.length };
        },
      }),
    ),
    ...walletForms(
      route({
        ...common,
        method: 'GET',
        path: '/v1/wallet/earning-rules/:rule_id',
        summary: 'Get an earning rule',
        response: 'earning_rule.view',
        auth: read,
        handler: async ({ tenant, params }) => {
          const r = await getRule(sql, tenant.id, params.rule_id);
          if (!r) throw errors.notFound(`Earning rule ${params.rule_id} not found`);
          return r;
        },
      }),
    ),
    ...walletForms(
      route({
        ...common,
        method: 'PUT',
        path: '/v1/wallet/earning-rules/:rule_id',
        summary: 'Update an earning rule (changed fields, e.g. max_per_day, active)',
        response: 'earning_rule.view',
        auth: write,
        body: 'earning_rule.update',
        handler: async ({ tenant, params, body: b }) => {
          const cur = await getRule(sql, tenant.id, params.rule_id);
          if (!cur) throw errors.notFound(`Earning rule ${params.rule_id} not found`);
          const err = validateRule({ ...cur, ...b });
          if (err) throw errors.validation(err);
          await checkCurrency(deps, tenant.id, b.currency_id);
          const updated = await updateRule(sql, tenant.id, params.rule_id, b, clock.now());
          if (!updated) throw errors.notFound(`Earning rule ${params.rule_id} not found`);
          return updated;
        },
      }),
    ),
    ...walletForms(
      route({
        ...common,
        method: 'DELETE',
        path: '/v1/wallet/earning-rules/:rule_id',
        summary: 'Delete an earning rule',
        response: 'earning_rule.view',
        auth: write,
        handler: async ({ tenant, params }) => {
          const r = await deleteRule(sql, tenant.id, params.rule_id);
          if (!r) throw errors.notFound(`Earning rule ${params.rule_id} not found`);
          return r;
        },
      }),
    ),
  ];
}
