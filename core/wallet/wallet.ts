/**
 * The wallet: balances and the append-only ledger (invariant 3). Every change of a balance is one
 * ledger row with its reason, written in the caller's transaction together with the balance and
 * the outbox event (currency.earned / currency.spent). The balance row is locked first, so
 * concurrent spends serialise and never overdraw. An idempotency key returns the first result.
 */
import { randomUUID } from 'node:crypto';
import type { Queryable } from '../../adapters/sql/types';
import { enqueue } from '../outbox';

export type WalletErrorCode =
  | 'insufficient_balance'
  | 'unknown_currency'
  | 'inactive_currency'
  | 'invalid_amount'
  | 'idempotency_conflict';

export class WalletError extends Error {
  constructor(
    readonly code: WalletErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'WalletError';
  }
}

export interface Movement {
  tenant_id: string;
  user_id: string;
  currency_id: string;
  /** Positive, in the currency's minor units. */
  amount: number;
  source_type: string;
  source_ref?: string | null;
  description?: string | null;
  idempotency_key?: string | null;
  now: number;
}

export interface MovementResult {
  transaction_id: string;
  /** Signed: positive earned, negative spent. */
  amount: number;
  balance_after: number;
  /** False when an earlier movement with the same idempotency key was returned. */
  created: boolean;
}

export interface Currency {
  tenant_id: string;
  id: string;
  name: string;
  symbol: string | null;
  is_spendable: boolean;
  decimal_places: number;
  active: boolean;
  created_at: string;
  updated_at: string;
}

/** Called after lifetime_earned grew (tiers, levels), inside the same transaction. */
export type LifetimeHook = (
  q: Queryable,
  change: { tenant_id: string; user_id: string; currency_id: string; lifetime_earned: number; now: number },
) => Promise<void>;

interface LedgerRow {
  id: string;
  user_id: string;
  currency_id: string;
  amount: number;
  balance_after: number;
}

export class Wallet {
  private readonly hooks: LifetimeHook[] = [];

  onLifetimeChange(hook: LifetimeHook): void {
    this.hooks.push(hook);
  }

  async currency(q: Queryable, tenantId: string, currencyId: string): Promise<Currency | null> {
    const r = await q.query<Currency>('SELECT * FROM currencies WHERE tenant_id = $1 AND id = $2', [
      tenantId,
      currencyId,
    ]);
    return r.rows[0] ?? null;
  }

  credit(q: Queryable, m: Movement): Promise<MovementResult> {
    return this.move(q, m, +1);
  }

  debit(q: Queryable, m: Movement): Promise<MovementResult> {
    return this.move(q, m, -1);
  }

  private async move(q: Queryable, m: Movement, sign: 1 | -1): Promise<MovementResult> {
    if (!Number.isSafeInteger(m.amount) || m.amount <= 0) {
      throw new WalletError('invalid_amount', 'amount must be a positive integer (minor units)');
    }
    if (m.idempotency_key) {
      const seen = await this.byKey(q, m.tenant_id, m.idempotency_key);
      if (seen) return this.replay(seen, m, sign);
    }
    const cur = await this.currency(q, m.tenant_id, m.currency_id);
    if (!cur) throw new WalletError('unknown_currency', `Currency ${m.currency_id} does not exist`);
    if (!cur.active) throw new WalletError('inactive_currency', `Currency ${m.currency_id} is not active`);

    await q.query(
      `INSERT INTO balances (tenant_id, user_id, currency_id, available, lifetime_earned) VALUES ($1, $2, $3, 0, 0)
       ON CONFLICT DO NOTHING`,
      [m.tenant_id, m.user_id, m.currency_id],
    );
    const b = await q.query<{ available: number; lifetime_earned: number }>(
      'SELECT available, lifetime_earned FROM balances WHERE tenant_id = $1 AND user_id = $2 AND currency_id = $3 FOR UPDATE',
      [m.tenant_id, m.user_id, m.currency_id],
    );
    // A concurrent movement with the same key may have committed while this one waited for the lock.
    if (m.idempotency_key) {
      const seen = await this.byKey(q, m.tenant_id, m.idempotency_key);
      if (seen) return this.replay(seen, m, sign);
    }
    const available = Number(b.rows[0]!.available);
    const lifetime = Number(b.rows[0]!.lifetime_earned);
    if (sign < 0 && available < m.amount) {
      throw new WalletError(
        'insufficient_balance',
        `Insufficient balance: ${available} ${m.currency_id} available, ${m.amount} needed`,
      );
    }
    const after = available + sign * m.amount;
    const lifetimeAfter = sign > 0 ? lifetime + m.amount : lifetime;
    if (!Number.isSafeInteger(lifetimeAfter))
      throw new WalletError('invalid_amount', 'balance would exceed 2^53');
    const id = randomUUID();
    await q.query(
      `INSERT INTO ledger (id, tenant_id, user_id, currency_id, amount, balance_after, source_type, source_ref, description, idempotency_key, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
      [
        id,
        m.tenant_id,
        m.user_id,
        m.currency_id,
        sign * m.amount,
        after,
        m.source_type,
        m.source_ref ?? null,
        m.description ?? null,
        m.idempotency_key ?? null,
        m.now,
      ],
    );
    await q.query(
      'UPDATE balances SET available = $4, lifetime_earned = $5 WHERE tenant_id = $1 AND user_id = $2 AND currency_id = $3',
      [m.tenant_id, m.user_id, m.currency_id, after, lifetimeAfter],
    );
    const eventType = sign > 0 ? 'currency.earned' : 'currency.spent';
    await enqueue(q, {
      tenant_id: m.tenant_id,
      event_type: eventType,
      dedupe_key: `${eventType}:${id}`,
      created_at: m.now,
      payload: {
        event_type: eventType,
        tenant_id: m.tenant_id,
        timestamp: new Date(m.now).toISOString(),
        user_id: m.user_id,
        data: {
          currency_id: m.currency_id,
          amount: m.amount,
          new_balance: after,
          source_type: m.source_type,
          transaction_id: id,
        },
      },
    });
    if (sign > 0) {
      for (const hook of this.hooks) {
        await hook(q, {
          tenant_id: m.tenant_id,
          user_id: m.user_id,
          currency_id: m.currency_id,
          lifetime_earned: lifetimeAfter,
          now: m.now,
        });
      }
    }
    return { transaction_id: id, amount: sign * m.amount, balance_after: after, created: true };
  }

  private async byKey(q: Queryable, tenantId: string, key: string): Promise<LedgerRow | null> {
    const r = await q.query<LedgerRow>(
      'SELECT id, user_id, currency_id, amount, balance_after FROM ledger WHERE tenant_id = $1 AND idempotency_key = $2',
      [tenantId, key],
    );
    return r.rows[0]
      ? { ...r.rows[0], amount: Number(r.rows[0].amount), balance_after: Number(r.rows[0].balance_after) }
      : null;
  }

  private replay(seen: LedgerRow, m: Movement, sign: 1 | -1): MovementResult {
    if (seen.user_id !== m.user_id || seen.currency_id !== m.currency_id || seen.amount !== sign * m.amount) {
      throw new WalletError(
        'idempotency_conflict',
        'idempotency_key was already used for a different movement',
      );
    }
    return {
      transaction_id: seen.id,
      amount: seen.amount,
      balance_after: seen.balance_after,
      created: false,
    };
  }
}
