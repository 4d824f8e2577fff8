/** Admin routes of loyalty tiers (wallet): create, list, get, update, delete. */
import { randomUUID } from 'node:crypto';
import { toTier } from '../../core/wallet/tiers';
import { answerRefusals } from '../../http/domain-errors';
import { errors } from '../../http/errors';
import { route, type RouteSpec } from '../../http/route';
import { checkCurrency, common, read, walletForms, write, type WalletAdminDeps } from './common';

export function tierRoutes(deps: WalletAdminDeps): RouteSpec[] {
  const { sql, clock } = deps;
  const now = () => new Date(clock.now()).toISOString();
  return [
    ...walletForms(
      route({
        ...common,
        method: 'POST',
        path: '/v1/wallet/tiers',
        summary: 'Create a loyalty tier',
        response: 'tier.view',
        auth: write,
        body: 'tier.create',
        status: 201,
        handler: async ({ tenant, body: b }) => {
          await checkCurrency(deps, tenant.id, b.currency_id);
          const r = await sql.query<Parameters<typeof toTier>[0]>(
            `INSERT INTO tiers (tenant_id, id, tier_name, tier_level, min_lifetime_points, currency_id, icon_url, badge_color, benefits, created_at, updated_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10) ON CONFLICT DO NOTHING RETURNING *`,
            [
              tenant.id,
              randomUUID(),
              b.tier_name,
              b.tier_level,
              b.min_lifetime_points,
              b.currency_id,
              b.icon_url ?? null,
              b.badge_color ?? null,
              JSON.stringify(b.benefits ?? {}),
              now(),
            ],
          );
          if (!r.rows[0])
            throw errors.conflict(`A tier of level ${b.tier_level} already exists for ${b.currency_id}`);
          return toTier(r.rows[0]);
        },
      }),
    ),
    ...walletForms(
      route({
        ...common,
        method: 'GET',
        path: '/v1/wallet/tiers',
        summary: 'List loyalty tiers',
        response: 'tier.list.view',
        auth: read,
        handler: async ({ tenant }) => {
          const r = await sql.query<Parameters<typeof toTier>[0]>(
            'SELECT * FROM tiers WHERE tenant_id = $1 ORDER BY currency_id, tier_level',
            [tenant.id],
          );
          return { tiers: r.rows.map(toTier), total: r.rows.length };
        },
      }),
    ),
    ...walletForms(
      route({
        ...common,
        method: 'GET',
        path: '/v1/wallet/tiers/:tier_id',
        summary: 'Get a loyalty tier',
        response: 'tier.view',
        auth: read,
        handler: async ({ tenant, params }) => {
          const r = await sql.query<Parameters<typeof toTier>[0]>(
            'SELECT * FROM tiers WHERE tenant_id = $1 AND id = $2',
            [tenant.id, params.tier_id],
          );
          if (!r.rows[0]) throw errors.notFound(`Tier ${params.tier_id} not found`);
          return toTier(r.rows[0]);
        },
      }),
    ),
    ...walletForms(
      route({
        ...common,
        method: 'PUT',
        path: '/v1/wallet/tiers/:tier_id',
        summary: 'Update a loyalty tier',
        response: 'tier.view',
        auth: write,
        body: 'tier.update',
        handler: async ({ tenant, params, body: b }) => {
          await checkCurrency(deps, tenant.id, b.currency_id);
          const update = () =>
            sql.query<Parameters<typeof toTier>[0]>(
              `UPDATE tiers SET tier_name = COALESCE($3, tier_name), tier_level = COALESCE($4, tier_level),
             min_lifetime_points = COALESCE($5, min_lifetime_points), currency_id = COALESCE($6, currency_id),
             icon_url = CASE WHEN $7::boolean THEN $8 ELSE icon_url END, badge_color = CASE WHEN $9::boolean THEN $10 ELSE badge_color END,
             benefits = COALESCE($11::jsonb, benefits), updated_at = $12
           WHERE tenant_id = $1 AND id = $2 RETURNING *`,
              [
                tenant.id,
                params.tier_id,
                b.tier_name ?? null,
                b.tier_level ?? null,
                b.min_lifetime_points ?? null,
                b.currency_id ?? null,
                b.icon_url !== undefined,
                b.icon_url ?? null,
                b.badge_color !== undefined,
                b.badge_color ?? null,
                b.benefits ? JSON.stringify(b.benefits) : null,
                now(),
              ],
            );
          // Another tier of the currency took that level meanwhile (the unique key): 409, as the create answers.
          const r = await answerRefusals(update, {
            unique: () => errors.conflict('Another tier of this currency already has that tier_level'),
          });
          if (!r.rows[0]) throw errors.notFound(`Tier ${params.tier_id} not found`);
          return toTier(r.rows[0]);
        },
      }),
    ),
    ...walletForms(
      route({
        ...common,
        method: 'DELETE',
        path: '/v1/wallet/tiers/:tier_id',
        summary: 'Delete a loyalty tier',
        response: 'tier.view',
        auth: write,
        handler: async ({ tenant, params }) => {
          const r = await sql.query<Parameters<typeof toTier>[0]>(
            'DELETE FROM tiers WHERE tenant_id = $1 AND id = $2 RETURNING *',
            [tenant.id, params.tier_id],
          );
          if (!r.rows[0]) throw errors.notFound(`Tier ${params.tier_id} not found`);
          return toTier(r.rows[0]);
        },
      }),
    ),
  ];
}
