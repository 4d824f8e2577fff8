import { arrayLiteral } from './array-literal';

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
