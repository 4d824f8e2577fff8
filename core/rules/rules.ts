/**
 * One rules module (issue 13, seam 2). `core/expressions.ts` is the one condition language; the
 * specification writes conditions in four surface forms, and this module turns every one of them
 * into that language's one condition object (`Condition`, `{path: {op: value}}`), compiled once
 * into a test (`compileCondition`):
 *
 *   form                                    where                                         adapter
 *   `{path: {op: v}, ...}`                  scoring-rule and achievement conditions       `fromPathMap`
 *   `{field, op, value}` (one or a list)    leaderboard scope filters, earning filters    `fromFilter`, `fromFilters`
 *   `{condition: {field, operator, value}}` streak expressions                            `fromStreakExpression`
 *   `event_types[]` / `event_type`, `*`     every rule that is picked by event type       `eventTypeMatcher`
 *
 * and one field-path resolver (`fieldPath`, `fieldReader`), with the one alias of bare names:
 * `amount` means `attrs.amount` where the caller asks for it (`bareNames: 'attrs'`; earning rules
 * today). Where today's call sites differ in a detail, the adapter keeps each one's behaviour and
 * says so in its options (see "Differences kept" in docs/architecture.md "One rules module").
 *
 * Validation goes through the same adapters, so a form is checked exactly as it is evaluated:
 * `validate*` return `core/expressions.ts` messages under the caller's `where`.
 */
import {
  compileCondition,
  compileFieldReader,
  validateConditions,
  validateFieldPath,
  type Condition,
  type ConditionOperator,
  type ConditionTest,
  type EventView,
} from '../expressions';

export type { Condition, ConditionOperator, ConditionTest, EventView };

/** `{field, op, value}`: leaderboard scope filters and earning-rule filters. */
export interface FieldFilter {
  field: string;
  op: ConditionOperator;
  value: unknown;
}

/** `{condition: {field, operator, value}}`: streak expressions. */
export interface StreakExpression {
  condition: { field: string; operator: ConditionOperator; value: unknown };
}

export interface FieldOptions {
  /**
   * What a bare name (`amount`, no known root) means. `'attrs'`: the attribute `attrs.amount`
   * (earning rules: filters and calculation fields). `'as_is'` (the default): the name is taken
   * as written, which validation refuses as an unknown field (leaderboard scope filters, scoring
   * conditions).
   */
  bareNames?: 'attrs' | 'as_is';
}

const KNOWN_ROOT = /^(attrs|subject|actor|type|user_id|event_id|occurred_at)(\.|$)/;

/**
 * The field path a rule's field means: standard fields and paths under `attrs`, `subject` and
 * `actor` stay as they are; with `bareNames: 'attrs'`, any other name is an attribute path
 * (`amount` -> `attrs.amount`).
 */
export function fieldPath(field: string, opts: FieldOptions = {}): string {
  return opts.bareNames === 'attrs' && !KNOWN_ROOT.test(field) ? `attrs.${field}` : field;
}

/** The resolver of a rule's field, compiled once: the value in an event, undefined when absent or invalid. */
export function fieldReader(field: string, opts: FieldOptions = {}): (e: EventView) => unknown {
  return compileFieldReader(fieldPath(field, opts));
}

/** Sets an own, enumerable property, whatever the key (`__proto__` included: validation refuses it, evaluation fails closed). */
function setOwn(o: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(o, key, { value, enumerable: true, writable: true, configurable: true });
}

function entry(path: string, op: string, value: unknown): Condition {
  const ops: Record<string, unknown> = {};
  setOwn(ops, op, value);
  const c: Condition = {};
  setOwn(c, path, ops);
  return c;
}

/**
 * `{path: {op: v}}` is already the canonical condition (absent: no condition). With `bareNames:
 * 'attrs'` (achievement conditions), a key without a known root is an attribute path (`level` ->
 * `attrs.level`); anything that is not an object is passed on as it is (validation refuses it).
 */
export function fromPathMap(c: Condition | undefined | null, opts: FieldOptions = {}): Condition | undefined {
  if (c === undefined || c === null) return undefined;
  if (opts.bareNames !== 'attrs' || typeof c !== 'object' || Array.isArray(c)) return c;
  const out: Condition = {};
  for (const k of Object.keys(c)) setOwn(out, fieldPath(k, opts), c[k]);
  return out;
}

