/**
 * Orders: their records, reads and every state change (docs/store.md). A change of state goes
 * through `OrderStore.apply`, which asks the state machine (./order-states.ts) and emits the
 * `order.moved` fact in the caller's transaction (its webhook is rendered by the outbox).
 *
 * `OrderStore` also creates the order of a granted reward item that awaits fulfilment (`createHeld`,
 * the granting service's `heldAs`): the item names a catalog reward with `payload.catalog_reward_id`,
 * else the order is an implicit manual order of the item itself.
 */
import type { Queryable } from '../../adapters/sql/types';
import type { FactBus } from '../facts';
import { systemRandom, type Random } from '../random';
import { DEFAULT_VARIANT, getReward, type CatalogReward, type Fulfillment } from './catalog';
import { move, type OrderAction, type OrderEvent, type OrderState } from './order-states';

export interface OrderStatus {
  state: OrderState;
  started_at?: string;
  completed_at?: string;
  data?: { type: string; external_id: string | null };
  tracking_number?: string;
  shipped_at?: string;
  notes?: string;
  reason?: string;
  expired_at?: string;
  refunded_at?: string;
  attempts?: number;
  last_error?: string;
}

export interface Order {
  id: string;
  tenant_id: string;
  user_id: string;
  reward_id: string;
  reward_slug: string | null;
  reward_name: string;
  reward_image_url: string | null;
  variant_id: string;
  source_type: string;
  source_ref: string | null;
  status: OrderStatus;
  fields: Record<string, string>;
  fulfillment: Fulfillment;
  requires_claim: boolean;
  expires_at: string | null;
  price: { currency: string; amount: number } | null;
  created_at: string;
  updated_at: string;
}

/** The stored row (internal columns included). */
export interface OrderRow {
  tenant_id: string;
  id: string;
  user_id: string;
  reward_id: string;
  reward_slug: string | null;
  reward_name: string;
  reward_image_url: string | null;
  variant_id: string;
  source_type: string;
  source_ref: string | null;
  state: OrderState;
  status: Omit<OrderStatus, 'state'>;
  fields: Record<string, string>;
  fulfillment: Fulfillment;
  config: Record<string, unknown>;
  requires_claim: boolean;
  expires_at: string | number | null;
  version: number;
  idempotency_key: string | null;
  request_hash: string | null;
  price_currency: string | null;
  price_amount: string | number | null;
  debit_tx_id: string | null;
  refund_tx_id: string | null;
  stock_held: boolean;
  grant_key: string | null;
  attempts: number;
  next_attempt_at: string | number | null;
  lease_owner: string | null;
  lease_until: string | number | null;
  created_at: string | number;
  updated_at: string | number;
}

const iso = (ms: number | string) => new Date(Number(ms)).toISOString();

export function toOrder(r: OrderRow): Order {
  return {
    id: r.id,
    tenant_id: r.tenant_id,
    user_id: r.user_id,
    reward_id: r.reward_id,
    reward_slug: r.reward_slug,
    reward_name: r.reward_name,
    reward_image_url: r.reward_image_url,
    variant_id: r.variant_id,
    source_type: r.source_type,
    source_ref: r.source_ref,
    status: { state: r.state, ...r.status },
    fields: r.fields,
    fulfillment: r.fulfillment,
    requires_claim: r.requires_claim,
    expires_at: r.expires_at === null ? null : iso(r.expires_at),
    price:
      r.price_currency !== null && r.price_amount !== null
        ? { currency: r.price_currency, amount: Number(r.price_amount) }
        : null,
    created_at: iso(r.created_at),
    updated_at: iso(r.updated_at),
  };
}

/** An order list item (SPEC.md "Order list items carry ..."), with the user and the state's details. */
export function toListItem(r: OrderRow) {
  return {
    id: r.id,
    user_id: r.user_id,
    reward_id: r.reward_id,
    reward_name: r.reward_name,
    reward_image_url: r.reward_image_url,
    variant_id: r.variant_id,
    source_type: r.source_type,
    status: { state: r.state, ...r.status },
    requires_claim: r.requires_claim,
    expires_at: r.expires_at === null ? null : iso(r.expires_at),
    created_at: iso(r.created_at),
  };
}

/** What a new order is made of. */
export interface NewOrder {
  id?: string;
  tenant_id: string;
  user_id: string;
  reward: Pick<
    CatalogReward,
    'id' | 'slug' | 'name' | 'image_url' | 'fulfillment' | 'config' | 'requires_claim'
  >;
  variant_id: string;
  source_type: string;
  source_ref: string | null;
  state: 'pending_claim' | 'fulfilling';
  fields: Record<string, string>;
  expires_at: number | null;
  idempotency_key?: string | null;
  request_hash?: string | null;
  price?: { currency: string; amount: number } | null;
  debit_tx_id?: string | null;
  stock_held: boolean;
  grant_key?: string | null;
  /** When automatic fulfilment (api, or wallet left to the worker) is first due; null for none. */
  next_attempt_at?: number | null;
  now: number;
}

