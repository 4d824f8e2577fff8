/**
 * The one place where ClickHouse SQL text is built from values.
 *
 * ClickHouse 18.16 has no query parameters, so every literal is spliced into the text. Use the
 * `chsql` template tag; it renders each interpolated value by its type and nothing else:
 *
 *   string        a quoted literal: '...' with \\ for a backslash, \' for a quote and \xHH for
 *                 every control character (0x00-0x1F, 0x7F); anything else is kept as UTF-8.
 *                 A lone surrogate is rejected (it has no UTF-8 encoding; Node would silently
 *                 replace it with U+FFFD and the literal would no longer equal the input).
 *   number        safe integers as digits, other finite numbers in JavaScript's shortest
 *                 round-trip form; negatives in parentheses (so `a-${-1}` cannot become the
 *                 comment `a--1`). NaN, Infinity and subnormals are rejected (18.16's parser
 *                 fails on literals below 2.2250738585072014e-308).
 *   bigint        digits, within Int64/UInt64 range; negatives in parentheses.
 *   ChSql         a fragment made by this module (an identifier, or another chsql result).
 *   ChSql[]       fragments joined by ', '.
 *
 * Anything else (boolean, null, undefined, objects, arrays of values) throws: a caller must say
 * what a value is. Identifiers come only from `ident()`, which allow-lists them by regex.
 */

const TOKEN = Symbol('chsql');
/** Every fragment this module made: `instanceof` alone could be fooled by Object.create. */
const MADE = new WeakSet<object>();

/** A piece of SQL text produced by this module only (its constructor needs a private token). */
export class ChSql {
  readonly text: string;
  constructor(token: symbol, text: string) {
    if (token !== TOKEN) throw new Error('chsql: ChSql is made by chsql/ident/qualified only');
    this.text = text;
    MADE.add(this);
  }
  toString(): string {
    return this.text;
  }
}

function make(text: string): ChSql {
  return new ChSql(TOKEN, text);
}

function isMade(v: unknown): v is ChSql {
  return typeof v === 'object' && v !== null && MADE.has(v);
}

export type ChValue = string | number | bigint | ChSql | ChSql[];

const IDENT = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;
const LONE_SURROGATE = /\p{Cs}/u;
// eslint-disable-next-line no-control-regex
const SPECIAL = /[\\'\u0000-\u001f\u007f]/g;
const MIN_NORMAL = 2.2250738585072014e-308;
const INT64_MIN = -(2n ** 63n);
const UINT64_MAX = 2n ** 64n - 1n;

/** An allow-listed identifier (database, table or column name): [A-Za-z_][A-Za-z0-9_]{0,62}. */
export function ident(name: string): ChSql {
  if (typeof name !== 'string' || !IDENT.test(name))
    throw new Error(`invalid ClickHouse identifier: ${JSON.stringify(name)}`);
  return make(name);
}

/** `db.table`, both allow-listed. */
export function qualified(database: string, table: string): ChSql {
  return make(`${ident(database).text}.${ident(table).text}`);
}

/** A quoted ClickHouse string literal whose value is exactly `s`. */
export function strLiteral(s: string): string {
  if (typeof s !== 'string') throw new Error('strLiteral: not a string');
  if (LONE_SURROGATE.test(s))
    throw new Error('ClickHouse string literal: lone surrogate (not encodable as UTF-8)');
  return `'${s.replace(SPECIAL, escapeChar)}'`;
}

function escapeChar(c: string): string {
  if (c === '\\') return '\\\\';
  if (c === "'") return "\\'";
  return `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`;
}

/** A numeric literal. */
export function numLiteral(n: number | bigint): string {
  if (typeof n === 'bigint') {
    if (n < INT64_MIN || n > UINT64_MAX)
      throw new Error(`ClickHouse integer literal out of 64-bit range: ${n}`);
    return n < 0n ? `(${n})` : String(n);
  }
  if (typeof n !== 'number' || !Number.isFinite(n))
    throw new Error(`ClickHouse numeric literal must be finite: ${String(n)}`);
  if (n === 0) return '0';
  if (Math.abs(n) < MIN_NORMAL)
    throw new Error(`ClickHouse numeric literal is subnormal (18.16 cannot parse it): ${n}`);
  // Integers below 1e21 print as digits (exact for the double); others in the shortest form
  // that reads back as the same double (0.1, 1e+21, 1e-7).
  return n < 0 ? `(${String(n)})` : String(n);
}

function render(v: ChValue): string {
  if (isMade(v)) return v.text;
  if (typeof v === 'string') return strLiteral(v);
  if (typeof v === 'number' || typeof v === 'bigint') return numLiteral(v);
  if (Array.isArray(v)) {
    return v
      .map((x) => {
        if (!isMade(x)) throw new Error('chsql: an array must hold ChSql fragments only');
        return x.text;
      })
      .join(', ');
  }
  throw new Error(`chsql: cannot render a value of type ${v === null ? 'null' : typeof v}`);
}

/** Builds SQL text: `chsql\`SELECT * FROM ${qualified(db, t)} WHERE id = ${id}\``. */
export function chsql(strings: TemplateStringsArray, ...values: ChValue[]): ChSql {
  let out = strings[0];
  for (let i = 0; i < values.length; i++) out += render(values[i]) + strings[i + 1];
  return make(out);
}
