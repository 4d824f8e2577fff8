import { arrayLiteral, literalArrays } from './array-literal';

describe('arrayLiteral', () => {
  it('joins plain strings and numbers without escaping', () => {
    expect(arrayLiteral([])).toBe('{}');
    expect(arrayLiteral(['a', 'b c', ''])).toBe('{"a","b c",""}');
    expect(arrayLiteral([1, -2, 3.5, 9007199254740991])).toBe('{1,-2,3.5,9007199254740991}');
  });

  it('escapes quotes and backslashes, and writes null and undefined as NULL', () => {
    expect(arrayLiteral(['a"b', 'c\\d', '","'])).toBe('{"a\\"b","c\\\\d","\\",\\""}');
    expect(arrayLiteral(['NULL', null, undefined, 'x'])).toBe('{"NULL",NULL,NULL,"x"}');
  });

  it('leaves every other array to the driver', () => {
    expect(arrayLiteral([1, 'a'])).toBeUndefined();
    expect(arrayLiteral([1, null])).toBeUndefined();
    expect(arrayLiteral([true])).toBeUndefined();
    expect(arrayLiteral([new Date(0)])).toBeUndefined();
    expect(arrayLiteral([Buffer.from('a')])).toBeUndefined();
    expect(arrayLiteral([['a']])).toBeUndefined();
    expect(arrayLiteral([{ a: 1 }])).toBeUndefined();
  });
});

describe('literalArrays', () => {
  it('writes the arrays of literal array types as their literals, and leaves the rest', () => {
    const date = new Date(0);
    // text[], int4[], bool[] (not a literal type), an array of mixed elements, a scalar, a bytea.
    const types = [1009, 1007, 1000, 1009, 25, 17];
    expect(literalArrays([['a', 'b"c'], [1, 2], [true], [1, 'a'], 'x', Buffer.from('z')], types)).toEqual([
      '{"a","b\\"c"}',
      '{1,2}',
      [true],
      [1, 'a'],
      'x',
      Buffer.from('z'),
    ]);
    expect(literalArrays([[date]], [1185])).toEqual([[date]]);
  });
});
