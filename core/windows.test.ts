import fc from 'fast-check';
import { DateTime, IANAZone } from 'luxon';
import {
  ALL_TIME_END,
  MAX_INSTANT,
  nextWindow,
  Timeframe,
  TimeframeType,
  validateTimeframe,
  Window,
  windowAt,
  windowByKey,
  windowKeyPattern,
  WindowLookup,
} from './windows';

const H = 3_600_000;
const D = 24 * H;
const utc = (s: string): number => {
  const t = Date.parse(s.endsWith('Z') || /[+-]\d\d:\d\d$/.test(s) ? s : s + 'Z');
  if (Number.isNaN(t)) throw new Error(`bad date ${s}`);
  return t;
};
const iso = (t: number): string => new Date(t).toISOString();
/** Readable form of a window for assertions: key, start and end in UTC, length in hours. */
const fmt = (w: Window) => ({
  key: w.key,
  start: iso(w.start),
  end: iso(w.end),
  hours: (w.end - w.start) / H,
});
const local = (t: number, zone: string): string =>
  DateTime.fromMillis(t, { zone }).toFormat("yyyy-MM-dd'T'HH:mm:ss.SSSZZ");

const tf = (type: TimeframeType, timezone = 'UTC', extra: Partial<Timeframe> = {}): Timeframe => ({
  type,
  timezone,
  ...extra,
});

/** `n` consecutive windows starting with the one at `at`. */
function walk(t: Timeframe, at: number, n: number): Window[] {
  const out = [windowAt(t, at)];
  while (out.length < n) out.push(nextWindow(t, out[out.length - 1]));
  return out;
}

describe('validateTimeframe', () => {
  it.each([
    [{ type: 'hourly', timezone: 'UTC' }],
    [{ type: 'hourly' }],
    [{ type: 'daily', timezone: 'Europe/Berlin', reset_time: '06:30' }],
    [{ type: 'daily', timezone: 'America/New_York', reset_time: null, reset_day: null }],
    [{ type: 'weekly', timezone: 'Europe/Berlin', reset_day: 'sunday', reset_time: '23:59' }],
    [{ type: 'weekly', timezone: 'UTC', reset_day: 'Friday' }],
    [{ type: 'monthly', timezone: 'Asia/Kolkata', reset_day: 28, reset_time: '00:00' }],
    [{ type: 'monthly', timezone: 'UTC', reset_day: 1 }],
    [{ type: 'all_time', timezone: 'UTC' }],
    [{ type: 'all_time' }],
  ])('accepts %j', (t) => {
    expect(validateTimeframe(t)).toBeNull();
  });

  it.each<[unknown, string]>([
    [null, 'config.timeframe: must be an object'],
    ['weekly', 'config.timeframe: must be an object'],
    [[], 'config.timeframe: must be an object'],
    [{}, 'config.timeframe.type: must be one of hourly, daily, weekly, monthly, all_time, got undefined'],
    [
      { type: 'yearly' },
      'config.timeframe.type: must be one of hourly, daily, weekly, monthly, all_time, got "yearly"',
    ],
    [{ type: 'Weekly' }, 'config.timeframe.type: must be one of'],
    [{ type: 'daily', timezone: 'Mars/Base' }, 'config.timeframe.timezone: unknown time zone "Mars/Base"'],
    [{ type: 'daily', timezone: '' }, 'config.timeframe.timezone: unknown time zone ""'],
    [{ type: 'daily', timezone: '+05:00' }, 'config.timeframe.timezone: unknown time zone "+05:00"'],
    [{ type: 'daily', timezone: 5 }, 'config.timeframe.timezone: must be an IANA time zone name, got 5'],
    [{ type: 'daily', reset_day: 'monday' }, 'config.timeframe.reset_day: not allowed for daily timeframes'],
    [{ type: 'hourly', reset_day: 1 }, 'config.timeframe.reset_day: not allowed for hourly timeframes'],
    [{ type: 'all_time', reset_day: 1 }, 'config.timeframe.reset_day: not allowed for all_time timeframes'],
    [
      { type: 'weekly', reset_day: 'funday' },
      'config.timeframe.reset_day: must be a weekday name (monday to sunday)',
    ],
    [{ type: 'weekly', reset_day: 1 }, 'config.timeframe.reset_day: must be a weekday name'],
    [{ type: 'weekly', reset_day: 'mon' }, 'config.timeframe.reset_day: must be a weekday name'],
    [
      { type: 'monthly', reset_day: 0 },
      'config.timeframe.reset_day: must be an integer from 1 to 28 for monthly timeframes, got 0',
    ],
    [{ type: 'monthly', reset_day: 29 }, 'config.timeframe.reset_day: must be an integer from 1 to 28'],
    [{ type: 'monthly', reset_day: 31 }, 'config.timeframe.reset_day: must be an integer from 1 to 28'],
    [{ type: 'monthly', reset_day: 1.5 }, 'config.timeframe.reset_day: must be an integer from 1 to 28'],
    [
      { type: 'monthly', reset_day: '15' },
      'config.timeframe.reset_day: must be an integer from 1 to 28 for monthly timeframes, got "15"',
    ],
    [{ type: 'monthly', reset_day: 'monday' }, 'config.timeframe.reset_day: must be an integer from 1 to 28'],
    [
      { type: 'daily', reset_time: '24:00' },
      'config.timeframe.reset_time: must be "HH:MM" in 24-hour local time',
    ],
    [{ type: 'daily', reset_time: '7:00' }, 'config.timeframe.reset_time: must be "HH:MM"'],
    [{ type: 'daily', reset_time: '07:60' }, 'config.timeframe.reset_time: must be "HH:MM"'],
    [{ type: 'daily', reset_time: '07:00:00' }, 'config.timeframe.reset_time: must be "HH:MM"'],
    [{ type: 'weekly', reset_time: 700 }, 'config.timeframe.reset_time: must be "HH:MM"'],
    [
      { type: 'hourly', reset_time: '00:30' },
      'config.timeframe.reset_time: not allowed for hourly timeframes',
    ],
    [
      { type: 'all_time', reset_time: '00:00' },
      'config.timeframe.reset_time: not allowed for all_time timeframes',
    ],
    [{ type: 'daily', resetTime: '06:00' }, 'config.timeframe.resetTime: unknown field'],
  ])('refuses %j naming the field', (t, message) => {
    expect(validateTimeframe(t)).toContain(message);
  });

  it('accepts zone names in any case and aliases, with the same windows', () => {
    expect(validateTimeframe({ type: 'daily', timezone: 'europe/berlin' })).toBeNull();
    expect(validateTimeframe({ type: 'daily', timezone: 'US/Eastern' })).toBeNull();
    const at = utc('2026-10-25T12:00:00');
    expect(windowAt(tf('daily', 'europe/berlin'), at)).toEqual(windowAt(tf('daily', 'Europe/Berlin'), at));
    expect(windowAt(tf('hourly', 'US/Eastern'), at)).toEqual(windowAt(tf('hourly', 'America/New_York'), at));
    expect(windowAt(tf('daily', 'Etc/UTC'), at)).toEqual(windowAt(tf('daily', 'UTC'), at));
  });

  it('uses the given prefix', () => {
    expect(validateTimeframe({ type: 'daily', timezone: 'Nowhere/Land' }, 'config.window')).toBe(
      'config.window.timezone: unknown time zone "Nowhere/Land"',
    );
  });

  it('windowAt, windowByKey and nextWindow throw a RangeError with the message for an invalid timeframe', () => {
    const bad = { type: 'daily', timezone: 'Mars/Base' } as Timeframe;
    expect(() => windowAt(bad, 0)).toThrow(
      new RangeError('config.timeframe.timezone: unknown time zone "Mars/Base"'),
    );
    expect(() => windowByKey(bad, '2026-01-01')).toThrow(RangeError);
    expect(() => nextWindow(bad, { key: 'x', start: 0, end: 1 })).toThrow(RangeError);
    expect(() => windowAt({ type: 'fortnightly' } as unknown as Timeframe, 0)).toThrow(
      'config.timeframe.type',
    );
    expect(() => windowAt(tf('hourly', 'UTC', { reset_time: '00:30' }), 0)).toThrow(
      'reset_time: not allowed',
    );
  });
});

