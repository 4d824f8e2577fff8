/**
 * The store's money-like operations, each one SQL transaction (docs/store.md): purchase, admin
 * grant, claim, the admin's status of a manual order, retry, refund, and the expiry of unclaimed
 * orders. Wallet movements go through the wallet (core/wallet/wallet.ts), state moves through the
 * order state machine (./order-states.ts via OrderStore.apply), webhooks through facts.
 */
import { createHash } from 'node:crypto';
import type { Queryable, Sql } from '../../adapters/sql/types';
import { WalletError, type Wallet } from '../wallet/wallet';
import {
  DEFAULT_VARIANT,
  fieldProblems,
  getReward,
  getRewardBySlug,
  pricesFor,
  returnStock,
  takeStock,
  type CatalogReward,
} from './catalog';
import { StoreError } from './errors';
import type { Fulfiller } from './fulfilment';
import { move } from './order-states';
import { orderByKey, type OrderRow, type OrderStore } from './orders';

/** Advisory lock class of purchase idempotency keys ('LDPK'). */
const PURCHASE_LOCK_CLASS = 0x4c44504b;

const iso = (ms: number) => new Date(ms).toISOString();

export interface PurchaseRequest {
  user_id: string;
  idempotency_key: string;
  currency: string;
  fields?: Record<string, unknown>;
  variant_id?: string;
}

export interface GrantOrderRequest {
  user_id: string;
  reward_id: string;
  variant_id?: string;
  source_type: string;
  source_ref?: string | null;
  expires_at?: string | null;
}

/** A stable hash of what a purchase asks for: the same key must ask for the same thing. */
export function purchaseHash(slug: string, b: PurchaseRequest): string {
  const fields = Object.fromEntries(Object.entries(b.fields ?? {}).sort(([a], [c]) => (a < c ? -1 : 1)));
  return createHash('sha256')
    .update(JSON.stringify([slug, b.currency, b.variant_id ?? DEFAULT_VARIANT, fields]))
    .digest('hex');
}

/** The remaining stock of a reward or variant as read (null: unlimited). */
function stockOf(r: CatalogReward, variantId: string): number | null {
  if (variantId === DEFAULT_VARIANT) return r.stock;
  return r.variants.find((v) => v.variant_id === variantId)?.stock ?? null;
}

function checkVariant(r: CatalogReward, variantId: string | undefined): string {
  const v = variantId ?? DEFAULT_VARIANT;
  if (v !== DEFAULT_VARIANT && !r.variants.some((x) => x.variant_id === v))
    throw new StoreError('invalid', `body.variant_id: reward ${r.slug} has no variant ${v}`);
  return v;
}

function checkFields(r: CatalogReward, fields: Record<string, unknown>): Record<string, string> {
  const problems = fieldProblems(r.fields, fields);
  const names = Object.keys(problems);
  if (names.length > 0)
    throw new StoreError(
      'invalid',
      `body.fields.${names[0]}: ${problems[names[0]!]}${names.length > 1 ? ` (and ${names.length - 1} more; see details.fields)` : ''}`,
      { fields: problems },
    );
  return Object.fromEntries(
    Object.entries(fields).filter(([, v]) => typeof v === 'string' && v !== ''),
  ) as Record<string, string>;
}

export class StoreService {
  constructor(
    private readonly deps: { sql: Sql; wallet: Wallet; orders: OrderStore; fulfiller: Fulfiller },
  ) {}

