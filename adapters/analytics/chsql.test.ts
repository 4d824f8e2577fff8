/**
 * The literal-escaping helper: exact output for hostile input, and a round trip through the
 * real ClickHouse server (18.16 in the test stack): every literal must come back as its input.
 */
import { createClient, type ClickHouseClient } from '@clickhouse/client';
import { ChSql, chsql, ident, numLiteral, qualified, strLiteral, type ChValue } from './chsql';
import { stack } from '../../tests/support/stack';

const HOSTILE: string[] = [
  '',
  "'",
  "''",
  '\\',
  "\\'",
  "\\\\'",
  "'\\",
  'a\\',
  "'); DROP TABLE events; --",
  "x' OR '1'='1",
  '` ; SELECT 1 --',
  '/* comment */',
  '-- comment',
  '\n',
  '\r\n',
  'line1\nline2\ttab',
  '\u0000',
  'a\u0000b',
  '\u0001\u0007\u0008\u000b\u000c\u001b\u001f\u007f',
  '\\x41',
  '\\0',
  '\\N',
  '{x:String}',
  '?',
  '$1',
  'é',
  'e\u0301',
  '\u00a0\u2028\u2029\ufeff',
  '\uFFFD',
  '\u{1F600}\u{1F468}\u200D\u{1F469}',
  '\u{10FFFF}',
  '日本語',
  'مرحبا',
  "\\''\\'\\\\''",
  'FORMAT JSONEachRow',
  '\t\v\f',
];

describe('chsql: literals', () => {
  it('escapes backslash and quote, and control characters as \\xHH', () => {
    expect(strLiteral('')).toBe("''");
    expect(strLiteral("'")).toBe("'\\''");
    expect(strLiteral('\\')).toBe("'\\\\'");
    expect(strLiteral("\\'")).toBe("'\\\\\\''");
    expect(strLiteral("'); DROP TABLE t; --")).toBe("'\\'); DROP TABLE t; --'");
    expect(strLiteral('a\nb\r\t')).toBe("'a\\x0ab\\x0d\\x09'");
    expect(strLiteral('\u0000')).toBe("'\\x00'");
    expect(strLiteral('\u007f\u001f')).toBe("'\\x7f\\x1f'");
    expect(strLiteral('é\u{1F600}')).toBe("'é\u{1F600}'");
  });

  it('never leaves an unescaped quote or a bare backslash inside a literal', () => {
    for (const s of HOSTILE) {
      const lit = strLiteral(s);
      const body = lit.slice(1, -1);
      // Walk the body as ClickHouse's lexer does: a backslash consumes the next character.
      for (let i = 0; i < body.length; i++) {
        if (body[i] === '\\') {
          expect(['\\', "'", 'x']).toContain(body[i + 1]);
          i++;
        } else {
          expect(body[i]).not.toBe("'");
          expect(body.charCodeAt(i) < 0x20 || body.charCodeAt(i) === 0x7f).toBe(false);
        }
      }
    }
  });

  it('rejects lone surrogates', () => {
    expect(() => strLiteral('\uD800')).toThrow(/lone surrogate/);
    expect(() => strLiteral('a\uDC00b')).toThrow(/lone surrogate/);
    expect(() => chsql`SELECT ${'\uDFFF'}`).toThrow(/lone surrogate/);
  });

  it('renders numbers: finite only, negatives parenthesised, no subnormals', () => {
    expect(numLiteral(0)).toBe('0');
    expect(numLiteral(-0)).toBe('0');
    expect(numLiteral(42)).toBe('42');
    expect(numLiteral(-42)).toBe('(-42)');
    expect(numLiteral(Number.MAX_SAFE_INTEGER)).toBe('9007199254740991');
    expect(numLiteral(0.1)).toBe('0.1');
    expect(numLiteral(1e21)).toBe('1e+21');
    expect(numLiteral(-1.5e-7)).toBe('(-1.5e-7)');
    expect(numLiteral(2n ** 63n)).toBe('9223372036854775808');
    expect(numLiteral(-(2n ** 63n))).toBe('(-9223372036854775808)');
    expect(() => numLiteral(2n ** 64n)).toThrow(/64-bit/);
    expect(() => numLiteral(NaN)).toThrow(/finite/);
    expect(() => numLiteral(Infinity)).toThrow(/finite/);
    expect(() => numLiteral(-Infinity)).toThrow(/finite/);
    expect(() => numLiteral(5e-324)).toThrow(/subnormal/);
    expect(() => numLiteral('1' as unknown as number)).toThrow(/finite/);
    expect(chsql`SELECT 1-${-1}`.text).toBe('SELECT 1-(-1)');
  });

  it('allow-lists identifiers', () => {
    expect(ident('events').text).toBe('events');
    expect(ident('_t1').text).toBe('_t1');
    expect(qualified('ludus_test_1', 'events').text).toBe('ludus_test_1.events');
    for (const bad of [
      '',
      '1a',
      'a b',
      'a;b',
      'a-b',
      'a.b',
      '`x`',
      '"x"',
      "x'",
      'é',
      'a\u0000',
      'x'.repeat(64),
      'events; DROP TABLE x',
    ]) {
      expect(() => ident(bad)).toThrow(/invalid ClickHouse identifier/);
    }
    expect(ident('x'.repeat(63)).text).toHaveLength(63);
  });

  it('renders only known value types; ChSql cannot be forged from a plain object', () => {
    const t = ident('t');
    expect(chsql`SELECT ${[ident('a'), ident('b')]} FROM ${t} WHERE x = ${'v'} AND y > ${3}`.text).toBe(
      "SELECT a, b FROM t WHERE x = 'v' AND y > 3",
    );
    expect(chsql`${chsql`a = ${'x'}`} AND b`.text).toBe("a = 'x' AND b");
    const forged = Object.create(ChSql.prototype, { text: { value: 'DROP TABLE x' } }) as ChSql;
    expect(forged).toBeInstanceOf(ChSql);
    const bad: unknown[] = [
      null,
      undefined,
      true,
      { text: 'DROP TABLE x' },
      forged,
      ['a'],
      [forged],
      () => 'x',
      Symbol('s'),
    ];
    for (const v of bad) expect(() => chsql`SELECT ${v as ChValue}`).toThrow(/chsql/);
    expect(() => new ChSql(Symbol('chsql'), 'DROP TABLE x')).toThrow(/chsql/);
  });
});

