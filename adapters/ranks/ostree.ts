/**
 * An order-statistic tree: a counted B+-tree. Items are kept sorted by a comparator; every
 * internal node knows the size of each child subtree, so that insert, delete, rank (position
 * of an item) and select (item at a position) are all O(log n), with a small constant: a
 * node holds up to 64 children or items, so a million items fit in four levels.
 *
 * Memory: leaves hold plain arrays of item references (no per-item node object), which is what
 * keeps a 1M-item index cheap; see bench figures in MemoryRankIndex's comment.
 *
 * Items must be distinct under the comparator (the caller keys them, e.g. by member id) and
 * must not change while they are in the tree (replace them: delete the old, insert the new).
 */
const MAX = 64;
const MIN = MAX / 2;
/** Bulk loading fills nodes to this size, leaving room for inserts before the first split. */
const BULK = 48;

export type Comparator<T> = (a: T, b: T) => number;

class Leaf<T> {
  next: Leaf<T> | null = null;
  constructor(public items: T[]) {}
  get length(): number {
    return this.items.length;
  }
}

class Inner<T> {
  constructor(
    public children: Array<Node<T>>,
    /** counts[i] = number of items under children[i]. */
    public counts: number[],
    /**
     * mins[i] (i >= 1) separates children: every item under children[i - 1] is < mins[i] and
     * every item under children[i] is >= mins[i]. mins[0] is a lower bound of children[0] and is
     * only used to keep that rule true when a child moves between nodes.
     */
    public mins: T[],
    public size: number,
  ) {}
  get length(): number {
    return this.children.length;
  }
}

type Node<T> = Leaf<T> | Inner<T>;

function sizeOf<T>(n: Node<T>): number {
  return n instanceof Leaf ? n.items.length : n.size;
}

function minOf<T>(n: Node<T>): T {
  let cur: Node<T> = n;
  while (cur instanceof Inner) cur = cur.children[0];
  return cur.items[0];
}

export class OSTree<T> {
  private root: Node<T> | null = null;

  constructor(private readonly cmp: Comparator<T>) {}

  /** Builds a tree from items already sorted by cmp and distinct (checked). O(n). */
  static fromSorted<T>(cmp: Comparator<T>, items: readonly T[]): OSTree<T> {
    const t = new OSTree<T>(cmp);
    for (let i = 1; i < items.length; i++) {
      if (cmp(items[i - 1], items[i]) >= 0)
        throw new Error('OSTree.fromSorted: items are not sorted and distinct');
    }
    if (items.length === 0) return t;
    const leaves = chunk(items.length).map(([a, b]) => new Leaf(items.slice(a, b)));
    for (let i = 1; i < leaves.length; i++) leaves[i - 1].next = leaves[i];
    let level: Array<Node<T>> = leaves;
    while (level.length > 1) {
      const up: Array<Node<T>> = [];
      for (const [a, b] of chunk(level.length)) {
        const children = level.slice(a, b);
        const counts = children.map(sizeOf);
        up.push(
          new Inner(
            children,
            counts,
            children.map(minOf),
            counts.reduce((x, y) => x + y, 0),
          ),
        );
      }
      level = up;
    }
    t.root = level[0];
    return t;
  }

  get size(): number {
    return this.root ? sizeOf(this.root) : 0;
  }

  clear(): void {
    this.root = null;
  }

  /** Inserts an item; throws if an equal item is present (the caller keeps items distinct). */
  insert(item: T): void {
    if (!this.root) {
      this.root = new Leaf([item]);
      return;
    }
    const split = this.ins(this.root, item);
    if (split) {
      const left = this.root;
      this.root = new Inner(
        [left, split],
        [sizeOf(left), sizeOf(split)],
        [minOf(left), minOf(split)],
        sizeOf(left) + sizeOf(split),
      );
    }
  }

  /** Removes an item equal to `item`; false when absent. */
  delete(item: T): boolean {
    if (!this.root) return false;
    if (!this.del(this.root, item)) return false;
    if (this.root instanceof Inner && this.root.children.length === 1) this.root = this.root.children[0];
    else if (this.root instanceof Leaf && this.root.items.length === 0) this.root = null;
    return true;
  }

  /** 0-based position of an item equal to `item`, or -1 when absent. */
  rank(item: T): number {
    let node = this.root;
    let pos = 0;
    while (node instanceof Inner) {
      const ci = this.childIndex(node, item);
      for (let i = 0; i < ci; i++) pos += node.counts[i];
      node = node.children[ci];
    }
    if (!node) return -1;
    const i = this.lowerBound(node.items, item);
    return i < node.items.length && this.cmp(node.items[i], item) === 0 ? pos + i : -1;
  }

