/**
 * The one reward-granting service every feature uses (leaderboards now; streaks, achievements,
 * coupons, wheels and the store later). Each grant is idempotent on its `grant_key` (for example
 * `leaderboard:<board>:<window>:<user>`), so a retry never pays twice:
 * - currency, xp and points credit the wallet (xp and points credit the currencies `xp` and
 *   `points`), with the caller's source_type;
 * - badge and item are recorded as owned by the user;
 * - physical_item, custom and any other type are recorded for fulfilment.
 * Every grant has a row in reward_grants, readable per user: the journal of what each source
 * granted under which key. Each granted reward has one record of what the user holds or awaits
 * (docs/architecture.md "One grant-from-config path"): the ledger row for a balance, the grant row
 * itself for an owned item, and the store's order for a reward awaiting fulfilment (`heldAs`,
 * `HeldOrders`). Features grant from a reward config
 * through `grantFromConfig` (./from-config.ts).
 */
import type { Queryable } from '../../adapters/sql/types';
import { systemRandom, type Random } from '../random';
import { WalletError, type Wallet } from '../wallet/wallet';
import type { RewardItem } from './items';

export interface GrantRequest {
  tenant_id: string;
  user_id: string;
  items: RewardItem[];
  source_type: string;
  source_ref: string | null;
  /** Unique per logical grant; each item's grant key is `<grant_key>:<item_id>`. */
  grant_key: string;
  now: number;
}

export interface Granted {
  item_id: string;
  name: string;
  reward_type: string;
  payload: Record<string, unknown>;
  status: 'credited' | 'owned' | 'pending_fulfilment' | 'ordered' | 'failed';
  transaction_id: string | null;
  /** The order holding a reward that awaits fulfilment (status `ordered`), else null. */
  order_id?: string | null;
}

/**
 * Where a reward awaiting fulfilment is recorded: the store's orders (core/store/orders.ts
 * `OrderStore.createHeld`), in the grant's transaction, idempotent on the grant key; answers the
 * order id. Declared here so the granting service needs nothing of the store.
 */
export interface HeldOrders {
  createHeld(
    q: Queryable,
    g: {
      tenant_id: string;
      user_id: string;
      item: RewardItem;
      source_type: string;
      source_ref: string | null;
      grant_key: string;
      now: number;
    },
  ): Promise<string>;
}

interface GrantRow {
  id: string;
  tenant_id: string;
  user_id: string;
  item_id: string;
  reward_type: string;
  payload: Record<string, unknown>;
  status: Granted['status'];
  source_type: string;
  source_ref: string | null;
  transaction_id: string | null;
  order_id: string | null;
  created_at: number;
}

/**
 * A reward type whose record another store keeps (streak freezes: core/streaks/freezes.ts), as a
 * narrow port the composition root plugs in (`holdWith`), so the granting service never imports a
 * feature. `hold` records the item in the grant's transaction, idempotent on the grant key.
 */
export interface RewardHolder {
  hold(
    q: Queryable,
    g: {
      tenant_id: string;
      user_id: string;
      item: RewardItem;
      grant_key: string;
      source_type: string;
      now: number;
    },
  ): Promise<'credited' | 'failed'>;
}

export class Granter {
  private readonly holders = new Map<string, RewardHolder>();

  /**
   * `random` draws the grant row ids; `orders` records rewards awaiting fulfilment as orders
   * (without it, as before the store, they stay `pending_fulfilment` grant rows).
   */
  constructor(
    private readonly wallet: Wallet,
    private readonly random: Random = systemRandom,
    private readonly orders: HeldOrders | null = null,
  ) {}

  /** Items of `rewardType` are recorded by `holder` (one holder per type). */
  holdWith(rewardType: string, holder: RewardHolder): this {
    this.holders.set(rewardType, holder);
    return this;
  }

