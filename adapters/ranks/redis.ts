/**
 * RedisRankIndex: the distributed shape's rank index, one sorted set plus one hash per board.
 *
 * Keys (all under the configured prefix P; the board's keys share the hash tag `{board}`, so
 * they live on one cluster slot):
 *   P{<board>}:z2                sorted set: stored score = -score, member = encoded entry
 *   P{<board>}:h2                hash: member id -> encoded entry (to find the old one on update)
 *   P{<board>}:load:<id>:z|h     staging keys of a running load(), with a TTL (see load())
 *   Pwm2:<partition>:<stream>    watermark: next offset applied for (stream, partition)
 *
 * Layout 2 (the "2" in the key names) carries the score inside the member. Layout 1 (`:z`, `:h`,
 * `wm:`, the member without the score) is not read: a deployment upgraded from it finds no
 * watermark, and processors/pipeline/rank-sync.ts rebuilds each partition from SQL when the
 * partition is assigned (queries answer from the rebuilt boards as they fill). The layout-1 keys
 * are then garbage; docs/operations.md says how to delete them.
 *
 * Order and encoding. Redis orders a sorted set by (score asc, member bytes asc). The board
 * order is (score desc, tiebreak asc, member asc by bytes). Instead of reading with ZREVRANGE,
 * which would reverse the member bytes too (and then need inverted bytes plus a terminator that
 * cannot exist for every member), the index stores the negated score and reads with ZRANGE /
 * ZRANK, which keep the member bytes ascending. Negating a double is exact, so no two scores
 * collide. The encoded member is
 *
 *     hex16(score) hex14(tiebreak + 2^53) ":" member-id
 *
 * hex16(score) is the 64 bits of the score as a double (big-endian, lowercase hex; -0 is stored
 * as 0), so the score reads back bit for bit without Redis formatting it: a page is read with
 * ZRANGE without WITHSCORES. Redis 7.0 prints each score of a reply with snprintf("%.17g") (twice
 * in RESP2), and a Lua script then holds it as one more string: on a 1M board that was a quarter of
 * an around-user page's time in Redis (docs/performance.md, issue 19, thirteenth pass). The price is
 * on writes: a score change changes the member, so it is ZREM + ZADD + HSET instead of one ZADD.
 * Members with equal stored scores have equal first 16 bytes, so the prefix never changes the
 * order. hex14 is a fixed-width, zero-padded, lowercase hex of the biased tiebreak (|tiebreak| <=
 * 2^53 - 1, so the biased value is in [1, 2^54 - 1], 14 hex digits). Fixed width and '0'-'9' <
 * 'a'-'f' in ASCII make byte order equal numeric order on those 14 bytes; when tiebreaks are equal
 * the first 31 bytes are equal and the rest is the member id's UTF-8 bytes, compared by memcmp
 * with a shorter prefix first: exactly "member asc by bytes". Decoding cuts at the fixed width,
 * so a member id may contain ':' or anything else (NUL included); see ./validate.ts for the rules.
 *
 * Writes are Lua scripts (EVALSHA, falling back to EVAL when the script is not cached). apply()
 * is ONE script: it checks the watermark, applies every update and moves the watermark, so it is
 * atomic with respect to every other client. Input is validated before the script runs, so the
 * script cannot fail half way. Reads that need more than one command are Lua scripts too (their
 * replies have the same shape whatever RESP version the client speaks).
 *
 * Cluster caveat: one apply() touches the watermark key and the keys of every board in the
 * batch, which are on different slots. That is fine on one Redis (or a primary with replicas);
 * on Redis Cluster the script would fail with CROSSSLOT. Running on a cluster would need every
 * board updated by one partition and that partition's watermark on one slot (a hash tag per
 * (stream, partition)), which changes the key layout above.
 *
 * Connection: pass a URL (the index opens and closes its own ioredis client, with ioredis'
 * auto-pipelining: the commands of concurrent callers issued in one event-loop turn leave in one
 * write; each keeps its own reply or error, and order is kept) or a client that the caller owns
 * and closes. The client must not use ioredis' own `keyPrefix` (use `prefix`).
 * ioredis resends unanswered commands after a reconnect; that is safe: apply() is guarded by the
 * watermark (a resent batch returns false), remove/dropBoard/load are idempotent.
 */
