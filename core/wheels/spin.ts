/**
 * A spin (SPEC.md "Spin wheels", "Limits", "Errors"), one transaction of the caller's:
 * 1. the wheel is read (404 unknown) and its availability judged at the clock's `now`;
 * 2. the user's counter row of the wheel is created if missing and locked FOR UPDATE, so the
 *    spins of one user on one wheel are judged one after the other however many arrive at once;
 * 3. the frequency limit is checked on that row (a daily limit counts spins of the UTC day, a
 *    total limit spins ever, a cooldown the hours since the last spin);
 * 4. the cost, if any, is debited through the wallet (`wheel_spin`; 402 when short);
 * 5. a segment is drawn from the injected random source in proportion to the weights (./draw.ts);
 * 6. a prize is granted through the one granting service (`wheel`, grant key naming the spin): a
 *    currency prize credits the wallet, another item is held as the granting service decides;
 * 7. the history row (with what audits the draw) is written and the counters moved.
 * A refusal throws WheelError before anything is written; the caller's rollback undoes the rest.
 */
import { createHash } from 'node:crypto';
import type { Queryable } from '../../adapters/sql/types';
import type { Random } from '../random';
import type { Granted, Granter } from '../rewards/grant';
import { getItem, type RewardItem } from '../rewards/items';
import { WalletError, type Wallet } from '../wallet/wallet';
import { drawSegment } from './draw';
import { availability, getWheel, type Segment, type Wheel } from './wheels';

export type WheelRefusal =
  'not_found' | 'not_active' | 'not_started' | 'ended' | 'limit_reached' | 'cooldown' | 'cost_unavailable';

export class WheelError extends Error {
  constructor(
    readonly kind: WheelRefusal,
    message: string,
    /** For a cooldown or a limit that resets: when the next spin is allowed (Unix ms). */
    readonly nextSpinAt?: number,
    readonly now?: number,
  ) {
    super(message);
    this.name = 'WheelError';
  }
}

/** The source types of a spin's ledger rows: its cost, and its prize (the grant's, as its order's). */
export const SPIN_COST_SOURCE = 'wheel_spin';
export const PRIZE_SOURCE = 'wheel';

export interface SpinDeps {
  wallet: Wallet;
  granter: Granter;
  random: Random;
}

export interface SpinResult {
  spin_id: string;
  wheel_id: string;
  user_id: string;
  segment_index: number;
  segment: Segment;
  reward_item: Pick<RewardItem, 'item_id' | 'name' | 'description' | 'reward_type' | 'payload'> | null;
  prize: { status: Granted['status']; transaction_id: string | null } | null;
  cost: { currency_id: string; amount: number; transaction_id: string; balance_after: number } | null;
  spun_at: string;
}

interface StateRow {
  total_spins: number;
  day: string | null;
  day_spins: number;
  last_spun_at: number | null;
}

const utcDay = (t: number) => new Date(t).toISOString().slice(0, 10);
const nextUtcMidnight = (t: number) => {
  const d = new Date(t);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1);
};

/** `2h 5m 3s`, for the time left of a cooldown or a daily limit. */
export function duration(ms: number): string {
  const s = Math.max(1, Math.ceil(ms / 1000));
  const parts = [
    [Math.floor(s / 3600), 'h'],
    [Math.floor((s % 3600) / 60), 'm'],
    [s % 60, 's'],
  ] as const;
  return parts
    .filter(([n]) => n > 0)
    .map(([n, u]) => `${n}${u}`)
    .join(' ');
}

