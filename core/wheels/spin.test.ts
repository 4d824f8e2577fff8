import { duration, frequencyRefusal } from './spin';
import type { Wheel, WheelConfig } from './wheels';

const wheel = (frequency: WheelConfig['frequency']): Wheel => ({
  id: 'w',
  tenant_id: 't',
  name: 'w',
  description: null,
  active: true,
  config: { segments: [], frequency },
  created_at: '',
  updated_at: '',
});
const at = (iso: string) => Date.parse(iso);
const state = (
  s: Partial<{ total_spins: number; day: string | null; day_spins: number; last_spun_at: number | null }>,
) => ({
  total_spins: 0,
  day: null,
  day_spins: 0,
  last_spun_at: null,
  ...s,
});

describe('frequency limits', () => {
  it('unlimited never refuses', () => {
    expect(
      frequencyRefusal(wheel({ type: 'unlimited', value: null }), state({ total_spins: 1e9 }), 0),
    ).toBeNull();
  });

  it('daily limit counts the UTC day of the last spin and resets at midnight UTC', () => {
    const w = wheel({ type: 'daily_limit', value: 2 });
    const s = state({ day: '2026-11-20', day_spins: 2 });
    const late = frequencyRefusal(w, s, at('2026-11-20T23:59:59.999Z'));
    expect(late).toMatchObject({ kind: 'limit_reached', nextSpinAt: at('2026-11-21T00:00:00Z') });
    expect(late!.message).toMatch(/in 1s\)$/);
    expect(frequencyRefusal(w, s, at('2026-11-21T00:00:00.000Z'))).toBeNull();
    expect(
      frequencyRefusal(w, state({ day: '2026-11-20', day_spins: 1 }), at('2026-11-20T12:00:00Z')),
    ).toBeNull();
  });

  it('total limit counts every spin ever', () => {
    const w = wheel({ type: 'total_limit', value: 3 });
    expect(frequencyRefusal(w, state({ total_spins: 2 }), 0)).toBeNull();
    expect(frequencyRefusal(w, state({ total_spins: 3 }), 1e13)).toMatchObject({ kind: 'limit_reached' });
  });

  it('cooldown waits value hours from the last spin, to the millisecond', () => {
    const w = wheel({ type: 'cooldown', value: 24 });
    const last = at('2026-11-20T10:00:00Z');
    expect(frequencyRefusal(w, state({}), last)).toBeNull();
    const r = frequencyRefusal(w, state({ last_spun_at: last }), last + 24 * 3_600_000 - 1);
    expect(r).toMatchObject({ kind: 'cooldown', nextSpinAt: last + 24 * 3_600_000 });
    expect(r!.message).toBe('Cooldown of 24 hours: next spin in 1s (at 2026-11-21T10:00:00.000Z)');
    expect(frequencyRefusal(w, state({ last_spun_at: last }), last + 24 * 3_600_000)).toBeNull();
  });

  it('says the time left readably', () => {
    expect(duration(1)).toBe('1s');
    expect(duration(59_000)).toBe('59s');
    expect(duration(3_600_000 + 61_000)).toBe('1h 1m 1s');
    expect(duration(2 * 3_600_000)).toBe('2h');
  });
});
