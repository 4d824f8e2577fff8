/**
 * Input rules and conversions shared by both Analytics adapters, so that both accept and reject
 * exactly the same rows (the contract suite checks both) and format results the same way.
 *
 * - Text fields: strings of well-formed Unicode without NUL (Postgres text cannot hold NUL; a
 *   lone surrogate has no UTF-8 form). Identifier fields (tenant_id, event_id, type, user_id,
 *   transaction_id, currency_id, source_type, leaderboard_id, window_key) must be non-empty;
 *   attrs_json and source_ref may be empty; source_ref may be null.
 * - Times (occurred_at, received_at, created_at, snapshot_time): integer Unix milliseconds in
 *   [0, 4294967295999], the range of ClickHouse's DateTime (1970 to 2106-02-07).
 * - amount, balance_after: safe integers (|x| <= 2^53 - 1). Totals beyond that are an error.
 * - rank: integer in [0, 2^31 - 1]. score: a finite double that is 0 or normal (18.16 cannot read
 *   subnormal doubles, below 2.2250738585072014e-308).
 * - Rows with the same natural key are expected to be identical (a redelivery). When they are not,
 *   ClickHouse ends with the last inserted and SQL keeps the first: do not rely on either.
 */
import type {
  AnalyticsEvent,
  AnalyticsTransaction,
  EventCount,
  SnapshotEntry,
} from '../../adapters/analytics/types';

export class AnalyticsInputError extends Error {
  override readonly name = 'AnalyticsInputError';
}

export const MAX_TIME_MS = 4_294_967_295_999;
export const DAY_MS = 86_400_000;
const MAX_RANK = 2 ** 31 - 1;
const MIN_NORMAL = 2.2250738585072014e-308;
const LONE_SURROGATE = /\p{Cs}/u;

function text(what: string, v: unknown, nonEmpty: boolean): string {
  if (typeof v !== 'string') throw new AnalyticsInputError(`${what} must be a string`);
  if (nonEmpty && v.length === 0) throw new AnalyticsInputError(`${what} must not be empty`);
  if (v.includes('\u0000')) throw new AnalyticsInputError(`${what} must not contain NUL characters`);
  if (LONE_SURROGATE.test(v))
    throw new AnalyticsInputError(`${what} must be well-formed Unicode (it has a lone surrogate)`);
  return v;
}

export const checkId = (what: string, v: unknown): string => text(what, v, true);

function time(what: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0 || v > MAX_TIME_MS) {
    throw new AnalyticsInputError(
      `${what} must be integer Unix milliseconds in [0, ${MAX_TIME_MS}], got ${String(v)}`,
    );
  }
  return v;
}

function int(what: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v))
    throw new AnalyticsInputError(`${what} must be an integer with |x| <= 2^53 - 1, got ${String(v)}`);
  return v === 0 ? 0 : v;
}

function obj(what: string, v: unknown): Record<string, unknown> {
  if (typeof v !== 'object' || v === null) throw new AnalyticsInputError(`${what} must be an object`);
  return v as Record<string, unknown>;
}

export function checkEvent(raw: AnalyticsEvent): AnalyticsEvent {
  const e = obj('event', raw);
  return {
    tenant_id: checkId('tenant_id', e.tenant_id),
    event_id: checkId('event_id', e.event_id),
    type: checkId('type', e.type),
    user_id: checkId('user_id', e.user_id),
    occurred_at: time('occurred_at', e.occurred_at),
    received_at: time('received_at', e.received_at),
    attrs_json: text('attrs_json', e.attrs_json, false),
  };
}

export function checkTransaction(raw: AnalyticsTransaction): AnalyticsTransaction {
  const t = obj('transaction', raw);
  return {
    tenant_id: checkId('tenant_id', t.tenant_id),
    transaction_id: checkId('transaction_id', t.transaction_id),
    user_id: checkId('user_id', t.user_id),
    currency_id: checkId('currency_id', t.currency_id),
    amount: int('amount', t.amount),
    balance_after: int('balance_after', t.balance_after),
    source_type: checkId('source_type', t.source_type),
    source_ref: t.source_ref === null ? null : text('source_ref', t.source_ref, false),
    created_at: time('created_at', t.created_at),
  };
}

