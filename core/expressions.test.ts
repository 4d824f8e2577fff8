import fc from 'fast-check';
import {
  compileCondition,
  compileExpression,
  compileFieldReader,
  CONDITION_LIMITS,
  Condition,
  EventView,
  EXPRESSION_LIMITS,
  matchConditions,
  readField,
  validateConditions,
  validateFieldPath,
} from './expressions';

const ev = (attrs: Record<string, unknown> = {}, more: Partial<EventView> = {}): EventView => ({
  type: 'match_finished',
  user_id: 'u1',
  event_id: 'e1',
  occurred_at: 1_795_000_000_000,
  attrs,
  subject: { type: 'match', id: 'm-7', stats: { rounds: 12 } },
  actor_metadata: { tier: 'gold', age: 31 },
  ...more,
});

/** Compiles or fails the test with the compiler's message. */
function compile(src: string) {
  const r = compileExpression(src);
  if (!r.ok) throw new Error(`did not compile: ${src}: ${r.error}`);
  return r;
}
const evalSrc = (src: string, e: EventView = ev()) => compile(src).fn(e);
const errorOf = (src: string): string => {
  const r = compileExpression(src);
  if (r.ok) throw new Error(`compiled unexpectedly: ${src}`);
  return r.error;
};

describe('readField', () => {
  const e = ev(
    { score: 10, stats: { kills: 3, nested: { deep: 'x' } }, items: [5, 6], flag: false, nothing: null },
    { subject: { type: 'match', id: 'm-7' }, actor_metadata: { tier: 'gold' } },
  );

  it.each<[string, unknown]>([
    ['type', 'match_finished'],
    ['user_id', 'u1'],
    ['actor.user_id', 'u1'],
    ['event_id', 'e1'],
    ['occurred_at', 1_795_000_000_000],
    ['attrs.score', 10],
    ['attrs.stats.kills', 3],
    ['attrs.stats.nested.deep', 'x'],
    ['attrs.items.1', 6],
    ['attrs.flag', false],
    ['attrs.nothing', null],
    ['subject.id', 'm-7'],
    ['subject.type', 'match'],
    ['actor.metadata.tier', 'gold'],
  ])('%s', (path, want) => {
    expect(readField(e, path)).toEqual(want);
  });

  it.each([
    'attrs.missing',
    'attrs.score.x', // through a number
    'attrs.stats.nested.deep.length', // through a string
    'attrs.items.length', // own but not enumerable
    'attrs.items.2',
    'attrs.toString', // inherited
    'attrs.hasOwnProperty',
    'attrs.__proto__',
    'attrs.constructor',
    'attrs.stats.constructor.prototype',
    'subject.missing',
    'actor.metadata.missing',
    'actor.metadata',
    'actor',
    'attrs',
    'subject',
    'type.length',
    'process',
    'this',
    'globalThis.process',
    '',
    'attrs..score',
    '.attrs',
    'attrs.',
  ])('%s is undefined', (path) => {
    expect(readField(e, path)).toBeUndefined();
  });

  it('does not run getters, see own keys named __proto__, or fail on null objects', () => {
    let called = false;
    const attrs: Record<string, unknown> = {};
    Object.defineProperty(attrs, 'trap', {
      enumerable: true,
      get() {
        called = true;
        return 1;
      },
    });
    expect(readField(ev(attrs), 'attrs.trap')).toBeUndefined();
    expect(called).toBe(false);
    const parsed = JSON.parse('{"__proto__": {"x": 1}, "ok": 2}') as Record<string, unknown>;
    expect(readField(ev(parsed), 'attrs.__proto__.x')).toBeUndefined();
    expect(readField(ev(parsed), 'attrs.ok')).toBe(2);
    expect(readField(ev({}, { subject: null, actor_metadata: null }), 'subject.id')).toBeUndefined();
    expect(readField(ev({}, { subject: undefined }), 'subject.id')).toBeUndefined();
    expect(readField({ attrs: null } as unknown as EventView, 'attrs.x')).toBeUndefined();
    const bare = Object.create(null) as Record<string, unknown>;
    bare.k = 4;
    expect(readField(ev(bare), 'attrs.k')).toBe(4);
    expect(readField(ev(), 42 as unknown as string)).toBeUndefined();
  });
});

describe('validateFieldPath', () => {
  it.each([
    'attrs.a',
    'attrs.a-b c',
    'attrs.0',
    'subject.id',
    'actor.metadata.x.y',
    'actor.user_id',
    'type',
    'occurred_at',
  ])('accepts %s', (p) => expect(validateFieldPath(p)).toBeNull());
  it.each<[unknown, string]>([
    ['attrs.__proto__', 'field "attrs.__proto__" is not allowed'],
    ['attrs.constructor', 'field "attrs.constructor" is not allowed'],
    ['subject.prototype.x', 'field "subject.prototype.x" is not allowed'],
    ['attrs', 'field "attrs" needs a sub-field, like attrs.x'],
    ['type.x', 'field "type.x": type has no sub-fields'],
    ['actor.metadata', 'unknown field "actor.metadata"'],
    ['actor.id', 'unknown field "actor.id"'],
    ['score', 'unknown field "score"'],
    ['attrs..x', 'field "attrs..x" has an empty segment'],
    ['', 'field path is empty'],
    ['attrs.' + 'x'.repeat(300), 'is too long'],
    [5, 'field path must be a string'],
  ])('refuses %p', (p, msg) => {
    expect(validateFieldPath(p)).toContain(msg);
  });
});

