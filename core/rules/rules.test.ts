import { matchConditions, readField, type Condition, type EventView } from '../expressions';
import {
  compile,
  CompileCache,
  eventTypeMatcher,
  fieldPath,
  fieldReader,
  fromFilter,
  fromFilters,
  fromPathMap,
  fromStreakExpression,
  validateField,
  validateFilter,
  validateFilters,
  validatePathMap,
  validateStreakExpression,
  type ConditionOperator,
} from './rules';

const ev = (attrs: Record<string, unknown>, more: Partial<EventView> = {}): EventView => ({
  type: 'match_finished',
  user_id: 'u1',
  event_id: 'e1',
  occurred_at: 1_795_000_000_000,
  attrs,
  subject: { type: 'match', id: 'm-7' },
  actor_metadata: { tier: 'gold' },
  ...more,
});

/** Sample events covering present, missing and wrongly typed values. */
const SAMPLES: EventView[] = [
  ev({ mode: 'ranked', score: 10, amount: 100 }),
  ev({ mode: 'casual', score: 3, amount: 99 }),
  ev({ mode: 5, score: '10', amount: 0 }),
  ev({}),
  ev({ mode: null, score: -1, amount: 250 }, { type: 'purchase' }),
  ev({ mode: 'ranked', score: 10.5, amount: 1e9 }, { user_id: 'u2', subject: null, actor_metadata: null }),
];

const OPS: Array<[ConditionOperator, unknown]> = [
  ['eq', 'ranked'],
  ['ne', 'ranked'],
  ['eq', 10],
  ['gt', 5],
  ['gte', 10],
  ['lt', 10],
  ['lte', 3],
  ['in', ['ranked', 'casual', 5]],
];

describe('every surface form becomes the same condition', () => {
  it.each(OPS)(
    '%s %j: {path: {op: v}}, {field, op, value}, a list of one, and a streak expression',
    (op, value) => {
      for (const field of [
        'attrs.mode',
        'attrs.score',
        'type',
        'user_id',
        'subject.id',
        'actor.metadata.tier',
      ]) {
        const canonical: Condition = { [field]: { [op]: value } };
        const forms = [
          fromPathMap(canonical),
          fromFilter({ field, op, value }),
          fromFilters([{ field, op, value }]),
          fromStreakExpression({ condition: { field, operator: op, value } }),
        ];
        for (const c of forms) expect(c).toEqual(canonical);
        // ... and evaluates the same on every sample, as the language's own matchConditions does.
        const tests = forms.map((c) => compile(c).test);
        for (const e of SAMPLES) {
          const want = matchConditions(canonical, e);
          expect(tests.map((t) => t(e))).toEqual(tests.map(() => want));
        }
      }
    },
  );

  it('a list of filters is one condition with every entry (AND), merged per field', () => {
    const c = fromFilters([
      { field: 'attrs.score', op: 'gte', value: 3 },
      { field: 'attrs.score', op: 'lt', value: 10 },
      { field: 'attrs.mode', op: 'ne', value: 'ranked' },
    ]);
    expect(c).toEqual({ 'attrs.score': { gte: 3, lt: 10 }, 'attrs.mode': { ne: 'ranked' } });
    expect(SAMPLES.map(compile(c).test)).toEqual([false, true, false, false, false, false]);
  });

  it('a later filter with the same field and operator replaces the earlier (scope filters, kept as they were)', () => {
    expect(
      fromFilters([
        { field: 'attrs.mode', op: 'eq', value: 'casual' },
        { field: 'attrs.mode', op: 'eq', value: 'ranked' },
      ]),
    ).toEqual({ 'attrs.mode': { eq: 'ranked' } });
  });

  it('no condition holds for every event; absent forms are no condition', () => {
    expect(fromPathMap(undefined)).toBeUndefined();
    expect(fromPathMap(null)).toBeUndefined();
    expect(fromFilters([])).toBeUndefined();
    expect(fromFilters(undefined)).toBeUndefined();
    expect(fromStreakExpression(undefined)).toBeUndefined();
    expect(SAMPLES.every(compile(undefined).test)).toBe(true);
  });

  it('a `__proto__` field is an own entry (refused by validation, never holds), and pollutes nothing', () => {
    const c = fromFilters([{ field: '__proto__', op: 'eq', value: 1 }]);
    expect(Object.keys(c!)).toEqual(['__proto__']);
    expect(validatePathMap(c, 'w')).toMatch(/w\.__proto__: field "__proto__" is not allowed/);
    expect(SAMPLES.some(compile(c).test)).toBe(false);
    expect(({} as Record<string, unknown>).eq).toBeUndefined();
  });
});