/** What a move changes besides the state. */
export interface MovePatch {
  status?: Partial<Omit<OrderStatus, 'state'>>;
  /** Status keys to drop (a retried order forgets its failure). */
  clear?: Array<keyof Omit<OrderStatus, 'state'>>;
  fields?: Record<string, string>;
  refund_tx_id?: string;
  stock_held?: boolean;
  attempts?: number;
  next_attempt_at?: number | null;
}

export class OrderStore {
  constructor(
    private readonly facts: FactBus,
    private readonly random: Random = systemRandom,
  ) {}

  newId(): string {
    return this.random.uuid();
  }

  /** Inserts an order and emits order.created (then order.fulfilling when it starts there). */
  async insert(q: Queryable, o: NewOrder): Promise<OrderRow> {
    const id = o.id ?? this.random.uuid();
    const status: Omit<OrderStatus, 'state'> = o.state === 'fulfilling' ? { started_at: iso(o.now) } : {};
    const r = await q.query<OrderRow>(
      `INSERT INTO reward_orders (tenant_id, id, user_id, reward_id, reward_slug, reward_name, reward_image_url, variant_id,
         source_type, source_ref, state, status, fields, fulfillment, config, requires_claim, expires_at, version,
         idempotency_key, request_hash, price_currency, price_amount, debit_tx_id, stock_held, grant_key,
         next_attempt_at, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23,
         $24, $25, $26, $27, $27)
       RETURNING *`,
      [
        o.tenant_id,
        id,
        o.user_id,
        o.reward.id,
        o.reward.slug,
        o.reward.name,
        o.reward.image_url,
        o.variant_id,
        o.source_type,
        o.source_ref,
        o.state,
        JSON.stringify(status),
        JSON.stringify(o.fields),
        JSON.stringify(o.reward.fulfillment),
        JSON.stringify(o.reward.config ?? {}),
        o.reward.requires_claim,
        o.expires_at,
        o.state === 'fulfilling' ? 2 : 1,
        o.idempotency_key ?? null,
        o.request_hash ?? null,
        o.price?.currency ?? null,
        o.price?.amount ?? null,
        o.debit_tx_id ?? null,
        o.stock_held,
        o.grant_key ?? null,
        o.state === 'fulfilling' ? (o.next_attempt_at ?? null) : null,
        o.now,
      ],
    );
    const row = r.rows[0]!;
    await this.emit(q, row, 'created', 1, o.now);
    if (o.state === 'fulfilling') await this.emit(q, row, 'fulfilling', 2, o.now);
    return row;
  }

  /** Locks an order for a move (null when the tenant has no such order). */
  async lock(q: Queryable, tenantId: string, id: string): Promise<OrderRow | null> {
    const r = await q.query<OrderRow>(
      'SELECT * FROM reward_orders WHERE tenant_id = $1 AND id = $2 FOR UPDATE',
      [tenantId, id],
    );
    return r.rows[0] ?? null;
  }

  /**
   * Applies `action` to a locked order: the state machine decides (OrderStateError when the move
   * is not allowed), the row is updated and the move's fact emitted. Returns the new row.
   */
  async apply(
    q: Queryable,
    o: OrderRow,
    action: OrderAction,
    patch: MovePatch,
    now: number,
  ): Promise<OrderRow> {
    const m = move(o.state, action);
    const status: Record<string, unknown> = { ...o.status, ...patch.status };
    for (const k of patch.clear ?? []) delete status[k];
    const r = await q.query<OrderRow>(
      `UPDATE reward_orders SET state = $3, status = $4, version = version + 1, updated_at = $5,
         fields = COALESCE($6::jsonb, fields),
         refund_tx_id = COALESCE($7, refund_tx_id),
         stock_held = COALESCE($8, stock_held),
         attempts = COALESCE($9, attempts),
         next_attempt_at = CASE WHEN $10::boolean THEN $11::bigint ELSE next_attempt_at END,
         lease_owner = NULL, lease_until = NULL
       WHERE tenant_id = $1 AND id = $2 RETURNING *`,
      [
        o.tenant_id,
        o.id,
        m.to,
        JSON.stringify(status),
        now,
        patch.fields ? JSON.stringify(patch.fields) : null,
        patch.refund_tx_id ?? null,
        patch.stock_held ?? null,
        patch.attempts ?? null,
        patch.next_attempt_at !== undefined || m.to !== 'fulfilling',
        m.to === 'fulfilling' ? (patch.next_attempt_at ?? null) : null,
      ],
    );
    const row = r.rows[0]!;
    await this.emit(q, row, m.event, row.version, now);
    return row;
  }

  private async emit(
    q: Queryable,
    o: OrderRow,
    event: OrderEvent,
    version: number,
    now: number,
  ): Promise<void> {
    await this.facts.emit(q, 'order.moved', [
      {
        tenant_id: o.tenant_id,
        order_id: o.id,
        user_id: o.user_id,
        reward_id: o.reward_id,
        reward_slug: o.reward_slug,
        variant_id: o.variant_id,
        source_type: o.source_type,
        fulfillment_type: o.fulfillment.type,
        fulfillment_data: { state: o.state, ...o.status } as Record<string, unknown>,
        event,
        version,
        now,
      },
    ]);
  }

