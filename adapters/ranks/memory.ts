/**
 * MemoryRankIndex: the embedded shape's rank index. One order-statistic tree (a counted B+-tree,
 * ./ostree.ts) per board plus a Map member -> entry per board; watermarks in a Map.
 *
 * It is a derived index and holds nothing durable: at start the composition root rebuilds every
 * live board from the SQL score tables with `load(board, entries)` (the caller reads SQL, this
 * index only sorts and bulk-builds, O(n log n)), and the consumers seek to the offsets stored in
 * SQL. Its watermarks therefore only guard against replays within one process lifetime; in the
 * embedded shape the SQL offset (stored in the same transaction as the scores) is authoritative.
 *
 * Cost: insert, delete, rank, select are O(log n); a page of k entries is O(log n + k).
 * Measured on Node 20 (x64, 2 cores), one board of 1M entries with 12-character member ids,
 * fractional scores and Unix-ms tiebreaks: about 115 bytes of heap per entry for the index
 * (entry object, tree slot, Map slot) plus the member id string itself (about 32 bytes), so
 * about 150 bytes per entry; bulk load of 1M entries about 1.2 s, 1M single upserts about 2 s,
 * get about 2.5 us, a page of 100 about 6-9 us.
 *
 * Every method validates its whole input before changing anything, and the work after
 * validation is synchronous, so apply() is atomic: no other call can observe a half-applied
 * batch, and a rejected batch changes nothing.
 */
import { OSTree } from './ostree';
import {
  centredOffset,
  type ApplyOutcome,
  type RankedEntry,
  type RankEntry,
  type RankIndex,
  type RankPage,
  type RankUpdate,
  type Watermark,
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
  compareEntries,
} from '../../core/leaderboards/rank-input';

/** Immutable: an update replaces the entry object (the tree's separators may refer to old ones). */
class Entry implements RankEntry {
  constructor(
    readonly member: string,
    readonly score: number,
    readonly tiebreak: number,
  ) {}
}

class Board {
  readonly byMember = new Map<string, Entry>();
  constructor(readonly tree = new OSTree<Entry>(compareEntries)) {}

  upsert(member: string, score: number, tiebreak: number): void {
    const old = this.byMember.get(member);
    if (old) {
      if (old.score === score && old.tiebreak === tiebreak) return;
      this.tree.delete(old);
    }
    const e = new Entry(member, score, tiebreak);
    this.tree.insert(e);
    this.byMember.set(member, e);
  }

  remove(member: string): void {
    const old = this.byMember.get(member);
    if (!old) return;
    this.tree.delete(old);
    this.byMember.delete(member);
  }
}

function slice(b: Board, off: number, lim: number): RankedEntry[] {
  return b.tree
    .slice(off, lim)
    .map((e, i) => ({ member: e.member, score: e.score, tiebreak: e.tiebreak, position: off + i }));
}

export class MemoryRankIndex implements RankIndex {
  readonly kind = 'memory' as const;
  private readonly boards = new Map<string, Board>();
  private readonly watermarks = new Map<string, number>();
  private closed = false;

  async apply(updates: RankUpdate[], wm: Watermark): Promise<boolean> {
    return this.applyChecked(updates, wm, false) === 'applied';
  }

  async applyAfter(updates: RankUpdate[], wm: Watermark): Promise<ApplyOutcome> {
    return this.applyChecked(updates, wm, true);
  }

  private applyChecked(updates: RankUpdate[], wm: Watermark, known: boolean): ApplyOutcome {
    this.open();
    if (!Array.isArray(updates)) throw new RankInputError('updates must be an array');
    const ups = updates.map(checkUpdate);
    const w = checkWatermark(wm);
    const key = wmKey(w.stream, w.partition);
    const stored = this.watermarks.get(key);
    if (stored === undefined && known) return 'lost';
    if (stored !== undefined && stored >= w.nextOffset) return 'replay';
    for (const u of ups) {
      let b = this.boards.get(u.board);
      if (!b) this.boards.set(u.board, (b = new Board()));
      b.upsert(u.member, u.score, u.tiebreak);
    }
    this.watermarks.set(key, w.nextOffset);
    return 'applied';
  }