describe('compileExpression: evaluation', () => {
  it.each<[string, number]>([
    ['42', 42],
    ['3.25', 3.25],
    ['1e3', 1000],
    ['2.5E-1', 0.25],
    ['1e+2', 100],
    ['2 + 3 * 4', 14],
    ['(2 + 3) * 4', 20],
    ['2 * 3 + 4', 10],
    ['10 - 4 - 3', 3], // left-associative
    ['10 - (4 - 3)', 9],
    ['64 / 4 / 2', 8], // left-associative
    ['64 / (4 / 2)', 32],
    ['2 * 3 / 4', 1.5],
    ['7 - 2 * 3 + 8 / 4', 3],
    ['-2 * 3', -6],
    ['-2 + 3', 1],
    ['2 * -3', -6],
    ['2 - -3', 5],
    ['--3', 3],
    ['- - -3', -3],
    ['-(2 + 3)', -5],
    ['-(-(4))', 4],
    ['min(3, 1, 2)', 1],
    ['max(3, 1, 2)', 3],
    ['min(5)', 5],
    ['max(-1, -2, -3, -4, -5, -6)', -1],
    ['abs(-4)', 4],
    ['abs(4)', 4],
    ['max(0, min(10, 3 * 5)) - abs(-2)', 8],
    ['min(max(1, 2), max(3, 4)) * 10', 20],
    [' \t\n( 1 +\r\n 2 ) ', 3],
    ['0 * -1', 0],
  ])('%s = %p', (src, want) => {
    expect(evalSrc(src)).toBe(want);
  });

  it('normalizes -0 to 0', () => {
    expect(Object.is(evalSrc('0 * -1'), 0)).toBe(true);
    expect(Object.is(evalSrc('-0'), 0)).toBe(true);
    expect(Object.is(evalSrc('min(0, -0)'), 0)).toBe(true);
  });

  it('reads fields and lists each once, in order', () => {
    const r = compile(
      'attrs.score * 10 + attrs.stats.kills * 5 - attrs.score / max(1, subject.stats.rounds)',
    );
    expect(r.fields).toEqual(['attrs.score', 'attrs.stats.kills', 'subject.stats.rounds']);
    expect(r.fn(ev({ score: 24, stats: { kills: 3 } }))).toBe(240 + 15 - 2);
    expect(compile('actor.metadata.age + 1').fn(ev())).toBe(32);
    expect(compile('occurred_at / 1000').fn(ev())).toBe(1_795_000_000);
    expect(compile('attrs.items.0 + attrs.items.1').fn(ev({ items: [2, 3] }))).toBe(5);
    expect(compile('42').fields).toEqual([]);
  });

  it.each<[string, Record<string, unknown>]>([
    ['attrs.score', {}],
    ['attrs.score', { score: '5' }], // no coercion
    ['attrs.score', { score: true }],
    ['attrs.score', { score: null }],
    ['attrs.score', { score: { value: 5 } }],
    ['attrs.score', { score: [5] }],
    ['attrs.score', { score: NaN }],
    ['attrs.score', { score: Infinity }],
    ['attrs.a.b', { a: 5 }],
    ['attrs.toString', {}],
    ['1 + attrs.missing * 0', {}], // null propagates even through * 0
    ['min(1, attrs.missing)', {}],
    ['max(attrs.missing, 1)', {}],
    ['abs(attrs.missing)', {}],
    ['-attrs.missing', {}],
    ['type', {}], // a string field
    ['user_id + 1', {}],
  ])('%s with %j is null', (src, attrs) => {
    expect(evalSrc(src, ev(attrs))).toBeNull();
  });

  it('division by zero, overflow and non-finite intermediates are null', () => {
    expect(evalSrc('1 / 0')).toBeNull();
    expect(evalSrc('0 / 0')).toBeNull();
    expect(evalSrc('1 / -0')).toBeNull();
    expect(evalSrc('1 / (2 - 2)')).toBeNull();
    expect(evalSrc('attrs.a / attrs.b', ev({ a: 1, b: 0 }))).toBeNull();
    expect(evalSrc('1e308 * 10')).toBeNull();
    expect(evalSrc('1e308 + 1e308')).toBeNull();
    expect(evalSrc('-1e308 - 1e308')).toBeNull();
    expect(evalSrc('1e308 * 10 / 10')).toBeNull(); // the intermediate overflowed
    expect(evalSrc('1 / 1e-320')).toBeNull();
    expect(evalSrc('attrs.a * attrs.a', ev({ a: 1e200 }))).toBeNull();
  });

  it('handles huge and tiny values exactly', () => {
    expect(evalSrc('1e308')).toBe(1e308);
    expect(evalSrc('5e-324')).toBe(5e-324);
    expect(evalSrc('9007199254740993')).toBe(9007199254740992);
    expect(evalSrc('attrs.a - 1', ev({ a: Number.MAX_VALUE }))).toBe(Number.MAX_VALUE - 1);
    expect(evalSrc('0.1 + 0.2')).toBe(0.1 + 0.2);
    expect(evalSrc('max(attrs.a, 1)', ev({ a: -Number.MAX_VALUE }))).toBe(1);
  });

  it('a compiled expression is reusable and independent of other events', () => {
    const { fn } = compile('attrs.x * 2');
    expect(fn(ev({ x: 1 }))).toBe(2);
    expect(fn(ev({}))).toBeNull();
    expect(fn(ev({ x: 21 }))).toBe(42);
  });
});