  /**
   * The order of a granted reward item that awaits fulfilment (physical_item, custom, ...), in the
   * grant's transaction, idempotent on the grant's key: the catalog reward the item's payload names
   * (`catalog_reward_id`), else an implicit manual order of the item. Returns the order id.
   * Such an order takes no stock (the prize was promised by its source) and is not paid.
   */
  async createHeld(
    q: Queryable,
    g: {
      tenant_id: string;
      user_id: string;
      item: { item_id: string; name: string; payload: Record<string, unknown> };
      source_type: string;
      source_ref: string | null;
      grant_key: string;
      now: number;
    },
  ): Promise<string> {
    const seen = await q.query<{ id: string }>(
      'SELECT id FROM reward_orders WHERE tenant_id = $1 AND grant_key = $2',
      [g.tenant_id, g.grant_key],
    );
    if (seen.rows[0]) return seen.rows[0].id;
    const named = g.item.payload.catalog_reward_id;
    const catalog = typeof named === 'string' ? await getReward(q, g.tenant_id, named) : null;
    const reward = catalog ?? {
      id: g.item.item_id,
      slug: null as unknown as string,
      name: g.item.name,
      image_url: null,
      fulfillment: { type: 'manual' as const },
      config: {},
      requires_claim: false,
    };
    const state = reward.requires_claim ? 'pending_claim' : 'fulfilling';
    const automatic = reward.fulfillment.type !== 'manual';
    const row = await this.insert(q, {
      tenant_id: g.tenant_id,
      user_id: g.user_id,
      reward,
      variant_id: DEFAULT_VARIANT,
      source_type: g.source_type,
      source_ref: g.source_ref,
      state,
      fields: {},
      expires_at: null,
      stock_held: false,
      grant_key: g.grant_key,
      next_attempt_at: automatic ? g.now : null,
      now: g.now,
    });
    return row.id;
  }
}

export async function getOrder(q: Queryable, tenantId: string, id: string): Promise<OrderRow | null> {
  const r = await q.query<OrderRow>('SELECT * FROM reward_orders WHERE tenant_id = $1 AND id = $2', [
    tenantId,
    id,
  ]);
  return r.rows[0] ?? null;
}

export async function orderByKey(
  q: Queryable,
  tenantId: string,
  userId: string,
  key: string,
): Promise<OrderRow | null> {
  const r = await q.query<OrderRow>(
    'SELECT * FROM reward_orders WHERE tenant_id = $1 AND user_id = $2 AND idempotency_key = $3',
    [tenantId, userId, key],
  );
  return r.rows[0] ?? null;
}

export async function listOrders(
  q: Queryable,
  tenantId: string,
  f: {
    user_id?: string;
    status?: string;
    reward_id?: string;
    source_type?: string;
    limit: number;
    offset: number;
  },
): Promise<{ rows: OrderRow[]; total: number }> {
  const where = `tenant_id = $1 AND ($2::text IS NULL OR user_id = $2) AND ($3::text IS NULL OR state = $3)
    AND ($4::text IS NULL OR reward_id = $4) AND ($5::text IS NULL OR source_type = $5)`;
  const params = [tenantId, f.user_id ?? null, f.status ?? null, f.reward_id ?? null, f.source_type ?? null];
  const [rows, total] = await Promise.all([
    q.query<OrderRow>(
      `SELECT * FROM reward_orders WHERE ${where} ORDER BY created_at DESC, id LIMIT $6 OFFSET $7`,
      [...params, f.limit, f.offset],
    ),
    q.query<{ n: number }>(`SELECT count(*)::int AS n FROM reward_orders WHERE ${where}`, params),
  ]);
  return { rows: rows.rows, total: total.rows[0]?.n ?? 0 };
}

/** The last value the user submitted for each field name, newest order first. */
export async function recentFields(
  q: Queryable,
  tenantId: string,
  userId: string,
): Promise<Record<string, string>> {
  const r = await q.query<{ fields: Record<string, string> }>(
    `SELECT fields FROM reward_orders WHERE tenant_id = $1 AND user_id = $2 AND fields <> '{}'::jsonb
     ORDER BY updated_at DESC, id LIMIT 50`,
    [tenantId, userId],
  );
  const out: Record<string, string> = {};
  for (const row of r.rows)
    for (const [k, v] of Object.entries(row.fields)) if (!(k in out) && typeof v === 'string') out[k] = v;
  return out;
}

/** Pending claims past their expiry, oldest first. */
export async function expiredClaims(q: Queryable, now: number, limit: number) {
  const r = await q.query<{ tenant_id: string; id: string }>(
    `SELECT tenant_id, id FROM reward_orders WHERE state = 'pending_claim' AND expires_at IS NOT NULL AND expires_at <= $1
     ORDER BY expires_at LIMIT $2`,
    [now, limit],
  );
  return r.rows;
}