describe('chsql: round trip through the real ClickHouse', () => {
  let ch: ClickHouseClient;
  beforeAll(() => {
    ch = createClient({ url: stack.clickhouseUrl, request_timeout: 20_000 });
  });
  afterAll(() => ch.close());

  async function selectRow(q: ChSql): Promise<Record<string, unknown>> {
    const rs = await ch.query({ query: q.text, format: 'JSONEachRow' });
    const rows = await rs.json<Record<string, unknown>>();
    expect(rows).toHaveLength(1);
    return rows[0];
  }

  it('reads every hostile string back exactly (value and UTF-8 byte length)', async () => {
    const cols = HOSTILE.map((s, i) => chsql`${s} AS ${ident(`c${i}`)}, length(${s}) AS ${ident(`n${i}`)}`);
    const row = await selectRow(chsql`SELECT ${cols}`);
    HOSTILE.forEach((s, i) => {
      expect(row[`c${i}`]).toBe(s);
      expect(Number(row[`n${i}`])).toBe(Buffer.byteLength(s, 'utf8'));
    });
  });

  it('reads random strings over a hostile alphabet back exactly', async () => {
    const alphabet = [
      "'",
      '\\',
      '"',
      '\n',
      '\u0000',
      'x',
      ';',
      '-',
      '/',
      '*',
      'é',
      '\u{1F600}',
      '\u007f',
      '`',
      '{',
      '}',
      ' ',
    ];
    let seed = 7;
    const rand = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    const samples = Array.from({ length: 200 }, () =>
      Array.from(
        { length: Math.floor(rand() * 12) },
        () => alphabet[Math.floor(rand() * alphabet.length)],
      ).join(''),
    );
    const row = await selectRow(chsql`SELECT ${samples.map((s, i) => chsql`${s} AS ${ident(`s${i}`)}`)}`);
    samples.forEach((s, i) => expect(row[`s${i}`]).toBe(s));
  });

  it('reads numbers back exactly', async () => {
    const nums = [
      0,
      1,
      -1,
      42,
      -42,
      2 ** 31,
      -(2 ** 31),
      Number.MAX_SAFE_INTEGER,
      -Number.MAX_SAFE_INTEGER,
      0.1,
      -2.5,
      1 / 3,
      1e21,
      1e-7,
      1.7976931348623157e308,
      2.2250738585072014e-308,
    ];
    const row = await selectRow(
      chsql`SELECT ${nums.map((n, i) => chsql`${n} AS ${ident(`v${i}`)}`)}, 1-${-1} AS two`,
    );
    nums.forEach((n, i) => expect(Number(row[`v${i}`])).toBe(n));
    expect(Number(row.two)).toBe(2);
  });
});