describe('compileExpression: errors', () => {
  it.each<[string, string]>([
    ['', 'expression is empty'],
    ['   ', 'expression is empty'],
    ['1 +', 'unexpected end of expression at position 3'],
    ['(1', 'unexpected end of expression at position 2, expected ")"'],
    ['(1 + 2))', 'unexpected ")" at position 7'],
    [')', 'unexpected ")" at position 0'],
    ['1 2', 'unexpected "2" at position 2'],
    ['1 attrs.a', 'unexpected "attrs.a" at position 2'],
    ['2 ** 3', 'unexpected "*" at position 3, expected a number, a field, a function or "("'],
    ['+1', 'unexpected "+" at position 0'],
    ['min(1, )', 'unexpected ")" at position 7'],
    ['min(1 2)', 'unexpected "2" at position 6, expected "," or ")"'],
    ['min()', 'min() at position 0 needs at least one argument'],
    ['abs(1, 2)', 'abs() at position 0 takes exactly one argument, got 2'],
    ['abs', 'unknown field "abs"'],
    ['eval(1)', 'unknown function "eval" at position 0'],
    ['Math.max(1, 2)', 'unknown function "Math.max" at position 0'],
    ['process.exit()', 'unknown function "process.exit" at position 0'],
    ['require("fs")', 'unexpected character "\\"" at position 8 (strings are not supported)'],
    ['require(1)', 'unknown function "require" at position 0'],
    ['MIN(1)', 'unknown function "MIN" at position 0'],
    ['toString(1)', 'unknown function "toString" at position 0'],
    ['hasOwnProperty(1)', 'unknown function "hasOwnProperty" at position 0'],
    [
      'constructor.constructor("return process")()',
      'field "constructor.constructor" is not allowed at position 0',
    ],
    ['attrs.__proto__.x', 'field "attrs.__proto__.x" is not allowed at position 0'],
    ['1 + attrs.constructor', 'field "attrs.constructor" is not allowed at position 4'],
    ['attrs.prototype', 'field "attrs.prototype" is not allowed at position 0'],
    ['__proto__', 'field "__proto__" is not allowed at position 0'],
    ['this', 'unknown field "this" at position 0'],
    ['globalThis', 'unknown field "globalThis"'],
    ['score * 2', 'unknown field "score"'],
    ['attrs * 2', 'field "attrs" needs a sub-field, like attrs.x at position 0'],
    ['1;2', 'unexpected character ";" at position 1'],
    ['"abc"', 'unexpected character "\\"" at position 0 (strings are not supported)'],
    ["'abc'", 'unexpected character "\'" at position 0 (strings are not supported)'],
    ['`x`', 'strings are not supported'],
    ['attrs["score"]', 'unexpected character "[" at position 5'],
    ['attrs.', 'unexpected character "." at position 5'],
    ['attrs.score.', 'unexpected character "." at position 11'],
    ['.5', 'unexpected character "." at position 0'],
    ['1.', 'unexpected character "." at position 1'],
    ['1.2.3', 'unexpected character "." at position 3'],
    ['a ? 1 : 2', 'unexpected character "?" at position 2'],
    ['attrs.a > 1', 'unexpected character ">" at position 8'],
    ['attrs.a = 1', 'unexpected character "=" at position 8'],
    ['x => 1', 'unexpected character "=" at position 2'],
    ['2 ^ 3', 'unexpected character "^" at position 2'],
    ['1 % 2', 'unexpected character "%" at position 2'],
    ['new Date()', 'unknown field "new" at position 0 (use attrs.<key>'],
    ['1e999', 'number 1e999 at position 0 is out of range'],
    ['attrs.a\u0000', 'unexpected character U+0000 at position 7'],
    ['1 \u2212 2', 'unexpected character "\u2212" at position 2'],
    ['\u{1F600}', 'unexpected character "\u{1F600}" at position 0'],
  ])('%p: %s', (src, msg) => {
    expect(errorOf(src)).toContain(msg);
  });

  it('refuses what is not a string', () => {
    expect(compileExpression(42 as unknown as string)).toEqual({
      ok: false,
      error: 'expression must be a string',
    });
    expect(compileExpression(null as unknown as string)).toEqual({
      ok: false,
      error: 'expression must be a string',
    });
  });

  it(`limits the source to ${EXPRESSION_LIMITS.maxLength} characters`, () => {
    expect(errorOf('1'.padEnd(10 * 1024, ' '))).toBe('expression is too long (10240 characters, max 500)');
    expect(errorOf('1+'.repeat(5000) + '1')).toContain('expression is too long');
    expect(compileExpression('1'.padEnd(500, ' ')).ok).toBe(true);
    expect(compileExpression('1'.padEnd(501, ' ')).ok).toBe(false);
  });

  it(`limits the tokens to ${EXPRESSION_LIMITS.maxTokens}`, () => {
    const ok = '1' + '+1'.repeat(49); // 99 tokens
    expect(evalSrc(ok)).toBe(50);
    expect(compileExpression(ok + '+1').ok).toBe(false); // 101
    expect(errorOf(ok + '+1')).toBe('expression has too many tokens (max 100)');
    expect(compileExpression('min(' + Array(48).fill('1').join(',') + ')').ok).toBe(true); // 98 tokens
  });

  it(`limits nesting to ${EXPRESSION_LIMITS.maxDepth}`, () => {
    const parens = (n: number) => '('.repeat(n) + '1' + ')'.repeat(n);
    expect(evalSrc(parens(32))).toBe(1);
    expect(errorOf(parens(33))).toBe('expression is nested too deeply at position 32 (max depth 32)');
    expect(evalSrc('-'.repeat(32) + '1')).toBe(1);
    expect(errorOf('-'.repeat(33) + '1')).toContain('nested too deeply');
    const calls = (n: number) => 'abs('.repeat(n) + '1' + ')'.repeat(n);
    expect(evalSrc(calls(24))).toBe(1);
    expect(errorOf(calls(33))).toContain('nested too deeply');
    expect(errorOf('(-(-(-'.repeat(11) + '1' + ')))'.repeat(11))).toContain('nested too deeply');
    expect(errorOf('('.repeat(400))).toContain('too many tokens');
  });

  it('never throws and never evaluates anything, whatever the input', () => {
    const g = globalThis as Record<string, unknown>;
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string({ maxLength: 200 }),
          fc.string({ unit: 'binary', maxLength: 100 }),
          fc
            .array(
              fc.constantFrom(
                '1',
                '2.5',
                'attrs.a',
                'attrs.__proto__',
                'constructor',
                'min',
                'max',
                'abs',
                'eval',
                '(',
                ')',
                ',',
                '+',
                '-',
                '*',
                '/',
                ' ',
                '"',
                ';',
                '.',
                'e',
                'globalThis.pwned=1',
              ),
              { maxLength: 60 },
            )
            .map((xs) => xs.join('')),
        ),
        (src) => {
          const r = compileExpression(src);
          if (r.ok) {
            const v = r.fn(ev({ a: 3 }));
            expect(v === null || Number.isFinite(v)).toBe(true);
          } else {
            expect(typeof r.error).toBe('string');
            expect(r.error.length).toBeGreaterThan(0);
          }
          expect(g.pwned).toBeUndefined();
        },
      ),
      { numRuns: 2000 },
    );
  });
});