describe('windowAt: range', () => {
  it.each([-1, NaN, Infinity, -Infinity, MAX_INSTANT, 1e20])('refuses the instant %p', (at) => {
    expect(() => windowAt(tf('daily'), at)).toThrow(RangeError);
  });

  it('accepts the ends of the range and fractional milliseconds', () => {
    expect(fmt(windowAt(tf('daily'), 0))).toMatchObject({ key: '1970-01-01' });
    expect(fmt(windowAt(tf('daily', 'America/New_York'), 0))).toEqual({
      key: '1969-12-31',
      start: '1969-12-31T05:00:00.000Z',
      end: '1970-01-01T05:00:00.000Z',
      hours: 24,
    });
    expect(windowAt(tf('daily'), MAX_INSTANT - 1).key).toBe('9998-12-31');
    const w = windowAt(tf('hourly'), utc('2026-01-01T10:00:00') - 0.5);
    expect(fmt(w).key).toBe('2026-01-01T09');
  });
});

describe('all_time', () => {
  const t = tf('all_time', 'Europe/Berlin');
  it('is one window [0, MAX_SAFE_INTEGER)', () => {
    expect(ALL_TIME_END).toBe(Number.MAX_SAFE_INTEGER);
    expect(windowAt(t, 0)).toEqual({ key: 'all_time', start: 0, end: Number.MAX_SAFE_INTEGER });
    expect(windowAt(t, utc('2031-05-05T05:05:05'))).toEqual({ key: 'all_time', start: 0, end: ALL_TIME_END });
    expect(windowByKey(t, 'all_time')).toEqual({ key: 'all_time', start: 0, end: ALL_TIME_END });
  });
  it('has no other key and no next window', () => {
    expect(windowByKey(t, '2026')).toBeNull();
    expect(windowByKey(t, 'ALL_TIME')).toBeNull();
    expect(() => nextWindow(t, windowAt(t, 0))).toThrow('no next window');
  });
  it('hands out copies', () => {
    const w = windowAt(t, 5);
    w.end = 7;
    expect(windowAt(t, 5).end).toBe(ALL_TIME_END);
  });
});

