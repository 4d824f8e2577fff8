/**
 * Domain errors as HTTP answers, in one place. Core modules throw their own errors (they know
 * nothing of HTTP); the route chain (./route.ts) passes whatever a handler throws through
 * `toApiError`, so a handler lets a domain error propagate instead of catching and mapping it.
 * A new feature with its own error class adds one entry to `MAPPINGS`.
 *
 * Store refusals are the other kind: a write the database refused (a foreign or unique key) after
 * a check in the handler let it through, because a concurrent transaction slipped in between.
 * What they mean depends on the write, so the handler names the answer and `answerRefusals`
 * applies it (the same answer the check before the write gives).
 */
import { AddressCheckUnavailable, AddressRefused } from '../core/webhooks/address';
import { CouponError } from '../core/coupons/errors';
import { BackfillRefused } from '../core/achievements/backfill';
import { WindowNotFound } from '../core/leaderboards/queries';
import { StreakError } from '../core/streaks/definitions';
import { TenancyError } from '../core/tenancy/store';
import { RuleLimitError } from '../core/wallet/earning';
import { WalletError } from '../core/wallet/wallet';
import { StoreError } from '../core/store/errors';
import { OrderStateError } from '../core/store/order-states';
import { WheelError } from '../core/wheels/spin';
import { ApiError, errors } from './errors';

/** Error codes of refused spins (SPEC.md leaves them open; docs/wheels.md lists them). */
const WHEEL_CODES = {
  not_found: 'NOT_FOUND',
  not_active: 'WHEEL_NOT_ACTIVE',
  not_started: 'WHEEL_NOT_STARTED',
  ended: 'WHEEL_ENDED',
  limit_reached: 'SPIN_LIMIT_REACHED',
  cooldown: 'SPIN_COOLDOWN',
  cost_unavailable: 'WHEEL_COST_UNAVAILABLE',
} as const;

/** How one domain error class answers. */
interface Mapping<E extends Error> {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- any constructor of E
  type: abstract new (...args: any[]) => E;
  /** The answer, or null to leave the error as it is (an unexpected error: 500). */
  answer(err: E): ApiError | null;
}

const mapping = <E extends Error>(m: Mapping<E>): Mapping<Error> => m as unknown as Mapping<Error>;