  /**
   * A purchase, in one transaction: the key's earlier order (was_cached) or a new one. Refusals:
   * 404 reward, 400 currency/variant/fields, 409 out of stock or key reused for another request,
   * 402 insufficient balance (nothing written).
   */
  async purchase(
    tenantId: string,
    slug: string,
    b: PurchaseRequest,
    now: number,
  ): Promise<{ order: OrderRow; was_cached: boolean }> {
    const { sql, wallet, orders, fulfiller } = this.deps;
    const hash = purchaseHash(slug, b);
    return sql.tx(async (q) => {
      // One purchase per key at a time: the second waits and then finds the first's order.
      const lockKey = createHash('sha256')
        .update(`${tenantId}\u0000${b.user_id}\u0000${b.idempotency_key}`)
        .digest();
      await q.query('SELECT pg_advisory_xact_lock($1::int4, $2::int4)', [
        PURCHASE_LOCK_CLASS,
        lockKey.readInt32BE(0),
      ]);
      const seen = await orderByKey(q, tenantId, b.user_id, b.idempotency_key);
      if (seen) {
        if (seen.request_hash !== hash)
          throw new StoreError(
            'idempotency_conflict',
            'idempotency_key was already used for a different purchase (another reward, currency, variant or fields)',
          );
        return { order: seen, was_cached: true };
      }
      const reward = await getRewardBySlug(q, tenantId, slug);
      if (!reward || !reward.active) throw new StoreError('not_found', `Reward ${slug} not found`);
      const variant = checkVariant(reward, b.variant_id);
      const prices = pricesFor(reward, variant);
      if (prices.length === 0)
        throw new StoreError('invalid', `Reward ${slug} is not for sale (it has no prices)`);
      const price = prices.find((p) => p.currency === b.currency);
      if (!price)
        throw new StoreError(
          'invalid',
          `body.currency: ${b.currency} is not among the reward's prices (${prices.map((p) => p.currency).join(', ')})`,
        );
      const given = b.fields !== undefined && Object.keys(b.fields).length > 0;
      // A reward that needs a claim may be bought without its fields and claimed later.
      const claimLater = reward.requires_claim && !given;
      const fields = claimLater ? {} : checkFields(reward, b.fields ?? {});
      // The stock row is the one row every buyer of the reward locks: it is taken last (below), so
      // it stays locked only for the commit. Whether the order holds a unit is known from the read.
      const limited = stockOf(reward, variant) !== null;
      // Sold out as read: refused at once (the unit taken last below is the guarantee).
      if (stockOf(reward, variant) === 0)
        throw new StoreError(
          'out_of_stock',
          `Reward ${slug}${variant === DEFAULT_VARIANT ? '' : ` (variant ${variant})`} is out of stock`,
        );
      const id = orders.newId();
      const debit = await wallet
        .debit(q, {
          tenant_id: tenantId,
          user_id: b.user_id,
          currency_id: price.currency,
          amount: price.amount,
          source_type: 'purchase',
          source_ref: id,
          description: reward.name,
          idempotency_key: `purchase:${b.user_id}:${b.idempotency_key}`,
          purpose: 'spend',
          now,
        })
        .catch((err: unknown) => {
          // The price's currency was deactivated or made accumulate-only since: the request's field.
          if (err instanceof WalletError && err.code !== 'insufficient_balance')
            throw new StoreError('invalid', `body.currency: ${err.message}`);
          throw err;
        });
      const row = await orders.insert(q, {
        id,
        tenant_id: tenantId,
        user_id: b.user_id,
        reward,
        variant_id: variant,
        source_type: 'purchase',
        source_ref: null,
        state: claimLater ? 'pending_claim' : 'fulfilling',
        fields,
        expires_at: null,
        idempotency_key: b.idempotency_key,
        request_hash: hash,
        price,
        debit_tx_id: debit.transaction_id,
        stock_held: limited,
        next_attempt_at: reward.fulfillment.type === 'api' ? now : null,
        now,
      });
      const started = await fulfiller.start(q, row, now);
      const stock = await takeStock(q, tenantId, reward.id, variant);
      if (stock === 'out')
        throw new StoreError(
          'out_of_stock',
          `Reward ${slug}${variant === DEFAULT_VARIANT ? '' : ` (variant ${variant})`} is out of stock`,
        );
      const held = stock === 'taken';
      // The stock was made limited or unlimited since the read: the order says what happened.
      if (held !== limited)
        await q.query('UPDATE reward_orders SET stock_held = $3 WHERE tenant_id = $1 AND id = $2', [
          tenantId,
          id,
          held,
        ]);
      return { order: { ...started, stock_held: held }, was_cached: false };
    });
  }

  /** The admin grant: an order without payment (pending_claim when the reward needs a claim). */
  async grant(tenantId: string, b: GrantOrderRequest, now: number): Promise<OrderRow> {
    const { sql, orders, fulfiller } = this.deps;
    return sql.tx(async (q) => {
      const reward = await getReward(q, tenantId, b.reward_id);
      if (!reward) throw new StoreError('not_found', `Reward ${b.reward_id} not found`);
      const variant = checkVariant(reward, b.variant_id);
      let expires: number | null = null;
      if (b.expires_at) {
        expires = Date.parse(b.expires_at);
        if (!reward.requires_claim)
          throw new StoreError(
            'invalid',
            'body.expires_at: only an order waiting for a claim expires (the reward has requires_claim false)',
          );
        if (expires <= now) throw new StoreError('invalid', 'body.expires_at must be in the future');
      }
      const stock = await takeStock(q, tenantId, reward.id, variant);
      if (stock === 'out') throw new StoreError('out_of_stock', `Reward ${reward.slug} is out of stock`);
      const row = await orders.insert(q, {
        tenant_id: tenantId,
        user_id: b.user_id,
        reward,
        variant_id: variant,
        source_type: b.source_type,
        source_ref: b.source_ref ?? null,
        state: reward.requires_claim ? 'pending_claim' : 'fulfilling',
        fields: {},
        expires_at: expires,
        stock_held: stock === 'taken',
        next_attempt_at: reward.fulfillment.type === 'api' ? now : null,
        now,
      });
      return fulfiller.start(q, row, now);
    });
  }

