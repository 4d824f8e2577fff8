/** Domain errors as HTTP answers: the one mapping (toApiError) and the store refusals (answerRefusals). */
import { AddressCheckUnavailable, AddressRefused } from '../core/webhooks/address';
import { WindowNotFound } from '../core/leaderboards/queries';
import { TenancyError } from '../core/tenancy/store';
import { WalletError, type WalletErrorCode } from '../core/wallet/wallet';
import { answerRefusals, storeRefusal, toApiError } from './domain-errors';
import { ApiError, errors } from './errors';

/** The rendered body of what an error answers, or the error itself when it stays unmapped. */
const answer = (err: unknown) => {
  const out = toApiError(err);
  return out instanceof ApiError ? out.toBody().error : out;
};

const sqlError = (code: string) => Object.assign(new Error(`sqlstate ${code}`), { code });

describe('toApiError', () => {
  it.each<[WalletErrorCode, number, string, string]>([
    ['insufficient_balance', 402, 'INSUFFICIENT_BALANCE', 'low'],
    ['idempotency_conflict', 409, 'CONFLICT', 'low'],
    ['unknown_currency', 400, 'VALIDATION_ERROR', 'body.currency_id: low'],
    ['inactive_currency', 400, 'VALIDATION_ERROR', 'body.currency_id: low'],
    ['not_spendable', 400, 'VALIDATION_ERROR', 'body.currency_id: low'],
    ['invalid_amount', 400, 'VALIDATION_ERROR', 'low'],
  ])('answers the wallet error %s with %i %s', (code, status, apiCode, message) => {
    expect(answer(new WalletError(code, 'low'))).toEqual({ status, code: apiCode, message });
  });

  it('answers a taken tenant id 409, and leaves any other tenancy error unmapped', () => {
    expect(answer(new TenancyError('conflict', 'tenant t already exists'))).toEqual({
      status: 409,
      code: 'CONFLICT',
      message: 'tenant t already exists',
    });
    const other = new TenancyError('not_found', 'gone');
    expect(toApiError(other)).toBe(other);
  });

  it('answers a window that does not exist 404', () => {
    expect(answer(new WindowNotFound('Window 2024-01 not found'))).toEqual({
      status: 404,
      code: 'NOT_FOUND',
      message: 'Window 2024-01 not found',
    });
  });

  it('answers a refused webhook address 400 and an unfinished address check 503, naming body.url', () => {
    expect(answer(new AddressRefused('x.test resolves to a private address'))).toEqual({
      status: 400,
      code: 'VALIDATION_ERROR',
      message: 'body.url: x.test resolves to a private address',
    });
    expect(answer(new AddressCheckUnavailable('timeout'))).toEqual({
      status: 503,
      code: 'SERVICE_UNAVAILABLE',
      message: 'body.url: the address check could not finish (timeout); nothing was registered, retry',
    });
  });

  it('passes an ApiError, an unknown error and a thrown non-error through unchanged', () => {
    const api = errors.notFound('x');
    const unknown = new TypeError('bug');
    expect(toApiError(api)).toBe(api);
    expect(toApiError(unknown)).toBe(unknown);
    expect(toApiError('text')).toBe('text');
    // A store refusal is not a domain error: only the handler that made the write knows its answer.
    const fk = sqlError('23503');
    expect(toApiError(fk)).toBe(fk);
  });
});

describe('answerRefusals', () => {
  const answers = {
    foreignKey: async () => errors.conflict('in use'),
    unique: () => errors.conflict('taken'),
  };

  it('returns what the write returns', async () => {
    await expect(answerRefusals(async () => 7, answers)).resolves.toBe(7);
  });

  it('answers a foreign-key or unique refusal as given', async () => {
    await expect(answerRefusals(() => Promise.reject(sqlError('23503')), answers)).rejects.toMatchObject({
      status: 409,
      message: 'in use',
    });
    await expect(answerRefusals(() => Promise.reject(sqlError('23505')), answers)).rejects.toMatchObject({
      status: 409,
      message: 'taken',
    });
  });

  it('lets a refusal it has no answer for, and any other error, propagate unchanged', async () => {
    const unique = sqlError('23505');
    await expect(
      answerRefusals(() => Promise.reject(unique), { foreignKey: answers.foreignKey }),
    ).rejects.toBe(unique);
    const other = sqlError('40001');
    await expect(answerRefusals(() => Promise.reject(other), answers)).rejects.toBe(other);
    expect([
      storeRefusal(sqlError('23503')),
      storeRefusal(unique),
      storeRefusal(other),
      storeRefusal(null),
    ]).toEqual(['foreign_key', 'unique', null, null]);
  });
});