describe('hourly', () => {
  it('UTC: hours of the clock', () => {
    const t = tf('hourly');
    expect(fmt(windowAt(t, utc('2026-11-22T13:59:59.999')))).toEqual({
      key: '2026-11-22T13',
      start: '2026-11-22T13:00:00.000Z',
      end: '2026-11-22T14:00:00.000Z',
      hours: 1,
    });
    expect(windowAt(t, utc('2026-11-22T14:00:00')).key).toBe('2026-11-22T14');
    expect(walk(t, utc('2026-12-31T22:10:00'), 3).map((w) => w.key)).toEqual([
      '2026-12-31T22',
      '2026-12-31T23',
      '2027-01-01T00',
    ]);
  });

  it('keys show the local hour; half-hour and 45-minute zones start at local minute 0', () => {
    expect(fmt(windowAt(tf('hourly', 'Asia/Kolkata'), utc('2026-06-01T08:00:00')))).toEqual({
      key: '2026-06-01T13',
      start: '2026-06-01T07:30:00.000Z',
      end: '2026-06-01T08:30:00.000Z',
      hours: 1,
    });
    expect(fmt(windowAt(tf('hourly', 'Asia/Kathmandu'), utc('2026-06-01T08:00:00')))).toMatchObject({
      key: '2026-06-01T13',
      start: '2026-06-01T07:15:00.000Z',
    });
  });

  it('America/New_York, spring forward: 02:00 is skipped, no window for it', () => {
    const t = tf('hourly', 'America/New_York');
    const ws = walk(t, utc('2026-03-08T05:30:00'), 4).map(fmt);
    expect(ws).toEqual([
      { key: '2026-03-08T00', start: '2026-03-08T05:00:00.000Z', end: '2026-03-08T06:00:00.000Z', hours: 1 },
      { key: '2026-03-08T01', start: '2026-03-08T06:00:00.000Z', end: '2026-03-08T07:00:00.000Z', hours: 1 },
      { key: '2026-03-08T03', start: '2026-03-08T07:00:00.000Z', end: '2026-03-08T08:00:00.000Z', hours: 1 },
      { key: '2026-03-08T04', start: '2026-03-08T08:00:00.000Z', end: '2026-03-08T09:00:00.000Z', hours: 1 },
    ]);
    expect(windowByKey(t, '2026-03-08T02')).toBeNull();
    expect(windowByKey(t, '2026-03-08T02-05:00')).toBeNull();
  });

  it('America/New_York, fall back: the repeated 01:00 hour is two windows with distinct, ordered keys', () => {
    const t = tf('hourly', 'America/New_York');
    const ws = walk(t, utc('2026-11-01T04:59:59.999'), 4);
    expect(ws.map(fmt)).toEqual([
      { key: '2026-11-01T00', start: '2026-11-01T04:00:00.000Z', end: '2026-11-01T05:00:00.000Z', hours: 1 },
      { key: '2026-11-01T01', start: '2026-11-01T05:00:00.000Z', end: '2026-11-01T06:00:00.000Z', hours: 1 },
      {
        key: '2026-11-01T01-05:00',
        start: '2026-11-01T06:00:00.000Z',
        end: '2026-11-01T07:00:00.000Z',
        hours: 1,
      },
      { key: '2026-11-01T02', start: '2026-11-01T07:00:00.000Z', end: '2026-11-01T08:00:00.000Z', hours: 1 },
    ]);
    const keys = ws.map((w) => w.key);
    expect([...keys].sort()).toEqual(keys);
    expect(windowAt(t, utc('2026-11-01T01:30:00-04:00')).key).toBe('2026-11-01T01');
    expect(windowAt(t, utc('2026-11-01T01:30:00-05:00')).key).toBe('2026-11-01T01-05:00');
    for (const w of ws) expect(windowByKey(t, w.key)).toEqual(w);
    // Only the canonical spelling is a key.
    expect(windowByKey(t, '2026-11-01T01-04:00')).toBeNull();
    expect(windowByKey(t, '2026-11-01T01+05:00')).toBeNull();
    expect(windowByKey(t, '2026-11-01T02-05:00')).toBeNull();
  });

  it('Europe/Berlin, spring and autumn', () => {
    const t = tf('hourly', 'Europe/Berlin');
    expect(walk(t, utc('2026-03-29T00:30:00'), 3).map(fmt)).toEqual([
      { key: '2026-03-29T01', start: '2026-03-29T00:00:00.000Z', end: '2026-03-29T01:00:00.000Z', hours: 1 },
      { key: '2026-03-29T03', start: '2026-03-29T01:00:00.000Z', end: '2026-03-29T02:00:00.000Z', hours: 1 },
      { key: '2026-03-29T04', start: '2026-03-29T02:00:00.000Z', end: '2026-03-29T03:00:00.000Z', hours: 1 },
    ]);
    const autumn = walk(t, utc('2026-10-24T23:30:00'), 4);
    expect(autumn.map(fmt)).toEqual([
      { key: '2026-10-25T01', start: '2026-10-24T23:00:00.000Z', end: '2026-10-25T00:00:00.000Z', hours: 1 },
      { key: '2026-10-25T02', start: '2026-10-25T00:00:00.000Z', end: '2026-10-25T01:00:00.000Z', hours: 1 },
      {
        key: '2026-10-25T02+01:00',
        start: '2026-10-25T01:00:00.000Z',
        end: '2026-10-25T02:00:00.000Z',
        hours: 1,
      },
      { key: '2026-10-25T03', start: '2026-10-25T02:00:00.000Z', end: '2026-10-25T03:00:00.000Z', hours: 1 },
    ]);
    // '+' sorts before digits, so the suffixed key still falls between T02 and T03.
    expect(autumn.map((w) => w.key).sort()).toEqual(autumn.map((w) => w.key));
    for (const w of autumn) expect(windowByKey(t, w.key)).toEqual(w);
  });

  it('Australia/Lord_Howe (30-minute DST): hours around the shift are 1.5 h, keys stay unique', () => {
    const t = tf('hourly', 'Australia/Lord_Howe');
    const back = walk(t, utc('2026-04-04T13:30:00'), 3).map(fmt);
    expect(back.map((w) => [w.key, w.hours])).toEqual([
      ['2026-04-05T00', 1],
      ['2026-04-05T01', 1.5],
      ['2026-04-05T02', 1],
    ]);
    // 02:00 (+10:30) jumps to 02:30 (+11): the hour labelled 01 runs to 03:00.
    const fwd = walk(t, utc('2026-10-03T14:00:00'), 3).map(fmt);
    expect(fwd.map((w) => [w.key, w.hours])).toEqual([
      ['2026-10-04T00', 1],
      ['2026-10-04T01', 1.5],
      ['2026-10-04T03', 1],
    ]);
  });

  it('Antarctica/Troll and Casey (clocks go back 2 h and 3 h): repeated hours keyed after the last hour before the change', () => {
    const troll = tf('hourly', 'Antarctica/Troll');
    const ws = walk(troll, utc('2026-10-24T23:00:00'), 5);
    expect(ws.map(fmt)).toEqual([
      { key: '2026-10-25T01', start: '2026-10-24T23:00:00.000Z', end: '2026-10-25T00:00:00.000Z', hours: 1 },
      { key: '2026-10-25T02', start: '2026-10-25T00:00:00.000Z', end: '2026-10-25T01:00:00.000Z', hours: 1 },
      {
        key: '2026-10-25T02~2026-10-25T01+00:00',
        start: '2026-10-25T01:00:00.000Z',
        end: '2026-10-25T02:00:00.000Z',
        hours: 1,
      },
      {
        key: '2026-10-25T02~2026-10-25T02+00:00',
        start: '2026-10-25T02:00:00.000Z',
        end: '2026-10-25T03:00:00.000Z',
        hours: 1,
      },
      { key: '2026-10-25T03', start: '2026-10-25T03:00:00.000Z', end: '2026-10-25T04:00:00.000Z', hours: 1 },
    ]);
    expect(ws.map((w) => w.key).sort()).toEqual(ws.map((w) => w.key));
    for (const w of ws) expect(windowByKey(troll, w.key)).toEqual(w);
    expect(windowByKey(troll, '2026-10-25T01+00:00')).toBeNull();
    expect(windowByKey(troll, '2026-10-25T02+00:00')).toBeNull();
    expect(windowByKey(troll, '2026-10-25T02~2026-10-25T01+02:00')).toBeNull();
    const casey = tf('hourly', 'Antarctica/Casey');
    const cs = walk(casey, utc('2020-03-07T15:00:00'), 5);
    expect(cs.map((w) => w.key)).toEqual([
      '2020-03-08T02',
      '2020-03-08T02~2020-03-08T00+08:00',
      '2020-03-08T02~2020-03-08T01+08:00',
      '2020-03-08T02~2020-03-08T02+08:00',
      '2020-03-08T03',
    ]);
    for (const w of cs) expect(windowByKey(casey, w.key)).toEqual(w);
    // America/St_Johns went back 2 h at 00:01 on 1988-10-30: the repeats cross midnight, keys stay ordered.
    const sj = tf('hourly', 'America/St_Johns');
    const ss = walk(sj, utc('1988-10-30T00:30:00-01:30'), 5);
    expect(ss.map((w) => w.key)).toEqual([
      '1988-10-30T00',
      '1988-10-30T00~1988-10-29T23-03:30',
      '1988-10-30T00~1988-10-30T00-03:30',
      '1988-10-30T01',
      '1988-10-30T02',
    ]);
    expect(ss.map((w) => w.key).sort()).toEqual(ss.map((w) => w.key));
    for (const w of ss) expect(windowByKey(sj, w.key)).toEqual(w);
  });

  it('windowByKey refuses malformed keys', () => {
    const t = tf('hourly', 'UTC');
    for (const k of [
      '2026-11-22',
      '2026-11-22T24',
      '2026-02-30T10',
      '2026-11-22T1',
      '2026-11-22 13',
      'x',
      '',
      '2026-11-22T13Z',
    ]) {
      expect(windowByKey(t, k)).toBeNull();
    }
    expect(windowByKey(t, 42 as unknown as string)).toBeNull();
    expect(windowByKey(t, '2026-11-22T13')).toEqual(windowAt(t, utc('2026-11-22T13:00:00')));
  });
});