/** `{field, op, value}` as the canonical condition `{path: {op: value}}`. */
export function fromFilter(f: FieldFilter, opts: FieldOptions = {}): Condition {
  return entry(fieldPath(f.field, opts), f.op, f.value);
}

/**
 * A list of `{field, op, value}` (all must hold) as one condition; undefined for none. Filters on
 * the same field merge into one entry; a later filter with the same field and operator replaces
 * the earlier one (leaderboard scope filters have always merged this way).
 */
export function fromFilters(
  fs: readonly FieldFilter[] | undefined,
  opts: FieldOptions = {},
): Condition | undefined {
  if (!fs || fs.length === 0) return undefined;
  const c: Condition = {};
  for (const f of fs) {
    const path = fieldPath(f.field, opts);
    let ops = Object.prototype.hasOwnProperty.call(c, path) ? c[path] : undefined;
    if (ops === undefined) setOwn(c, path, (ops = {}));
    setOwn(ops as Record<string, unknown>, f.op, f.value);
  }
  return c;
}

/** `{condition: {field, operator, value}}` as the canonical condition; undefined when absent. */
export function fromStreakExpression(
  x: StreakExpression | undefined | null,
  opts: FieldOptions = {},
): Condition | undefined {
  if (!x) return undefined;
  return entry(fieldPath(x.condition.field, opts), x.condition.operator, x.condition.value);
}

/** Validation of a rule's field (a path a calculation reads): `where.<path>: message`, or null. */
export function validateField(field: string, where: string, opts: FieldOptions = {}): string | null {
  const path = fieldPath(field, opts);
  const err = validateFieldPath(path);
  return err ? `${where}.${path}: ${err}` : null;
}

/** Validation of a `{path: {op: v}}` condition (read with `opts`, as `fromPathMap`): a message under `where`, or null. */
export function validatePathMap(c: unknown, where: string, opts: FieldOptions = {}): string | null {
  return validateConditions(opts.bareNames === 'attrs' ? fromPathMap(c as Condition, opts) : c, where);
}

/** Validation of one `{field, op, value}`, checked as the condition it becomes. */
export function validateFilter(f: FieldFilter, where: string, opts: FieldOptions = {}): string | null {
  return validateConditions(fromFilter(f, opts), where);
}

/** Validation of a list of `{field, op, value}`: each checked on its own under `where[i]`. */
export function validateFilters(
  fs: readonly FieldFilter[] | undefined,
  where: string,
  opts: FieldOptions = {},
): string | null {
  for (const [i, f] of (fs ?? []).entries()) {
    const err = validateFilter(f, `${where}[${i}]`, opts);
    if (err) return err;
  }
  return null;
}

/** Validation of a streak expression, checked as the condition it becomes (under `where.condition`). */
export function validateStreakExpression(
  x: StreakExpression | undefined | null,
  where: string,
  opts: FieldOptions = {},
): string | null {
  return x ? validateConditions(fromStreakExpression(x, opts), `${where}.condition`) : null;
}

/** A compiled condition: its canonical source and its test. */
export interface CompiledCondition {
  /** The canonical condition (undefined: none, always holds). */
  readonly condition: Condition | undefined;
  readonly test: ConditionTest;
}

/** Compiles a canonical condition (the output of any `from*` adapter). */
export function compile(c: Condition | undefined): CompiledCondition {
  return { condition: c, test: compileCondition(c) };
}

/**
 * The one event-type matcher: `event_type` (one string) or `event_types` (a list); `*` matches
 * every type, anything else matches exactly (case-sensitive). An empty list matches nothing.
 */
export function eventTypeMatcher(types: string | readonly string[]): (type: string) => boolean {
  const list = typeof types === 'string' ? [types] : types;
  if (list.includes('*')) return () => true;
  if (list.length === 1) {
    const only = list[0];
    return (t) => t === only;
  }
  const set = new Set(list);
  return (t) => set.has(t);
}

/**
 * A bounded cache of compiled rules by version key (a definition's id and version, or its
 * content): compiling is done once per version, not per batch. When full it starts over (the
 * definitions in use come back on the next batch).
 */
export class CompileCache<T> {
  private readonly map = new Map<string, T>();

  constructor(private readonly max = 10_000) {}

  get(key: string, build: () => T): T {
    let v = this.map.get(key);
    if (v === undefined) {
      if (this.map.size >= this.max) this.map.clear();
      v = build();
      this.map.set(key, v);
    }
    return v;
  }

  get size(): number {
    return this.map.size;
  }
}
