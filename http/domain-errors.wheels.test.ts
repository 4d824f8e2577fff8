/** The spin refusals as HTTP answers (http/domain-errors.ts, docs/wheels.md "Statuses"). */
import { WheelError, type WheelRefusal } from '../core/wheels/spin';
import { toApiError } from './domain-errors';
import { ApiError } from './errors';

describe('WheelError answers', () => {
  it.each<[WheelRefusal, number, string]>([
    ['not_found', 404, 'NOT_FOUND'],
    ['not_active', 400, 'WHEEL_NOT_ACTIVE'],
    ['not_started', 400, 'WHEEL_NOT_STARTED'],
    ['ended', 400, 'WHEEL_ENDED'],
    ['limit_reached', 400, 'SPIN_LIMIT_REACHED'],
    ['cooldown', 400, 'SPIN_COOLDOWN'],
    ['cost_unavailable', 400, 'WHEEL_COST_UNAVAILABLE'],
  ])('%s: %i %s with the message', (kind, status, code) => {
    const out = toApiError(new WheelError(kind, 'why'));
    expect(out).toBeInstanceOf(ApiError);
    expect((out as ApiError).toBody().error).toEqual({ status, code, message: 'why' });
  });

  it('gives when the next spin is allowed, with the seconds left', () => {
    const out = toApiError(new WheelError('cooldown', 'wait', 10_500, 1_000)) as ApiError;
    expect(out.toBody().error.details).toEqual({
      next_spin_at: '1970-01-01T00:00:10.500Z',
      retry_after_seconds: 10,
    });
  });
});
