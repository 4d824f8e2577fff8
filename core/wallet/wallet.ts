/**
 * The wallet: balances and the append-only ledger (invariant 3). Every change of a balance is one
 * ledger row with its reason, written in the caller's transaction together with the balance and
 * its fact (`wallet.credited` / `wallet.debited`, core/facts.ts), whose subscribers run in that
 * transaction: the outbox (currency.earned / currency.spent), tiers and levels. The balance row is
 * locked first, so concurrent spends serialise and never overdraw. An idempotency key returns the
 * first result.
 */
import { hash } from 'node:crypto';
import type { Queryable } from '../../adapters/sql/types';
import { BatchState } from '../batch-state';
import { write } from '../write-behind';
import type { FactBus, WalletMoved } from '../facts';
import { systemRandom, type Random } from '../random';

export type WalletErrorCode =
  | 'insufficient_balance'
  | 'unknown_currency'
  | 'inactive_currency'
  | 'invalid_amount'
  | 'idempotency_conflict'
  | 'not_spendable';

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

/**
 * Why money leaves a balance; it decides what an accumulate-only currency (`is_spendable: false`,
 * for example xp) allows (docs/wallet.md "Spendable and accumulate-only currencies"):
 * - `spend`: a user or a feature spends (store purchase, wheel spin cost, and every later spend):
 *   refused on an accumulate-only currency (`not_spendable`);
 * - `correction`: an operator corrects a balance (the admin deduct): allowed on an accumulate-only
 *   currency only when its `source_type` is `manual_adjustment`, so taking xp back is always a
 *   deliberate, recognisable ledger row and never an accidental "spend".
 */
export type DebitPurpose = 'spend' | 'correction';

/** The one `source_type` that may debit an accumulate-only currency (purpose `correction`). */
export const ADJUSTMENT_SOURCE = 'manual_adjustment';