import { isAscii } from 'node:buffer';
import { createHash, randomBytes } from 'node:crypto';
import Redis, { type RedisOptions } from 'ioredis';
import type {
  ApplyOutcome,
  RankedEntry,
  RankEntry,
  RankIndex,
  RankPage,
  RankUpdate,
  Watermark,
} from './types';
import {
  RankInputError,
  checkBoard,
  checkEntry,
  checkMember,
  checkMembers,
  checkPage,
  checkPartition,
  checkScore,
  checkStream,
  checkUpdate,
  checkWatermark,
} from '../../core/leaderboards/rank-input';

export interface RedisRankIndexOptions {
  /** A Redis URL such as redis://127.0.0.1:6379/0, or an ioredis client the caller owns. */
  redis: string | Redis;
  /** Prefix of every key, e.g. `ludus:ranks:`; [A-Za-z0-9_.:-], at most 64 characters. */
  prefix: string;
  /** Options for the client made from a URL (ignored when a client is passed). */
  redisOptions?: RedisOptions;
  /** Entries per script call in load(); default 5000. */
  loadChunk?: number;
  /** TTL in seconds of a load()'s staging keys (a crashed load leaves nothing behind); default 3600. */
  loadTtlSeconds?: number;
}

const SCORE_WIDTH = 16;
const TB_WIDTH = 14;
/** Bytes before the member id: hex16(score), hex14(tiebreak), ':'. */
const PREFIX = SCORE_WIDTH + TB_WIDTH + 1;
const TB_BIAS = 2n ** 53n;
const TB_BIAS_NUMBER = 2 ** 53;
const bits = new DataView(new ArrayBuffer(8));

const hex8 = (n: number) => n.toString(16).padStart(8, '0');

/** The sortable member string: see the file comment. Exported for the contract tests. */
export function encodeMember(score: number, tiebreak: number, member: string): string {
  bits.setFloat64(0, score === 0 ? 0 : score);
  return (
    hex8(bits.getUint32(0)) +
    hex8(bits.getUint32(4)) +
    (BigInt(tiebreak) + TB_BIAS).toString(16).padStart(TB_WIDTH, '0') +
    ':' +
    member
  );
}

/** The score of an encoded member read from a latin1 (or ASCII) view at `at` (-0 as 0), or NaN. */
function scoreAt(bytes: string, at: number): number {
  const hi = hexAt(bytes, at, at + 8);
  const lo = hexAt(bytes, at + 8, at + SCORE_WIDTH);
  if (Number.isNaN(hi) || Number.isNaN(lo)) return NaN;
  bits.setUint32(0, hi);
  bits.setUint32(4, lo);
  const score = bits.getFloat64(0);
  return !Number.isFinite(score) ? NaN : score === 0 ? 0 : score;
}

/** hex14 of a tiebreak of 0, most boards' only tiebreak (a string compare instead of parsing). */
const TB_ZERO = (2 ** 53).toString(16).padStart(TB_WIDTH, '0');

/**
 * The tiebreak of an encoded member read at `at` (after its score), or NaN. Two 28-bit halves
 * instead of a BigInt (pages decode a member per entry): hi * 2^28 and 2^53 are multiples of 2^28
 * below 2^54, so their difference is exact, and adding lo stays within the safe range: the same
 * value as BigInt(hex) - 2^53, bit for bit.
 */
function tiebreakAt(bytes: string, at: number): number {
  if (bytes.startsWith(TB_ZERO, at)) return 0;
  const hi = hexAt(bytes, at, at + 7);
  const lo = hexAt(bytes, at + 7, at + TB_WIDTH);
  const tb = hi * 268435456 - TB_BIAS_NUMBER + lo;
  return tb === 0 ? 0 : tb;
}

export function decodeMember(enc: string): { score: number; tiebreak: number; member: string } {
  const score = enc.length >= PREFIX && enc.charCodeAt(PREFIX - 1) === 58 ? scoreAt(enc, 0) : NaN;
  const tiebreak = tiebreakAt(enc, SCORE_WIDTH);
  if (Number.isNaN(score) || Number.isNaN(tiebreak))
    throw new Error(`malformed rank member: ${JSON.stringify(enc)}`);
  return { score, tiebreak, member: enc.slice(PREFIX) };
}

/** The stored score is the negated score (ZADD's argument; exact). */
function storedScore(score: number): string {
  return String(-score);
}