  /** Number of items ordered strictly before `probe` (which need not be in the tree). */
  countBefore(probe: T): number {
    let node = this.root;
    let pos = 0;
    while (node instanceof Inner) {
      const ci = this.childIndex(node, probe);
      for (let i = 0; i < ci; i++) pos += node.counts[i];
      node = node.children[ci];
    }
    return node ? pos + this.lowerBound(node.items, probe) : 0;
  }

  /** The item at a 0-based position, or undefined when out of range. */
  at(position: number): T | undefined {
    const found = this.locate(position);
    return found ? found[0].items[found[1]] : undefined;
  }

  /** Items at positions [offset, offset + limit), in order. */
  slice(offset: number, limit: number): T[] {
    const out: T[] = [];
    if (limit <= 0) return out;
    const found = this.locate(offset);
    if (!found) return out;
    let [leaf, i] = found as [Leaf<T> | null, number];
    while (leaf && out.length < limit) {
      const items = leaf.items;
      while (i < items.length && out.length < limit) out.push(items[i++]);
      leaf = leaf.next;
      i = 0;
    }
    return out;
  }

  /** Every item in order (tests and dumps). */
  *[Symbol.iterator](): IterableIterator<T> {
    let node = this.root;
    while (node instanceof Inner) node = node.children[0];
    for (let leaf: Leaf<T> | null = node; leaf; leaf = leaf.next) yield* leaf.items;
  }

  /** Checks every structural invariant; throws on the first broken one (tests). Returns height. */
  check(): number {
    if (!this.root) return 0;
    let prev: T | undefined;
    let leafCount = 0;
    const walk = (n: Node<T>, isRoot: boolean, lo: T | undefined): number => {
      if (!isRoot && n.length < MIN) throw new Error(`node underfull: ${n.length}`);
      if (n.length > MAX) throw new Error(`node overfull: ${n.length}`);
      if (n instanceof Leaf) {
        leafCount++;
        for (const it of n.items) {
          if (prev !== undefined && this.cmp(prev, it) >= 0) throw new Error('items out of order');
          if (lo !== undefined && this.cmp(lo, it) > 0) throw new Error('item below its separator');
          prev = it;
        }
        return 1;
      }
      if (isRoot && n.length < 2) throw new Error('inner root with one child');
      let h = -1;
      let total = 0;
      for (let i = 0; i < n.children.length; i++) {
        const c = n.children[i];
        if (n.counts[i] !== sizeOf(c)) throw new Error('stale count');
        total += n.counts[i];
        if (i > 0 && prev !== undefined && this.cmp(prev, n.mins[i]) >= 0)
          throw new Error('separator not above left sibling');
        const ch = walk(c, false, n.mins[i]);
        if (h !== -1 && ch !== h) throw new Error('unbalanced');
        h = ch;
      }
      if (total !== n.size) throw new Error('stale size');
      return h + 1;
    };
    const height = walk(this.root, true, undefined);
    let linked = 0;
    let first: Node<T> = this.root;
    while (first instanceof Inner) first = first.children[0];
    for (let l: Leaf<T> | null = first; l; l = l.next) linked++;
    if (linked !== leafCount) throw new Error('leaf chain broken');
    return height;
  }

  // ------------------------------------------------------------------------------------------

