/** Operator: dead letters, the records a consumer could not apply (docs/operations.md "Dead letters"). */
import type { Queryable } from '../../adapters/sql/types';
import { listDeadLetters } from '../../core/dead-letters';
import { route, type RouteSpec } from '../../http/route';
import { root } from './common';

export function deadLetterRoutes(deps: { sql: Queryable }): RouteSpec[] {
  return [
    route({
      gateway: 'admin',
      method: 'GET',
      path: '/v1/operator/dead-letters',
      summary:
        'List dead letters (records a consumer could not apply, with the reason), newest first; filter by consumer and partition, page with cursor',
      tag: 'Operator',
      auth: root,
      response: 'deadletter.list.view',
      query: 'deadletters.query',
      handler: async ({ query }) => listDeadLetters(deps.sql, query),
    }),
  ];
}
