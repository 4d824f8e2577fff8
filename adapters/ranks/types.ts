/**
 * The rank-index port: a derived, rebuildable index of leaderboard standings.
 * Two adapters: Redis sorted sets (ioredis + Lua) and an in-memory order-statistic index
 * rebuilt from SQL at start. The system of record for scores is SQL; this index only answers
 * rank, score and page queries fast.
 *
 * Order within a board: higher score first; on equal scores the lower `tiebreak` first (for
 * example the sequence at which the user reached the score: who got there first ranks higher);
 * on equal score and tiebreak, the lower member id (byte order) first. Positions are 0-based.
 *
 * Input limits, the same in both adapters (./validate.ts; violations throw RankInputError and
 * change nothing): member, board and stream are non-empty well-formed Unicode strings of at most
 * 512 UTF-8 bytes; score is any finite double (-0 reads back as 0); tiebreak is a safe integer
 * (|tiebreak| <= 2^53 - 1); partition, nextOffset, offset and limit are non-negative safe integers.
 */
export interface RankEntry {
  member: string;
  score: number;
  tiebreak: number;
}

export interface RankUpdate extends RankEntry {
  /** A board key such as `tenant:leaderboard:window`, opaque to the index. */
  board: string;
}

/** Where a batch of updates came from: one partition of one log stream. */
export interface Watermark {
  /** e.g. `<consumer group>:<topic>` */
  stream: string;
  partition: number;
  /** Offset after the last record this batch covers. */
  nextOffset: number;
}

/** What `applyAfter` did. */
export type ApplyOutcome = 'applied' | 'replay' | 'lost';

export interface RankedEntry extends RankEntry {
  /** 0-based position in the board's order. */
  position: number;
}

export interface RankPage {
  entries: RankedEntry[];
  /** Number of members of the board. */
  total: number;
  /** Position of the first entry (the offset asked for, or the centred one of `around`). */
  offset: number;
}

/** The offset of a page of `limit` centred on position `position` of a board of `total` entries. */
export function centredOffset(position: number, limit: number, total: number): number {
  return Math.max(0, Math.min(position - Math.floor(limit / 2), total - limit));
}

export interface RankIndex {
  readonly kind: 'redis' | 'memory';
  /**
   * Sets absolute scores (upsert) atomically with the stream's watermark. When the stored
   * watermark for (stream, partition) is already >= `wm.nextOffset`, nothing is applied and
   * false is returned (a replay). Atomic: either all updates and the new watermark, or none.
   */
  apply(updates: RankUpdate[], wm: Watermark): Promise<boolean>;
  /**
   * `apply` for a batch after earlier ones of the stream's partition, with the check that the
   * index still has their state folded in (one round trip on Redis): when no watermark is stored
   * for (stream, partition) (the index lost its state), nothing is applied and `lost` is answered
   * (the caller rebuilds the partition); `replay` when the stored watermark is already >=
   * `wm.nextOffset`; else `applied`, atomically as `apply`.
   */
  applyAfter(updates: RankUpdate[], wm: Watermark): Promise<ApplyOutcome>;
  /** Next offset applied for (stream, partition), or null when never written. */
  watermark(stream: string, partition: number): Promise<number | null>;
  /** The member's entry and position, or null when absent. */
  get(board: string, member: string): Promise<RankedEntry | null>;
  /** Entries at positions [offset, offset + limit), in board order. */
  range(board: string, offset: number, limit: number): Promise<RankedEntry[]>;
  /** Number of members of the board. */
  count(board: string): Promise<number>;
  /**
   * `range` and `count` read together (one round trip on Redis, one consistent state): the page
   * at [offset, offset + limit) and the board's size.
   */
  page(board: string, offset: number, limit: number): Promise<RankPage>;
  /**
   * The page of `limit` entries centred on `member` (the lower middle for an even limit; a full
   * page near the end; never before position 0), with the member's entry and the board's size,
   * read together. When the member is absent: `me` is null and the page is the top (offset 0).
   */
  around(board: string, member: string, limit: number): Promise<RankPage & { me: RankedEntry | null }>;
  /** Number of members with a score strictly greater than `score` (shared ranks: this + 1). */
  countAbove(board: string, score: number): Promise<number>;
  /** Removes members from a board (no watermark: admin operations). */
  remove(board: string, members: string[]): Promise<void>;
  /** Drops a whole board. */
  dropBoard(board: string): Promise<void>;
  /** Replaces the content of a board (rebuild from SQL). */
  load(board: string, entries: RankEntry[]): Promise<void>;
  ping(): Promise<void>;
  close(): Promise<void>;
}
