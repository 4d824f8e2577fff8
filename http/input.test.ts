import { inputProblem, MAX_NESTING, paramsProblem } from './input';
import { validateOrThrow } from './validate';

function nested(depth: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < depth; i++) v = { a: v };
  return v;
}

describe('the input rule', () => {
  it('accepts ordinary values, emoji and every non-NUL control character', () => {
    expect(inputProblem({ a: ['x', 1, null, true, { b: '😀\u0001\uFFFF' }] }, 'body')).toBeNull();
  });

  it.each([
    ['NUL in a string', { name: 'a\u0000b' }, 'body.name must not contain NUL characters'],
    ['a lone high surrogate', { user_id: '\ud800' }, 'body.user_id must be well-formed Unicode'],
    ['a lone low surrogate in an array', { ids: ['ok', 'x\udc00'] }, 'body.ids[1] must be well-formed'],
    ['NUL in a key', { attrs: { 'a\u0000': 1 } }, 'body.attrs["a\\u0000"]: the key must not contain NUL'],
    ['a lone surrogate in a key', { attrs: { '\ud800': 1 } }, 'body.attrs["\\ud800"]: the key must be'],
  ])('refuses %s, naming the field', (_what, value, message) => {
    expect(inputProblem(value, 'body')).toContain(message);
  });

  it(`allows ${MAX_NESTING} levels of nesting and refuses one more, naming where`, () => {
    expect(inputProblem(nested(MAX_NESTING), 'body')).toBeNull();
    expect(inputProblem(nested(MAX_NESTING + 1), 'body')).toBe(
      `body${'.a'.repeat(MAX_NESTING)}: nesting deeper than ${MAX_NESTING} levels`,
    );
  });

  it('walks 100,000 levels of nesting without recursing (stops at the limit)', () => {
    const deep = JSON.parse('['.repeat(100_000) + ']'.repeat(100_000)) as unknown;
    expect(inputProblem({ attrs: { a: deep } }, 'body')).toMatch(
      /^body\.attrs\.a(\[0\])+: nesting deeper than 32 levels$/,
    );
  });

  it('finds a problem wherever one is, and only then (random values against a plain recursive check)', () => {
    let seed = 7;
    const rand = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const strings = ['ok', '', 'é😀', 'a\u0000b', '\ud800', 'x\udc00y', 'k-1'];
    const make = (depth: number): unknown => {
      const kind = rand(depth > 36 ? 3 : 6);
      if (kind === 0) return strings[rand(strings.length)];
      if (kind === 1) return rand(100);
      if (kind === 2) return null;
      if (kind === 3) return Array.from({ length: rand(4) }, () => make(depth + 1));
      const o: Record<string, unknown> = {};
      for (let i = rand(4); i > 0; i--) o[strings[rand(strings.length)]! + i] = make(depth + 1);
      return o;
    };
    const bad = (v: unknown, depth: number): boolean => {
      if (typeof v === 'string') return v.includes('\u0000') || /\p{Cs}/u.test(v);
      if (typeof v !== 'object' || v === null) return false;
      if (depth > MAX_NESTING) return true;
      const entries = Array.isArray(v) ? v.map((x) => ['', x] as const) : Object.entries(v);
      return entries.some(([k, x]) => bad(k, 0) || bad(x, depth + 1));
    };
    // A quarter of the values sit 28 to 33 levels deep, around the nesting limit.
    const wrap = (v: unknown, levels: number): unknown =>
      levels === 0 ? v : rand(2) ? [wrap(v, levels - 1)] : { w: wrap(v, levels - 1) };
    const outcomes = { ok: 0, nesting: 0, other: 0 };
    for (let i = 0; i < 3000; i++) {
      const v = rand(4) === 0 ? wrap(make(0), 28 + rand(6)) : make(0);
      const problem = inputProblem(v, 'body');
      expect(problem !== null).toBe(bad(v, 1));
      outcomes[problem === null ? 'ok' : problem.includes('nesting') ? 'nesting' : 'other']++;
    }
    expect(outcomes.ok).toBeGreaterThan(300);
    expect(outcomes.nesting).toBeGreaterThan(50);
    expect(outcomes.other).toBeGreaterThan(300);
  });

  it('checks path parameters: NUL, lone surrogates and more than 256 UTF-8 bytes', () => {
    expect(paramsProblem({ user_id: 'alice', tenant_id: 't' })).toBeNull();
    expect(paramsProblem({ user_id: 'a\u0000' })).toBe('path.user_id must not contain NUL characters');
    expect(paramsProblem({ user_id: '界'.repeat(86) })).toBe('path.user_id must be at most 256 UTF-8 bytes');
    expect(paramsProblem({ user_id: '界'.repeat(85) })).toBeNull();
  });
});

describe('identifier byte limits in the schemas (x-max-bytes)', () => {
  const grant = (user_id: string) => ({ user_id, currency_id: 'coins', amount: 1 });

  it('refuses a user id of 200 CJK characters (600 bytes) and accepts 85 (255 bytes)', () => {
    expect(() => validateOrThrow('wallet.grant', grant('界'.repeat(200)), 'body')).toThrow(
      'body.user_id must be at most 256 UTF-8 bytes',
    );
    expect(() => validateOrThrow('wallet.grant', grant('界'.repeat(85)), 'body')).not.toThrow();
    expect(() => validateOrThrow('wallet.grant', grant('a'.repeat(200)), 'body')).not.toThrow();
  });

  it('applies to query strings too', () => {
    expect(() => validateOrThrow('wallet.user.query', { user_id: '界'.repeat(100) }, 'query')).toThrow(
      'query.user_id must be at most 256 UTF-8 bytes',
    );
  });
});