describe('daily', () => {
  it('UTC midnight to midnight; reset_time moves the start', () => {
    expect(fmt(windowAt(tf('daily'), utc('2026-11-22T23:59:59.999')))).toEqual({
      key: '2026-11-22',
      start: '2026-11-22T00:00:00.000Z',
      end: '2026-11-23T00:00:00.000Z',
      hours: 24,
    });
    const t = tf('daily', 'UTC', { reset_time: '06:00' });
    expect(fmt(windowAt(t, utc('2026-11-22T05:59:59.999')))).toMatchObject({
      key: '2026-11-21',
      start: '2026-11-21T06:00:00.000Z',
    });
    expect(windowAt(t, utc('2026-11-22T06:00:00')).key).toBe('2026-11-22');
  });

  it('Europe/Berlin: 23 h on the day clocks go forward, 25 h when they go back', () => {
    const t = tf('daily', 'Europe/Berlin');
    expect(walk(t, utc('2026-03-28T12:00:00'), 3).map(fmt)).toEqual([
      { key: '2026-03-28', start: '2026-03-27T23:00:00.000Z', end: '2026-03-28T23:00:00.000Z', hours: 24 },
      { key: '2026-03-29', start: '2026-03-28T23:00:00.000Z', end: '2026-03-29T22:00:00.000Z', hours: 23 },
      { key: '2026-03-30', start: '2026-03-29T22:00:00.000Z', end: '2026-03-30T22:00:00.000Z', hours: 24 },
    ]);
    expect(fmt(windowAt(t, utc('2026-10-25T12:00:00')))).toEqual({
      key: '2026-10-25',
      start: '2026-10-24T22:00:00.000Z',
      end: '2026-10-25T23:00:00.000Z',
      hours: 25,
    });
  });

  it('America/New_York: 23 h and 25 h days', () => {
    const t = tf('daily', 'America/New_York');
    expect(fmt(windowAt(t, utc('2026-03-08T12:00:00')))).toEqual({
      key: '2026-03-08',
      start: '2026-03-08T05:00:00.000Z',
      end: '2026-03-09T04:00:00.000Z',
      hours: 23,
    });
    expect(fmt(windowAt(t, utc('2026-11-01T12:00:00')))).toEqual({
      key: '2026-11-01',
      start: '2026-11-01T04:00:00.000Z',
      end: '2026-11-02T05:00:00.000Z',
      hours: 25,
    });
  });

  it('a reset_time inside the spring-forward gap starts at the first valid instant after the gap', () => {
    const t = tf('daily', 'America/New_York', { reset_time: '02:30' });
    const ws = walk(t, utc('2026-03-07T12:00:00'), 3);
    expect(ws.map(fmt)).toEqual([
      // 02:30 EST on the 7th ... 03:00 EDT on the 8th (02:30 does not exist that day)
      { key: '2026-03-07', start: '2026-03-07T07:30:00.000Z', end: '2026-03-08T07:00:00.000Z', hours: 23.5 },
      { key: '2026-03-08', start: '2026-03-08T07:00:00.000Z', end: '2026-03-09T06:30:00.000Z', hours: 23.5 },
      { key: '2026-03-09', start: '2026-03-09T06:30:00.000Z', end: '2026-03-10T06:30:00.000Z', hours: 24 },
    ]);
    expect(local(ws[1].start, 'America/New_York')).toBe('2026-03-08T03:00:00.000-04:00');
    expect(windowByKey(t, '2026-03-08')).toEqual(ws[1]);
    const berlin = tf('daily', 'Europe/Berlin', { reset_time: '02:30' });
    expect(local(windowAt(berlin, utc('2026-03-29T12:00:00')).start, 'Europe/Berlin')).toBe(
      '2026-03-29T03:00:00.000+02:00',
    );
  });

  it('a reset_time that happens twice starts at its first occurrence', () => {
    const t = tf('daily', 'America/New_York', { reset_time: '01:30' });
    expect(walk(t, utc('2026-10-31T12:00:00'), 2).map(fmt)).toEqual([
      { key: '2026-10-31', start: '2026-10-31T05:30:00.000Z', end: '2026-11-01T05:30:00.000Z', hours: 24 },
      { key: '2026-11-01', start: '2026-11-01T05:30:00.000Z', end: '2026-11-02T06:30:00.000Z', hours: 25 },
    ]);
    // The second 01:30 (EST) lies inside the window that began at the first one.
    expect(windowAt(t, utc('2026-11-01T01:30:00-05:00')).key).toBe('2026-11-01');
    const berlin = tf('daily', 'Europe/Berlin', { reset_time: '02:30' });
    expect(local(windowAt(berlin, utc('2026-10-25T12:00:00')).start, 'Europe/Berlin')).toBe(
      '2026-10-25T02:30:00.000+02:00',
    );
  });

  it('a zone whose spring-forward skips midnight (America/Santiago) starts the day at 01:00', () => {
    const t = tf('daily', 'America/Santiago');
    const w = windowAt(t, utc('2026-09-06T12:00:00'));
    expect(w.key).toBe('2026-09-06');
    expect(local(w.start, 'America/Santiago')).toBe('2026-09-06T01:00:00.000-03:00');
    expect((w.end - w.start) / H).toBe(23);
  });

  it('a day the zone skipped (Pacific/Apia, 2011-12-30) has no window', () => {
    const t = tf('daily', 'Pacific/Apia');
    expect(walk(t, utc('2011-12-29T12:00:00'), 3).map((w) => w.key)).toEqual([
      '2011-12-29',
      '2011-12-31',
      '2012-01-01',
    ]);
    expect(windowByKey(t, '2011-12-30')).toBeNull();
    expect(windowByKey(t, '2011-12-31')).not.toBeNull();
  });

  it('year boundary and malformed keys', () => {
    const t = tf('daily', 'Asia/Tokyo');
    expect(walk(t, utc('2026-12-31T12:00:00'), 2).map((w) => w.key)).toEqual(['2026-12-31', '2027-01-01']);
    for (const k of [
      '2026-02-29',
      '2028-02-30',
      '2026-13-01',
      '2026-00-10',
      '2026-1-01',
      '2026-W01',
      '2026-01',
      '20260101',
    ]) {
      expect(windowByKey(t, k)).toBeNull();
    }
    expect(windowByKey(t, '2028-02-29')?.key).toBe('2028-02-29');
    expect(windowByKey(t, '1969-12-30')).toBeNull(); // ends before 1970
    expect(windowByKey(t, '9999-06-01')).toBeNull(); // after the supported range
  });
});