  /** First index i with items[i] >= item. */
  private lowerBound(items: T[], item: T): number {
    let lo = 0;
    let hi = items.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.cmp(items[mid], item) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Last child index i with mins[i] <= item (0 when item is below every separator). */
  private childIndex(node: Inner<T>, item: T): number {
    const mins = node.mins;
    let lo = 1;
    let hi = mins.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.cmp(mins[mid], item) <= 0) lo = mid + 1;
      else hi = mid;
    }
    return lo - 1;
  }

  private locate(position: number): [Leaf<T>, number] | null {
    let node = this.root;
    if (!node || !Number.isInteger(position) || position < 0 || position >= sizeOf(node)) return null;
    let p = position;
    while (node instanceof Inner) {
      let i = 0;
      while (p >= node.counts[i]) p -= node.counts[i++];
      node = node.children[i];
    }
    return [node, p];
  }

  /** Inserts under node; returns a new right sibling when node split. */
  private ins(node: Node<T>, item: T): Node<T> | null {
    if (node instanceof Leaf) {
      const items = node.items;
      const i = this.lowerBound(items, item);
      if (i < items.length && this.cmp(items[i], item) === 0)
        throw new Error('OSTree.insert: an equal item is present');
      items.splice(i, 0, item);
      if (items.length <= MAX) return null;
      const right = new Leaf(items.splice(MIN));
      right.next = node.next;
      node.next = right;
      return right;
    }
    const ci = this.childIndex(node, item);
    if (ci === 0 && this.cmp(item, node.mins[0]) < 0) node.mins[0] = item;
    const split = this.ins(node.children[ci], item);
    node.counts[ci]++;
    node.size++;
    if (!split) return null;
    const left = node.children[ci];
    node.children.splice(ci + 1, 0, split);
    node.counts.splice(ci, 1, sizeOf(left), sizeOf(split));
    node.mins.splice(ci + 1, 0, minOf(split));
    if (node.children.length <= MAX) return null;
    const children = node.children.splice(MIN);
    const counts = node.counts.splice(MIN);
    const mins = node.mins.splice(MIN);
    const moved = counts.reduce((x, y) => x + y, 0);
    node.size -= moved;
    return new Inner(children, counts, mins, moved);
  }

  private del(node: Node<T>, item: T): boolean {
    if (node instanceof Leaf) {
      const i = this.lowerBound(node.items, item);
      if (i >= node.items.length || this.cmp(node.items[i], item) !== 0) return false;
      node.items.splice(i, 1);
      return true;
    }
    const ci = this.childIndex(node, item);
    if (!this.del(node.children[ci], item)) return false;
    node.counts[ci]--;
    node.size--;
    if (node.children[ci].length < MIN) this.rebalance(node, ci);
    return true;
  }

  /** Fixes an underfull child i of parent: borrow from a sibling, or merge with one. */
  private rebalance(parent: Inner<T>, i: number): void {
    const child = parent.children[i];
    const left = i > 0 ? parent.children[i - 1] : null;
    const right = i + 1 < parent.children.length ? parent.children[i + 1] : null;
    if (left && left.length > MIN) {
      this.moveLastToFront(left, child);
      parent.counts[i - 1] = sizeOf(left);
      parent.counts[i] = sizeOf(child);
      parent.mins[i] = minOf(child);
    } else if (right && right.length > MIN) {
      this.moveFirstToEnd(right, child);
      parent.counts[i] = sizeOf(child);
      parent.counts[i + 1] = sizeOf(right);
      parent.mins[i + 1] = minOf(right);
    } else if (left) {
      this.merge(parent, i - 1);
    } else if (right) {
      this.merge(parent, i);
    }
    // An inner node always has at least two children, so one of the branches above applies.
  }

  private moveLastToFront(from: Node<T>, to: Node<T>): void {
    if (from instanceof Leaf && to instanceof Leaf) {
      to.items.unshift(from.items.pop() as T);
      return;
    }
    const f = from as Inner<T>;
    const t = to as Inner<T>;
    const c = f.children.pop() as Node<T>;
    const n = f.counts.pop() as number;
    f.mins.pop();
    f.size -= n;
    // The old t.mins[0] may be a loose lower bound; it now separates from c, so make it exact.
    t.mins[0] = minOf(t.children[0]);
    t.children.unshift(c);
    t.counts.unshift(n);
    t.mins.unshift(minOf(c));
    t.size += n;
  }

  private moveFirstToEnd(from: Node<T>, to: Node<T>): void {
    if (from instanceof Leaf && to instanceof Leaf) {
      to.items.push(from.items.shift() as T);
      return;
    }
    const f = from as Inner<T>;
    const t = to as Inner<T>;
    const c = f.children.shift() as Node<T>;
    const n = f.counts.shift() as number;
    f.mins.shift();
    f.size -= n;
    f.mins[0] = minOf(f.children[0]);
    t.children.push(c);
    t.counts.push(n);
    t.mins.push(minOf(c));
    t.size += n;
  }

  /** Merges parent.children[i + 1] into parent.children[i]. */
  private merge(parent: Inner<T>, i: number): void {
    const a = parent.children[i];
    const b = parent.children[i + 1];
    if (a instanceof Leaf && b instanceof Leaf) {
      for (const it of b.items) a.items.push(it);
      a.next = b.next;
    } else {
      const x = a as Inner<T>;
      const y = b as Inner<T>;
      y.mins[0] = minOf(y.children[0]);
      for (let k = 0; k < y.children.length; k++) {
        x.children.push(y.children[k]);
        x.counts.push(y.counts[k]);
        x.mins.push(y.mins[k]);
      }
      x.size += y.size;
    }
    parent.children.splice(i + 1, 1);
    parent.counts.splice(i, 2, sizeOf(a));
    parent.mins.splice(i + 1, 1);
  }
}

/**
 * Splits n items into even runs of at most BULK, each within [MIN, MAX] (one run when n <= MAX):
 * for n > MAX, n / ceil(n / BULK) >= MIN.
 */
function chunk(n: number): Array<[number, number]> {
  const parts = n <= MAX ? 1 : Math.ceil(n / BULK);
  const out: Array<[number, number]> = [];
  const base = Math.floor(n / parts);
  let extra = n % parts;
  let a = 0;
  for (let p = 0; p < parts; p++) {
    const len = base + (extra > 0 ? 1 : 0);
    if (extra > 0) extra--;
    out.push([a, a + len]);
    a += len;
  }
  return out;
}
