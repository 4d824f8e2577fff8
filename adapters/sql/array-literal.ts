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

/**
 * Array parameter types whose elements PGlite serialises as their text (strings as they are,
 * numbers by `toString`): for these an array of strings or numbers is written by `arrayLiteral`
 * (the same literal, faster), and a string is taken as the array's literal, as Postgres and the pg
 * driver take it. text, varchar, bpchar, int2, int4, int8, float4, float8, numeric, json, jsonb.
 */
export const LITERAL_ARRAYS: ReadonlySet<number> = new Set([
  1009, 1015, 1014, 1005, 1007, 1016, 1021, 1022, 1231, 199, 3807,
]);

/**
 * `params` with every array of strings or numbers whose parameter type (`types`, the statement's
 * parameter type OIDs) is in LITERAL_ARRAYS written as its literal; the other parameters as they
 * are. The embedded store's main thread sends these: one string crosses to the database thread
 * where an array of strings was cloned element by element (docs/performance.md, twenty-fifth pass).
 */
export function literalArrays(params: readonly unknown[], types: readonly number[]): unknown[] {
  return params.map((v, i) => literalFor(v, types[i]!) ?? v);
}

/** `v`'s literal when `type` is in LITERAL_ARRAYS and `v` an array of strings or numbers; else undefined. */
export function literalFor(v: unknown, type: number): string | undefined {
  return Array.isArray(v) && LITERAL_ARRAYS.has(type) ? arrayLiteral(v) : undefined;
}