  async watermark(stream: string, partition: number): Promise<number | null> {
    this.open();
    return this.watermarks.get(wmKey(checkStream(stream), checkPartition(partition))) ?? null;
  }

  async get(board: string, member: string): Promise<RankedEntry | null> {
    this.open();
    const b = this.boards.get(checkBoard(board));
    const e = b?.byMember.get(checkMember(member));
    if (!b || !e) return null;
    return { member: e.member, score: e.score, tiebreak: e.tiebreak, position: b.tree.rank(e) };
  }

  async range(board: string, offset: number, limit: number): Promise<RankedEntry[]> {
    this.open();
    const b = this.boards.get(checkBoard(board));
    const [off, lim] = checkPage(offset, limit);
    return b ? slice(b, off, lim) : [];
  }

  async count(board: string): Promise<number> {
    this.open();
    return this.boards.get(checkBoard(board))?.tree.size ?? 0;
  }

  async page(board: string, offset: number, limit: number): Promise<RankPage> {
    this.open();
    const b = this.boards.get(checkBoard(board));
    const [off, lim] = checkPage(offset, limit);
    return { entries: b ? slice(b, off, lim) : [], total: b?.tree.size ?? 0, offset: off };
  }

  async around(board: string, member: string, limit: number): Promise<RankPage & { me: RankedEntry | null }> {
    this.open();
    const b = this.boards.get(checkBoard(board));
    const m = checkMember(member);
    const [, lim] = checkPage(0, limit);
    const e = b?.byMember.get(m);
    if (!b) return { me: null, entries: [], total: 0, offset: 0 };
    const me = e
      ? { member: e.member, score: e.score, tiebreak: e.tiebreak, position: b.tree.rank(e) }
      : null;
    const offset = me ? centredOffset(me.position, lim, b.tree.size) : 0;
    return { me, entries: slice(b, offset, lim), total: b.tree.size, offset };
  }

  async countAbove(board: string, score: number): Promise<number> {
    this.open();
    const s = checkScore(score);
    const b = this.boards.get(checkBoard(board));
    // A probe ordered before every entry of score s: the lowest tiebreak and the empty member.
    return b ? b.tree.countBefore(new Entry('', s, -Infinity)) : 0;
  }

  async remove(board: string, members: string[]): Promise<void> {
    this.open();
    const name = checkBoard(board);
    const ms = checkMembers(members);
    const b = this.boards.get(name);
    if (!b) return;
    for (const m of ms) b.remove(m);
    if (b.tree.size === 0) this.boards.delete(name);
  }

  async dropBoard(board: string): Promise<void> {
    this.open();
    this.boards.delete(checkBoard(board));
  }

  async load(board: string, entries: RankEntry[]): Promise<void> {
    this.open();
    const name = checkBoard(board);
    if (!Array.isArray(entries)) throw new RankInputError('entries must be an array');
    // Later entries for the same member win, as in apply().
    const byMember = new Map<string, Entry>();
    for (const raw of entries) {
      const e = checkEntry(raw);
      byMember.set(e.member, new Entry(e.member, e.score, e.tiebreak));
    }
    if (byMember.size === 0) {
      this.boards.delete(name);
      return;
    }
    const sorted = [...byMember.values()].sort(compareEntries);
    const b = new Board(OSTree.fromSorted(compareEntries, sorted));
    for (const e of sorted) b.byMember.set(e.member, e);
    this.boards.set(name, b);
  }

  async ping(): Promise<void> {
    this.open();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.boards.clear();
    this.watermarks.clear();
  }

  private open(): void {
    if (this.closed) throw new Error('MemoryRankIndex is closed');
  }
}

/** Partition first: it is digits, so the first ':' ends it and any stream name is unambiguous. */
function wmKey(stream: string, partition: number): string {
  return `${partition}:${stream}`;
}
