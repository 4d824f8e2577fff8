import { OSTree } from './ostree';

/** A small deterministic PRNG (mulberry32), so a failure can be replayed from its seed. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const num = (a: number, b: number) => a - b;

/** Throws with context instead of calling expect() in hot loops (expect is slow there). */
function must(cond: boolean, what: string): void {
  if (!cond) throw new Error(what);
}

function sameArray(a: number[], b: number[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** Index of x in a sorted array, or where it would go. */
function bisect(arr: number[], x: number): number {
  let lo = 0;
  let hi = arr.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (arr[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

describe('OSTree', () => {
  it('is empty at first', () => {
    const t = new OSTree<number>(num);
    expect(t.size).toBe(0);
    expect(t.at(0)).toBeUndefined();
    expect(t.rank(1)).toBe(-1);
    expect(t.slice(0, 10)).toEqual([]);
    expect(t.delete(1)).toBe(false);
    expect([...t]).toEqual([]);
    expect(t.check()).toBe(0);
  });

  it('rejects an equal item and leaves the tree unchanged', () => {
    const t = new OSTree<number>(num);
    for (let i = 0; i < 500; i++) t.insert(i * 2);
    expect(() => t.insert(0)).toThrow(/equal item/);
    expect(() => t.insert(998)).toThrow(/equal item/);
    expect(t.size).toBe(500);
    t.check();
    expect([...t]).toEqual(Array.from({ length: 500 }, (_, i) => i * 2));
  });

  it('matches a sorted array under random inserts and deletes', () => {
    for (const seed of [1, 2, 3]) {
      const r = rng(seed);
      const t = new OSTree<number>(num);
      const ref: number[] = [];
      const present = new Set<number>();
      for (let step = 0; step < 30_000; step++) {
        // Grow for the first half, then shrink towards empty, so merges and borrows happen.
        const grow = step < 15_000 ? r() < 0.7 : r() < 0.3;
        if (grow || ref.length === 0) {
          const x = Math.floor(r() * 1e6);
          if (present.has(x)) continue;
          present.add(x);
          t.insert(x);
          ref.splice(bisect(ref, x), 0, x);
        } else {
          const x = ref[Math.floor(r() * ref.length)];
          must(t.delete(x), `seed ${seed} step ${step}: delete ${x}`);
          must(!t.delete(x), `seed ${seed} step ${step}: second delete ${x}`);
          present.delete(x);
          ref.splice(bisect(ref, x), 1);
        }
        if (step % 997 === 0) {
          t.check();
          must(t.size === ref.length, `seed ${seed} step ${step}: size`);
          must(sameArray([...t], ref), `seed ${seed} step ${step}: content`);
        }
        if (step % 7 === 0 && ref.length > 0) {
          const i = Math.floor(r() * ref.length);
          must(t.at(i) === ref[i], `seed ${seed} step ${step}: at(${i})`);
          must(t.rank(ref[i]) === i, `seed ${seed} step ${step}: rank(${ref[i]})`);
          must(t.rank(ref[i] + 0.5) === -1, `seed ${seed} step ${step}: rank of absent`);
          const n = Math.floor(r() * 150);
          must(sameArray(t.slice(i, n), ref.slice(i, i + n)), `seed ${seed} step ${step}: slice(${i}, ${n})`);
        }
      }
      t.check();
      expect([...t]).toEqual(ref);
      for (let i = 0; i < ref.length; i++) must(t.rank(ref[i]) === i, `seed ${seed}: final rank ${i}`);
      // Empty it completely, checking the structure on the way down.
      const order = [...ref].sort(() => r() - 0.5);
      for (let k = 0; k < order.length; k++) {
        must(t.delete(order[k]), `seed ${seed}: emptying ${k}`);
        if (k % 500 === 0) t.check();
      }
      expect(t.size).toBe(0);
      expect(t.check()).toBe(0);
    }
  });

  it('deletes in ascending and descending runs (leftmost and rightmost paths)', () => {
    const t = new OSTree<number>(num);
    for (let i = 0; i < 20_000; i++) t.insert(i);
    for (let i = 0; i < 10_000; i++) must(t.delete(i), `delete ${i}`);
    t.check();
    for (let i = 19_999; i >= 15_000; i--) must(t.delete(i), `delete ${i}`);
    t.check();
    expect(t.size).toBe(5_000);
    expect(t.at(0)).toBe(10_000);
    expect(t.at(4_999)).toBe(14_999);
    expect(t.rank(12_345)).toBe(2_345);
    // Re-insert below the old minimum: separators must still route correctly.
    for (let i = 9_999; i >= 0; i -= 3) t.insert(i);
    t.check();
    expect(t.at(0)).toBe(0);
    expect(t.rank(10_000)).toBe(3_334);
  });

  it('bulk loads from sorted input of every small size and large ones', () => {
    for (const n of [0, 1, 2, 31, 32, 33, 63, 64, 65, 95, 96, 97, 128, 1000, 4097, 100_000]) {
      const items = Array.from({ length: n }, (_, i) => i * 3);
      const t = OSTree.fromSorted(num, items);
      t.check();
      expect(t.size).toBe(n);
      expect([...t]).toEqual(items);
      if (n > 0) {
        expect(t.at(n - 1)).toBe(items[n - 1]);
        expect(t.rank(items[Math.floor(n / 2)])).toBe(Math.floor(n / 2));
      }
      // Keeps working after bulk load.
      t.insert(1);
      t.insert(n * 3 + 2);
      if (n > 0) t.delete(0);
      t.check();
    }
    expect(() => OSTree.fromSorted(num, [1, 1])).toThrow(/sorted and distinct/);
    expect(() => OSTree.fromSorted(num, [2, 1])).toThrow(/sorted and distinct/);
  });

  it('slices across leaves and clamps at the end', () => {
    const t = new OSTree<number>(num);
    for (let i = 999; i >= 0; i--) t.insert(i);
    expect(t.slice(60, 10)).toEqual([60, 61, 62, 63, 64, 65, 66, 67, 68, 69]);
    expect(t.slice(995, 10)).toEqual([995, 996, 997, 998, 999]);
    expect(t.slice(1000, 10)).toEqual([]);
    expect(t.slice(0, 0)).toEqual([]);
    expect(t.slice(0, 2000)).toHaveLength(1000);
    expect(t.at(-1)).toBeUndefined();
    expect(t.at(1.5)).toBeUndefined();
  });
});