describe('weekly', () => {
  it('defaults to monday 00:00', () => {
    const t = tf('weekly');
    expect(fmt(windowAt(t, utc('2026-11-22T12:00:00')))).toEqual({
      key: '2026-W47',
      start: '2026-11-16T00:00:00.000Z',
      end: '2026-11-23T00:00:00.000Z',
      hours: 168,
    });
  });

  it('ISO week 53 and week 1 belonging to the neighbouring year', () => {
    const t = tf('weekly');
    // 2026 has 53 ISO weeks; 2027-W01 starts on Monday 2027-01-04.
    expect(walk(t, utc('2026-12-25T00:00:00'), 3).map(fmt)).toEqual([
      { key: '2026-W52', start: '2026-12-21T00:00:00.000Z', end: '2026-12-28T00:00:00.000Z', hours: 168 },
      { key: '2026-W53', start: '2026-12-28T00:00:00.000Z', end: '2027-01-04T00:00:00.000Z', hours: 168 },
      { key: '2027-W01', start: '2027-01-04T00:00:00.000Z', end: '2027-01-11T00:00:00.000Z', hours: 168 },
    ]);
    // Monday 2024-12-30 begins ISO week 1 of 2025.
    expect(windowAt(t, utc('2024-12-31T00:00:00')).key).toBe('2025-W01');
    // Friday 2021-01-01 is in week 53 of 2020.
    expect(windowAt(t, utc('2021-01-01T00:00:00')).key).toBe('2020-W53');
    expect(windowByKey(t, '2027-W53')).toBeNull(); // 2027 has 52 weeks
    expect(windowByKey(t, '2026-W00')).toBeNull();
    expect(windowByKey(t, '2026-W54')).toBeNull();
    expect(windowByKey(t, '2026-W1')).toBeNull();
    expect(windowByKey(t, '2026-11-16')).toBeNull();
    expect(windowByKey(t, '2020-W53')?.start).toBe(utc('2020-12-28T00:00:00'));
  });

  it('sunday-start weeks take the ISO week of their start date; keys stay unique and ordered over a year boundary', () => {
    const t = tf('weekly', 'UTC', { reset_day: 'sunday' });
    const ws = walk(t, utc('2020-12-20T12:00:00'), 5);
    expect(ws.map((w) => [w.key, iso(w.start).slice(0, 10)])).toEqual([
      ['2020-W51', '2020-12-20'],
      ['2020-W52', '2020-12-27'],
      ['2020-W53', '2021-01-03'],
      ['2021-W01', '2021-01-10'],
      ['2021-W02', '2021-01-17'],
    ]);
    for (const w of ws) expect(windowByKey(t, w.key)).toEqual(w);
    // Saturday 2026-11-21 is in ISO week 47; the window reaches into week 48.
    const sat = tf('weekly', 'UTC', { reset_day: 'Saturday', reset_time: '12:00' });
    expect(fmt(windowAt(sat, utc('2026-11-25T00:00:00')))).toMatchObject({
      key: '2026-W47',
      start: '2026-11-21T12:00:00.000Z',
      end: '2026-11-28T12:00:00.000Z',
    });
    expect(windowAt(sat, utc('2026-11-21T11:59:59.999')).key).toBe('2026-W46');
  });

  it('Europe/Berlin and America/New_York: DST weeks are 167 h and 169 h', () => {
    const b = tf('weekly', 'Europe/Berlin', { reset_day: 'sunday', reset_time: '02:30' });
    const spring = windowAt(b, utc('2026-03-25T00:00:00'));
    // Sunday 02:30 does not exist on 2026-03-29: that week starts at 03:00 CEST.
    expect(fmt(spring)).toMatchObject({ key: '2026-W12', hours: 167.5 });
    expect(fmt(nextWindow(b, spring))).toMatchObject({ key: '2026-W13', hours: 167.5 });
    expect(local(nextWindow(b, spring).start, 'Europe/Berlin')).toBe('2026-03-29T03:00:00.000+02:00');
    const n = tf('weekly', 'America/New_York');
    expect(fmt(windowAt(n, utc('2026-03-10T00:00:00')))).toMatchObject({
      key: '2026-W11',
      start: '2026-03-09T04:00:00.000Z',
      hours: 168,
    });
    expect(fmt(windowAt(n, utc('2026-03-05T00:00:00')))).toMatchObject({ key: '2026-W10', hours: 167 });
    expect(fmt(windowAt(n, utc('2026-11-01T00:00:00')))).toMatchObject({ key: '2026-W44', hours: 169 });
    const bn = tf('weekly', 'Europe/Berlin');
    expect(fmt(windowAt(bn, utc('2026-10-25T12:00:00')))).toMatchObject({
      key: '2026-W43',
      start: '2026-10-18T22:00:00.000Z',
      end: '2026-10-25T23:00:00.000Z',
      hours: 169,
    });
  });

  it('keys agree with luxon ISO weeks for monday weeks', () => {
    fc.assert(
      fc.property(fc.integer({ min: utc('1971-01-01T00:00:00'), max: utc('2099-12-31T00:00:00') }), (at) => {
        const key = windowAt(tf('weekly'), at).key;
        expect(key).toBe(DateTime.fromMillis(at, { zone: 'utc' }).toFormat("kkkk-'W'WW"));
      }),
      { numRuns: 300 },
    );
  });
});