/** ioredis' `<command>Buffer` forms (replies as Buffers, not strings), which its typings leave out. */
type Evaluate = (
  this: Redis,
  script: string,
  numKeys: number,
  ...keysAndArgs: Array<string | number>
) => Promise<unknown>;
interface BufferReplies {
  evalshaBuffer: Evaluate;
  evalBuffer: Evaluate;
}

class LuaScript {
  private readonly sha: string;
  constructor(private readonly lua: string) {
    this.sha = createHash('sha1').update(lua).digest('hex');
  }

  async run(redis: Redis, keys: string[], args: Array<string | number>): Promise<unknown> {
    try {
      return await redis.evalsha(this.sha, keys.length, ...keys, ...args);
    } catch (err) {
      // NOSCRIPT: the script did not run; EVAL runs it and caches it for the next EVALSHA.
      if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
      return redis.eval(this.lua, keys.length, ...keys, ...args);
    }
  }

  /** `run` with the reply's strings as Buffers (packed pages: byte lengths, see `unpack`). */
  async runBuffers(redis: Redis, keys: string[], args: Array<string | number>): Promise<unknown> {
    const r = redis as unknown as BufferReplies;
    try {
      return await r.evalshaBuffer.call(redis, this.sha, keys.length, ...keys, ...args);
    } catch (err) {
      if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
      return r.evalBuffer.call(redis, this.lua, keys.length, ...keys, ...args);
    }
  }
}

/**
 * KEYS[1] = watermark key; KEYS[2k], KEYS[2k+1] = zset and hash of one board.
 * ARGV[1] = next offset; ARGV[2] = '1' when the watermark must exist (`applyAfter`: answers 2 and
 * applies nothing when it does not); then per update: index of the board's zset in KEYS, member
 * id, stored score, encoded member. Answers 1 when applied, 0 for a replay.
 */
const APPLY = new LuaScript(`
local cur = redis.call('GET', KEYS[1])
if not cur and ARGV[2] == '1' then return 2 end
if cur and tonumber(cur) >= tonumber(ARGV[1]) then return 0 end
for i = 3, #ARGV, 4 do
  local k = tonumber(ARGV[i])
  local z, h = KEYS[k], KEYS[k + 1]
  local member, score, enc = ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local old = redis.call('HGET', h, member)
  if old and old ~= enc then redis.call('ZREM', z, old) end
  redis.call('ZADD', z, score, enc)
  if old ~= enc then redis.call('HSET', h, member, enc) end
end
redis.call('SET', KEYS[1], ARGV[1])
return 1
`);

/** KEYS = zset, hash (staging keys of a load); ARGV[1] = TTL; then member, stored score, encoded. */
const STAGE = new LuaScript(`
for i = 2, #ARGV, 3 do
  local member, score, enc = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local old = redis.call('HGET', KEYS[2], member)
  if old and old ~= enc then redis.call('ZREM', KEYS[1], old) end
  redis.call('ZADD', KEYS[1], score, enc)
  if old ~= enc then redis.call('HSET', KEYS[2], member, enc) end
end
redis.call('EXPIRE', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[2], ARGV[1])
return 1
`);

/** KEYS = zset, hash, staging zset, staging hash: replaces the board with the staged content. */
const SWAP = new LuaScript(`
if redis.call('EXISTS', KEYS[3]) == 1 then
  redis.call('RENAME', KEYS[3], KEYS[1])
  redis.call('RENAME', KEYS[4], KEYS[2])
  redis.call('PERSIST', KEYS[1])
  redis.call('PERSIST', KEYS[2])
else
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[4])
end
return 1
`);

/** KEYS = zset, hash; ARGV = member ids. */
const REMOVE = new LuaScript(`
for i = 1, #ARGV do
  local enc = redis.call('HGET', KEYS[2], ARGV[i])
  if enc then
    redis.call('ZREM', KEYS[1], enc)
    redis.call('HDEL', KEYS[2], ARGV[i])
  end
end
return 1
`);

/** KEYS = zset, hash; ARGV[1] = member id. Returns {encoded, rank} or nil. */
const GET = new LuaScript(`
local enc = redis.call('HGET', KEYS[2], ARGV[1])
if not enc then return false end
local rank = redis.call('ZRANK', KEYS[1], enc)
if not rank then return redis.error_reply('rank index out of sync for a member') end
return {enc, rank}
`);