// ---------------------------------------------------------------------------------------------
// Property: the compiler agrees with a direct evaluation of random ASTs

type Ast =
  | { k: 'num'; v: number }
  | { k: 'field'; name: string }
  | { k: 'neg'; a: Ast }
  | { k: 'bin'; op: '+' | '-' | '*' | '/'; a: Ast; b: Ast }
  | { k: 'call'; fn: 'min' | 'max' | 'abs'; args: Ast[] };

const FIELDS = ['attrs.a', 'attrs.b', 'attrs.c.d', 'subject.n', 'actor.metadata.m', 'occurred_at'];

const { ast: astArb } = fc.letrec<{ ast: Ast; leaf: Ast; node: Ast }>((tie) => ({
  leaf: fc.oneof(
    fc
      .oneof(
        fc.integer({ min: 0, max: 1000 }),
        fc.double({ min: 0, max: 1e6, noNaN: true }),
        fc.constantFrom(0, 1, 0.1, 1e308, 5e-324, 1e21, 1e-7),
      )
      .map((v): Ast => ({ k: 'num', v })),
    fc.constantFrom(...FIELDS).map((name): Ast => ({ k: 'field', name })),
  ),
  node: fc.oneof(
    tie('ast').map((a): Ast => ({ k: 'neg', a })),
    fc
      .tuple(fc.constantFrom<'+' | '-' | '*' | '/'>('+', '-', '*', '/'), tie('ast'), tie('ast'))
      .map(([op, a, b]): Ast => ({ k: 'bin', op, a, b })),
    tie('ast').map((a): Ast => ({ k: 'call', fn: 'abs', args: [a] })),
    fc
      .tuple(
        fc.constantFrom<'min' | 'max'>('min', 'max'),
        fc.array(tie('ast'), { minLength: 1, maxLength: 3 }),
      )
      .map(([fn, args]): Ast => ({ k: 'call', fn, args })),
  ),
  ast: fc.oneof({ depthSize: 'small', withCrossShrink: true }, tie('leaf'), tie('node')),
}));

const PREC = { bin: { '+': 1, '-': 1, '*': 2, '/': 2 }, neg: 3, atom: 4 };
const prec = (n: Ast): number => (n.k === 'bin' ? PREC.bin[n.op] : n.k === 'neg' ? PREC.neg : PREC.atom);

/** Source with as few parentheses as precedence and left-associativity allow. */
function render(n: Ast, full: boolean): string {
  const wrap = (c: Ast, need: boolean) =>
    need || (full && c.k !== 'num' && c.k !== 'field') ? `(${render(c, full)})` : render(c, full);
  switch (n.k) {
    case 'num':
      return String(n.v);
    case 'field':
      return n.name;
    case 'neg':
      return '-' + wrap(n.a, prec(n.a) < PREC.neg);
    case 'bin':
      return `${wrap(n.a, prec(n.a) < prec(n))} ${n.op} ${wrap(n.b, prec(n.b) <= prec(n))}`;
    case 'call':
      return `${n.fn}(${n.args.map((a) => render(a, full)).join(', ')})`;
  }
}

