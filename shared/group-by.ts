/**
 * Groups items by a string key, in one pass: each group keeps the items' order, and the groups
 * come in the order of their first item. (Copying a group's array at every item, as several
 * call sites once did, made grouping quadratic: a pipeline round's 760 credits of one tenant and
 * currency were copied 290,000 times, twice, and were the process's largest allocation.)
 */
export function groupBy<T>(items: Iterable<T>, key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const group = groups.get(k);
    if (group) group.push(item);
    else groups.set(k, [item]);
  }
  return groups;
}