/** Null when the debit may leave this currency, else why not (nothing is written). */
export function debitRefusal(
  currency: Pick<Currency, 'id' | 'is_spendable'>,
  m: { purpose: DebitPurpose; source_type: string },
): WalletError | null {
  if (currency.is_spendable) return null;
  if (m.purpose === 'correction' && m.source_type === ADJUSTMENT_SOURCE) return null;
  return new WalletError(
    'not_spendable',
    m.purpose === 'correction'
      ? `Currency ${currency.id} is accumulate-only (is_spendable: false); an admin correction of it needs source_type "${ADJUSTMENT_SOURCE}"`
      : `Currency ${currency.id} is accumulate-only (is_spendable: false) and cannot be spent`,
  );
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

interface LedgerRow {
  id: string;
  user_id: string;
  currency_id: string;
  amount: number;
  balance_after: number;
}

/** The direction of a call's movements (all of one call go the same way), and a debit's purpose. */
interface Direction {
  sign: 1 | -1;
  purpose?: DebitPurpose;
}

/** Per movement of a batch: its result, or why it was refused (nothing of it was written). */
export type BatchResult = MovementResult | WalletError;

const pairId = (tenant: string, a: string, b = '') => `${tenant}\u0000${a}\u0000${b}`;

/**
 * What `Wallet.prepareCredits` locked and sent: the idempotency keys and currencies it covers
 * (`pairId`s), and its reads' answers (the keys' ledger rows, the currencies).
 */
export interface PreparedMoves {
  readonly keys: ReadonlySet<string>;
  readonly currencies: ReadonlySet<string>;
  readonly reads: Promise<[Map<string, LedgerRow>, Map<string, Currency>]>;
}

/**
 * The balance rows a batch locks (core/batch-state.ts: one statement, FOR UPDATE in key order). Its
 * `id` of a row is `pairId(tenant, user, currency)`. The wallet writes them back itself (one UPDATE
 * of the changed rows), so only `lock` is used.
 */
const balanceRows = new BatchState<{
  tenant_id: string;
  user_id: string;
  currency_id: string;
  available: number;
  lifetime_earned: number;
}>({
  table: 'balances',
  keys: [
    { column: 'tenant_id', type: 'text' },
    { column: 'user_id', type: 'text' },
    { column: 'currency_id', type: 'text' },
  ],
  values: [
    { column: 'available', type: 'bigint', merge: 'replace' },
    { column: 'lifetime_earned', type: 'bigint', merge: 'replace' },
  ],
});

/** Advisory lock class of idempotency keys ('LDWK'). */
const KEY_LOCK_CLASS = 0x4c44574b;

export class Wallet {
  /**
   * `facts` carries each batch's `wallet.credited` / `wallet.debited` facts to their subscribers;
   * `random` draws the ledger row ids.
   */
  constructor(
    private readonly facts: FactBus,
    private readonly random: Random = systemRandom,
  ) {}

  async currency(q: Queryable, tenantId: string, currencyId: string): Promise<Currency | null> {
    const r = await q.query<Currency>('SELECT * FROM currencies WHERE tenant_id = $1 AND id = $2', [
      tenantId,
      currencyId,
    ]);
    return r.rows[0] ?? null;
  }

  credit(q: Queryable, m: Movement): Promise<MovementResult> {
    return this.one(q, m, { sign: 1 });
  }

  /** Debits `m`; `purpose` decides what an accumulate-only currency allows (`debitRefusal`). */
  debit(q: Queryable, m: Movement & { purpose: DebitPurpose }): Promise<MovementResult> {
    return this.one(q, m, { sign: -1, purpose: m.purpose });
  }

  /**
   * Credits many movements in the caller's transaction with a fixed number of statements (the
   * pipeline's earning rules): applied in order, each with its own result or refusal. With
   * `prepared` (`prepareCredits`, same transaction), the reads it sent are used instead of its own.
   */
  creditMany(q: Queryable, ms: Movement[], prepared?: PreparedMoves): Promise<BatchResult[]> {
    return this.moveMany(q, ms, { sign: 1 }, prepared);
  }

  /**
   * The first statements of `creditMany` for movements whose amounts are not known yet (the
   * pipeline's earning rules, before their caps): the idempotency keys' locks, the keys' ledger
   * rows and the currencies, sent now without waiting, so that they go out with the caller's own
   * reads (one round trip to the store fewer). The movements given to `creditMany` afterwards may
   * be any of these (same tenant, key and currency; any user and amount): keys and currencies it
   * does not cover are locked and read by `creditMany` itself, as without it.
   */
  prepareCredits(
    q: Queryable,
    ms: ReadonlyArray<Pick<Movement, 'tenant_id' | 'currency_id' | 'idempotency_key'>>,
  ): PreparedMoves {
    const keyed = ms.filter((m) => m.idempotency_key);
    const reads = (async () => {
      await this.lockKeys(q, keyed);
      return Promise.all([this.byKeys(q, keyed), this.currencies(q, [...ms])]);
    })();
    // Awaited by creditMany; a failure also fails the transaction's next statement.
    reads.catch(() => undefined);
    return {
      keys: new Set(keyed.map((m) => pairId(m.tenant_id, m.idempotency_key!))),
      currencies: new Set(ms.map((m) => pairId(m.tenant_id, m.currency_id))),
      reads,
    };
  }

  private async one(q: Queryable, m: Movement, dir: Direction): Promise<MovementResult> {
    const [r] = await this.moveMany(q, [m], dir);
    if (r instanceof WalletError) throw r;
    return r!;
  }

  /**
   * The one path of every balance change: idempotency keys (locked first, so concurrent movements
   * with one key serialise whatever users or currencies they name; then read once, under the
   * lock), currencies, balance
   * rows created and locked in one order, then the ledger rows and balances written in one
   * statement each, then the batch's facts emitted (in ledger order).
   */
  private async moveMany(
    q: Queryable,
    ms: Movement[],
    dir: Direction,
    prepared?: PreparedMoves,
  ): Promise<BatchResult[]> {
    const sign = dir.sign;
    const results: Array<BatchResult | undefined> = ms.map((m) =>
      Number.isSafeInteger(m.amount) && m.amount > 0
        ? undefined
        : new WalletError('invalid_amount', 'amount must be a positive integer (minor units)'),
    );
    const keyed = ms.filter((m, i) => !results[i] && m.idempotency_key);
    const valid = ms.filter((_, i) => !results[i]);
    let seen: Map<string, LedgerRow>;
    let currencies: Map<string, Currency>;
    if (
      prepared &&
      keyed.every((m) => prepared.keys.has(pairId(m.tenant_id, m.idempotency_key!))) &&
      valid.every((m) => prepared.currencies.has(pairId(m.tenant_id, m.currency_id)))
    ) {
      // Locked and read by prepareCredits, earlier in this transaction.
      [seen, currencies] = await prepared.reads;
    } else {
      await this.lockKeys(q, keyed);
      // The keys' ledger rows and the currencies in one round trip (two reads sent together); the
      // currencies of every valid movement, also those the keys will show to be replays.
      [seen, currencies] = await Promise.all([this.byKeys(q, keyed), this.currencies(q, valid)]);
    }
    ms.forEach((m, i) => {
      const s =
        !results[i] && m.idempotency_key ? seen.get(pairId(m.tenant_id, m.idempotency_key)) : undefined;
      if (s) results[i] = this.replay(s, m, sign);
    });
    // The movements not decided yet (no result or refusal): narrowed after each phase.
    let pending: Array<{ m: Movement; i: number }> = [];
    ms.forEach((m, i) => {
      if (!results[i]) pending.push({ m, i });
    });
    const narrow = () => (pending = pending.filter(({ i }) => !results[i]));
    if (pending.length === 0) return results as BatchResult[];

    for (const { m, i } of pending) {
      const cur = currencies.get(pairId(m.tenant_id, m.currency_id));
      if (!cur) results[i] = new WalletError('unknown_currency', `Currency ${m.currency_id} does not exist`);
      else if (!cur.active)
        results[i] = new WalletError('inactive_currency', `Currency ${m.currency_id} is not active`);
      else if (sign < 0)
        results[i] =
          debitRefusal(cur, { purpose: dir.purpose ?? 'spend', source_type: m.source_type }) ?? undefined;
    }
    if (narrow().length === 0) return results as BatchResult[];

    // No second read of the keys after this lock: a concurrent movement with one of these keys
    // waits for the key's lock (lockKeys, held to COMMIT), and one that held it before committed
    // before the read above began, so the read saw it.
    const balances = await this.lockBalances(
      q,
      pending.map(({ m }) => m),
    );

    const ledger: Array<LedgerRow & { lifetime_earned: number; m: Movement }> = [];
    const inBatch = new Map<string, LedgerRow>();
    for (const { m, i } of pending) {
      const keyId = m.idempotency_key ? pairId(m.tenant_id, m.idempotency_key) : null;
      const earlier = keyId ? inBatch.get(keyId) : undefined;
      if (earlier) {
        results[i] = this.replay(earlier, m, sign);
        continue;
      }
      const bId = pairId(m.tenant_id, m.user_id, m.currency_id);
      const b = balances.get(bId)!;
      if (sign < 0 && b.available < m.amount) {
        results[i] = new WalletError(
          'insufficient_balance',
          `Insufficient balance: ${b.available} ${m.currency_id} available, ${m.amount} needed`,
        );
        continue;
      }
      const after = b.available + sign * m.amount;
      const lifetimeAfter = sign > 0 ? b.lifetime + m.amount : b.lifetime;
      if (!Number.isSafeInteger(lifetimeAfter)) {
        results[i] = new WalletError('invalid_amount', 'balance would exceed 2^53');
        continue;
      }
      b.available = after;
      b.lifetime = lifetimeAfter;
      b.changed = true;
      const row = {
        id: this.random.uuid(),
        user_id: m.user_id,
        currency_id: m.currency_id,
        amount: sign * m.amount,
        balance_after: after,
        lifetime_earned: lifetimeAfter,
        m,
      };
      if (keyId) inBatch.set(keyId, row);
      ledger.push(row);
      results[i] = { transaction_id: row.id, amount: row.amount, balance_after: after, created: true };
    }
    if (ledger.length === 0) return results as BatchResult[];

    await this.writeLedger(q, ledger);
    const changed = [...balances.values()].filter((b) => b.changed);
    await write(
      q,
      `UPDATE balances b SET available = u.available, lifetime_earned = u.lifetime
       FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[]) AS u(tenant_id, user_id, currency_id, available, lifetime)
       WHERE b.tenant_id = u.tenant_id AND b.user_id = u.user_id AND b.currency_id = u.currency_id`,
      [
        changed.map((b) => b.tenant_id),
        changed.map((b) => b.user_id),
        changed.map((b) => b.currency_id),
        changed.map((b) => b.available),
        changed.map((b) => b.lifetime),
      ],
    );
    await this.emitFacts(q, ledger, sign);
    return results as BatchResult[];
  }

  /** The facts of the ledger rows, in their order, in one emit (a call's movements share a sign). */
  private async emitFacts(
    q: Queryable,
    rows: Array<LedgerRow & { lifetime_earned: number; m: Movement }>,
    sign: 1 | -1,
  ): Promise<void> {
    const facts: WalletMoved[] = rows.map((r) => ({
      tenant_id: r.m.tenant_id,
      user_id: r.user_id,
      currency_id: r.currency_id,
      amount: r.m.amount,
      balance_after: r.balance_after,
      lifetime_earned: r.lifetime_earned,
      source_type: r.m.source_type,
      transaction_id: r.id,
      now: r.m.now,
    }));
    await this.facts.emit(q, sign > 0 ? 'wallet.credited' : 'wallet.debited', facts);
  }

  private async currencies(
    q: Queryable,
    ms: ReadonlyArray<Pick<Movement, 'tenant_id' | 'currency_id'>>,
  ): Promise<Map<string, Currency>> {
    if (ms.length === 0) return new Map();
    const pairs = unique(ms.map((m) => [m.tenant_id, m.currency_id] as const));
    const r = await q.query<Currency>(
      `SELECT c.* FROM currencies c JOIN unnest($1::text[], $2::text[]) AS p(tenant_id, id)
       ON c.tenant_id = p.tenant_id AND c.id = p.id`,
      [pairs.map((p) => p[0]), pairs.map((p) => p[1])],
    );
    return new Map(r.rows.map((c) => [pairId(c.tenant_id, c.id), c]));
  }

  /** Creates missing balance rows and locks every row of the batch, in one order (no deadlocks). */
  private async lockBalances(q: Queryable, ms: Movement[]) {
    const byId = new Map<string, Movement>();
    for (const m of ms) byId.set(pairId(m.tenant_id, m.user_id, m.currency_id), m);
    const keys = [...byId.keys()].sort().map((id) => byId.get(id)!);
    const cols = [keys.map((k) => k.tenant_id), keys.map((k) => k.user_id), keys.map((k) => k.currency_id)];
    // The missing rows, sent with the lock that follows (write-behind: nothing is read back).
    await write(
      q,
      `INSERT INTO balances (tenant_id, user_id, currency_id, available, lifetime_earned)
       SELECT tenant_id, user_id, currency_id, 0, 0 FROM unnest($1::text[], $2::text[], $3::text[]) AS k(tenant_id, user_id, currency_id)
       ON CONFLICT DO NOTHING`,
      cols,
    );
    const locked = await balanceRows.lock(q, keys);
    return new Map(
      [...locked].map(([id, b]) => [
        id,
        {
          tenant_id: b.tenant_id,
          user_id: b.user_id,
          currency_id: b.currency_id,
          available: b.available,
          lifetime: b.lifetime_earned,
          changed: false,
        },
      ]),
    );
  }

  private async writeLedger(q: Queryable, rows: Array<LedgerRow & { m: Movement }>): Promise<void> {
    await write(
      q,
      `INSERT INTO ledger (id, tenant_id, user_id, currency_id, amount, balance_after, source_type, source_ref, description, idempotency_key, created_at)
       SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bigint[], $7::text[], $8::text[], $9::text[], $10::text[], $11::bigint[])`,
      [
        rows.map((r) => r.id),
        rows.map((r) => r.m.tenant_id),
        rows.map((r) => r.user_id),
        rows.map((r) => r.currency_id),
        rows.map((r) => r.amount),
        rows.map((r) => r.balance_after),
        rows.map((r) => r.m.source_type),
        rows.map((r) => r.m.source_ref ?? null),
        rows.map((r) => r.m.description ?? null),
        rows.map((r) => r.m.idempotency_key ?? null),
        rows.map((r) => r.m.now),
      ],
    );
  }

  /**
   * Takes a transaction-scoped advisory lock per (tenant, idempotency key), in one order. Without
   * it, two movements with one key for different balance rows lock different rows, neither sees
   * the other's uncommitted ledger row, and the second fails on the unique index (a 500) instead
   * of being judged against the first (the same result, or idempotency_conflict: 409). The lock
   * space (two int4 keys, class KEY_LOCK_CLASS) is apart from the migrations' bigint lock; a hash
   * collision only serialises two movements.
   */
  private async lockKeys(
    q: Queryable,
    ms: ReadonlyArray<Pick<Movement, 'tenant_id' | 'idempotency_key'>>,
  ): Promise<void> {
    if (ms.length === 0) return;
    const hashes = [
      ...new Set(
        ms.map((m) => hash('sha256', pairId(m.tenant_id, m.idempotency_key!), 'buffer').readInt32BE(0)),
      ),
    ].sort((a, b) => a - b);
    // Nothing is read back: on a write-behind transaction the lock goes out with the read after
    // it (the statements run in the order sent; a failed lock fails that read too).
    await write(
      q,
      `SELECT pg_advisory_xact_lock($1::int4, k) FROM unnest($2::int4[]) WITH ORDINALITY AS u(k, n) ORDER BY n`,
      [KEY_LOCK_CLASS, hashes],
    );
  }

  /** Ledger rows by (tenant, idempotency key) for the movements that carry one. */
  private async byKeys(
    q: Queryable,
    ms: ReadonlyArray<Pick<Movement, 'tenant_id' | 'idempotency_key'>>,
  ): Promise<Map<string, LedgerRow>> {
    if (ms.length === 0) return new Map();
    const r = await q.query<LedgerRow & { tenant_id: string; idempotency_key: string }>(
      `SELECT l.id, l.tenant_id, l.idempotency_key, l.user_id, l.currency_id, l.amount, l.balance_after FROM ledger l
       JOIN unnest($1::text[], $2::text[]) AS k(tenant_id, idempotency_key)
         ON l.tenant_id = k.tenant_id AND l.idempotency_key = k.idempotency_key`,
      [ms.map((m) => m.tenant_id), ms.map((m) => m.idempotency_key!)],
    );
    return new Map(
      r.rows.map((x) => [
        pairId(x.tenant_id, x.idempotency_key),
        {
          id: x.id,
          user_id: x.user_id,
          currency_id: x.currency_id,
          amount: Number(x.amount),
          balance_after: Number(x.balance_after),
        },
      ]),
    );
  }

  private replay(seen: LedgerRow, m: Movement, sign: 1 | -1): MovementResult | WalletError {
    if (seen.user_id !== m.user_id || seen.currency_id !== m.currency_id || seen.amount !== sign * m.amount) {
      return new WalletError(
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

function unique<T extends readonly string[]>(keys: T[]): T[] {
  const m = new Map<string, T>();
  for (const k of keys) m.set(k.join('\u0000'), k);
  return [...m.values()];
}