/**
 * Pages leave Redis packed: ONE string holding, per entry in board order, two bytes of the encoded
 * member's byte length (big-endian; a member id has at most 512 bytes) and the encoded member,
 * back to back, instead of one string per entry. Decoding a reply of 200 strings was most of the
 * client's cost of a top page (ioredis' reply decoder and a string per element); one string of a
 * few KB is one allocation, and `unpack` reads it at about a third of the cost. The length lets a
 * member id hold any byte (space, NUL); two bytes from string.char instead of decimal digits spare
 * the script Lua's number formatting (an snprintf per entry).
 */
const PACK = `
local char, floor = string.char, math.floor
local function pack(members)
  local parts = {}
  for i = 1, #members do
    local n = #members[i]
    parts[2 * i - 1] = char(floor(n / 256), n % 256)
    parts[2 * i] = members[i]
  end
  return table.concat(parts)
end
`;

/** KEYS = zset; ARGV = start, stop. {ZCARD, packed page}: one state. */
const PAGE = new LuaScript(`${PACK}
return {redis.call('ZCARD', KEYS[1]), pack(redis.call('ZRANGE', KEYS[1], ARGV[1], ARGV[2]))}
`);

/**
 * KEYS = zset, hash; ARGV = member id, limit (>= 1). {ZCARD, offset, rank or -1, packed page}:
 * the page centred on the member (RankIndex.around), the top when absent. The member's own entry
 * is in the page (rank - offset is in [0, limit)), so it is not sent twice.
 */
const AROUND = new LuaScript(`${PACK}
local total = redis.call('ZCARD', KEYS[1])
local lim = tonumber(ARGV[2])
local enc = redis.call('HGET', KEYS[2], ARGV[1])
local rank = -1
local off = 0
if enc then
  rank = redis.call('ZRANK', KEYS[1], enc)
  if not rank then return redis.error_reply('rank index out of sync for a member') end
  off = math.max(0, math.min(rank - floor(lim / 2), total - lim))
end
return {total, off, rank, pack(redis.call('ZRANGE', KEYS[1], off, off + lim - 1))}
`);

/** The value of the lowercase hex digits at [from, to) of a latin1 view (at most 13 digits), or NaN. */
function hexAt(bytes: string, from: number, to: number): number {
  let v = 0;
  for (let i = from; i < to; i++) {
    const c = bytes.charCodeAt(i);
    const d = c >= 48 && c <= 57 ? c - 48 : c >= 97 && c <= 102 ? c - 87 : -1;
    if (d < 0) return NaN;
    v = v * 16 + d;
  }
  return v;
}

/**
 * Entries from a packed page (see PACK) starting at position `off`. The page is read as one latin1
 * string (one character per byte, so positions are byte offsets): the lengths, scores and
 * tiebreaks are read from it without a call into the Buffer per field, and the member ids of an
 * all-ASCII page are slices of it (a page holding other bytes decodes its ids as UTF-8).
 * Exported for the contract tests.
 */
export function unpack(packed: Buffer, off: number): RankedEntry[] {
  const out: RankedEntry[] = [];
  const bytes = packed.toString('latin1');
  const ascii = isAscii(packed);
  const n = bytes.length;
  let p = 0;
  while (p < n) {
    const start = p + 2;
    const end = start + bytes.charCodeAt(p) * 256 + bytes.charCodeAt(p + 1);
    const framed =
      start <= n && end <= n && end - start >= PREFIX && bytes.charCodeAt(start + PREFIX - 1) === 58;
    const score = framed ? scoreAt(bytes, start) : NaN;
    const tiebreak = framed ? tiebreakAt(bytes, start + SCORE_WIDTH) : NaN;
    if (Number.isNaN(score) || Number.isNaN(tiebreak))
      throw new Error(`malformed packed rank page at byte ${p}`);
    out.push({
      member: ascii ? bytes.slice(start + PREFIX, end) : packed.toString('utf8', start + PREFIX, end),
      score,
      tiebreak,
      position: off + out.length,
    });
    p = end;
  }
  return out;
}

/** The rank index's key prefix under a deployment's Redis prefix (`LUDUS_REDIS_PREFIX`). */
export function ranksPrefix(redisPrefix: string): string {
  return `${redisPrefix}ranks:`;
}

/**
 * The key names of layout 2 under a prefix (see the file comment): the index's own, and the
 * bench's, which watches watermarks and members without going through the index.
 */
