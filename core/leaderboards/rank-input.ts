/**
 * Input rules shared by both RankIndex adapters, so that they accept and reject exactly the same
 * input (the contract suite checks both), and the board order as one comparator.
 *
 * - member, board, stream: non-empty strings of well-formed Unicode (no lone surrogates: they
 *   cannot be encoded as UTF-8, and two different ones would collapse into U+FFFD in Redis),
 *   at most 512 UTF-8 bytes. Any other character is allowed, separators, NUL and emoji included.
 * - score: any finite double (-0 is stored as 0). Integers are exact up to 2^53.
 * - tiebreak: a safe integer, |tiebreak| <= 2^53 - 1 (a sequence number or a Unix-ms timestamp).
 * - watermark: partition and nextOffset are non-negative safe integers.
 * - range: offset and limit are non-negative safe integers.
 */
import type { RankEntry, RankUpdate, Watermark } from '../../adapters/ranks/types';

export const MAX_KEY_BYTES = 512;
export const MAX_TIEBREAK = Number.MAX_SAFE_INTEGER;

export class RankInputError extends Error {
  override readonly name = 'RankInputError';
}

const LONE_SURROGATE = /\p{Cs}/u;

function checkText(what: string, v: unknown): string {
  if (typeof v !== 'string') throw new RankInputError(`${what} must be a string`);
  if (v.length === 0) throw new RankInputError(`${what} must not be empty`);
  if (v.length > MAX_KEY_BYTES || Buffer.byteLength(v, 'utf8') > MAX_KEY_BYTES) {
    throw new RankInputError(`${what} must be at most ${MAX_KEY_BYTES} UTF-8 bytes`);
  }
  if (LONE_SURROGATE.test(v))
    throw new RankInputError(`${what} must be well-formed Unicode (it has a lone surrogate)`);
  return v;
}

export const checkMember = (m: unknown): string => checkText('member', m);
export const checkBoard = (b: unknown): string => checkText('board', b);

export function checkScore(s: unknown): number {
  if (typeof s !== 'number' || !Number.isFinite(s))
    throw new RankInputError(`score must be a finite number, got ${String(s)}`);
  return s === 0 ? 0 : s; // folds -0 into 0
}

export function checkTiebreak(t: unknown): number {
  if (typeof t !== 'number' || !Number.isSafeInteger(t)) {
    throw new RankInputError(`tiebreak must be an integer with |tiebreak| <= 2^53 - 1, got ${String(t)}`);
  }
  return t === 0 ? 0 : t;
}

function checkCount(what: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0)
    throw new RankInputError(`${what} must be a non-negative integer, got ${String(v)}`);
  return v;
}

export function checkEntry(e: RankEntry): RankEntry {
  if (typeof e !== 'object' || e === null) throw new RankInputError('entry must be an object');
  return { member: checkMember(e.member), score: checkScore(e.score), tiebreak: checkTiebreak(e.tiebreak) };
}

export function checkUpdate(u: RankUpdate): RankUpdate {
  if (typeof u !== 'object' || u === null) throw new RankInputError('update must be an object');
  return { board: checkBoard(u.board), ...checkEntry(u) };
}

export function checkWatermark(wm: Watermark): Watermark {
  if (typeof wm !== 'object' || wm === null) throw new RankInputError('watermark must be an object');
  return {
    stream: checkText('stream', wm.stream),
    partition: checkCount('partition', wm.partition),
    nextOffset: checkCount('nextOffset', wm.nextOffset),
  };
}

export const checkPartition = (p: unknown): number => checkCount('partition', p);
export const checkStream = (s: unknown): string => checkText('stream', s);

export function checkPage(offset: unknown, limit: unknown): [number, number] {
  return [checkCount('offset', offset), checkCount('limit', limit)];
}

export function checkMembers(members: unknown): string[] {
  if (!Array.isArray(members)) throw new RankInputError('members must be an array');
  return members.map(checkMember);
}

/**
 * Compares two strings by their UTF-8 bytes (= by code points), which is the order Redis uses.
 * JavaScript's `<` compares UTF-16 code units, which differs for characters above U+FFFF
 * against U+E000..U+FFFF: '\u{1F600}' < '\uFFFD' in code units but not in bytes.
 */
export function compareBytes(a: string, b: string): number {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i);
    let y = b.charCodeAt(i);
    if (x === y) continue;
    if (x >= 0xd800 && y >= 0xd800) {
      // Move surrogates (code points >= U+10000) above U+E000..U+FFFF; order within each kept.
      x = x >= 0xe000 ? x - 0x800 : x + 0x2000;
      y = y >= 0xe000 ? y - 0x800 : y + 0x2000;
    }
    return x < y ? -1 : 1;
  }
  return a.length - b.length;
}

/** Board order: score desc, then tiebreak asc, then member asc by bytes. */
export function compareEntries(a: RankEntry, b: RankEntry): number {
  if (a.score !== b.score) return a.score > b.score ? -1 : 1;
  if (a.tiebreak !== b.tiebreak) return a.tiebreak < b.tiebreak ? -1 : 1;
  return compareBytes(a.member, b.member);
}