describe('monthly', () => {
  it('defaults to the 1st at 00:00 and crosses the year', () => {
    const t = tf('monthly', 'Europe/Berlin');
    expect(walk(t, utc('2026-12-15T00:00:00'), 2).map(fmt)).toEqual([
      { key: '2026-12', start: '2026-11-30T23:00:00.000Z', end: '2026-12-31T23:00:00.000Z', hours: 31 * 24 },
      { key: '2027-01', start: '2026-12-31T23:00:00.000Z', end: '2027-01-31T23:00:00.000Z', hours: 31 * 24 },
    ]);
  });

  it('DST months lose or gain an hour (Europe/Berlin, America/New_York)', () => {
    expect(fmt(windowAt(tf('monthly', 'Europe/Berlin'), utc('2026-03-15T00:00:00'))).hours).toBe(31 * 24 - 1);
    expect(fmt(windowAt(tf('monthly', 'Europe/Berlin'), utc('2026-10-15T00:00:00'))).hours).toBe(31 * 24 + 1);
    expect(fmt(windowAt(tf('monthly', 'America/New_York'), utc('2026-03-15T00:00:00'))).hours).toBe(
      31 * 24 - 1,
    );
    expect(fmt(windowAt(tf('monthly', 'America/New_York'), utc('2026-11-15T00:00:00')))).toEqual({
      key: '2026-11',
      start: '2026-11-01T04:00:00.000Z',
      end: '2026-12-01T05:00:00.000Z',
      hours: 30 * 24 + 1,
    });
  });

  it('reset_day 28 runs from the 28th of February to the 28th of March (leap and common years)', () => {
    const t = tf('monthly', 'UTC', { reset_day: 28 });
    expect(fmt(windowAt(t, utc('2027-03-01T00:00:00')))).toEqual({
      key: '2027-02',
      start: '2027-02-28T00:00:00.000Z',
      end: '2027-03-28T00:00:00.000Z',
      hours: 28 * 24,
    });
    expect(fmt(windowAt(t, utc('2028-02-29T00:00:00')))).toMatchObject({ key: '2028-02', hours: 29 * 24 });
    expect(windowAt(t, utc('2027-02-27T23:59:59.999')).key).toBe('2027-01');
  });

  it('reset_day and reset_time together, with a start inside a gap', () => {
    const t = tf('monthly', 'America/New_York', { reset_day: 8, reset_time: '02:30' });
    const w = windowAt(t, utc('2026-03-20T00:00:00'));
    expect(w.key).toBe('2026-03');
    expect(local(w.start, 'America/New_York')).toBe('2026-03-08T03:00:00.000-04:00');
    expect(windowAt(t, w.start - 1).key).toBe('2026-02');
    expect(windowByKey(t, '2026-03')).toEqual(w);
  });

  it('refuses malformed keys', () => {
    const t = tf('monthly');
    for (const k of ['2026-13', '2026-00', '2026-1', '2026-W11', '2026-11-01', 'november']) {
      expect(windowByKey(t, k)).toBeNull();
    }
  });
});

describe('windowKeyPattern', () => {
  it.each<[TimeframeType, string[], string[]]>([
    [
      'hourly',
      ['2026-11-22T13', '2026-11-01T01-05:00', '2026-10-25T02+01:00', '2026-10-25T02~2026-10-25T01+00:00'],
      ['2026-11-22', '2026-11-22T13:00', '2026-10-25T02~2026-10-25T01', '2026-10-25T02~01+00:00'],
    ],
    ['daily', ['2026-11-22'], ['2026-11-22T13', '2026-W47', 'current']],
    ['weekly', ['2026-W47', '2020-W53'], ['2026-W7', '2026-47', 'current']],
    ['monthly', ['2026-11'], ['2026-11-01', '2026-W11']],
    ['all_time', ['all_time'], ['alltime', 'current']],
  ])('%s', (type, good, bad) => {
    for (const k of good) expect(windowKeyPattern(type).test(k)).toBe(true);
    for (const k of bad) expect(windowKeyPattern(type).test(k)).toBe(false);
  });
});

// ---------------------------------------------------------------------------------------------
// Properties

const ZONES = [
  'UTC',
  'Europe/Berlin',
  'America/New_York',
  'Europe/London',
  'America/Los_Angeles',
  'Australia/Lord_Howe', // 30-minute DST
  'Australia/Adelaide', // +09:30 / +10:30
  'Asia/Kolkata',
  'Asia/Kathmandu', // +05:45
  'Pacific/Chatham', // +12:45 / +13:45
  'America/St_Johns', // -03:30 / -02:30
  'America/Santiago', // transitions at midnight
  'America/Havana', // transitions at midnight
  'Africa/Casablanca', // Ramadan shifts
  'Antarctica/Troll', // 2-hour DST
  'Antarctica/Casey', // back 3 hours in 2020 and 2021
  'Pacific/Kiritimati', // +14
  'Pacific/Pago_Pago', // -11
  'Asia/Tehran',
  'America/Sao_Paulo',
];
const WEEKDAYS = ['monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday', 'sunday'];
const hhmm = (h: number, m: number) => `${String(h).padStart(2, '0')}:${String(m).padStart(2, '0')}`;
const resetTimeArb = fc.oneof(
  fc.constantFrom('00:00', '00:30', '01:00', '01:30', '02:00', '02:30', '03:00', '23:30', '23:59'),
  fc.tuple(fc.integer({ min: 0, max: 23 }), fc.integer({ min: 0, max: 59 })).map(([h, m]) => hhmm(h, m)),
);
const zoneArb = fc.constantFrom(...ZONES);
const timeframeArb: fc.Arbitrary<Timeframe> = fc.oneof(
  fc.record({ type: fc.constant<TimeframeType>('hourly'), timezone: zoneArb }),
  fc.record({ type: fc.constant<TimeframeType>('daily'), timezone: zoneArb, reset_time: resetTimeArb }),
  fc.record({
    type: fc.constant<TimeframeType>('weekly'),
    timezone: zoneArb,
    reset_day: fc.constantFrom(...WEEKDAYS),
    reset_time: resetTimeArb,
  }),
  fc.record({
    type: fc.constant<TimeframeType>('monthly'),
    timezone: zoneArb,
    reset_day: fc.integer({ min: 1, max: 28 }),
    reset_time: resetTimeArb,
  }),
);
const instantArb = fc.integer({ min: utc('2020-01-01T00:00:00'), max: utc('2036-01-01T00:00:00') - 1 });

