/** The streak engine, pure: periods across DST, settling, freezes, late events, deadlines, the view. */
import {
  applyEvent,
  dueAt,
  emptyProgress,
  nextPeriod,
  periodAt,
  settle,
  sweep,
  viewAt,
  type Move,
  type StreakConfig,
} from './engine';

const H = 3_600_000;
const D = 24 * H;
const berlin: StreakConfig = {
  event_types: ['x'],
  window: { type: 'calendar', period: 'daily', timezone: 'Europe/Berlin', reset_time: '04:00' },
  condition: { type: 'count', min: 1 },
  milestones: [{ threshold: 2, reward_item_id: null, repeatable: false }],
  at_risk_seconds: 3600,
};

describe('streak engine', () => {
  it('cuts daily periods at the local reset time, 25 h on the day the clocks go back', () => {
    const p = periodAt(berlin, null, Date.parse('2026-10-25T02:30:00Z'));
    expect([p.key, new Date(p.start).toISOString(), new Date(p.end).toISOString()]).toEqual([
      '2026-10-24',
      '2026-10-24T02:00:00.000Z',
      '2026-10-25T03:00:00.000Z',
    ]);
    expect(p.end - p.start).toBe(25 * H);
    expect(nextPeriod(berlin, p).key).toBe('2026-10-25');
  });

  it('rolling periods start at the run and follow each other', () => {
    const cfg: StreakConfig = { ...berlin, window: { type: 'rolling', duration_seconds: 3600 } };
    expect(periodAt(cfg, null, 1000)).toMatchObject({ start: 1000, end: 1000 + H });
    expect(periodAt(cfg, 1000 + H, 1000 + 3.5 * H)).toMatchObject({ start: 1000 + 3 * H, end: 1000 + 4 * H });
  });

  it('qualifies once per period, reaches milestones, ignores late events', () => {
    const p = emptyProgress();
    const moves: Move[] = [];
    const t = Date.parse('2026-11-02T12:00:00Z');
    expect(applyEvent(berlin, p, t, 1, moves)).toBe(true);
    expect(applyEvent(berlin, p, t + 1000, 1, moves)).toBe(true);
    expect(applyEvent(berlin, p, t + D, 1, moves)).toBe(true);
    expect(p.current_count).toBe(2);
    expect(moves.map((m) => m.kind)).toEqual(['qualified', 'qualified', 'milestone']);
    expect(applyEvent(berlin, p, t - D, 1, moves)).toBe(false);
    expect(p.current_count).toBe(2);
  });

  it('uses a freeze instead of a break, then breaks; deadlines follow', () => {
    const p = emptyProgress();
    const moves: Move[] = [];
    const t = Date.parse('2026-11-02T12:00:00Z'); // period 11-02 04:00 CET = 03:00Z .. 11-03 03:00Z
    applyEvent(berlin, p, t, 1, moves);
    p.freezes = 1;
    // Qualified: the next period (11-03) must be qualified; at risk an hour before it ends.
    expect(new Date(dueAt(berlin, p)!).toISOString()).toBe('2026-11-04T02:00:00.000Z');
    moves.length = 0;
    sweep(berlin, p, Date.parse('2026-11-04T02:00:00Z'), moves);
    expect(moves.map((m) => m.kind)).toEqual(['at_risk']);
    expect(new Date(dueAt(berlin, p)!).toISOString()).toBe('2026-11-04T03:00:00.000Z');
    sweep(berlin, p, Date.parse('2026-11-04T03:00:00Z'), moves);
    expect(moves.map((m) => m.kind)).toEqual(['at_risk', 'frozen']);
    expect([p.current_count, p.freezes]).toEqual([1, 0]);
    settle(berlin, p, Date.parse('2026-11-06T03:00:00Z'), moves);
    expect(moves.map((m) => m.kind)).toEqual(['at_risk', 'frozen', 'broken']);
    expect([p.current_count, p.longest_count, p.run, p.period]).toEqual([0, 1, 1, null]);
    expect(dueAt(berlin, p)).toBeNull();
    expect(viewAt(berlin, p, Date.parse('2026-11-06T04:00:00Z'), false).status).toBe('broken');
  });

  it('the view settles a copy and shows frozen while paused', () => {
    const p = emptyProgress();
    applyEvent(berlin, p, Date.parse('2026-11-02T12:00:00Z'), 1, []);
    const later = Date.parse('2026-11-10T12:00:00Z');
    expect(viewAt(berlin, p, later, false)).toMatchObject({ status: 'broken', current_count: 0 });
    expect(viewAt(berlin, p, later, true)).toMatchObject({ status: 'frozen', current_count: 1 });
    expect(p.current_count).toBe(1);
  });
});
