/**
 * The signed-request string of docs/authentication.md: the canonical target and the worked
 * examples of that page (bash/openssl and Node) checked against the server's implementation.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { canonicalTarget, signRequest } from './authenticator';

const doc = readFileSync(join(__dirname, '../../docs/authentication.md'), 'utf8');
const SECRET = 'ldh_example_secret';
const TS = '1767225600';
const EXAMPLE = '5ed0cb90782b49e0d0777ee3a37637ff026406791f691bac1d3da489d044c333';

describe('canonical request target', () => {
  it.each([
    ['/v1/events', '', '/v1/events'],
    ['/v1/events', '&&', '/v1/events'],
    [
      '/v1/wallet/acme/transactions',
      'user_id=alice&limit=5',
      '/v1/wallet/acme/transactions?limit=5&user_id=alice',
    ],
    ['/v1/w', 'user_id=J%c3%bcrgen+M&limit=5&a&x=*', '/v1/w?a=&limit=5&user_id=J%C3%BCrgen%20M&x=%2A'],
    ['/v1/w', 'b=2&a=2&a=1', '/v1/w?a=1&a=2&b=2'],
    ['/v1/w', 'k=a%3Db%26c', '/v1/w?k=a%3Db%26c'],
    ['/v1/w', "q=~-._!'()", '/v1/w?q=~-._%21%27%28%29'],
  ])('%s ? %s -> %s', (path, query, expected) => {
    expect(canonicalTarget(path, query)).toBe(expected);
  });

  it('is the same for every order and spelling of the same parameters, and differs otherwise', () => {
    const a = canonicalTarget('/p', 'user_id=alice&limit=5');
    expect(canonicalTarget('/p', 'limit=%35&user_id=alice')).toBe(a);
    expect(canonicalTarget('/p', 'user_id=bob&limit=5')).not.toBe(a);
    expect(canonicalTarget('/p', 'user_id=alice&limit=5&offset=0')).not.toBe(a);
    expect(canonicalTarget('/p', 'user_id=alice')).not.toBe(a);
    // `=` and `&` inside a value cannot be confused with separators.
    expect(canonicalTarget('/p', 'a=1%26b%3D2')).not.toBe(canonicalTarget('/p', 'a=1&b=2'));
  });

  it('every documented example row holds', () => {
    const rows = [...doc.matchAll(/^ {2}\| `([^`]+)` \| `([^`]+)` \|$/gm)];
    expect(rows.length).toBeGreaterThanOrEqual(4);
    for (const [, target, expected] of rows) {
      const q = target!.indexOf('?');
      const got = q < 0 ? target : canonicalTarget(target!.slice(0, q), target!.slice(q + 1));
      expect([target, got]).toEqual([target, expected]);
    }
  });
});

describe('the worked example of docs/authentication.md', () => {
  it('gives the documented signature on the server', () => {
    expect(doc).toContain(EXAMPLE);
    expect(signRequest(SECRET, 'GET', '/v1/wallet/acme/transactions?user_id=alice&limit=5', TS, '')).toBe(
      EXAMPLE,
    );
  });

  it('gives the same signature with the documented Node code', () => {
    const js = /```js\n([\s\S]*?)```/.exec(doc)![1]!;
    const sign = new Function('require', `${js}\nreturn sign;`)(require) as (...a: string[]) => string;
    expect(sign(SECRET, 'GET', '/v1/wallet/acme/transactions?user_id=alice&limit=5', TS)).toBe(EXAMPLE);
    const target = '/v1/w?user_id=J%c3%bcrgen+M&limit=5&a&x=*';
    expect(sign(SECRET, 'get', target, TS, '{}')).toBe(signRequest(SECRET, 'GET', target, TS, '{}'));
  });

  it('gives the same signatures with the documented bash and openssl lines', () => {
    const sh = /```sh\n(HMAC_SECRET=[\s\S]*?)```/.exec(doc)![1]!;
    // The documented lines without the curl calls, printing each of the two signatures.
    const script = sh
      .split('\n')
      .filter((l) => !/^curl|^\s+-H/.test(l))
      .concat('echo "$sig"')
      .join('\n')
      .replace(/^(sig=.*)$/m, '$1\necho "$sig"');
    const out = execFileSync('bash', ['-c', script], { encoding: 'utf8' }).trim().split('\n');
    const body = /^body='(.*)'$/m.exec(sh)![1]!;
    expect(out).toEqual([EXAMPLE, signRequest(SECRET, 'POST', '/v1/events', TS, body)]);
  });
});
