/**
 * The step contract's runner (./step.ts) with steps written for the test: load before apply,
 * once per batch, in list order; how effects combine into one outcome per record; dead letters
 * withheld from later steps; after-commit work in order.
 */
import type { Queryable } from '../../adapters/sql/types';
import type { EventView } from '../../core/expressions';
import type { EventRecord } from '../../schemas/topics';
import {
  applied,
  nothing,
  runSteps,
  type PipelineStep,
  type StepBatch,
  type StepEffect,
  type StepEvent,
} from './step';

const q = {} as Queryable;

function batchOf(types: string[]): StepBatch {
  const events: StepEvent[] = types.map((type, index) => {
    const event: EventRecord = {
      tenant_id: 't',
      event_id: `e${index}`,
      type,
      user_id: `u${index}`,
      occurred_at: 1000 + index,
      received_at: 2000,
      attrs_json: '{}',
      actor_metadata_json: null,
      subject_json: null,
    };
    const view: EventView = {
      type,
      user_id: event.user_id,
      event_id: event.event_id,
      occurred_at: event.occurred_at,
      attrs: {},
    };
    return {
      index,
      record: {
        topic: 'ludus.events',
        partition: 3,
        offset: 10 + index,
        key: `t:${event.user_id}`,
        value: event,
        timestamp: 0,
      },
      event,
      view,
    };
  });
  return {
    parts: [{ partition: 3, firstOffset: 10, nextOffset: 10 + types.length }],
    events,
    replayed: [],
    tenants: ['t'],
    timezones: new Map([['t', 'UTC']]),
    now: 5000,
  };
}

/** A step that answers per event type, and records what it was given. */
function step(
  name: string,
  byType: Record<string, StepEffect>,
  log: string[],
  after?: () => Promise<void>,
): PipelineStep<string> & { seen: string[][] } {
  const seen: string[][] = [];
  return {
    name,
    seen,
    async load(_q, batch) {
      log.push(`${name}.load(${batch.events.length})`);
      return `${name}-defs`;
    },
    async apply(_q, batch, loaded) {
      log.push(`${name}.apply(${loaded})`);
      seen.push(batch.events.map((e) => e.event.type));
      expect(batch.now).toBe(5000);
      expect(batch.timezones.get('t')).toBe('UTC');
      return { effects: batch.events.map((e) => byType[e.view.type] ?? nothing), afterCommit: after };
    },
  };
}

describe('runSteps', () => {
  it('loads then applies each step once per batch, in list order', async () => {
    const log: string[] = [];
    await runSteps(q, [step('a', {}, log), step('b', {}, log)], batchOf(['x', 'y']));
    expect(log).toEqual(['a.load(2)', 'a.apply(a-defs)', 'b.load(2)', 'b.apply(b-defs)']);
  });

  it('an event is ok when any step applied it, else skipped with the first reason given, else "no matching rule"', async () => {
    const log: string[] = [];
    const late: StepEffect = { kind: 'none', reason: 'late: the window has closed' };
    const r = await runSteps(
      q,
      [
        step('scores', { both: applied, first: applied, late, lateThenEarned: late }, log),
        step(
          'credits',
          {
            both: applied,
            second: applied,
            lateThenEarned: applied,
            other: { kind: 'none', reason: 'capped' },
          },
          log,
        ),
      ],
      batchOf(['both', 'first', 'second', 'late', 'lateThenEarned', 'other', 'none']),
    );
    expect(r.outcomes).toEqual([
      { kind: 'ok' },
      { kind: 'ok' },
      { kind: 'ok' },
      { kind: 'skip', reason: 'late: the window has closed' },
      { kind: 'ok' },
      { kind: 'skip', reason: 'capped' },
      { kind: 'skip', reason: 'no matching rule' },
    ]);
  });

  it('a dead-lettered event becomes a dead letter and is not given to the steps after', async () => {
    const log: string[] = [];
    const check = step(
      'check',
      { poison: { kind: 'dead_letter', reason: 'bad attrs', reasonClass: 'invalid' } },
      log,
    );
    const effects = step('effects', { fine: applied, poison: applied }, log);
    const r = await runSteps(q, [check, effects], batchOf(['fine', 'poison', 'other']));
    expect(effects.seen).toEqual([['fine', 'other']]);
    expect(log).toContain('effects.load(2)');
    expect(r.outcomes).toEqual([
      { kind: 'ok' },
      { kind: 'dead_letter', reason: 'bad attrs', reasonClass: 'invalid' },
      { kind: 'skip', reason: 'no matching rule' },
    ]);
  });

  it('steps still run on a batch without fresh events (replays: derived indexes resync, watermarks move)', async () => {
    const log: string[] = [];
    let pushed = 0;
    const r = await runSteps(q, [step('a', {}, log, async () => void pushed++)], batchOf([]));
    expect(log).toEqual(['a.load(0)', 'a.apply(a-defs)']);
    expect(r.outcomes).toEqual([]);
    await r.afterCommit();
    expect(pushed).toBe(1);
  });

  it('runs after-commit work in list order; one that throws stops the rest (the batch is redelivered as replay)', async () => {
    const log: string[] = [];
    const order: string[] = [];
    const a = step('a', {}, log, async () => void order.push('a'));
    const b = step('b', {}, log, async () => {
      order.push('b');
      throw new Error('index down');
    });
    const c = step('c', {}, log, async () => void order.push('c'));
    const r = await runSteps(q, [a, b, c], batchOf(['x']));
    expect(order).toEqual([]); // nothing before the commit
    await expect(r.afterCommit()).rejects.toThrow('index down');
    expect(order).toEqual(['a', 'b']);
  });

  it('refuses a step that does not report one effect per event', async () => {
    const bad: PipelineStep<null> = {
      name: 'bad',
      load: async () => null,
      apply: async () => ({ effects: [applied] }),
    };
    await expect(runSteps(q, [bad], batchOf(['x', 'y']))).rejects.toThrow(
      'pipeline step bad: 1 effects for 2 events',
    );
  });
});
