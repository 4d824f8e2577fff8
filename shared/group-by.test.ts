import { groupBy } from './group-by';

describe('groupBy', () => {
  it('keeps the items of a group in their order and the groups in the order of their first item', () => {
    const items = ['b1', 'a1', 'b2', 'c1', 'a2', 'b3'];
    const groups = groupBy(items, (s) => s[0]!);
    expect([...groups.keys()]).toEqual(['b', 'a', 'c']);
    expect(groups.get('b')).toEqual(['b1', 'b2', 'b3']);
    expect(groups.get('a')).toEqual(['a1', 'a2']);
    expect(groups.get('c')).toEqual(['c1']);
  });

  it('returns an empty map for no items, and takes any iterable', () => {
    expect(groupBy([], String).size).toBe(0);
    const fromSet = groupBy(new Set([1, 2, 3, 4]), (n) => (n % 2 ? 'odd' : 'even'));
    expect(Object.fromEntries(fromSet)).toEqual({ odd: [1, 3], even: [2, 4] });
  });

  it('groups 200,000 items of one key in one pass (a copy per item would take minutes)', () => {
    const groups = groupBy(
      Array.from({ length: 200_000 }, (_, i) => i),
      () => 'one tenant and currency',
    );
    const group = groups.get('one tenant and currency')!;
    expect(group).toHaveLength(200_000);
    expect(group[199_999]).toBe(199_999);
  });
});
