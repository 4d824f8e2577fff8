/**
 * Safe points expressions and field conditions (SPEC.md "Leaderboard views", "Achievement",
 * "Streak definition", "Earning rule"): scoring rules' `points_expression`, and the condition
 * language shared by leaderboards, achievements, streaks and earning rules.
 *
 * Pure and closed: a hand-written tokenizer and recursive-descent parser build a small AST that is
 * turned into closures. No eval, no Function constructor, no access to anything but own,
 * enumerable data properties of the event's objects.
 *
 * Field paths
 *   type, user_id (also actor.user_id), event_id, occurred_at (Unix ms): the event's own fields;
 *   attrs.<a>[.<b>...], subject.<a>[...], actor.metadata.<a>[...]: walks into those objects.
 *   Segments are separated by dots and may not be empty. `__proto__`, `constructor` and
 *   `prototype` are refused as segments, everywhere. readField answers undefined for anything it
 *   cannot reach: a missing key, an inherited one (`attrs.toString`), a non-enumerable one
 *   (`attrs.list.length`), an accessor, a walk through a non-object. Array elements are reached by
 *   index (`attrs.items.0`).
 *
 * Expressions
 *   expr    := term (('+' | '-') term)*                    left-associative
 *   term    := unary (('*' | '/') unary)*                  left-associative, binds tighter
 *   unary   := '-' unary | primary
 *   primary := number | field | name '(' expr (',' expr)* ')' | '(' expr ')'
 *   number  := digits ['.' digits] [('e' | 'E') ['+' | '-'] digits]
 *   field   := a field path as above; in an expression its segments are [A-Za-z0-9_]+ (the first
 *              starting with a letter or '_')
 *   name    := min (1 or more arguments), max (1 or more), abs (exactly 1)
 *   Whitespace (space, tab, CR, LF) is ignored. There are no strings, comparisons, assignments,
 *   member calls, or other functions.
 *   A field's value must be a finite JSON number: a missing field, a string ("5" is not coerced),
 *   a boolean, null or an object makes the result null. So does division by zero and any
 *   intermediate or final result that is not finite (overflow). -0 comes out as 0.
 *   Limits: source at most 500 characters, at most 100 tokens, nesting (parentheses, function
 *   calls and unary minus, counted together) at most 32 deep. Errors name what is wrong and the
 *   0-based character position: `unexpected ")" at position 7`, `unknown function "eval" at
 *   position 0`, `field "attrs.__proto__" is not allowed at position 0`.
 *
 * Conditions
 *   `{ "<field path>": { "<op>": value, ... }, ... }`. Every entry must hold and every operator of
 *   an entry must hold (AND), so `{"attrs.level": {"gte": 3, "lt": 10}}` is a range.
 *   eq, ne     value: string, finite number or boolean; strict equality, no coercion (5 is not "5").
 *   gt, gte, lt, lte
 *              value: finite number; holds only when the field is a number too.
 *   in         value: non-empty array (at most 1000) of strings, finite numbers or booleans;
 *              holds when the field strictly equals one of them.
 *   A missing field (readField undefined) fails every operator, ne included: `{"attrs.mode": {"ne":
 *   "ranked"}}` needs attrs.mode to be present. A present field of another type fails eq, gt..lte
 *   and in, and passes ne (it is not equal). At most 50 entries. matchConditions fails closed on
 *   anything validateConditions would refuse.
 */

export interface EventView {
  type: string;
  user_id: string;
  event_id: string;
  /** Unix ms. */
  occurred_at: number;
  attrs: Record<string, unknown>;
  subject?: Record<string, unknown> | null;
  actor_metadata?: Record<string, unknown> | null;
}

/** null when a referenced field is missing or not a finite number, on division by zero, or when a result is not finite. */
export type Compiled = (e: EventView) => number | null;

export type ConditionOperator = 'eq' | 'ne' | 'gt' | 'gte' | 'lt' | 'lte' | 'in';
export type Condition = Record<string, Partial<Record<ConditionOperator, unknown>>>;