/** The obviously correct evaluator, straight from the documented semantics. */
function reference(n: Ast, env: Record<string, unknown>): number | null {
  const fin = (x: number) => (Number.isFinite(x) ? x : null);
  switch (n.k) {
    case 'num':
      return n.v;
    case 'field': {
      const v = env[n.name];
      return typeof v === 'number' && Number.isFinite(v) ? v : null;
    }
    case 'neg': {
      const a = reference(n.a, env);
      return a === null ? null : -a;
    }
    case 'bin': {
      const a = reference(n.a, env);
      const b = reference(n.b, env);
      if (a === null || b === null) return null;
      if (n.op === '/') return b === 0 ? null : fin(a / b);
      return fin(n.op === '+' ? a + b : n.op === '-' ? a - b : a * b);
    }
    case 'call': {
      const xs = n.args.map((a) => reference(a, env));
      if (xs.some((x) => x === null)) return null;
      const ns = xs as number[];
      return n.fn === 'abs' ? Math.abs(ns[0]) : n.fn === 'min' ? Math.min(...ns) : Math.max(...ns);
    }
  }
}

const valueArb = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.oneof(
      fc.integer({ min: -1000, max: 1000 }),
      fc.double({ noNaN: true, noDefaultInfinity: true }),
    ),
  },
  { weight: 1, arbitrary: fc.constantFrom<unknown>(undefined, null, '5', true, 0, -0, 1e308, { x: 1 }) },
);

describe('property: compiled expressions agree with a reference evaluator', () => {
  it('on random ASTs rendered with minimal and with full parentheses', () => {
    fc.assert(
      fc.property(
        astArb,
        fc.tuple(valueArb, valueArb, valueArb, valueArb, valueArb),
        (ast, [a, b, cd, n, m]) => {
          const env: Record<string, unknown> = {
            'attrs.a': a,
            'attrs.b': b,
            'attrs.c.d': cd,
            'subject.n': n,
            'actor.metadata.m': m,
            occurred_at: 1_795_000_000_000,
          };
          const e = ev(
            { a, b, c: { d: cd } },
            { subject: { n }, actor_metadata: { m }, occurred_at: 1_795_000_000_000 },
          );
          const want = reference(ast, env);
          const expected = want === null ? null : want + 0;
          for (const src of [render(ast, false), render(ast, true)]) {
            const r = compileExpression(src);
            if (!r.ok) {
              // Only the documented limits may refuse a well-formed expression.
              expect(r.error).toMatch(/too long|too many tokens|nested too deeply/);
              continue;
            }
            expect(r.fn(e)).toBe(expected);
          }
        },
      ),
      { numRuns: 3000 },
    );
  });
});

// ---------------------------------------------------------------------------------------------
// Conditions