export function checkScore(v: unknown): number {
  if (typeof v !== 'number' || !Number.isFinite(v))
    throw new AnalyticsInputError(`score must be a finite number, got ${String(v)}`);
  if (v !== 0 && Math.abs(v) < MIN_NORMAL)
    throw new AnalyticsInputError(
      `score must be 0 or at least 2.2250738585072014e-308 in magnitude, got ${v}`,
    );
  return v === 0 ? 0 : v;
}

export function checkSnapshotEntry(raw: SnapshotEntry): SnapshotEntry {
  const s = obj('snapshot entry', raw);
  const rank = s.rank;
  if (typeof rank !== 'number' || !Number.isInteger(rank) || rank < 0 || rank > MAX_RANK) {
    throw new AnalyticsInputError(`rank must be an integer in [0, ${MAX_RANK}], got ${String(rank)}`);
  }
  return {
    tenant_id: checkId('tenant_id', s.tenant_id),
    leaderboard_id: checkId('leaderboard_id', s.leaderboard_id),
    window_key: checkId('window_key', s.window_key),
    snapshot_time: time('snapshot_time', s.snapshot_time),
    user_id: checkId('user_id', s.user_id),
    rank,
    score: checkScore(s.score),
  };
}

export function checkRows<T>(what: string, rows: unknown, check: (r: T) => T): T[] {
  if (!Array.isArray(rows)) throw new AnalyticsInputError(`${what} must be an array`);
  return rows.map((r) => check(r as T));
}

/** A [from, to) bound pair: safe integers (Unix ms); an empty or reversed range is allowed. */
export function checkBounds(from: unknown, to: unknown): [number, number] {
  return [int('from', from), int('to', to)];
}

export function checkPage(offset: unknown, limit: unknown): [number, number] {
  for (const [what, v] of [
    ['offset', offset],
    ['limit', limit],
  ] as const) {
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0)
      throw new AnalyticsInputError(`${what} must be a non-negative integer, got ${String(v)}`);
  }
  return [offset as number, limit as number];
}

export const checkLimit = (limit: unknown): number => checkPage(0, limit)[1];
export const checkTime = (what: string, v: unknown): number => int(what, v);

/** A database integer (number, bigint or decimal string) as a safe JS integer, or an error. */
export function toSafeInt(what: string, v: unknown): number {
  let n: number;
  if (typeof v === 'number') n = v;
  else if (typeof v === 'bigint' || (typeof v === 'string' && /^-?\d+$/.test(v))) {
    const b = BigInt(v);
    if (b > BigInt(Number.MAX_SAFE_INTEGER) || b < -BigInt(Number.MAX_SAFE_INTEGER)) {
      throw new Error(`${what} is beyond 2^53 - 1 and cannot be returned exactly: ${String(v)}`);
    }
    n = Number(b);
  } else throw new Error(`${what}: unexpected integer value ${JSON.stringify(v)}`);
  if (!Number.isSafeInteger(n)) throw new Error(`${what}: not a safe integer: ${String(v)}`);
  return n === 0 ? 0 : n;
}

export function toFloat(what: string, v: unknown): number {
  const n = typeof v === 'number' ? v : typeof v === 'string' ? Number(v) : NaN;
  if (!Number.isFinite(n)) throw new Error(`${what}: unexpected number ${JSON.stringify(v)}`);
  return n === 0 ? 0 : n;
}

/** Day number since 1970-01-01 (UTC) to YYYY-MM-DD. */
export function dayString(dayNumber: number): string {
  return new Date(dayNumber * DAY_MS).toISOString().slice(0, 10);
}

export function eventCount(day: unknown, type: unknown, events: unknown, users: unknown): EventCount {
  return {
    day: dayString(toSafeInt('day', day)),
    type: String(type),
    events: toSafeInt('events', events),
    users: toSafeInt('users', users),
  };
}
