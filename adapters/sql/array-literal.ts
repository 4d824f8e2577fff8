/**
 * A fast text encoding of the array parameters the services pass most: arrays of strings (with or
 * without NULLs) and arrays of numbers, as Postgres array literals (`{"a","b"}`, `{1,2}`).
 *
 * The pipeline passes each batch's columns as arrays (`unnest($1::text[], ...)`), hundreds of
 * thousands of elements per second. The drivers' own encoders (node-postgres's `arrayString`,
 * PGlite's array serializer) quote and escape one element at a time with two regular-expression
 * replaces each, numbers included; here each string is only searched, and when none needs
 * escaping (the usual batch: ids, keys, JSON-free text) the elements are joined natively. The literal is the one the drivers
 * write: every string is quoted, `"` and `\` are escaped with `\`, null is NULL, a number is its
 * `String`. Any other array (nested, dates, buffers, objects, booleans) returns undefined: the
 * driver encodes it as before.
 */

const ESCAPED = /["\\]/;
const BACKSLASH = /\\/g;
const QUOTE = /"/g;

export function arrayLiteral(a: readonly unknown[]): string | undefined {
  const n = a.length;
  if (n === 0) return '{}';
  let numbers = 0;
  let plain = true;
  for (let i = 0; i < n; i++) {
    const v = a[i];
    if (typeof v === 'string') {
      if (plain && ESCAPED.test(v)) plain = false;
    } else if (typeof v === 'number') numbers++;
    else if (v === null || v === undefined) plain = false;
    else return undefined;
  }
  if (numbers === n) return `{${a.join(',')}}`;
  if (numbers > 0) return undefined;
  if (plain) return `{"${a.join('","')}"}`;
  // Two replaces with fixed texts, as the drivers do: faster than one with a pattern ($&).
  let out = '{';
  for (let i = 0; i < n; i++) {
    const v = a[i] as string | null | undefined;
    if (i > 0) out += ',';
    out += v === null || v === undefined ? 'NULL' : `"${v.replace(BACKSLASH, '\\\\').replace(QUOTE, '\\"')}"`;
  }
  return `${out}}`;
}