/** Every domain error the API answers for, with its answer. */
export const MAPPINGS: readonly Mapping<Error>[] = [
  // Wallet movements (grant, deduct): 402 for an insufficient balance, as purchases answer.
  mapping({
    type: WalletError,
    answer: (err) => {
      switch (err.code) {
        case 'insufficient_balance':
          return new ApiError(402, 'INSUFFICIENT_BALANCE', err.message);
        case 'idempotency_conflict':
          return errors.conflict(err.message);
        case 'unknown_currency':
        case 'inactive_currency':
        case 'not_spendable':
          return errors.validation(`body.currency_id: ${err.message}`);
        default:
          return errors.validation(err.message);
      }
    },
  }),
  // Earning rules: a create past the tenant's limit (docs/wallet.md).
  mapping({ type: RuleLimitError, answer: (err) => errors.conflict(err.message) }),
  // The store (docs/store.md "Errors"): purchases, grants, claims, order moves.
  mapping({
    type: StoreError,
    answer: (err) => {
      switch (err.code) {
        case 'not_found':
          return errors.notFound(err.message);
        case 'invalid':
          return errors.validation(err.message, err.details);
        case 'out_of_stock':
          return new ApiError(409, 'OUT_OF_STOCK', err.message);
        case 'idempotency_conflict':
          return new ApiError(409, 'IDEMPOTENCY_CONFLICT', err.message);
        default:
          return new ApiError(409, 'INVALID_STATE', err.message);
      }
    },
  }),
  // The order state machine (core/store/order-states.ts): a move it does not list.
  mapping({ type: OrderStateError, answer: (err) => new ApiError(409, 'INVALID_STATE', err.message) }),
  // Operator routes: a tenant id that is taken.
  mapping({
    type: TenancyError,
    answer: (err) => (err.kind === 'conflict' ? errors.conflict(err.message) : null),
  }),
  // Streaks: a status move out of archived, a reused idempotency key; a missing definition.
  mapping({
    type: StreakError,
    answer: (err) =>
      err.kind === 'conflict'
        ? errors.conflict(err.message)
        : err.kind === 'not_found'
          ? errors.notFound(err.message)
          : errors.validation(err.message),
  }),
  // Leaderboard queries: a window key that names no window of the board.
  mapping({ type: WindowNotFound, answer: (err) => errors.notFound(err.message) }),
  // Achievement backfills: one already running, no achievement (every criteria type is backfilled).
  mapping({
    type: BackfillRefused,
    answer: (err) => (err.kind === 'busy' ? errors.conflict(err.message) : errors.notFound(err.message)),
  }),
  // Webhook registration (body.url): an address that may not receive deliveries ...
  mapping({ type: AddressRefused, answer: (err) => errors.validation(`body.url: ${err.message}`) }),
  // ... or a check that could not finish (DNS): nothing was registered, fail closed.
  mapping({
    type: AddressCheckUnavailable,
    answer: (err) =>
      errors.unavailable(
        `body.url: the address check could not finish (${err.message}); nothing was registered, retry`,
      ),
  }),
  // Wheel spins (docs/wheels.md "Statuses"): 404 an unknown wheel, else 400 with the reason; a
  // cooldown or daily limit says when the next spin is allowed.
  mapping({
    type: WheelError,
    answer: (err) => {
      if (err.kind === 'not_found') return errors.notFound(err.message);
      const details =
        err.nextSpinAt === undefined
          ? undefined
          : {
              next_spin_at: new Date(err.nextSpinAt).toISOString(),
              retry_after_seconds: Math.max(1, Math.ceil((err.nextSpinAt - (err.now ?? 0)) / 1000)),
            };
      return new ApiError(400, WHEEL_CODES[err.kind], err.message, details);
    },
  }),
  // Coupons (docs/coupons.md "Statuses"): 404 for a code that does not exist, 409 for a code taken or a
  // reward that could not be granted, 400 with a code per reason for every other refusal.
  mapping({
    type: CouponError,
    answer: (err) => {
      switch (err.reason) {
        case 'unknown':
          return errors.notFound(err.message);
        case 'code_taken':
        case 'codes_exhausted':
        case 'reward_failed':
          return errors.conflict(err.message);
        default:
          return new ApiError(400, `COUPON_${err.reason.toUpperCase()}`, err.message);
      }
    },
  }),
];

/** The HTTP answer of an error a handler threw: an ApiError as it is, a domain error mapped, else unchanged. */
export function toApiError(err: unknown): unknown {
  if (err instanceof ApiError || !(err instanceof Error)) return err;
  for (const m of MAPPINGS) {
    if (err instanceof m.type) return m.answer(err) ?? err;
  }
  return err;
}

/** The store's refusal of a write, by SQLSTATE: a foreign key (23503) or a unique key (23505). */
export function storeRefusal(err: unknown): 'foreign_key' | 'unique' | null {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '23503' ? 'foreign_key' : code === '23505' ? 'unique' : null;
}

/** The answers a write gives when the store refuses it (see the module comment). */
export interface RefusalAnswers {
  foreignKey?: () => ApiError | Promise<ApiError>;
  unique?: () => ApiError | Promise<ApiError>;
}

/** Runs a write; a store refusal it names answers as given, any other error propagates. */
export async function answerRefusals<T>(write: () => Promise<T>, answers: RefusalAnswers): Promise<T> {
  try {
    return await write();
  } catch (err) {
    const kind = storeRefusal(err);
    const answer =
      kind === 'foreign_key' ? answers.foreignKey : kind === 'unique' ? answers.unique : undefined;
    if (!answer) throw err;
    throw await answer();
  }
}