export function rankKeys(prefix: string) {
  return {
    zset: (board: string) => `${prefix}{${board}}:z2`,
    hash: (board: string) => `${prefix}{${board}}:h2`,
    watermark: (stream: string, partition: number) => `${prefix}wm2:${partition}:${stream}`,
    /** A running load()'s staging keys (same slot as the board's). */
    staging: (board: string, id: string) => `${prefix}{${board}}:load:${id}`,
  };
}

export class RedisRankIndex implements RankIndex {
  readonly kind = 'redis' as const;
  private readonly redis: Redis;
  private readonly owned: boolean;
  private readonly keys: ReturnType<typeof rankKeys>;
  private readonly loadChunk: number;
  private readonly loadTtl: number;

  constructor(opts: RedisRankIndexOptions) {
    if (typeof opts.prefix !== 'string' || !/^[A-Za-z0-9_.:-]{0,64}$/.test(opts.prefix)) {
      throw new Error(
        `RedisRankIndex: prefix must match [A-Za-z0-9_.:-]{0,64}, got ${JSON.stringify(opts.prefix)}`,
      );
    }
    this.keys = rankKeys(opts.prefix);
    this.loadChunk = opts.loadChunk ?? 5000;
    this.loadTtl = opts.loadTtlSeconds ?? 3600;
    if (!Number.isSafeInteger(this.loadChunk) || this.loadChunk < 1)
      throw new Error('RedisRankIndex: loadChunk must be a positive integer');
    if (!Number.isSafeInteger(this.loadTtl) || this.loadTtl < 1)
      throw new Error('RedisRankIndex: loadTtlSeconds must be a positive integer');
    if (typeof opts.redis === 'string') {
      // Auto-pipelining: the commands that concurrent requests issue in one event-loop turn leave
      // in one write (one syscall instead of one each); each command keeps its own reply or error.
      this.redis = new Redis(opts.redis, { enableAutoPipelining: true, ...opts.redisOptions });
      // Connection errors surface as rejected commands; without a listener ioredis prints them.
      this.redis.on('error', () => undefined);
      this.owned = true;
    } else {
      if (opts.redis.options.keyPrefix)
        throw new Error("RedisRankIndex: the client must not set ioredis' keyPrefix; use the prefix option");
      this.redis = opts.redis;
      this.owned = false;
    }
  }

  async apply(updates: RankUpdate[], wm: Watermark): Promise<boolean> {
    return (await this.applyScript(updates, wm, false)) === 'applied';
  }

  applyAfter(updates: RankUpdate[], wm: Watermark): Promise<ApplyOutcome> {
    return this.applyScript(updates, wm, true);
  }

  /** One APPLY script call: the watermark check (and, with `known`, its existence) folded in. */
  private async applyScript(updates: RankUpdate[], wm: Watermark, known: boolean): Promise<ApplyOutcome> {
    if (!Array.isArray(updates)) throw new RankInputError('updates must be an array');
    const ups = updates.map(checkUpdate);
    const w = checkWatermark(wm);
    const keys = [this.keys.watermark(w.stream, w.partition)];
    const boardIndex = new Map<string, number>();
    const args: string[] = [String(w.nextOffset), known ? '1' : '0'];
    for (const u of ups) {
      let k = boardIndex.get(u.board);
      if (k === undefined) {
        k = keys.length + 1; // Lua's KEYS is 1-based
        boardIndex.set(u.board, k);
        keys.push(this.keys.zset(u.board), this.keys.hash(u.board));
      }
      args.push(String(k), u.member, storedScore(u.score), encodeMember(u.score, u.tiebreak, u.member));
    }
    const r = Number(await APPLY.run(this.redis, keys, args));
    return r === 1 ? 'applied' : r === 2 ? 'lost' : 'replay';
  }

  async watermark(stream: string, partition: number): Promise<number | null> {
    const v = await this.redis.get(this.keys.watermark(checkStream(stream), checkPartition(partition)));
    return v === null ? null : Number(v);
  }

  async get(board: string, member: string): Promise<RankedEntry | null> {
    const b = checkBoard(board);
    const m = checkMember(member);
    const r = (await GET.run(this.redis, [this.keys.zset(b), this.keys.hash(b)], [m])) as
      [string, number] | null;
    if (!r) return null;
    const { score, tiebreak } = decodeMember(r[0]);
    return { member: m, score, tiebreak, position: Number(r[1]) };
  }