  /** The user's claim: fields checked against the reward's definitions, then fulfilling. */
  async claim(
    tenantId: string,
    orderId: string,
    userId: string,
    values: Record<string, unknown>,
    now: number,
  ): Promise<OrderRow> {
    const { sql, orders, fulfiller } = this.deps;
    return sql.tx(async (q) => {
      const o = await orders.lock(q, tenantId, orderId);
      if (!o || o.user_id !== userId)
        throw new StoreError('not_found', `Order ${orderId} not found for user ${userId}`);
      if (o.state === 'pending_claim' && o.expires_at !== null && Number(o.expires_at) <= now)
        throw new StoreError(
          'expired',
          `Order ${orderId} expired at ${iso(Number(o.expires_at))}; it can no longer be claimed`,
        );
      // The reward's current field definitions (an implicit order of a reward item has none).
      const reward = await getReward(q, tenantId, o.reward_id);
      // The state machine refuses a claim of an order that is not waiting for one (409).
      move(o.state, 'claim');
      const fields = reward ? checkFields(reward, values) : {};
      const moved = await orders.apply(
        q,
        o,
        'claim',
        {
          fields,
          status: { started_at: iso(now) },
          next_attempt_at: o.fulfillment.type === 'api' ? now : null,
        },
        now,
      );
      return fulfiller.start(q, moved, now);
    });
  }

  /** The admin's status of a manual order: completed (tracking) or failed (reason). */
  async setStatus(
    tenantId: string,
    orderId: string,
    s: {
      state: 'completed' | 'failed';
      tracking_number?: string;
      shipped_at?: string;
      notes?: string;
      reason?: string;
    },
    now: number,
  ): Promise<OrderRow> {
    const { sql, orders } = this.deps;
    return sql.tx(async (q) => {
      const o = await this.mustLock(q, tenantId, orderId);
      if (o.fulfillment.type !== 'manual')
        throw new StoreError(
          'not_manual',
          `Order ${orderId} is fulfilled by ${o.fulfillment.type}; the admin sets the status of manual orders only (retry a failed one)`,
        );
      if (s.state === 'completed') {
        const status = {
          completed_at: iso(now),
          ...(s.tracking_number !== undefined ? { tracking_number: s.tracking_number } : {}),
          ...(s.shipped_at !== undefined ? { shipped_at: new Date(s.shipped_at).toISOString() } : {}),
          ...(s.notes !== undefined ? { notes: s.notes } : {}),
        };
        return orders.apply(q, o, 'complete', { status, clear: ['reason'] }, now);
      }
      return orders.apply(q, o, 'fail', { status: { reason: s.reason } }, now);
    });
  }

  /** Retries a failed order: back to fulfilling, its attempts from zero. */
  async retry(tenantId: string, orderId: string, now: number): Promise<OrderRow> {
    const { sql, orders, fulfiller } = this.deps;
    return sql.tx(async (q) => {
      const o = await this.mustLock(q, tenantId, orderId);
      const moved = await orders.apply(
        q,
        o,
        'retry',
        {
          status: { started_at: iso(now), attempts: 0 },
          clear: ['reason', 'last_error'],
          attempts: 0,
          next_attempt_at: o.fulfillment.type === 'api' ? now : null,
        },
        now,
      );
      return fulfiller.start(q, moved, now);
    });
  }

  /**
   * Refunds a purchase order once: its debit credited back (a ledger row with source_type refund,
   * idempotent on the order), its stock returned, state refunded. A second refund is refused by the
   * state machine (409), so whatever is retried the money moves once.
   */
  async refund(tenantId: string, orderId: string, reason: string, now: number): Promise<OrderRow> {
    const { sql, orders, wallet } = this.deps;
    return sql.tx(async (q) => {
      const o = await this.mustLock(q, tenantId, orderId);
      if (o.source_type !== 'purchase' || o.price_currency === null || o.price_amount === null)
        throw new StoreError(
          'not_refundable',
          `Order ${orderId} was not bought (source_type ${o.source_type}); only purchases are refunded`,
        );
      // Asked before the credit, so a refused move writes nothing.
      move(o.state, 'refund');
      const credit = await wallet.credit(q, {
        tenant_id: tenantId,
        user_id: o.user_id,
        currency_id: o.price_currency,
        amount: Number(o.price_amount),
        source_type: 'refund',
        source_ref: o.id,
        description: `Refund: ${reason}`.slice(0, 500),
        idempotency_key: `refund:${o.id}`,
        now,
      });
      if (o.stock_held) await returnStock(q, tenantId, o.reward_id, o.variant_id);
      return orders.apply(
        q,
        o,
        'refund',
        { status: { reason, refunded_at: iso(now) }, refund_tx_id: credit.transaction_id, stock_held: false },
        now,
      );
    });
  }

  /** Moves one unclaimed order past its expiry to expired (its stock returned); false when it was not due. */
  async expire(tenantId: string, orderId: string, now: number): Promise<boolean> {
    const { sql, orders } = this.deps;
    return sql.tx(async (q) => {
      const o = await orders.lock(q, tenantId, orderId);
      if (!o || o.state !== 'pending_claim' || o.expires_at === null || Number(o.expires_at) > now)
        return false;
      if (o.stock_held) await returnStock(q, tenantId, o.reward_id, o.variant_id);
      await orders.apply(q, o, 'expire', { status: { expired_at: iso(now) }, stock_held: false }, now);
      return true;
    });
  }

  private async mustLock(q: Queryable, tenantId: string, orderId: string): Promise<OrderRow> {
    const o = await this.deps.orders.lock(q, tenantId, orderId);
    if (!o) throw new StoreError('not_found', `Order ${orderId} not found`);
    return o;
  }
}
