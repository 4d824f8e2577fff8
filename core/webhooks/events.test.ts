import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Queryable } from '../../adapters/sql/types';
import { enqueue, withEnvelope } from '../outbox';
import { bodyOf, EVENT_TYPES } from './events';

describe('webhook events', () => {
  it('lets endpoints subscribe to exactly the event types of SPEC.md, or *', () => {
    const schema = JSON.parse(
      readFileSync(join(__dirname, '..', '..', 'schemas', 'http', 'webhook.create.json'), 'utf8'),
    );
    expect(schema.properties.event_types.items.enum).toEqual(['*', ...EVENT_TYPES]);
  });

  it('serialises a payload as it is, envelope keys first', () => {
    const body = bodyOf({ data: { a: 1 }, user_id: 'u', timestamp: 'T', tenant_id: 't', event_type: 'x' });
    expect(body).toBe('{"event_type":"x","tenant_id":"t","timestamp":"T","data":{"a":1},"user_id":"u"}');
  });

  it('enqueue fills the envelope in, and refuses a payload naming another type or tenant', async () => {
    const at = Date.parse('2026-11-22T10:00:00Z');
    const e = { tenant_id: 't1', event_type: 'coupon.redeemed', dedupe_key: 'k', created_at: at };
    expect(withEnvelope({ ...e, payload: { user_id: 'u', code: 'C' } })).toEqual({
      event_type: 'coupon.redeemed',
      tenant_id: 't1',
      timestamp: '2026-11-22T10:00:00.000Z',
      user_id: 'u',
      code: 'C',
    });
    expect(withEnvelope({ ...e, payload: { timestamp: 'custom' } }).timestamp).toBe('custom');
    expect(() => withEnvelope({ ...e, payload: { event_type: 'order.created' } })).toThrow(/differs/);
    expect(() => withEnvelope({ ...e, payload: { tenant_id: 't2' } })).toThrow(/differs/);
    const seen: unknown[][] = [];
    const q: Queryable = {
      query: async (_text, params) => {
        seen.push(params ?? []);
        return { rows: [], rowCount: 1 } as never;
      },
      exec: async () => undefined,
    };
    expect(await enqueue(q, { ...e, payload: { code: 'C' } })).toBe(true);
    expect(JSON.parse(seen[0]![3] as string)).toMatchObject({
      event_type: 'coupon.redeemed',
      tenant_id: 't1',
      code: 'C',
    });
  });
});
