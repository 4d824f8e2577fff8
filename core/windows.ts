/**
 * Leaderboard time windows (SPEC.md "Leaderboard views"): a timeframe cuts time into consecutive
 * windows; each window has a key, and a reset starts a new key (nothing is deleted).
 *
 * Pure: no clock, no environment. Every instant is Unix milliseconds, passed in. Time-zone offsets
 * come from the platform's IANA database through luxon's `IANAZone` (Intl). luxon's own
 * wall-clock-to-instant conversion is deliberately not used: for an ambiguous local time it guesses
 * from the *current* offset, which would make results depend on today's date.
 *
 * Windows are half-open `[start, end)`, tile time with no gaps or overlaps, and
 * `nextWindow(tf, w)` is `windowAt(tf, w.end)`.
 *
 * hourly    Windows run between consecutive instants whose local wall clock reads HH:00:00.000.
 *           Each is one hour of real time (1.5 h around the half-hour DST shift of
 *           Australia/Lord_Howe). reset_day and reset_time are not allowed.
 *           Key: local date and hour of the start, `2026-11-22T13`. When clocks go back and a local
 *           hour happens twice, the two hours are two windows: the first keeps the plain key, the
 *           second carries its UTC offset, `2026-11-01T01` then `2026-11-01T01-05:00`
 *           (America/New_York), `2026-10-25T02` then `2026-10-25T02+01:00` (Europe/Berlin). Keys
 *           still sort chronologically, since the suffixed key extends the plain one and is
 *           smaller than the next hour's. Where the clock goes back by more than one hour (only
 *           Antarctic stations: Antarctica/Troll every October, Casey and Vostok in some years),
 *           several hours repeat and a local-hour prefix could not stay ordered; the repeats are
 *           then keyed after the last window before the change, followed by their own local
 *           hour and offset: `2026-10-25T01`, `2026-10-25T02`, `2026-10-25T02~2026-10-25T01+00:00`,
 *           `2026-10-25T02~2026-10-25T02+00:00`, `2026-10-25T03` (Troll). A skipped hour (spring forward)
 *           has no window: in New York `2026-03-08T01` is followed by `2026-03-08T03`.
 * daily     From reset_time (default 00:00) local time to reset_time the next day: 24 h, 23 h on the
 *           day clocks go forward, 25 h on the day they go back. Key: the local date on which the
 *           window starts, `2026-11-22`.
 * weekly    From reset_day (weekday name, default monday) at reset_time to the same a week later.
 *           Key: ISO week-year and week of the start date, `2026-W47` (`2026-W01`..`2026-W53`).
 *           With another reset_day the key is still the ISO week of the start date. Every ISO week
 *           (monday to sunday) holds exactly one day of each weekday, so start dates and ISO weeks
 *           correspond one to one: keys stay unique and chronological. A sunday-start window
 *           beginning Sunday 2026-11-22 is `2026-W47`, although most of it lies in ISO week 48.
 * monthly   From day reset_day (1..28, default 1) at reset_time to the same in the next month. Key:
 *           year and month of the start, `2026-11`.
 * all_time  One window, key `all_time`, `[0, ALL_TIME_END)` with ALL_TIME_END =
 *           Number.MAX_SAFE_INTEGER (finite, so it survives JSON and SQL bigint). It has no next
 *           window: nextWindow throws.
 *
 * Local times that do not exist or exist twice (daylight saving):
 * - A reset_time inside a gap (02:30 on the day New York springs forward) starts the window at
 *   the first valid instant after the gap, the moment of the transition (03:00 EDT).
 * - A reset_time that happens twice (01:30 on the day New York falls back) starts the window at
 *   its first occurrence (01:30 EDT).
 * - A day skipped by its zone (Pacific/Apia, 2011-12-30) would give an empty window; it is never
 *   returned, and windowByKey answers null for its key.
 *
 * Keys are canonical: windowByKey(tf, windowAt(tf, t).key) is that window, and any other string
 * (another spelling, a date that does not exist, a skipped hour, a key of another type) gives
 * null. `window_key=current` of the query API is resolved by the caller, not here.
 *
 * Range: windowAt accepts instants in [0, MAX_INSTANT) (1970-01-01 to 9999-01-01 UTC) and throws a
 * RangeError otherwise, so every key has a four-digit year and sorts as a string. A window that
 * contains such an instant may begin slightly before 1970 (daily in America/New_York).
 *
 * Timeframes are validated (and cached, by value) on use: windowAt, windowByKey and nextWindow
 * throw a RangeError carrying the validateTimeframe message for an invalid timeframe.
 */