  async range(board: string, offset: number, limit: number): Promise<RankedEntry[]> {
    return (await this.page(board, offset, limit)).entries;
  }

  async count(board: string): Promise<number> {
    return this.redis.zcard(this.keys.zset(checkBoard(board)));
  }

  async page(board: string, offset: number, limit: number): Promise<RankPage> {
    const b = checkBoard(board);
    const [off, lim] = checkPage(offset, limit);
    if (lim === 0) return { entries: [], total: await this.redis.zcard(this.keys.zset(b)), offset: off };
    const [total, packed] = (await PAGE.runBuffers(
      this.redis,
      [this.keys.zset(b)],
      [String(off), String(off + lim - 1)],
    )) as [number, Buffer];
    return { entries: unpack(packed, off), total: Number(total), offset: off };
  }

  async around(board: string, member: string, limit: number): Promise<RankPage & { me: RankedEntry | null }> {
    const b = checkBoard(board);
    const m = checkMember(member);
    const [, lim] = checkPage(0, limit);
    if (lim === 0) {
      const [me, total] = [await this.get(b, m), await this.count(b)];
      return { me, entries: [], total, offset: 0 };
    }
    const [total, off, rank, packed] = (await AROUND.runBuffers(
      this.redis,
      [this.keys.zset(b), this.keys.hash(b)],
      [m, String(lim)],
    )) as [number, number, number, Buffer];
    const offset = Number(off);
    const entries = unpack(packed, offset);
    let me: RankedEntry | null = null;
    if (Number(rank) >= 0) {
      me = entries[Number(rank) - offset] ?? null;
      if (me?.member !== m) throw new Error('rank index out of sync for a member');
    }
    return { me, entries, total: Number(total), offset };
  }

  async countAbove(board: string, score: number): Promise<number> {
    // Stored scores are negated: a greater score is a stored value below -score.
    return this.redis.zcount(this.keys.zset(checkBoard(board)), '-inf', `(${storedScore(checkScore(score))}`);
  }

  async remove(board: string, members: string[]): Promise<void> {
    const b = checkBoard(board);
    const ms = checkMembers(members);
    for (let i = 0; i < ms.length; i += this.loadChunk) {
      await REMOVE.run(this.redis, [this.keys.zset(b), this.keys.hash(b)], ms.slice(i, i + this.loadChunk));
    }
  }

  async dropBoard(board: string): Promise<void> {
    const b = checkBoard(board);
    await this.redis.del(this.keys.zset(b), this.keys.hash(b));
  }

  /**
   * Replaces the board: stages the entries in chunks under staging keys (same slot, with a TTL
   * so a crashed load cleans itself up), then swaps them in with one script (RENAME), so readers
   * see the old board until the new one is complete. Updates applied to the board while a load
   * runs are lost at the swap: the caller loads a board before consuming its partitions.
   * Later entries for the same member win, as in apply().
   */
  async load(board: string, entries: RankEntry[]): Promise<void> {
    const b = checkBoard(board);
    if (!Array.isArray(entries)) throw new RankInputError('entries must be an array');
    const es = entries.map(checkEntry);
    const stage = this.keys.staging(b, randomBytes(6).toString('hex'));
    const sz = `${stage}:z`;
    const sh = `${stage}:h`;
    try {
      for (let i = 0; i < es.length; i += this.loadChunk) {
        const args: string[] = [String(this.loadTtl)];
        for (const e of es.slice(i, i + this.loadChunk))
          args.push(e.member, storedScore(e.score), encodeMember(e.score, e.tiebreak, e.member));
        await STAGE.run(this.redis, [sz, sh], args);
      }
      await SWAP.run(this.redis, [this.keys.zset(b), this.keys.hash(b), sz, sh], []);
    } catch (err) {
      await this.redis.del(sz, sh).catch(() => undefined);
      throw err;
    }
  }

  async ping(): Promise<void> {
    await this.redis.ping();
  }

  /** Closes the client when the index made it from a URL; a passed client stays open. */
  async close(): Promise<void> {
    if (!this.owned) return;
    if (this.redis.status === 'end') return;
    if (this.redis.status !== 'ready') {
      this.redis.disconnect();
      return;
    }
    try {
      await this.redis.quit();
    } catch {
      this.redis.disconnect();
    }
  }
}