/** Why the user may not spin now, or null (the frequency rule of SPEC.md "Limits"). */
export function frequencyRefusal(w: Wheel, s: StateRow, now: number): WheelError | null {
  const f = w.config.frequency;
  const value = f.value ?? 0;
  switch (f.type) {
    case 'unlimited':
      return null;
    case 'daily_limit': {
      const today = s.day === utcDay(now) ? s.day_spins : 0;
      if (today < value) return null;
      const next = nextUtcMidnight(now);
      return new WheelError(
        'limit_reached',
        `Daily limit of ${value} spins reached; it resets at midnight UTC (${new Date(next).toISOString()}, in ${duration(next - now)})`,
        next,
        now,
      );
    }
    case 'total_limit':
      return s.total_spins < value
        ? null
        : new WheelError(
            'limit_reached',
            `Total limit of ${value} spins reached; this wheel allows no more spins for this user`,
          );
    case 'cooldown': {
      if (s.last_spun_at === null) return null;
      const next = Number(s.last_spun_at) + value * 3_600_000;
      if (now >= next) return null;
      return new WheelError(
        'cooldown',
        `Cooldown of ${value} hours: next spin in ${duration(next - now)} (at ${new Date(next).toISOString()})`,
        next,
        now,
      );
    }
  }
}

const refusals = {
  not_active: 'Wheel is not active',
  not_started: 'Wheel has not started yet',
  ended: 'Wheel has ended',
} as const;

/** Advisory lock class of a user's spins ('LDWS'), apart from the wallet's ('LDWK'). */
const SPIN_LOCK_CLASS = 0x4c445753;