import { IANAZone } from 'luxon';

export type TimeframeType = 'hourly' | 'daily' | 'weekly' | 'monthly' | 'all_time';

export interface Timeframe {
  type: TimeframeType;
  /** IANA zone name, e.g. 'Europe/Berlin'; default 'UTC'. */
  timezone: string;
  /** weekly: weekday name 'monday'..'sunday' (any case; default 'monday'); monthly: integer 1..28 (default 1). */
  reset_day?: string | number;
  /** 'HH:MM', 24 h local time (default '00:00'); daily, weekly and monthly only. */
  reset_time?: string;
}

/** Unix ms, half-open: start <= t < end. */
export interface Window {
  key: string;
  start: number;
  end: number;
}

export const TIMEFRAME_TYPES: readonly TimeframeType[] = ['hourly', 'daily', 'weekly', 'monthly', 'all_time'];
export const ALL_TIME_KEY = 'all_time';
export const ALL_TIME_END = Number.MAX_SAFE_INTEGER;
/** Exclusive upper bound of the instants windowAt accepts (9999-01-01T00:00Z). */
export const MAX_INSTANT = Date.UTC(9999, 0, 1);

const WEEKDAYS = ['monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday', 'sunday'];
const TIMEFRAME_FIELDS = ['type', 'timezone', 'reset_day', 'reset_time'];
const MINUTE = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;

const KEY_PATTERNS: Record<TimeframeType, RegExp> = {
  hourly: /^\d{4}-\d{2}-\d{2}T\d{2}(?:(?:~\d{4}-\d{2}-\d{2}T\d{2})?[+-]\d{2}:\d{2}(?::\d{2})?)?$/,
  daily: /^\d{4}-\d{2}-\d{2}$/,
  weekly: /^\d{4}-W\d{2}$/,
  monthly: /^\d{4}-\d{2}$/,
  all_time: /^all_time$/,
};

/**
 * The shape of a window key of this type (syntax only; whether the window exists is windowByKey's
 * business). For checking a window_key query parameter before a lookup.
 */
export function windowKeyPattern(type: TimeframeType): RegExp {
  return KEY_PATTERNS[type];
}

// ---------------------------------------------------------------------------------------------
// Validation