/** Offset transitions of a zone between two instants (assumed more than a day apart), found with luxon. */
const transitionMemo = new Map<string, number[]>();
function transitions(zone: string, from: number, to: number): number[] {
  const memo = transitionMemo.get(zone);
  if (memo) return memo;
  const z = IANAZone.create(zone);
  const off = (t: number) => z.offset(t);
  const out: number[] = [];
  transitionMemo.set(zone, out);
  for (let t = from; t < to; t += D) {
    if (off(t) === off(t + D)) continue;
    let lo = t;
    let hi = t + D;
    while (hi - lo > 1) {
      const mid = Math.floor((lo + hi) / 2);
      if (off(mid) === off(lo)) lo = mid;
      else hi = mid;
    }
    out.push(hi);
  }
  return out;
}
const nearTransitionArb = fc
  .constantFrom(...ZONES.filter((z) => z !== 'UTC' && z !== 'Asia/Kolkata'))
  .chain((zone) => {
    const ts = transitions(zone, utc('2020-01-01T00:00:00'), utc('2036-01-01T00:00:00'));
    return ts.length === 0
      ? fc.constant(null)
      : fc.record({
          zone: fc.constant(zone),
          at: fc
            .tuple(fc.constantFrom(...ts), fc.integer({ min: -3 * H, max: 3 * H }))
            .map(([t, d]) => t + d),
        });
  });

const BOUNDS: Record<Exclude<TimeframeType, 'all_time'>, [number, number]> = {
  hourly: [0.5 * H, 1.5 * H],
  daily: [21 * H, 27 * H], // Antarctica/Casey moved 3 h at once
  weekly: [7 * D - 3 * H, 7 * D + 3 * H],
  monthly: [28 * D - 3 * H, 31 * D + 3 * H],
};

const offsetMs = (t: number, zone: string) => DateTime.fromMillis(t, { zone }).offset * 60_000;
const wallMs = (t: number, zone: string) => t + offsetMs(t, zone);

/** Checks, against luxon, that a window starts where its timeframe says. */
function checkStart(t: Timeframe, w: Window): void {
  const zone = t.timezone;
  const L = DateTime.fromMillis(w.start, { zone });
  if (t.type === 'hourly') {
    expect(L.minute * 60_000 + L.second * 1000 + L.millisecond).toBe(0);
    const repeated = w.key.length > 13;
    // A suffix marks exactly the second occurrence of a local hour.
    const earlier = [0.5, 1, 2, 3].some((h) => wallMs(w.start - h * H, zone) === wallMs(w.start, zone));
    expect(repeated).toBe(earlier);
    if (w.key.includes('~')) {
      expect(w.key.slice(13)).toBe(L.toFormat("'~'yyyy-MM-dd'T'HHZZ"));
    } else {
      expect(w.key.slice(0, 13)).toBe(L.toFormat("yyyy-MM-dd'T'HH"));
      if (repeated) expect(w.key.slice(13)).toBe(L.toFormat('ZZ'));
    }
    return;
  }
  const [hh, mm] = (t.reset_time ?? '00:00').split(':').map(Number);
  const reset = (hh * 60 + mm) * 60_000;
  // The nominal local start: its date is the start's local date or the day before (a gap over midnight).
  const day0 = Math.floor(wallMs(w.start, zone) / D);
  const candidates = [day0, day0 - 1].filter((d) => {
    const date = new Date(d * D);
    if (t.type === 'daily') return date.toISOString().slice(0, 10) === w.key;
    if (t.type === 'weekly')
      return ((date.getUTCDay() + 6) % 7) + 1 === WEEKDAYS.indexOf(String(t.reset_day)) + 1;
    return date.getUTCDate() === t.reset_day;
  });
  expect(candidates.length).toBeGreaterThan(0);
  const nominal = candidates[0] * D + reset;
  const wall = wallMs(w.start, zone);
  if (wall !== nominal) {
    // Only allowed when the nominal time fell in a gap: the start is the transition instant.
    expect(wallMs(w.start - 1, zone)).toBeLessThan(nominal);
    expect(wall).toBeGreaterThan(nominal);
    expect(offsetMs(w.start - 1, zone)).toBeLessThan(offsetMs(w.start, zone));
  } else {
    // The first occurrence of the nominal time: no earlier instant shows it.
    for (let k = 1; k <= 36; k++) expect(wallMs(w.start - k * 5 * 60_000, zone)).toBeLessThan(nominal);
  }
}

function checkWindow(t: Timeframe, at: number): void {
  const w = windowAt(t, at);
  expect(w.start).toBeLessThanOrEqual(at);
  expect(at).toBeLessThan(w.end);
  expect(Number.isInteger(w.start) && Number.isInteger(w.end)).toBe(true);
  expect(windowKeyPattern(t.type).test(w.key)).toBe(true);
  const [lo, hi] = BOUNDS[t.type as Exclude<TimeframeType, 'all_time'>];
  expect(w.end - w.start).toBeGreaterThanOrEqual(lo);
  expect(w.end - w.start).toBeLessThanOrEqual(hi);
  // Tiling: the window is the same from its first to its last millisecond; the neighbours touch it.
  expect(windowAt(t, w.start)).toEqual(w);
  expect(windowAt(t, w.end - 1)).toEqual(w);
  const next = nextWindow(t, w);
  expect(next).toEqual(windowAt(t, w.end));
  expect(next.start).toBe(w.end);
  expect(next.key > w.key).toBe(true);
  const prev = windowAt(t, w.start - 1);
  expect(prev.end).toBe(w.start);
  expect(prev.key < w.key).toBe(true);
  // Keys round-trip.
  expect(windowByKey(t, w.key)).toEqual(w);
  expect(windowByKey(t, next.key)).toEqual(next);
  checkStart(t, w);
}