describe('validateConditions', () => {
  const W = 'config.scoring.rules[0].conditions';

  it.each<[unknown]>([
    [undefined],
    [null],
    [{}],
    [{ 'attrs.mode': { eq: 'ranked' } }],
    [{ 'attrs.mode': { ne: 'casual' }, 'attrs.level': { gte: 3, lt: 10 } }],
    [{ type: { in: ['a', 'b'] }, 'attrs.win': { eq: true }, 'attrs.n': { eq: 0 } }],
    [
      {
        'subject.id': { in: [1, 'x', false] },
        'actor.metadata.tier': { ne: 'bronze' },
        occurred_at: { gt: 0 },
      },
    ],
    [{ 'attrs.game-mode v2': { eq: 'x' } }],
  ])('accepts %j', (c) => {
    expect(validateConditions(c, W)).toBeNull();
  });

  it.each<[unknown, string]>([
    [[], `${W}: must be an object mapping field paths to operators`],
    ['attrs.mode', `${W}: must be an object mapping field paths to operators`],
    [5, `${W}: must be an object mapping`],
    [{ 'attrs.mode': { regex: '^r' } }, `${W}.attrs.mode: unknown operator "regex"`],
    [{ 'attrs.mode': { eq: 'a', contains: 'b' } }, `${W}.attrs.mode: unknown operator "contains"`],
    [{ 'attrs.mode': 'ranked' }, `${W}.attrs.mode: must be an object of operators, like {"eq": "ranked"}`],
    [{ 'attrs.mode': ['eq', 'x'] }, `${W}.attrs.mode: must be an object of operators`],
    [{ 'attrs.mode': null }, `${W}.attrs.mode: must be an object of operators`],
    [{ 'attrs.mode': {} }, `${W}.attrs.mode: needs an operator (eq, ne, gt, gte, lt, lte, in)`],
    [{ 'attrs.__proto__': { eq: 1 } }, `${W}.attrs.__proto__: field "attrs.__proto__" is not allowed`],
    [JSON.parse('{"__proto__": {"eq": 1}}'), `${W}.__proto__: field "__proto__" is not allowed`],
    [{ 'attrs.constructor.name': { eq: 'Object' } }, 'is not allowed'],
    [{ score: { eq: 1 } }, `${W}.score: unknown field "score"`],
    [{ attrs: { eq: 1 } }, `${W}.attrs: field "attrs" needs a sub-field`],
    [{ 'attrs..x': { eq: 1 } }, 'has an empty segment'],
    [{ 'attrs.x': { eq: null } }, `${W}.attrs.x.eq: must be a string, a finite number or a boolean`],
    [{ 'attrs.x': { eq: { a: 1 } } }, `${W}.attrs.x.eq: must be a string`],
    [{ 'attrs.x': { eq: [1] } }, `${W}.attrs.x.eq: must be a string`],
    [{ 'attrs.x': { ne: NaN } }, `${W}.attrs.x.ne: must be a string`],
    [{ 'attrs.x': { eq: Infinity } }, `${W}.attrs.x.eq: must be a string`],
    [{ 'attrs.x': { eq: undefined } }, `${W}.attrs.x.eq: must be a string`],
    [{ 'attrs.x': { gt: '5' } }, `${W}.attrs.x.gt: must be a finite number`],
    [{ 'attrs.x': { gte: true } }, `${W}.attrs.x.gte: must be a finite number`],
    [{ 'attrs.x': { lt: null } }, `${W}.attrs.x.lt: must be a finite number`],
    [{ 'attrs.x': { lte: Infinity } }, `${W}.attrs.x.lte: must be a finite number`],
    [
      { 'attrs.x': { in: [] } },
      `${W}.attrs.x.in: must be a non-empty array of strings, finite numbers or booleans`,
    ],
    [{ 'attrs.x': { in: 'a' } }, `${W}.attrs.x.in: must be a non-empty array`],
    [
      { 'attrs.x': { in: ['a', { b: 1 }] } },
      `${W}.attrs.x.in[1]: must be a string, a finite number or a boolean`,
    ],
    [{ 'attrs.x': { in: [null] } }, `${W}.attrs.x.in[0]: must be a string`],
    [{ 'attrs.x': { in: Array(1001).fill(1) } }, `${W}.attrs.x.in: at most 1000 values`],
  ])('refuses %j', (c, msg) => {
    expect(validateConditions(c, W)).toContain(msg);
  });

  it(`allows at most ${CONDITION_LIMITS.maxEntries} fields`, () => {
    const c: Record<string, unknown> = {};
    for (let i = 0; i < 50; i++) c[`attrs.f${i}`] = { eq: i };
    expect(validateConditions(c, W)).toBeNull();
    c['attrs.f50'] = { eq: 50 };
    expect(validateConditions(c, W)).toBe(`${W}: at most 50 fields`);
  });

  it('uses the given prefix', () => {
    expect(validateConditions({ 'attrs.mode': { regex: 'x' } }, 'config.scope.filters[2]')).toBe(
      'config.scope.filters[2].attrs.mode: unknown operator "regex" (use eq, ne, gt, gte, lt, lte or in)',
    );
  });
});