function isPlainObject(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

/** Minutes after local midnight, or null when not 'HH:MM' (00:00..23:59). */
function parseResetTime(s: unknown): number | null {
  if (typeof s !== 'string') return null;
  const m = /^([01]\d|2[0-3]):([0-5]\d)$/.exec(s);
  return m ? Number(m[1]) * 60 + Number(m[2]) : null;
}

function show(x: unknown): string {
  if (typeof x === 'string') return JSON.stringify(x.length > 60 ? x.slice(0, 60) + '…' : x);
  if (typeof x === 'number' || typeof x === 'boolean' || x === null || x === undefined) return String(x);
  return Array.isArray(x) ? 'an array' : `a ${typeof x}`;
}

/**
 * null when `tf` is a valid timeframe, else one message naming the field, e.g.
 * `config.timeframe.timezone: unknown time zone "Mars/Base"`. `where` prefixes the message
 * (default 'config.timeframe'). Optional fields may be absent or null. Unknown fields are refused.
 */
export function validateTimeframe(tf: unknown, where = 'config.timeframe'): string | null {
  if (!isPlainObject(tf)) return `${where}: must be an object like {"type": "weekly", "timezone": "UTC"}`;
  for (const k of Object.keys(tf)) {
    if (!TIMEFRAME_FIELDS.includes(k))
      return `${where}.${k}: unknown field (allowed: ${TIMEFRAME_FIELDS.join(', ')})`;
  }
  const type = tf.type;
  if (typeof type !== 'string' || !(TIMEFRAME_TYPES as readonly string[]).includes(type)) {
    return `${where}.type: must be one of ${TIMEFRAME_TYPES.join(', ')}, got ${show(type)}`;
  }
  const tz = tf.timezone;
  if (tz != null) {
    if (typeof tz !== 'string') return `${where}.timezone: must be an IANA time zone name, got ${show(tz)}`;
    if (tz.length === 0 || tz.length > 64 || !IANAZone.isValidZone(tz)) {
      return `${where}.timezone: unknown time zone ${show(tz)}`;
    }
  }
  const day = tf.reset_day;
  if (day != null) {
    if (type === 'weekly') {
      if (typeof day !== 'string' || !WEEKDAYS.includes(day.toLowerCase())) {
        return `${where}.reset_day: must be a weekday name (monday to sunday) for weekly timeframes, got ${show(day)}`;
      }
    } else if (type === 'monthly') {
      if (typeof day !== 'number' || !Number.isInteger(day) || day < 1 || day > 28) {
        return `${where}.reset_day: must be an integer from 1 to 28 for monthly timeframes, got ${show(day)}`;
      }
    } else {
      return `${where}.reset_day: not allowed for ${type} timeframes (weekly and monthly only)`;
    }
  }
  const time = tf.reset_time;
  if (time != null) {
    if (type === 'hourly' || type === 'all_time') {
      return `${where}.reset_time: not allowed for ${type} timeframes (${type === 'hourly' ? 'hourly windows start at minute 0' : 'there is no reset'})`;
    }
    if (parseResetTime(time) === null) {
      return `${where}.reset_time: must be "HH:MM" in 24-hour local time (00:00 to 23:59), got ${show(time)}`;
    }
  }
  return null;
}

// ---------------------------------------------------------------------------------------------
// Zones: offsets and wall-clock arithmetic. A "wall" value is a local date-time encoded as if it
// were UTC (Date.UTC of its fields).

interface Zone {
  /** Offset of local time from UTC at instant t, in ms (local = t + offset). */
  offset(t: number): number;
}

const UTC_NAMES = new Set([
  'utc',
  'etc/utc',
  'gmt',
  'etc/gmt',
  'etc/universal',
  'universal',
  'etc/zulu',
  'zulu',
]);

function makeZone(name: string): Zone {
  if (UTC_NAMES.has(name.toLowerCase())) return { offset: () => 0 };
  const z = IANAZone.create(name);
  return { offset: (t) => Math.round(z.offset(t) * MINUTE) };
}

function mod(a: number, n: number): number {
  return ((a % n) + n) % n;
}

function wallOf(z: Zone, t: number): number {
  return t + z.offset(t);
}

/**
 * The earliest instant whose local wall time is `wall`; inside a gap, the first instant after it
 * (the transition). Assumes, as Temporal does, at most one transition within a day of `wall`
 * for the fast path, and falls back to a scan otherwise.
 */
function resolveWall(z: Zone, wall: number): number {
  const before = z.offset(wall - DAY);
  const after = z.offset(wall + DAY);
  const t1 = wall - before;
  const t2 = wall - after;
  const ok1 = wallOf(z, t1) === wall;
  const ok2 = t2 !== t1 && wallOf(z, t2) === wall;
  if (ok1 && ok2) return Math.min(t1, t2);
  if (ok1) return t1;
  if (ok2) return t2;
  if (before === after) {
    // Unusual history: several transitions near `wall`. Try every offset seen around it.
    let best = Infinity;
    for (let h = -26; h <= 26; h++) {
      const t = wall - z.offset(wall + h * HOUR);
      if (t < best && wallOf(z, t) === wall) best = t;
    }
    if (best !== Infinity) return best;
  }
  // A gap: the first instant whose wall time is past `wall`. Offsets stay within +-26 h.
  let lo = wall - 26 * HOUR;
  let hi = wall + 26 * HOUR;
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (wallOf(z, mid) < wall) lo = mid;
    else hi = mid;
  }
  return hi;
}

/** The smallest instant x in (lo, hi] with offset(x..hi) === off, given offset(lo) !== off. */
function transitionIn(z: Zone, lo: number, hi: number, off: number): number {
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (z.offset(mid) === off) hi = mid;
    else lo = mid;
  }
  return hi;
}

/** The latest instant <= t whose local wall clock reads HH:00:00.000. */
function hourStartAtOrBefore(z: Zone, t: number): number {
  for (let i = 0; i < 8; i++) {
    const off = z.offset(t);
    const s = t - mod(t + off, HOUR);
    if (z.offset(s) === off) return s;
    // A transition lies in (s, t]; the wall time there is not on the hour, so look before it.
    t = transitionIn(z, s, t, off) - 1;
  }
  throw new Error('windows: cannot find the start of the local hour');
}