describe('properties', () => {
  it('random instants 2020-2035 in random zones: windows contain the instant, tile time, keys order and round-trip', () => {
    fc.assert(
      fc.property(timeframeArb, instantArb, (t, at) => checkWindow(t, at)),
      { numRuns: 1500 },
    );
  });

  it('the same near every DST transition 2020-2035', () => {
    fc.assert(
      fc.property(
        nearTransitionArb.filter((x) => x !== null),
        fc.constantFrom<TimeframeType>('hourly', 'daily', 'weekly', 'monthly'),
        resetTimeArb,
        fc.integer({ min: 0, max: 27 }),
        (x, type, resetTime, n) => {
          const { zone, at } = x as { zone: string; at: number };
          const t: Timeframe =
            type === 'hourly'
              ? { type, timezone: zone }
              : type === 'daily'
                ? { type, timezone: zone, reset_time: resetTime }
                : type === 'weekly'
                  ? { type, timezone: zone, reset_day: WEEKDAYS[n % 7], reset_time: resetTime }
                  : { type, timezone: zone, reset_day: n + 1, reset_time: resetTime };
          checkWindow(t, at);
        },
      ),
      { numRuns: 1500 },
    );
  });

  it('a walk of consecutive windows has strictly increasing keys and no gaps', () => {
    fc.assert(
      fc.property(timeframeArb, instantArb, (t, at) => {
        const ws = walk(t, at, t.type === 'hourly' ? 60 : 12);
        for (let i = 1; i < ws.length; i++) {
          expect(ws[i].start).toBe(ws[i - 1].end);
          expect(ws[i].key > ws[i - 1].key).toBe(true);
        }
      }),
      { numRuns: 150 },
    );
  });

  it('is a pure function of the timeframe value: fresh objects and cold lookups agree', () => {
    fc.assert(
      fc.property(timeframeArb, instantArb, (t, at) => {
        const a = windowAt({ ...t }, at);
        const b = windowByKey({ ...t }, a.key);
        a.start = -1; // callers get copies
        expect(windowAt({ ...t }, at)).toEqual(b);
      }),
      { numRuns: 200 },
    );
  });
});

describe('WindowLookup (the per-hour cache of the pipeline)', () => {
  /** Instants near a base: many fall in the same UTC hours, some in hours a boundary cuts. */
  const burstArb = (base: fc.Arbitrary<number>) =>
    base.chain((b) =>
      fc
        .array(
          fc.oneof(
            fc.integer({ min: -3 * D, max: 3 * D }),
            fc.integer({ min: -2 * H, max: 2 * H }),
            fc.integer({ min: -60_000, max: 60_000 }),
          ),
          { minLength: 1, maxLength: 200 },
        )
        .map((ds) => ds.map((d) => Math.max(0, b + d))),
    );

  it("gives windowAt's window for random instants in random zones and timeframes", () => {
    fc.assert(
      fc.property(timeframeArb, burstArb(instantArb), (t, ats) => {
        const lookup = new WindowLookup(t);
        // Twice over: the second pass reads what the first one cached.
        for (const at of [...ats, ...ats]) expect(lookup.at(at)).toEqual(windowAt(t, at));
      }),
      { numRuns: 400 },
    );
  });

  it('the same near every DST transition 2020-2035 (hours cut by a transition or a reset)', () => {
    fc.assert(
      fc.property(
        nearTransitionArb.filter((x) => x !== null),
        fc.constantFrom<TimeframeType>('hourly', 'daily', 'weekly', 'monthly', 'all_time'),
        resetTimeArb,
        fc.integer({ min: 0, max: 27 }),
        fc.array(fc.integer({ min: -3 * H, max: 3 * H }), { minLength: 1, maxLength: 40 }),
        (x, type, resetTime, n, ds) => {
          const { zone, at } = x as { zone: string; at: number };
          const t: Timeframe =
            type === 'hourly' || type === 'all_time'
              ? { type, timezone: zone }
              : type === 'daily'
                ? { type, timezone: zone, reset_time: resetTime }
                : type === 'weekly'
                  ? { type, timezone: zone, reset_day: WEEKDAYS[n % 7], reset_time: resetTime }
                  : { type, timezone: zone, reset_day: n + 1, reset_time: resetTime };
          const lookup = new WindowLookup(t);
          const ats = ds.map((d) => at + d);
          for (const a of [...ats, ...ats]) expect(lookup.at(a)).toEqual(windowAt(t, a));
        },
      ),
      { numRuns: 250 },
    );
  });

  it('every millisecond around a transition cut inside an hour (Asia/Kathmandu daily at 00:00, +05:45)', () => {
    const t: Timeframe = { type: 'daily', timezone: 'Asia/Kathmandu' };
    const lookup = new WindowLookup(t);
    // Local midnight is 18:15 UTC: the hour 18:00-19:00 UTC holds two windows.
    const cut = utc('2026-11-20T18:15:00');
    for (const at of [cut - H, cut - 15 * 60_000, cut - 1, cut, cut + 1, cut + 44 * 60_000, cut - 1, cut])
      expect(lookup.at(at)).toEqual(windowAt(t, at));
    expect(lookup.at(cut - 1).key).toBe('2026-11-20');
    expect(lookup.at(cut).key).toBe('2026-11-21');
  });

  it('refuses what windowAt refuses', () => {
    expect(() => new WindowLookup({ type: 'daily', timezone: 'Mars/Base' })).toThrow(RangeError);
    const lookup = new WindowLookup({ type: 'daily', timezone: 'UTC' });
    for (const bad of [-1, MAX_INSTANT, Number.NaN, Number.POSITIVE_INFINITY])
      expect(() => lookup.at(bad)).toThrow(RangeError);
  });
});