describe('matchConditions', () => {
  const e = ev({
    mode: 'ranked',
    level: 5,
    win: true,
    zero: 0,
    nul: null,
    tags: ['a'],
    nested: { x: 'y' },
    five: '5',
  });
  const m = (c: Condition, on: EventView = e) => matchConditions(c, on);

  it('no conditions match everything', () => {
    expect(matchConditions(undefined, e)).toBe(true);
    expect(matchConditions(null, e)).toBe(true);
    expect(matchConditions({}, e)).toBe(true);
  });

  it('eq and ne: strict equality, no coercion', () => {
    expect(m({ 'attrs.mode': { eq: 'ranked' } })).toBe(true);
    expect(m({ 'attrs.mode': { eq: 'casual' } })).toBe(false);
    expect(m({ 'attrs.mode': { eq: 'Ranked' } })).toBe(false);
    expect(m({ 'attrs.level': { eq: 5 } })).toBe(true);
    expect(m({ 'attrs.level': { eq: '5' } })).toBe(false);
    expect(m({ 'attrs.five': { eq: 5 } })).toBe(false);
    expect(m({ 'attrs.win': { eq: true } })).toBe(true);
    expect(m({ 'attrs.win': { eq: 1 } })).toBe(false);
    expect(m({ 'attrs.zero': { eq: false } })).toBe(false);
    expect(m({ 'attrs.zero': { eq: 0 } })).toBe(true);
    expect(m({ 'attrs.mode': { ne: 'casual' } })).toBe(true);
    expect(m({ 'attrs.mode': { ne: 'ranked' } })).toBe(false);
    expect(m({ 'attrs.level': { ne: '5' } })).toBe(true); // another type is not equal
    expect(m({ 'attrs.nul': { ne: 'x' } })).toBe(true); // present, null
    expect(m({ 'attrs.nul': { eq: 'x' } })).toBe(false);
    expect(m({ 'attrs.nested': { eq: 'y' } })).toBe(false);
    expect(m({ 'attrs.nested': { ne: 'y' } })).toBe(true);
    expect(m({ 'attrs.nested.x': { eq: 'y' } })).toBe(true);
  });

  it('gt, gte, lt, lte: numbers only', () => {
    expect(m({ 'attrs.level': { gt: 4 } })).toBe(true);
    expect(m({ 'attrs.level': { gt: 5 } })).toBe(false);
    expect(m({ 'attrs.level': { gte: 5 } })).toBe(true);
    expect(m({ 'attrs.level': { gte: 5.5 } })).toBe(false);
    expect(m({ 'attrs.level': { lt: 6 } })).toBe(true);
    expect(m({ 'attrs.level': { lt: 5 } })).toBe(false);
    expect(m({ 'attrs.level': { lte: 5 } })).toBe(true);
    expect(m({ 'attrs.level': { lte: -1 } })).toBe(false);
    expect(m({ 'attrs.five': { gt: 1 } })).toBe(false); // "5" is a string
    expect(m({ 'attrs.win': { gte: 0 } })).toBe(false);
    expect(m({ 'attrs.nul': { lte: 0 } })).toBe(false);
    expect(m({ 'attrs.mode': { gt: 'a' } as Condition[string] })).toBe(false); // string bound: invalid, fails closed
    expect(m({ occurred_at: { gte: 1_795_000_000_000, lt: 1_795_000_000_001 } })).toBe(true);
  });

  it('in: strict membership of a scalar', () => {
    expect(m({ 'attrs.mode': { in: ['casual', 'ranked'] } })).toBe(true);
    expect(m({ 'attrs.mode': { in: ['casual'] } })).toBe(false);
    expect(m({ 'attrs.level': { in: [1, 5] } })).toBe(true);
    expect(m({ 'attrs.level': { in: ['5'] } })).toBe(false);
    expect(m({ 'attrs.win': { in: [true] } })).toBe(true);
    expect(m({ 'attrs.tags': { in: ['a'] } })).toBe(false); // an array field is not a scalar
    expect(m({ 'attrs.nul': { in: [null] } as Condition[string] })).toBe(false);
    expect(m({ 'attrs.mode': { in: [] } })).toBe(false); // invalid, fails closed
    expect(m({ 'attrs.mode': { in: 'ranked' } })).toBe(false);
  });

  it('a missing field fails every operator, ne included', () => {
    for (const op of ['eq', 'ne', 'gt', 'gte', 'lt', 'lte'] as const) {
      expect(m({ 'attrs.missing': { [op]: 1 } })).toBe(false);
      expect(m({ 'attrs.toString': { [op]: 1 } })).toBe(false);
      expect(m({ 'subject.none': { [op]: 'x' } })).toBe(false);
    }
    expect(m({ 'attrs.missing': { in: [1] } })).toBe(false);
    expect(m({ 'attrs.missing': { ne: 'anything' } })).toBe(false);
    expect(m({ 'subject.id': { ne: 'x' } }, ev({}, { subject: null }))).toBe(false);
  });

  it('every entry and every operator must hold', () => {
    expect(m({ 'attrs.mode': { eq: 'ranked' }, 'attrs.level': { gte: 3, lt: 10 } })).toBe(true);
    expect(m({ 'attrs.mode': { eq: 'ranked' }, 'attrs.level': { gte: 3, lt: 5 } })).toBe(false);
    expect(m({ 'attrs.mode': { eq: 'ranked', ne: 'ranked' } })).toBe(false);
  });

  it('reads the standard fields, subject and actor metadata', () => {
    expect(m({ type: { eq: 'match_finished' } })).toBe(true);
    expect(m({ user_id: { in: ['u1', 'u2'] }, 'actor.user_id': { eq: 'u1' }, event_id: { ne: 'e2' } })).toBe(
      true,
    );
    expect(m({ 'subject.id': { eq: 'm-7' }, 'subject.stats.rounds': { gt: 10 } })).toBe(true);
    expect(m({ 'actor.metadata.tier': { eq: 'gold' }, 'actor.metadata.age': { gte: 18 } })).toBe(true);
    expect(m({ 'actor.metadata.tier': { eq: 'gold' } }, ev({}, { actor_metadata: null }))).toBe(false);
  });

  it('fails closed on what validateConditions refuses', () => {
    expect(m({ 'attrs.mode': { regex: 'r' } } as unknown as Condition)).toBe(false);
    expect(m({ 'attrs.mode': {} })).toBe(false);
    expect(m({ 'attrs.mode': 'ranked' } as unknown as Condition)).toBe(false);
    expect(m({ 'attrs.__proto__': { ne: 'x' } })).toBe(false);
    expect(m({ score: { ne: 'x' } })).toBe(false);
    expect(m({ 'attrs.mode': { eq: { toString: () => 'ranked' } } })).toBe(false);
    expect(matchConditions([] as unknown as Condition, e)).toBe(false);
    const parsed = JSON.parse('{"__proto__": {"admin": true}}') as Condition;
    expect(m(parsed)).toBe(false);
  });

  it('property: validated conditions never throw and agree with a direct reading of the spec', () => {
    const scalar = fc.oneof(fc.constantFrom('a', 'b', ''), fc.integer({ min: -3, max: 3 }), fc.boolean());
    const fieldValue = fc.oneof(scalar, fc.constantFrom<unknown>(undefined, null, [1], { x: 1 }, 1.5));
    const opArb = fc.oneof(
      fc.record({ op: fc.constantFrom('eq', 'ne'), value: scalar }),
      fc.record({ op: fc.constantFrom('gt', 'gte', 'lt', 'lte'), value: fc.integer({ min: -3, max: 3 }) }),
      fc.record({ op: fc.constant('in'), value: fc.array(scalar, { minLength: 1, maxLength: 4 }) }),
    );
    fc.assert(
      fc.property(fieldValue, opArb, (v, { op, value }) => {
        const c = { 'attrs.f': { [op]: value } } as Condition;
        expect(validateConditions(c, 'c')).toBeNull();
        const attrs = v === undefined ? {} : { f: v };
        const got = matchConditions(c, ev(attrs));
        let want: boolean;
        if (v === undefined) want = false;
        else if (op === 'eq') want = v === value;
        else if (op === 'ne') want = v !== value;
        else if (op === 'in') want = (value as unknown[]).some((x) => x === v) && typeof v !== 'object';
        else if (typeof v !== 'number') want = false;
        else {
          const n = value as number;
          want = op === 'gt' ? v > n : op === 'gte' ? v >= n : op === 'lt' ? v < n : v <= n;
        }
        expect(got).toBe(want);
      }),
      { numRuns: 1000 },
    );
  });
});