/** One spin in the caller's transaction (see the module comment). */
export async function spin(
  q: Queryable,
  deps: SpinDeps,
  tenantId: string,
  wheelId: string,
  userId: string,
  now: number,
): Promise<SpinResult> {
  const wheel = await getWheel(q, tenantId, wheelId);
  if (!wheel) throw new WheelError('not_found', `Wheel ${wheelId} not found`);
  const av = availability(wheel, now);
  if (av !== 'available') {
    const at = av === 'not_started' ? wheel.config.starts_at : av === 'ended' ? wheel.config.ends_at : null;
    throw new WheelError(
      av,
      at ? `${refusals[av]} (${av === 'ended' ? 'ended' : 'starts'} at ${at})` : refusals[av],
    );
  }

  // One user's spins are judged one at a time: first a transaction-scoped lock on (tenant, user),
  // so two spins of one user on two wheels never lock the user's balances in opposite orders (a
  // cost in one currency, a prize in another); then the counter row of this wheel. Concurrent
  // first spins: the second INSERT waits for the first to commit, then skips.
  const h = createHash('sha256').update(`${tenantId}\u0000${userId}`).digest().readInt32BE(0);
  await q.query('SELECT pg_advisory_xact_lock($1::int4, $2::int4)', [SPIN_LOCK_CLASS, h]);
  await q.query(
    `INSERT INTO wheel_user_spins (tenant_id, wheel_id, user_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
    [tenantId, wheelId, userId],
  );
  const st = await q.query<StateRow>(
    `SELECT total_spins, day, day_spins, last_spun_at FROM wheel_user_spins
     WHERE tenant_id = $1 AND wheel_id = $2 AND user_id = $3 FOR UPDATE`,
    [tenantId, wheelId, userId],
  );
  const state = st.rows[0]!;
  state.total_spins = Number(state.total_spins);
  state.last_spun_at = state.last_spun_at === null ? null : Number(state.last_spun_at);
  const refused = frequencyRefusal(wheel, state, now);
  if (refused) throw refused;

  const spinId = deps.random.uuid();
  let cost: SpinResult['cost'] = null;
  if (wheel.config.cost) {
    const c = wheel.config.cost;
    try {
      const r = await deps.wallet.debit(q, {
        tenant_id: tenantId,
        user_id: userId,
        currency_id: c.currency_id,
        amount: c.amount,
        source_type: SPIN_COST_SOURCE,
        source_ref: spinId,
        description: `Spin of wheel ${wheel.name}`,
        // No idempotency key: the spin id is new to every spin, so a key would never replay and
        // would cost the wallet a lock and two reads.
        now,
        purpose: 'spend',
      });
      cost = {
        currency_id: c.currency_id,
        amount: c.amount,
        transaction_id: r.transaction_id,
        balance_after: r.balance_after,
      };
    } catch (err) {
      if (err instanceof WalletError && err.code !== 'insufficient_balance')
        throw new WheelError('cost_unavailable', `The wheel's cost cannot be paid: ${err.message}`);
      throw err;
    }
  }

  const draw = drawSegment(
    wheel.config.segments.map((s) => s.probability),
    deps.random,
  );
  const segment = wheel.config.segments[draw.segment_index]!;
  let item: RewardItem | null = null;
  let prize: SpinResult['prize'] = null;
  if (segment.reward_id) {
    item = await getItem(q, tenantId, segment.reward_id);
    if (item) {
      const [g] = await deps.granter.grant(q, {
        tenant_id: tenantId,
        user_id: userId,
        items: [item],
        source_type: PRIZE_SOURCE,
        source_ref: spinId,
        grant_key: `wheel:${wheelId}:${spinId}`,
        now,
      });
      prize = { status: g!.status, transaction_id: g!.transaction_id };
    }
  }

  await q.query(
    `INSERT INTO wheel_spins (tenant_id, id, wheel_id, user_id, result_index, reward_item_id, draw, cost, prize, spun_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
    [
      tenantId,
      spinId,
      wheelId,
      userId,
      draw.segment_index,
      item ? item.item_id : null,
      JSON.stringify({ random: draw.random, weights: draw.weights, total: draw.total }),
      cost ? JSON.stringify(cost) : null,
      prize ? JSON.stringify(prize) : null,
      now,
    ],
  );
  const today = utcDay(now);
  await q.query(
    `UPDATE wheel_user_spins SET total_spins = total_spins + 1,
       day_spins = CASE WHEN day = $4 THEN day_spins + 1 ELSE 1 END, day = $4, last_spun_at = $5
     WHERE tenant_id = $1 AND wheel_id = $2 AND user_id = $3`,
    [tenantId, wheelId, userId, today, now],
  );
  return {
    spin_id: spinId,
    wheel_id: wheelId,
    user_id: userId,
    segment_index: draw.segment_index,
    segment,
    reward_item: item
      ? {
          item_id: item.item_id,
          name: item.name,
          description: item.description,
          reward_type: item.reward_type,
          payload: item.payload,
        }
      : null,
    prize,
    cost,
    spun_at: new Date(now).toISOString(),
  };
}

interface SpinRow {
  id: string;
  wheel_id: string;
  user_id: string;
  result_index: number;
  reward_item_id: string | null;
  draw: { random: number; weights: number[]; total: number };
  cost: SpinResult['cost'];
  prize: SpinResult['prize'];
  spun_at: number;
}

/** Spins newest first: a user's (optionally of one wheel), or a wheel's (optionally of one user). */
export async function spinHistory(
  q: Queryable,
  tenantId: string,
  f: { user_id?: string; wheel_id?: string; limit: number; offset: number },
) {
  const where =
    'tenant_id = $1 AND ($2::text IS NULL OR user_id = $2) AND ($3::text IS NULL OR wheel_id = $3)';
  const params = [tenantId, f.user_id ?? null, f.wheel_id ?? null];
  const total = await q.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM wheel_spins WHERE ${where}`,
    params,
  );
  const r = await q.query<SpinRow>(
    `SELECT id, wheel_id, user_id, result_index, reward_item_id, draw, cost, prize, spun_at FROM wheel_spins
     WHERE ${where} ORDER BY seq DESC LIMIT $4 OFFSET $5`,
    [...params, f.limit, f.offset],
  );
  return {
    spins: r.rows.map((x) => ({
      id: x.id,
      wheel_id: x.wheel_id,
      user_id: x.user_id,
      result_index: x.result_index,
      reward_item_id: x.reward_item_id,
      spun_at: new Date(Number(x.spun_at)).toISOString(),
      draw: x.draw,
      cost: x.cost,
      prize: x.prize,
    })),
    total: total.rows[0]?.n ?? 0,
  };
}