export const CONDITION_OPERATORS: readonly ConditionOperator[] = ['eq', 'ne', 'gt', 'gte', 'lt', 'lte', 'in'];
export const EXPRESSION_LIMITS = { maxLength: 500, maxTokens: 100, maxDepth: 32 } as const;
export const CONDITION_LIMITS = { maxEntries: 50, maxInValues: 1000, maxPathLength: 256 } as const;

// ---------------------------------------------------------------------------------------------
// Field paths

const FORBIDDEN_SEGMENTS = new Set(['__proto__', 'constructor', 'prototype']);
const SCALAR_ROOTS = new Set(['type', 'user_id', 'event_id', 'occurred_at']);

type Root = 'type' | 'user_id' | 'event_id' | 'occurred_at' | 'attrs' | 'subject' | 'actor_metadata';
interface ParsedPath {
  root: Root;
  rest: string[];
}

/** A refused path: what is wrong, and optionally how to fix it. */
interface PathError {
  error: string;
  hint?: string;
}

function parsePath(path: string): ParsedPath | PathError {
  if (path.length === 0) return { error: 'field path is empty' };
  if (path.length > CONDITION_LIMITS.maxPathLength) {
    return {
      error: `field "${path.slice(0, 40)}…" is too long (max ${CONDITION_LIMITS.maxPathLength} characters)`,
    };
  }
  const segs = path.split('.');
  if (segs.some((s) => s === '')) return { error: `field "${path}" has an empty segment` };
  if (segs.some((s) => FORBIDDEN_SEGMENTS.has(s))) return { error: `field "${path}" is not allowed` };
  const [head, ...rest] = segs;
  if (SCALAR_ROOTS.has(head)) {
    return rest.length === 0
      ? { root: head as Root, rest }
      : { error: `field "${path}": ${head} has no sub-fields` };
  }
  if (head === 'attrs' || head === 'subject') {
    return rest.length > 0
      ? { root: head, rest }
      : { error: `field "${path}" needs a sub-field, like ${head}.x` };
  }
  if (head === 'actor') {
    if (rest.length === 1 && rest[0] === 'user_id') return { root: 'user_id', rest: [] };
    if (rest[0] === 'metadata' && rest.length > 1) return { root: 'actor_metadata', rest: rest.slice(1) };
    return { error: `unknown field "${path}"`, hint: '(actor has user_id and metadata.<key>)' };
  }
  return {
    error: `unknown field "${path}"`,
    hint: '(use attrs.<key>, subject.<key>, actor.metadata.<key>, type, user_id, actor.user_id, event_id or occurred_at)',
  };
}

function isPathError(p: ParsedPath | PathError): p is PathError {
  return 'error' in p;
}

const pathCache = new Map<string, ParsedPath | PathError>();

function cachedPath(path: string): ParsedPath | PathError {
  let p = pathCache.get(path);
  if (p === undefined) {
    p = parsePath(path);
    if (pathCache.size >= 10_000) pathCache.clear();
    pathCache.set(path, p);
  }
  return p;
}

/** null when `path` is a valid field path, else a message saying why, e.g. `field "attrs.__proto__" is not allowed`. */
export function validateFieldPath(path: unknown): string | null {
  if (typeof path !== 'string') return 'field path must be a string';
  const p = cachedPath(path);
  return isPathError(p) ? (p.hint ? `${p.error} ${p.hint}` : p.error) : null;
}

function ownData(obj: unknown, key: string): unknown {
  if (typeof obj !== 'object' || obj === null) return undefined;
  const d = Object.getOwnPropertyDescriptor(obj, key);
  return d !== undefined && d.enumerable && 'value' in d ? d.value : undefined;
}

function readParsed(e: EventView, p: ParsedPath): unknown {
  let v: unknown;
  switch (p.root) {
    case 'attrs':
      v = ownData(e, 'attrs');
      break;
    case 'subject':
      v = ownData(e, 'subject');
      break;
    case 'actor_metadata':
      v = ownData(e, 'actor_metadata');
      break;
    default:
      return ownData(e, p.root);
  }
  for (const seg of p.rest) {
    v = ownData(v, seg);
    if (v === undefined) return undefined;
  }
  return v;
}