// ---------------------------------------------------------------------------------------------
// Compiled conditions (issue 13): compileCondition is what every rule evaluates; it must agree
// with the evaluator conditions had before (kept here as the reference, unchanged).

function referenceHolds(op: string, want: unknown, v: unknown): boolean {
  const scalar = (x: unknown) =>
    typeof x === 'string' || typeof x === 'boolean' || (typeof x === 'number' && Number.isFinite(x));
  const num = (x: unknown): x is number => typeof x === 'number' && Number.isFinite(x);
  switch (op) {
    case 'eq':
      return scalar(want) && v === want;
    case 'ne':
      return scalar(want) && v !== want;
    case 'gt':
      return typeof v === 'number' && num(want) && v > want;
    case 'gte':
      return typeof v === 'number' && num(want) && v >= want;
    case 'lt':
      return typeof v === 'number' && num(want) && v < want;
    case 'lte':
      return typeof v === 'number' && num(want) && v <= want;
    case 'in':
      return Array.isArray(want) && want.length > 0 && scalar(v) && want.some((x) => scalar(x) && x === v);
    default:
      return false;
  }
}

function referenceMatch(c: unknown, e: EventView): boolean {
  const obj = (x: unknown): x is Record<string, unknown> =>
    typeof x === 'object' && x !== null && !Array.isArray(x);
  if (c === undefined || c === null) return true;
  if (!obj(c)) return false;
  for (const path of Object.keys(c)) {
    if (validateFieldPath(path) !== null) return false;
    const v = readField(e, path);
    if (v === undefined) return false;
    const ops = c[path];
    if (!obj(ops)) return false;
    const opKeys = Object.keys(ops);
    if (opKeys.length === 0) return false;
    for (const op of opKeys) if (!referenceHolds(op, ops[op], v)) return false;
  }
  return true;
}

describe('property: compiled conditions agree with the reference evaluator', () => {
  const scalarArb = fc.oneof(
    fc.constantFrom<unknown>('a', 'b', '', '5', 5, 0, -0, 1.5, -3, true, false, null, NaN, Infinity),
    fc.integer({ min: -5, max: 5 }),
  );
  const wantArb = fc.oneof(
    { weight: 4, arbitrary: scalarArb },
    { weight: 2, arbitrary: fc.array(scalarArb, { maxLength: 4 }) },
    { weight: 1, arbitrary: fc.constantFrom<unknown>({}, [[1]], undefined) },
  );
  const opsArb = fc.oneof(
    {
      weight: 8,
      arbitrary: fc.dictionary(
        fc.constantFrom('eq', 'ne', 'gt', 'gte', 'lt', 'lte', 'in', 'regex'),
        wantArb,
        { maxKeys: 3 },
      ),
    },
    { weight: 1, arbitrary: fc.constantFrom<unknown>(null, 1, 'eq', [{ eq: 1 }]) },
  );
  const pathArb = fc.constantFrom(
    'attrs.a',
    'attrs.b',
    'attrs.c.d',
    'type',
    'user_id',
    'subject.n',
    'actor.metadata.m',
    'attrs',
    'nope',
    'attrs.__proto__',
  );
  const condArb = fc.oneof(
    { weight: 10, arbitrary: fc.dictionary(pathArb, opsArb, { maxKeys: 3 }) },
    { weight: 1, arbitrary: fc.constantFrom<unknown>(undefined, null, [], 'x', 3) },
  );

  it('on random conditions (valid and not) and events', () => {
    fc.assert(
      fc.property(condArb, scalarArb, scalarArb, scalarArb, scalarArb, (c, a, b, d, n) => {
        const e = ev({ a, b, c: { d } }, { subject: { n }, actor_metadata: { m: a }, type: String(b) });
        const want = referenceMatch(c, e);
        expect(compileCondition(c as Condition)(e)).toBe(want);
        expect(matchConditions(c as Condition, e)).toBe(want);
      }),
      { numRuns: 5000 },
    );
  });

  it('reads the condition once: changing it afterwards changes nothing', () => {
    const c: Condition = { 'attrs.mode': { eq: 'ranked' } };
    const test = compileCondition(c);
    c['attrs.mode'] = { eq: 'casual' };
    expect(test(ev({ mode: 'ranked' }))).toBe(true);
  });

  it('compileFieldReader reads what readField reads', () => {
    for (const p of [
      'attrs.a',
      'attrs.c.d',
      'type',
      'actor.user_id',
      'actor.metadata.m',
      'attrs.__proto__',
      'x',
      '',
    ])
      for (const e of [ev({ a: 1, c: { d: 'x' } }, { actor_metadata: { m: 2 } }), ev({})])
        expect(compileFieldReader(p)(e)).toBe(readField(e, p));
  });
});
