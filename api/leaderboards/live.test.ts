/** The live socket's client messages go through the same input rule as every request body. */
import { parseMessage, type LiveOptions } from './live';

const opts = { maxPageSize: 100 } as LiveOptions;

describe('parseMessage', () => {
  test('accepts a configure and a request_page message', () => {
    expect(parseMessage('{"type":"configure","page":2,"window_key":"2026-W47"}', opts)).toEqual({
      type: 'configure',
      page: 2,
      window_key: '2026-W47',
    });
    expect(parseMessage('{"type":"request_page","page":1}', opts)).toEqual({ type: 'request_page', page: 1 });
  });

  test.each([
    [
      'a NUL in window_key',
      '{"type":"configure","window_key":"a\\u0000b"}',
      /message\.window_key must not contain NUL/,
    ],
    [
      'a lone surrogate in window_key',
      '{"type":"configure","window_key":"\\ud800"}',
      /message\.window_key must be well-formed/,
    ],
    ['a lone surrogate in the type', '{"type":"\\udc00"}', /type must be/],
    ['an unknown field', '{"type":"configure","x":1}', /x is not allowed/],
    ['a page of 0', '{"type":"request_page","page":0}', /page must be an integer/],
    ['not JSON', '{', /must be JSON/],
  ])('refuses %s', (_name, text, message) => {
    const r = parseMessage(text, opts);
    expect('error' in r && r.error).toMatch(message);
  });
});