describe('the attrs alias of bare names', () => {
  it('with bareNames: attrs, a bare name is an attribute; known roots stay as written', () => {
    const opts = { bareNames: 'attrs' } as const;
    expect(fieldPath('amount', opts)).toBe('attrs.amount');
    expect(fieldPath('attrsx', opts)).toBe('attrs.attrsx');
    expect(fieldPath('level.max', opts)).toBe('attrs.level.max');
    for (const f of [
      'attrs.amount',
      'subject.id',
      'actor.user_id',
      'actor.metadata.tier',
      'type',
      'user_id',
      'event_id',
      'occurred_at',
    ])
      expect(fieldPath(f, opts)).toBe(f);
    expect(fromFilter({ field: 'amount', op: 'gte', value: 100 }, opts)).toEqual({
      'attrs.amount': { gte: 100 },
    });
    expect(fromStreakExpression({ condition: { field: 'mode', operator: 'ne', value: 'x' } }, opts)).toEqual({
      'attrs.mode': { ne: 'x' },
    });
  });

  it('without it (the default), a bare name is taken as written and refused as an unknown field', () => {
    expect(fieldPath('amount')).toBe('amount');
    expect(fromFilter({ field: 'amount', op: 'eq', value: 1 })).toEqual({ amount: { eq: 1 } });
    expect(validateFilter({ field: 'amount', op: 'eq', value: 1 }, 'config.scope.filters[0]')).toMatch(
      /^config\.scope\.filters\[0\]\.amount: unknown field "amount"/,
    );
    expect(SAMPLES.some(compile(fromFilter({ field: 'amount', op: 'gte', value: 0 })).test)).toBe(false);
  });

  it('the field resolver reads what readField reads at the aliased path', () => {
    const opts = { bareNames: 'attrs' } as const;
    for (const f of [
      'amount',
      'attrs.amount',
      'mode',
      'type',
      'subject.id',
      'actor.metadata.tier',
      'nope',
      'attrs.__proto__',
    ]) {
      const read = fieldReader(f, opts);
      for (const e of SAMPLES) expect(read(e)).toBe(readField(e, fieldPath(f, opts)));
    }
  });
});

describe('validation goes through the same adapters', () => {
  it('names the offending path under the caller’s where, as before', () => {
    expect(
      validateFilter({ field: 'amount', op: 'regex' as ConditionOperator, value: 1 }, 'body.event_filter', {
        bareNames: 'attrs',
      }),
    ).toBe('body.event_filter.attrs.amount: unknown operator "regex" (use eq, ne, gt, gte, lt, lte or in)');
    expect(
      validateFilters(
        [
          { field: 'attrs.ok', op: 'eq', value: 1 },
          { field: 'attrs.x', op: 'gt', value: 'a' },
        ],
        'config.scope.filters',
      ),
    ).toBe('config.scope.filters[1].attrs.x.gt: must be a finite number');
    expect(validateFilters(undefined, 'w')).toBeNull();
    expect(validatePathMap({ 'attrs.mode': { eq: [] } }, 'r.conditions')).toBe(
      'r.conditions.attrs.mode.eq: must be a string, a finite number or a boolean',
    );
    expect(
      validateStreakExpression(
        { condition: { field: 'attrs.mode', operator: 'ne', value: {} } },
        'config.expression',
      ),
    ).toBe('config.expression.condition.attrs.mode.ne: must be a string, a finite number or a boolean');
    expect(validateStreakExpression(undefined, 'config.expression')).toBeNull();
    expect(validateField('amount', 'body.calculation.field', { bareNames: 'attrs' })).toBeNull();
    expect(validateField('attrs.__proto__', 'body.calculation.field', { bareNames: 'attrs' })).toBe(
      'body.calculation.field.attrs.__proto__: field "attrs.__proto__" is not allowed',
    );
  });
});

describe('the event-type matcher', () => {
  it('`*` matches every type; anything else exactly (case-sensitive)', () => {
    const any = eventTypeMatcher('*');
    expect(['a', 'purchase', ''].every(any)).toBe(true);
    const one = eventTypeMatcher('purchase');
    expect(['purchase', 'Purchase', 'purchase ', 'kill'].map(one)).toEqual([true, false, false, false]);
  });

  it('takes event_types lists: any of them, `*` anywhere in the list, none for an empty list', () => {
    const some = eventTypeMatcher(['kill', 'purchase']);
    expect(['kill', 'purchase', 'login'].map(some)).toEqual([true, true, false]);
    expect(['x', 'y'].every(eventTypeMatcher(['kill', '*']))).toBe(true);
    expect(eventTypeMatcher([])('kill')).toBe(false);
    expect(eventTypeMatcher(['kill'])('kill')).toBe(true);
  });
});

describe('CompileCache', () => {
  it('builds once per key and starts over when full', () => {
    const cache = new CompileCache<number>(2);
    let builds = 0;
    const get = (k: string) => cache.get(k, () => ++builds);
    expect([get('a'), get('a'), get('b'), get('a')]).toEqual([1, 1, 2, 1]);
    expect(builds).toBe(2);
    get('c'); // full: starts over with c
    expect(cache.size).toBe(1);
    expect(get('a')).toBe(4);
  });
});
