/** The store's refusals; http/domain-errors.ts maps each code to its status (docs/store.md "Errors"). */
export type StoreErrorCode =
  | 'not_found' // 404: the reward or order does not exist (for this user)
  | 'invalid' // 400: a field of the request is wrong (the message names it)
  | 'out_of_stock' // 409 OUT_OF_STOCK
  | 'idempotency_conflict' // 409 IDEMPOTENCY_CONFLICT: the key was used for another purchase
  | 'not_refundable' // 409 INVALID_STATE: only purchase orders are refunded
  | 'not_manual' // 409 INVALID_STATE: the admin sets the status of manual orders only
  | 'expired'; // 409 INVALID_STATE: a claim after expires_at (before the scheduler moved it)

export class StoreError extends Error {
  constructor(
    readonly code: StoreErrorCode,
    message: string,
    /** Per-field messages of a claim or purchase whose fields are wrong. */
    readonly details?: { fields: Record<string, string> },
  ) {
    super(message);
    this.name = 'StoreError';
  }
}