  async grant(q: Queryable, g: GrantRequest): Promise<Granted[]> {
    const out: Granted[] = [];
    for (const item of g.items) {
      const key = `${g.grant_key}:${item.item_id}`;
      const seen = await q.query<GrantRow>(
        'SELECT * FROM reward_grants WHERE tenant_id = $1 AND grant_key = $2',
        [g.tenant_id, key],
      );
      if (seen.rows[0]) {
        out.push(this.present(item, seen.rows[0].status, seen.rows[0].transaction_id, seen.rows[0].order_id));
        continue;
      }
      let status: Granted['status'];
      let tx: string | null = null;
      let orderId: string | null = null;
      const credit = this.creditOf(item);
      if (credit) {
        try {
          const r = await this.wallet.credit(q, {
            tenant_id: g.tenant_id,
            user_id: g.user_id,
            currency_id: credit.currency_id,
            amount: credit.amount,
            source_type: g.source_type,
            source_ref: g.source_ref,
            description: item.name,
            idempotency_key: `grant:${key}`,
            now: g.now,
          });
          status = 'credited';
          tx = r.transaction_id;
        } catch (err) {
          if (!(err instanceof WalletError)) throw err;
          status = 'failed';
        }
      } else if (this.holders.has(item.reward_type)) {
        status = await this.holders.get(item.reward_type)!.hold(q, {
          tenant_id: g.tenant_id,
          user_id: g.user_id,
          item,
          grant_key: key,
          source_type: g.source_type,
          now: g.now,
        });
      } else {
        status = heldAs(item);
        if (status === 'pending_fulfilment' && this.orders) {
          orderId = await this.orders.createHeld(q, {
            tenant_id: g.tenant_id,
            user_id: g.user_id,
            item,
            source_type: g.source_type,
            source_ref: g.source_ref,
            grant_key: key,
            now: g.now,
          });
          status = 'ordered';
        }
      }
      await q.query(
        `INSERT INTO reward_grants (id, tenant_id, grant_key, user_id, item_id, reward_type, payload, status, source_type, source_ref, transaction_id, created_at, order_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
        [
          this.random.uuid(),
          g.tenant_id,
          key,
          g.user_id,
          item.item_id,
          item.reward_type,
          JSON.stringify(item.payload),
          status,
          g.source_type,
          g.source_ref,
          tx,
          g.now,
          orderId,
        ],
      );
      out.push(this.present(item, status, tx, orderId));
    }
    return out;
  }

  private creditOf(item: RewardItem): { currency_id: string; amount: number } | null {
    const p = item.payload as { currency_id?: unknown; amount?: unknown };
    const amount = Number.isSafeInteger(p.amount) ? (p.amount as number) : 0;
    if (amount <= 0) return null;
    if (item.reward_type === 'currency' && typeof p.currency_id === 'string')
      return { currency_id: p.currency_id, amount };
    if (item.reward_type === 'xp') return { currency_id: 'xp', amount };
    if (item.reward_type === 'points') return { currency_id: 'points', amount };
    return null;
  }

  private present(
    item: RewardItem,
    status: Granted['status'],
    tx: string | null,
    orderId: string | null = null,
  ): Granted {
    return {
      item_id: item.item_id,
      name: item.name,
      reward_type: item.reward_type,
      payload: item.payload,
      status,
      transaction_id: tx,
      ...(orderId ? { order_id: orderId } : {}),
    };
  }
}

/**
 * What a reward that is no balance becomes. Badges and items are owned (the grant row is their
 * record). Any other type (physical_item, custom, ...) awaits fulfilment: the granting service
 * creates its order in the grant's transaction (`HeldOrders`, the store) and the grant row says
 * `ordered` and points to it (`order_id`), so a reward never has two records. The item names the
 * catalog reward it orders with `payload.catalog_reward_id`; without one the order is an implicit
 * manual order of the item (docs/store.md "Orders of granted reward items").
 */
function heldAs(item: RewardItem): 'owned' | 'pending_fulfilment' {
  return item.reward_type === 'badge' || item.reward_type === 'item' ? 'owned' : 'pending_fulfilment';
}

/** A user's grants, newest first. */
export async function grantsOf(
  q: Queryable,
  tenantId: string,
  userId: string,
  limit: number,
  offset: number,
) {
  const total = await q.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM reward_grants WHERE tenant_id = $1 AND user_id = $2',
    [tenantId, userId],
  );
  const r = await q.query<GrantRow>(
    'SELECT * FROM reward_grants WHERE tenant_id = $1 AND user_id = $2 ORDER BY created_at DESC, id LIMIT $3 OFFSET $4',
    [tenantId, userId, limit, offset],
  );
  return {
    grants: r.rows.map((x) => ({
      id: x.id,
      item_id: x.item_id,
      reward_type: x.reward_type,
      payload: x.payload,
      status: x.status,
      source_type: x.source_type,
      source_ref: x.source_ref,
      transaction_id: x.transaction_id,
      order_id: x.order_id ?? null,
      granted_at: new Date(Number(x.created_at)).toISOString(),
    })),
    total: total.rows[0]?.n ?? 0,
  };
}
