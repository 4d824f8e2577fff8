/**
 * The order state machine, in one place (ARCHITECTURE.md "one state machine per resource";
 * SPEC.md "Order" states; docs/store.md has the table). Every change of an order's state goes
 * through `move`, which refuses a move that is not listed here with an `OrderStateError`
 * (409 INVALID_STATE). Each move names the webhook it enqueues.
 */

export const ORDER_STATES = [
  'pending_claim',
  'fulfilling',
  'completed',
  'failed',
  'expired',
  'refunded',
] as const;
export type OrderState = (typeof ORDER_STATES)[number];

/** What moves an order. */
export type OrderAction =
  | 'claim' // the user submits the claim fields
  | 'complete' // fulfilment delivered (wallet or api automatically; manual by the admin)
  | 'fail' // fulfilment failed (api after its last attempt; manual by the admin; wallet refused)
  | 'retry' // the admin retries a failed order
  | 'expire' // the scheduler: an unclaimed order past expires_at
  | 'refund'; // the admin refunds a purchase order

/** The webhook event of each move (order.<event>). */
export type OrderEvent =
  'created' | 'claimed' | 'fulfilling' | 'completed' | 'failed' | 'expired' | 'refunded';

interface Move {
  from: readonly OrderState[];
  to: OrderState;
  event: OrderEvent;
}

/** Every allowed move. A purchase or grant creates an order in pending_claim or fulfilling. */
export const MOVES: Readonly<Record<OrderAction, Move>> = {
  claim: { from: ['pending_claim'], to: 'fulfilling', event: 'claimed' },
  // SPEC.md: "fulfilling or other" -> completed by the admin PUT; a failed order may be completed
  // by hand too (delivered outside the service). Not from an end state.
  complete: { from: ['fulfilling', 'failed', 'pending_claim'], to: 'completed', event: 'completed' },
  fail: { from: ['fulfilling', 'pending_claim'], to: 'failed', event: 'failed' },
  retry: { from: ['failed'], to: 'fulfilling', event: 'fulfilling' },
  expire: { from: ['pending_claim'], to: 'expired', event: 'expired' },
  // A purchase order not yet delivered, or one whose delivery failed or was completed (goodwill).
  refund: { from: ['pending_claim', 'fulfilling', 'failed', 'completed'], to: 'refunded', event: 'refunded' },
};

/** The states an order is created in. */
export const INITIAL_STATES: readonly OrderState[] = ['pending_claim', 'fulfilling'];

export class OrderStateError extends Error {
  constructor(
    readonly action: OrderAction,
    readonly state: OrderState,
  ) {
    super(
      `Cannot ${action} an order in state ${state}; ${action} is allowed from ${MOVES[action].from.join(', ')}`,
    );
    this.name = 'OrderStateError';
  }
}

/** The move of `action` from `state`, or throws OrderStateError. */
export function move(state: OrderState, action: OrderAction): Move {
  const m = MOVES[action];
  if (!m.from.includes(state)) throw new OrderStateError(action, state);
  return m;
}

/** Whether `action` is allowed from `state`. */
export function allowed(state: OrderState, action: OrderAction): boolean {
  return MOVES[action].from.includes(state);
}

/** End states: nothing moves out of them but a refund of a completed purchase. */
export const isFinal = (s: OrderState) => s === 'completed' || s === 'expired' || s === 'refunded';