/** The first instant > s whose local wall clock reads HH:00:00.000. */
function hourStartAfter(z: Zone, s: number): number {
  let probe = s + HOUR;
  let b = hourStartAtOrBefore(z, probe);
  for (let i = 0; b <= s; i++) {
    if (i > 4) throw new Error('windows: cannot find the next local hour');
    probe += HOUR;
    b = hourStartAtOrBefore(z, probe);
  }
  for (let i = 0; i < 4; i++) {
    const p = hourStartAtOrBefore(z, b - 1);
    if (p <= s) break;
    b = p;
  }
  return b;
}

// ---------------------------------------------------------------------------------------------
// Civil calendar helpers (proleptic Gregorian, day numbers since 1970-01-01)

function pad(n: number, w: number): string {
  return String(n).padStart(w, '0');
}

function ymd(dayNumber: number): string {
  const d = new Date(dayNumber * DAY);
  return `${pad(d.getUTCFullYear(), 4)}-${pad(d.getUTCMonth() + 1, 2)}-${pad(d.getUTCDate(), 2)}`;
}

/** Day number of a calendar date, or null when the date does not exist. */
function dayNumberOf(y: number, m: number, d: number): number | null {
  if (m < 1 || m > 12 || d < 1) return null;
  const t = new Date(0);
  t.setUTCFullYear(y, m - 1, d);
  if (t.getUTCFullYear() !== y || t.getUTCMonth() !== m - 1 || t.getUTCDate() !== d) return null;
  return Math.floor(t.getTime() / DAY);
}

/** ISO weekday, 1 = monday .. 7 = sunday. */
function isoWeekday(dayNumber: number): number {
  return mod(dayNumber + 3, 7) + 1;
}

function isoWeekKey(dayNumber: number): string {
  const thursday = dayNumber - isoWeekday(dayNumber) + 4;
  const year = new Date(thursday * DAY).getUTCFullYear();
  const jan1 = dayNumberOf(year, 1, 1) as number;
  const week = Math.floor((thursday - jan1) / 7) + 1;
  return `${pad(year, 4)}-W${pad(week, 2)}`;
}

function formatOffset(ms: number): string {
  const sign = ms < 0 ? '-' : '+';
  const a = Math.abs(ms) / 1000;
  const h = Math.floor(a / 3600);
  const m = Math.floor((a % 3600) / 60);
  const s = Math.floor(a % 60);
  return `${sign}${pad(h, 2)}:${pad(m, 2)}${s ? ':' + pad(s, 2) : ''}`;
}

function parseOffset(sign: string, h: string, m: string, s: string | undefined): number {
  const ms = (Number(h) * 3600 + Number(m) * 60 + Number(s ?? 0)) * 1000;
  return sign === '-' ? -ms : ms;
}

// ---------------------------------------------------------------------------------------------
// Calendars: daily, weekly and monthly windows are periods p whose start is a local wall time.

interface Calendar {
  /** A period near the one that contains this wall time (exact unless DST moves things). */
  guess(wall: number): number;
  step(p: number, n: number): number;
  /** Local wall time at which period p starts. */
  wallStart(p: number): number;
  key(p: number): string;
  parse(key: string): number | null;
}

function dailyCalendar(reset: number): Calendar {
  return {
    guess: (wall) => Math.floor((wall - reset) / DAY),
    step: (p, n) => p + n,
    wallStart: (p) => p * DAY + reset,
    key: ymd,
    parse: (key) => {
      const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(key);
      return m ? dayNumberOf(Number(m[1]), Number(m[2]), Number(m[3])) : null;
    },
  };
}

/** Periods are the day numbers of start dates; `weekday` is ISO (1 = monday). */
function weeklyCalendar(weekday: number, reset: number): Calendar {
  return {
    guess: (wall) => {
      const d = Math.floor((wall - reset) / DAY);
      return d - mod(isoWeekday(d) - weekday, 7);
    },
    step: (p, n) => p + 7 * n,
    wallStart: (p) => p * DAY + reset,
    key: isoWeekKey,
    parse: (key) => {
      const m = /^(\d{4})-W(\d{2})$/.exec(key);
      if (!m) return null;
      const jan4 = dayNumberOf(Number(m[1]), 1, 4) as number;
      const p = jan4 - (isoWeekday(jan4) - 1) + (Number(m[2]) - 1) * 7 + (weekday - 1);
      return isoWeekKey(p) === key ? p : null; // refuses W00 and a W53 the year does not have
    },
  };
}