/** The value at `path` in the event, or undefined when the path is invalid or leads nowhere. Never throws. */
export function readField(e: EventView, path: string): unknown {
  if (typeof path !== 'string') return undefined;
  const p = cachedPath(path);
  return isPathError(p) ? undefined : readParsed(e, p);
}

// ---------------------------------------------------------------------------------------------
// Expressions: tokens

type Tok =
  | { k: 'num'; v: number; text: string; pos: number }
  | { k: 'name'; text: string; pos: number }
  | { k: 'op'; text: '+' | '-' | '*' | '/' | '(' | ')' | ','; pos: number };

class ExprError extends Error {}

function describeChar(ch: string): string {
  const cp = ch.codePointAt(0) as number;
  return cp < 0x20 || cp === 0x7f
    ? `U+${cp.toString(16).toUpperCase().padStart(4, '0')}`
    : JSON.stringify(ch);
}

function tokenize(src: string): Tok[] {
  const out: Tok[] = [];
  const re = {
    num: /\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/y,
    name: /[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*/y,
  };
  let i = 0;
  while (i < src.length) {
    const ch = src[i];
    if (ch === ' ' || ch === '\t' || ch === '\n' || ch === '\r') {
      i++;
      continue;
    }
    if (out.length >= EXPRESSION_LIMITS.maxTokens) {
      throw new ExprError(`expression has too many tokens (max ${EXPRESSION_LIMITS.maxTokens})`);
    }
    if (ch >= '0' && ch <= '9') {
      re.num.lastIndex = i;
      const text = (re.num.exec(src) as RegExpExecArray)[0];
      const v = Number(text);
      if (!Number.isFinite(v)) throw new ExprError(`number ${text} at position ${i} is out of range`);
      out.push({ k: 'num', v, text, pos: i });
      i += text.length;
      continue;
    }
    if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || ch === '_') {
      re.name.lastIndex = i;
      const text = (re.name.exec(src) as RegExpExecArray)[0];
      if (text.split('.').some((s) => FORBIDDEN_SEGMENTS.has(s))) {
        throw new ExprError(`field "${text}" is not allowed at position ${i}`);
      }
      out.push({ k: 'name', text, pos: i });
      i += text.length;
      continue;
    }
    if (ch === '+' || ch === '-' || ch === '*' || ch === '/' || ch === '(' || ch === ')' || ch === ',') {
      out.push({ k: 'op', text: ch, pos: i });
      i++;
      continue;
    }
    const hint = ch === '"' || ch === "'" || ch === '`' ? ' (strings are not supported)' : '';
    throw new ExprError(
      `unexpected character ${describeChar(String.fromCodePoint(src.codePointAt(i) as number))} at position ${i}${hint}`,
    );
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Expressions: AST and parser

type Fn = 'min' | 'max' | 'abs';
type Node =
  | { k: 'num'; v: number }
  | { k: 'field'; path: string; p: ParsedPath }
  | { k: 'neg'; a: Node }
  | { k: 'bin'; op: '+' | '-' | '*' | '/'; a: Node; b: Node }
  | { k: 'call'; fn: Fn; args: Node[] };

const FUNCTIONS: Record<Fn, { min: number; max: number }> = {
  min: { min: 1, max: Infinity },
  max: { min: 1, max: Infinity },
  abs: { min: 1, max: 1 },
};

class Parser {
  private i = 0;
  private depth = 0;
  readonly fields: string[] = [];

  constructor(
    private readonly toks: Tok[],
    private readonly srcLength: number,
  ) {}

  parse(): Node {
    if (this.toks.length === 0) throw new ExprError('expression is empty');
    const n = this.expr();
    const t = this.toks[this.i];
    if (t) throw new ExprError(`unexpected ${show(t)} at position ${t.pos}`);
    return n;
  }

  private peek(): Tok | undefined {
    return this.toks[this.i];
  }

  private isOp(t: Tok | undefined, ...ops: string[]): boolean {
    return t !== undefined && t.k === 'op' && ops.includes(t.text);
  }

  private fail(t: Tok | undefined, expected?: string): never {
    const what = t
      ? `unexpected ${show(t)} at position ${t.pos}`
      : `unexpected end of expression at position ${this.srcLength}`;
    throw new ExprError(expected ? `${what}, expected ${expected}` : what);
  }

  private enter(t: Tok): void {
    if (++this.depth > EXPRESSION_LIMITS.maxDepth) {
      throw new ExprError(
        `expression is nested too deeply at position ${t.pos} (max depth ${EXPRESSION_LIMITS.maxDepth})`,
      );
    }
  }

  private expr(): Node {
    let a = this.term();
    for (let t = this.peek(); this.isOp(t, '+', '-'); t = this.peek()) {
      this.i++;
      a = { k: 'bin', op: (t as Tok).text as '+' | '-', a, b: this.term() };
    }
    return a;
  }

  private term(): Node {
    let a = this.unary();
    for (let t = this.peek(); this.isOp(t, '*', '/'); t = this.peek()) {
      this.i++;
      a = { k: 'bin', op: (t as Tok).text as '*' | '/', a, b: this.unary() };
    }
    return a;
  }

  private unary(): Node {
    const t = this.peek();
    if (t && this.isOp(t, '-')) {
      this.i++;
      this.enter(t);
      const a = this.unary();
      this.depth--;
      return { k: 'neg', a };
    }
    return this.primary();
  }

  private primary(): Node {
    const t = this.peek();
    if (!t) return this.fail(t, 'a number, a field, a function or "("');
    if (t.k === 'num') {
      this.i++;
      return { k: 'num', v: t.v };
    }
    if (t.k === 'name') {
      this.i++;
      if (this.isOp(this.peek(), '(')) return this.call(t);
      const p = parsePath(t.text);
      if (isPathError(p)) throw new ExprError(`${p.error} at position ${t.pos}${p.hint ? ' ' + p.hint : ''}`);
      if (!this.fields.includes(t.text)) this.fields.push(t.text);
      return { k: 'field', path: t.text, p };
    }
    if (this.isOp(t, '(')) {
      this.i++;
      this.enter(t);
      const n = this.expr();
      if (!this.isOp(this.peek(), ')')) this.fail(this.peek(), '")"');
      this.i++;
      this.depth--;
      return n;
    }
    return this.fail(t, 'a number, a field, a function or "("');
  }

  private call(name: Tok): Node {
    if (!Object.prototype.hasOwnProperty.call(FUNCTIONS, name.text)) {
      throw new ExprError(`unknown function "${name.text}" at position ${name.pos} (use min, max or abs)`);
    }
    const fn = name.text as Fn;
    this.i++; // '('
    this.enter(name);
    const args: Node[] = [];
    if (this.isOp(this.peek(), ')')) {
      throw new ExprError(`${fn}() at position ${name.pos} needs at least one argument`);
    }
    for (;;) {
      args.push(this.expr());
      const t = this.peek();
      if (this.isOp(t, ',')) {
        this.i++;
        continue;
      }
      if (this.isOp(t, ')')) {
        this.i++;
        break;
      }
      this.fail(t, '"," or ")"');
    }
    this.depth--;
    if (args.length > FUNCTIONS[fn].max) {
      throw new ExprError(`${fn}() at position ${name.pos} takes exactly one argument, got ${args.length}`);
    }
    return { k: 'call', fn, args };
  }
}

function show(t: Tok): string {
  return JSON.stringify(t.text.length > 40 ? t.text.slice(0, 40) + '…' : t.text);
}

// ---------------------------------------------------------------------------------------------
// Expressions: closures

type Eval = (e: EventView) => number | null;

function fin(x: number): number | null {
  return Number.isFinite(x) ? x : null;
}

function build(n: Node): Eval {
  switch (n.k) {
    case 'num': {
      const v = n.v;
      return () => v;
    }
    case 'field': {
      const p = n.p;
      return (e) => {
        const v = readParsed(e, p);
        return typeof v === 'number' && Number.isFinite(v) ? v : null;
      };
    }
    case 'neg': {
      const a = build(n.a);
      return (e) => {
        const x = a(e);
        return x === null ? null : -x;
      };
    }
    case 'bin': {
      const a = build(n.a);
      const b = build(n.b);
      switch (n.op) {
        case '+':
          return (e) => {
            const x = a(e);
            if (x === null) return null;
            const y = b(e);
            return y === null ? null : fin(x + y);
          };
        case '-':
          return (e) => {
            const x = a(e);
            if (x === null) return null;
            const y = b(e);
            return y === null ? null : fin(x - y);
          };
        case '*':
          return (e) => {
            const x = a(e);
            if (x === null) return null;
            const y = b(e);
            return y === null ? null : fin(x * y);
          };
        case '/':
          return (e) => {
            const x = a(e);
            if (x === null) return null;
            const y = b(e);
            return y === null || y === 0 ? null : fin(x / y);
          };
      }
      break;
    }
    case 'call': {
      const args = n.args.map(build);
      if (n.fn === 'abs') {
        const a = args[0];
        return (e) => {
          const x = a(e);
          return x === null ? null : Math.abs(x);
        };
      }
      const pick = n.fn === 'min' ? Math.min : Math.max;
      return (e) => {
        let r = args[0](e);
        if (r === null) return null;
        for (let i = 1; i < args.length; i++) {
          const x = args[i](e);
          if (x === null) return null;
          r = pick(r, x);
        }
        return r;
      };
    }
  }
  throw new Error('expressions: unknown node');
}

/**
 * Compiles a points expression. On success, `fn` evaluates it for an event and `fields` lists the
 * field paths it reads (each once, in order of appearance).
 */
export function compileExpression(
  src: string,
): { ok: true; fn: Compiled; fields: string[] } | { ok: false; error: string } {
  if (typeof src !== 'string') return { ok: false, error: 'expression must be a string' };
  if (src.length > EXPRESSION_LIMITS.maxLength) {
    return {
      ok: false,
      error: `expression is too long (${src.length} characters, max ${EXPRESSION_LIMITS.maxLength})`,
    };
  }
  try {
    const parser = new Parser(tokenize(src), src.length);
    const ev = build(parser.parse());
    const fn: Compiled = (e) => {
      const r = ev(e);
      return r === null ? null : r + 0; // -0 -> 0
    };
    return { ok: true, fn, fields: [...parser.fields] };
  } catch (err) {
    if (err instanceof ExprError) return { ok: false, error: err.message };
    throw err;
  }
}

// ---------------------------------------------------------------------------------------------
// Conditions

function isObject(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

function isScalar(x: unknown): x is string | number | boolean {
  return typeof x === 'string' || typeof x === 'boolean' || (typeof x === 'number' && Number.isFinite(x));
}

const SCALAR_MSG = 'must be a string, a finite number or a boolean';

/**
 * null when `c` is a valid condition object (or absent: undefined or null), else one message naming
 * the offending path under `where`, e.g.
 * `config.scoring.rules[0].conditions.attrs.mode: unknown operator "regex" (use eq, ne, gt, gte, lt, lte or in)`.
 */
export function validateConditions(c: unknown, where: string): string | null {
  if (c === undefined || c === null) return null;
  if (!isObject(c))
    return `${where}: must be an object mapping field paths to operators, like {"attrs.mode": {"eq": "ranked"}}`;
  const keys = Object.keys(c);
  if (keys.length > CONDITION_LIMITS.maxEntries)
    return `${where}: at most ${CONDITION_LIMITS.maxEntries} fields`;
  for (const path of keys) {
    const at = `${where}.${path}`;
    const pathErr = validateFieldPath(path);
    if (pathErr) return `${at}: ${pathErr}`;
    const ops = c[path];
    if (!isObject(ops)) return `${at}: must be an object of operators, like {"eq": "ranked"}`;
    const opKeys = Object.keys(ops);
    if (opKeys.length === 0) return `${at}: needs an operator (${CONDITION_OPERATORS.join(', ')})`;
    for (const op of opKeys) {
      const v = ops[op];
      switch (op) {
        case 'eq':
        case 'ne':
          if (!isScalar(v)) return `${at}.${op}: ${SCALAR_MSG}`;
          break;
        case 'gt':
        case 'gte':
        case 'lt':
        case 'lte':
          if (typeof v !== 'number' || !Number.isFinite(v)) return `${at}.${op}: must be a finite number`;
          break;
        case 'in':
          if (!Array.isArray(v) || v.length === 0) {
            return `${at}.in: must be a non-empty array of strings, finite numbers or booleans`;
          }
          if (v.length > CONDITION_LIMITS.maxInValues)
            return `${at}.in: at most ${CONDITION_LIMITS.maxInValues} values`;
          for (let i = 0; i < v.length; i++) if (!isScalar(v[i])) return `${at}.in[${i}]: ${SCALAR_MSG}`;
          break;
        default:
          return `${at}: unknown operator ${JSON.stringify(op)} (use eq, ne, gt, gte, lt, lte or in)`;
      }
    }
  }
  return null;
}

/** A compiled condition: true when the event satisfies it. Never throws. */
export type ConditionTest = (e: EventView) => boolean;

const ALWAYS: ConditionTest = () => true;
const NEVER: ConditionTest = () => false;
const NEVER_HOLDS = (_v: unknown) => false;

/** One operator against one wanted value, resolved once: the predicate on the field's value. */
function operatorTest(op: string, want: unknown): (v: unknown) => boolean {
  switch (op) {
    case 'eq':
      return isScalar(want) ? (v) => v === want : NEVER_HOLDS;
    case 'ne':
      return isScalar(want) ? (v) => v !== want : NEVER_HOLDS;
    case 'gt':
    case 'gte':
    case 'lt':
    case 'lte': {
      if (typeof want !== 'number' || !Number.isFinite(want)) return NEVER_HOLDS;
      const w = want;
      if (op === 'gt') return (v) => typeof v === 'number' && v > w;
      if (op === 'gte') return (v) => typeof v === 'number' && v >= w;
      if (op === 'lt') return (v) => typeof v === 'number' && v < w;
      return (v) => typeof v === 'number' && v <= w;
    }
    case 'in': {
      if (!Array.isArray(want) || want.length === 0) return NEVER_HOLDS;
      // Scalars only (so no NaN): Set membership is then strict equality.
      const set = new Set(want.filter(isScalar));
      return (v) => isScalar(v) && set.has(v);
    }
    default:
      return NEVER_HOLDS;
  }
}

/**
 * Compiles a condition object once into a test: every entry must hold and every operator of an
 * entry must hold (AND); true for no conditions (undefined or null). Fails closed: a condition
 * validateConditions would refuse (not an object, a bad path, an entry that is not an object of
 * operators or has none, an unknown operator or a wrong value type) never holds for any event.
 * The condition is read once, here: changing the object afterwards does not change the test.
 */
export function compileCondition(c: Condition | undefined | null): ConditionTest {
  if (c === undefined || c === null) return ALWAYS;
  if (!isObject(c)) return NEVER;
  const entries: Array<{ p: ParsedPath; tests: Array<(v: unknown) => boolean> }> = [];
  for (const path of Object.keys(c)) {
    const p = cachedPath(path);
    if (isPathError(p)) return NEVER;
    const ops: unknown = c[path];
    if (!isObject(ops)) return NEVER;
    const opKeys = Object.keys(ops);
    if (opKeys.length === 0) return NEVER;
    const tests = opKeys.map((op) => operatorTest(op, ops[op]));
    if (tests.includes(NEVER_HOLDS)) return NEVER;
    entries.push({ p, tests });
  }
  if (entries.length === 0) return ALWAYS;
  return (e) => {
    for (const { p, tests } of entries) {
      const v = readParsed(e, p);
      if (v === undefined) return false;
      for (const t of tests) if (!t(v)) return false;
    }
    return true;
  };
}

/** True when every entry of `c` holds for the event (true for no conditions). Never throws. */
export function matchConditions(c: Condition | undefined | null, e: EventView): boolean {
  return compileCondition(c)(e);
}

/**
 * The reader of one field path, resolved once: the value at `path` in an event, undefined when
 * the path is invalid (validateFieldPath says why) or leads nowhere. Never throws.
 */
export function compileFieldReader(path: string): (e: EventView) => unknown {
  const p = typeof path === 'string' ? cachedPath(path) : { error: 'field path must be a string' };
  if (isPathError(p)) return () => undefined;
  return (e) => readParsed(e, p);
}
