import { DEFAULT_WEBHOOK_RETRY_SCHEDULE, parseRetrySchedule } from '../../runtime/config';
import { afterFailure, JITTER } from './schedule';

describe('retry schedule', () => {
  const schedule = parseRetrySchedule('X', DEFAULT_WEBHOOK_RETRY_SCHEDULE);

  it('spreads 11 attempts over about a day by default', () => {
    expect(schedule).toHaveLength(10);
    const total = schedule.reduce((a, b) => a + b, 0);
    expect(total / 3600_000).toBeGreaterThan(23);
    expect(total / 3600_000).toBeLessThan(24);
    // Growing delays: exponential backoff, capped at 8 hours.
    for (let i = 1; i < schedule.length; i++) expect(schedule[i]!).toBeGreaterThanOrEqual(schedule[i - 1]!);
    expect(Math.max(...schedule)).toBe(8 * 3600_000);
  });

  it('waits the scheduled delay with ±20 % jitter, then dead-letters after the last attempt', () => {
    const now = 1_000_000;
    expect(afterFailure(schedule, 1, now, () => 0.5)).toEqual({ kind: 'retry', at: now + 5000 });
    expect(afterFailure(schedule, 1, now, () => 0)).toEqual({ kind: 'retry', at: now + 5000 * (1 - JITTER) });
    const hi = afterFailure(schedule, 10, now, () => 0.999999);
    expect(hi.kind === 'retry' && hi.at - now).toBeLessThanOrEqual(28800_000 * (1 + JITTER));
    expect(afterFailure(schedule, 11, now)).toEqual({ kind: 'dead' });
    expect(afterFailure([1000], 2, now)).toEqual({ kind: 'dead' });
    for (let i = 0; i < 200; i++) {
      const step = afterFailure([1000], 1, 0);
      expect(step.kind === 'retry' && step.at).toBeGreaterThanOrEqual(800);
      expect(step.kind === 'retry' && step.at).toBeLessThanOrEqual(1200);
    }
  });
});