/** Periods are year * 12 + month index. */
function monthlyCalendar(day: number, reset: number): Calendar {
  const shift = (day - 1) * DAY + reset;
  return {
    guess: (wall) => {
      const d = new Date(wall - shift);
      return d.getUTCFullYear() * 12 + d.getUTCMonth();
    },
    step: (p, n) => p + n,
    wallStart: (p) => {
      const t = new Date(0);
      t.setUTCFullYear(Math.floor(p / 12), mod(p, 12), day);
      return t.getTime() + reset;
    },
    key: (p) => `${pad(Math.floor(p / 12), 4)}-${pad(mod(p, 12) + 1, 2)}`,
    parse: (key) => {
      const m = /^(\d{4})-(\d{2})$/.exec(key);
      if (!m) return null;
      const month = Number(m[2]);
      return month >= 1 && month <= 12 ? Number(m[1]) * 12 + month - 1 : null;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Compiled timeframes, cached by value

interface Compiled {
  type: TimeframeType;
  zone: Zone;
  cal: Calendar | null;
  /** Windows recently returned (events arrive roughly in time order). */
  recent: Window[];
}

const compiledCache = new Map<string, Compiled>();

function compile(tf: Timeframe): Compiled {
  const id = `${tf?.type}\u0000${tf?.timezone}\u0000${tf?.reset_day}\u0000${tf?.reset_time}`;
  const hit = compiledCache.get(id);
  if (hit) return hit;
  const picked = {
    type: tf?.type,
    timezone: tf?.timezone,
    reset_day: tf?.reset_day,
    reset_time: tf?.reset_time,
  };
  const err = validateTimeframe(picked);
  if (err) throw new RangeError(err);
  const reset = (parseResetTime(tf.reset_time ?? '00:00') as number) * MINUTE;
  let cal: Calendar | null = null;
  if (tf.type === 'daily') cal = dailyCalendar(reset);
  else if (tf.type === 'weekly') {
    cal = weeklyCalendar(WEEKDAYS.indexOf(String(tf.reset_day ?? 'monday').toLowerCase()) + 1, reset);
  } else if (tf.type === 'monthly') cal = monthlyCalendar(Number(tf.reset_day ?? 1), reset);
  const c: Compiled = { type: tf.type, zone: makeZone(tf.timezone || 'UTC'), cal, recent: [] };
  if (compiledCache.size >= 1000) compiledCache.clear();
  compiledCache.set(id, c);
  return c;
}

const ALL_TIME: Window = Object.freeze({ key: ALL_TIME_KEY, start: 0, end: ALL_TIME_END });

/** `YYYY-MM-DDTHH` of a wall time. */
function hourLabel(wall: number): string {
  return `${ymd(Math.floor(wall / DAY))}T${pad(new Date(wall).getUTCHours(), 2)}`;
}

/** The key of the hourly window starting at `start` (an instant whose wall clock reads HH:00). */
function hourlyKey(z: Zone, start: number, depth = 0): string {
  const wall = wallOf(z, start);
  const first = resolveWall(z, wall);
  if (first === start || depth > 2) return hourLabel(wall);
  // The second occurrence of this local hour: the clock went back at some instant T in (first, start].
  const off = z.offset(start);
  const t = transitionIn(z, first, start, off);
  if (z.offset(t - 1) - off <= HOUR) return hourLabel(wall) + formatOffset(off);
  // Back by more than an hour: key after the last window before T, so that keys stay ordered.
  const last = hourlyKey(z, hourStartAtOrBefore(z, t - 1), depth + 1);
  return `${last}~${hourLabel(wall)}${formatOffset(off)}`;
}

function hourlyWindow(z: Zone, start: number): Window {
  return { key: hourlyKey(z, start), start, end: hourStartAfter(z, start) };
}

/** The window containing t, without range checks or cache. */
function locate(c: Compiled, t: number): Window {
  const z = c.zone;
  if (c.type === 'all_time') return { ...ALL_TIME };
  if (c.type === 'hourly') return hourlyWindow(z, hourStartAtOrBefore(z, t));
  const cal = c.cal as Calendar;
  let p = cal.guess(wallOf(z, t));
  let start = resolveWall(z, cal.wallStart(p));
  for (let i = 0; t < start; i++) {
    if (i > 3) throw new Error('windows: cannot locate the window');
    p = cal.step(p, -1);
    start = resolveWall(z, cal.wallStart(p));
  }
  let end = resolveWall(z, cal.wallStart(cal.step(p, 1)));
  for (let i = 0; t >= end; i++) {
    if (i > 3) throw new Error('windows: cannot locate the window');
    p = cal.step(p, 1);
    start = end;
    end = resolveWall(z, cal.wallStart(cal.step(p, 1)));
  }
  return { key: cal.key(p), start, end };
}

function checkInstant(at: number): void {
  if (typeof at !== 'number' || !Number.isFinite(at) || at < 0 || at >= MAX_INSTANT) {
    throw new RangeError(
      `windows: instant ${String(at)} is outside [0, ${MAX_INSTANT}) (1970 to 9999, Unix ms)`,
    );
  }
}

/** The window of `tf` that contains instant `at` (Unix ms in [0, MAX_INSTANT)). */
export function windowAt(tf: Timeframe, at: number): Window {
  const c = compile(tf);
  checkInstant(at);
  const t = Math.floor(at);
  for (const w of c.recent) if (w.start <= t && t < w.end) return { ...w };
  const w = locate(c, t);
  c.recent.unshift(w);
  if (c.recent.length > 4) c.recent.pop();
  return { ...w };
}

/**
 * The window whose key is `key`, or null when `key` is not the canonical key of a window of this
 * timeframe (malformed, another type's shape, a date or hour that does not exist in the zone, a
 * non-canonical offset suffix) or the window lies wholly outside [0, MAX_INSTANT).
 */
export function windowByKey(tf: Timeframe, key: string): Window | null {
  const c = compile(tf);
  if (typeof key !== 'string' || !KEY_PATTERNS[c.type].test(key)) return null;
  if (c.type === 'all_time') return { ...ALL_TIME };
  let start: number;
  if (c.type === 'hourly') {
    // The local hour is the one after `~` when there is one.
    const m = /(\d{4})-(\d{2})-(\d{2})T(\d{2})(?:([+-])(\d{2}):(\d{2})(?::(\d{2}))?)?$/.exec(
      key,
    ) as RegExpExecArray;
    const day = dayNumberOf(Number(m[1]), Number(m[2]), Number(m[3]));
    if (day === null || Number(m[4]) > 23) return null;
    const wall = day * DAY + Number(m[4]) * HOUR;
    start = m[5] ? wall - parseOffset(m[5], m[6], m[7], m[8]) : resolveWall(c.zone, wall);
    if (wallOf(c.zone, start) !== wall) return null; // a skipped hour, or an offset the zone does not use then
  } else {
    const cal = c.cal as Calendar;
    const p = cal.parse(key);
    if (p === null) return null;
    start = resolveWall(c.zone, cal.wallStart(p));
  }
  if (start >= MAX_INSTANT || start < -62 * DAY) return null; // cannot hold an instant in [0, MAX_INSTANT)
  const w = locate(c, start);
  if (w.key !== key || w.start !== start || w.end <= 0) return null;
  return w;
}

/** The window after `w` (a window of this timeframe): windowAt(tf, w.end). Throws for all_time. */
export function nextWindow(tf: Timeframe, w: Window): Window {
  const c = compile(tf);
  if (c.type === 'all_time') throw new RangeError('windows: an all_time timeframe has no next window');
  return windowAt(tf, w.end);
}

/**
 * Windows of one timeframe for many instants, as a pipeline batch asks for them (every event of a
 * batch, for every board): the window of an instant is remembered for its whole UTC hour when the
 * window covers that hour entirely, so the next instants of the hour take one map read instead of
 * a time-zone computation. An hour that a window boundary cuts (a reset time at :30 in a zone with
 * a half-hour offset, a DST change at a quarter hour) is not remembered: those instants go through
 * `windowAt`. The answers are `windowAt`'s, whatever the zone (tested against it, DST included).
 * The returned windows are shared: callers must not change them.
 */
export class WindowLookup {
  private readonly byHour = new Map<number, Window>();

  constructor(private readonly tf: Timeframe) {
    compile(tf); // validates the timeframe now (a RangeError), as windowAt would
  }

  /** The window of the timeframe that contains `at` (the same as `windowAt(tf, at)`). */
  at(at: number): Readonly<Window> {
    checkInstant(at);
    const hour = Math.floor(at / HOUR);
    const hit = this.byHour.get(hour);
    if (hit) return hit;
    const w = windowAt(this.tf, at);
    if (w.start <= hour * HOUR && w.end >= (hour + 1) * HOUR) {
      if (this.byHour.size >= 4096) this.byHour.clear();
      this.byHour.set(hour, w);
    }
    return w;
  }
}
