/**
 * What the store's route files share: dependencies, auth rules, the catalog checks that need the
 * store (currencies of prices, the api endpoint's address), and the views.
 */
import type { Sql } from '../../adapters/sql/types';
import type { Clock } from '../../core/clock';
import type { Random } from '../../core/random';
import { catalogProblem, pricesOf, type CatalogInput, type CatalogReward } from '../../core/store/catalog';
import { toListItem, toOrder, type OrderRow } from '../../core/store/orders';
import type { StoreService } from '../../core/store/store';
import { checkRegistrableName, checkUrl, type Resolver } from '../../core/webhooks/address';
import { AddressRefused } from '../../core/webhooks/address';
import { systemResolver } from '../../core/webhooks/sender';
import type { Wallet } from '../../core/wallet/wallet';
import { scope } from '../../http/auth/scopes';
import { errors } from '../../http/errors';

export interface StoreDeps {
  sql: Sql;
  clock: Clock;
  random: Random;
  wallet: Wallet;
  store: StoreService;
  /** The webhook address rules, which the api fulfilment endpoint follows too. */
  allowPrivate: boolean;
  resolve?: Resolver;
}

export const catalogRead = { kind: 'admin', scope: scope.read('rewards'), tenant: true } as const;
export const catalogWrite = { kind: 'admin', scope: scope.write('rewards'), tenant: true } as const;
export const ordersRead = { kind: 'admin', scope: scope.read('orders'), tenant: true } as const;
export const ordersWrite = { kind: 'admin', scope: scope.write('orders'), tenant: true } as const;
export const adminCommon = { gateway: 'admin', tag: 'Store' } as const;

/**
 * Checks a catalog reward as it will be stored (`merged`): the rules of catalogProblem, the
 * currencies of its prices (existing, active, spendable), the xp currency of xp fulfilment, and
 * the api endpoint's address (the webhook rules: http(s), no credentials, no private address).
 */
export async function checkCatalog(deps: StoreDeps, tenantId: string, merged: CatalogInput): Promise<void> {
  const p = catalogProblem(merged);
  if (p) throw errors.validation(p);
  for (const { at, currency } of pricesOf(merged)) {
    const c = await deps.wallet.currency(deps.sql, tenantId, currency);
    if (!c) throw errors.validation(`${at}: currency ${currency} does not exist`);
    if (!c.active) throw errors.validation(`${at}: currency ${currency} is not active`);
    if (!c.is_spendable)
      throw errors.validation(
        `${at}: currency ${currency} is accumulate-only (is_spendable: false) and cannot be a price`,
      );
  }
  const f = merged.fulfillment;
  if (f?.type === 'wallet' && f.item_type === 'xp' && !(await deps.wallet.currency(deps.sql, tenantId, 'xp')))
    throw errors.validation(
      'body.fulfillment.item_type: xp fulfilment credits the currency xp, which does not exist',
    );
  if (f?.type === 'api') {
    const url = merged.config?.url as string;
    const v = checkUrl(url, deps.allowPrivate);
    if (!v.ok) throw errors.validation(`body.config.url: ${v.reason}`);
    if (!v.ip && !deps.allowPrivate) {
      try {
        await checkRegistrableName(v.hostname, deps.resolve ?? systemResolver);
      } catch (err) {
        if (err instanceof AddressRefused) throw errors.validation(`body.config.url: ${err.message}`);
        throw err;
      }
    }
  }
}

export const orderView = (o: OrderRow) => toOrder(o);
export const orderItem = (o: OrderRow) => toListItem(o);

/**
 * A catalog reward as end users see it: no config, the fulfilment type only; with a balance,
 * whether it covers the first price (the primary one) and what is missing.
 */
export function storeView(r: CatalogReward, balance: number | undefined) {
  // `balance` is one number: it is compared with the reward's first price (its primary price).
  const lowest = r.purchase?.prices[0]?.amount ?? null;
  const inStock =
    r.variants.length > 0
      ? r.stock !== 0 || r.variants.some((v) => v.stock === null || v.stock === undefined || v.stock > 0)
      : r.stock !== 0;
  return {
    id: r.id,
    slug: r.slug,
    name: r.name,
    description: r.description,
    image_url: r.image_url,
    fields: r.fields,
    fulfillment: { type: r.fulfillment.type },
    requires_claim: r.requires_claim,
    purchase: r.purchase,
    stock: r.stock,
    variants: r.variants,
    in_stock: inStock,
    ...(balance === undefined
      ? {}
      : {
          affordable: lowest !== null && balance >= lowest,
          points_needed: lowest === null ? null : Math.max(0, lowest - balance),
        }),
  };
}
