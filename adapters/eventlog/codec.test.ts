/**
 * The plain Avro codec's encoding into its scratch buffer (./codec.ts `TopicTypes.encode`): every
 * record comes out in a buffer of its own, of its exact size, whatever the size of the record
 * before it; a record larger than the scratch grows it; an invalid record names its fields. The
 * registry codec's framing on top of the same encoding runs against the stack's registry in
 * tests/contract/eventlog.contract.test.ts and schema-registry.test.ts.
 */
import { Type, type Schema } from 'avsc';
import { EVENTS_TOPIC, type EventRecord } from '../../schemas/topics';
import { PlainAvroCodec } from './codec';

const event = (id: string, attrs: unknown): EventRecord => ({
  tenant_id: 't1',
  event_id: id,
  type: 'match_finished',
  user_id: 'u1',
  occurred_at: 1_700_000_000_000,
  received_at: 1_700_000_000_500,
  attrs_json: JSON.stringify(attrs),
  actor_metadata_json: null,
  subject_json: null,
});

describe('PlainAvroCodec encoding', () => {
  const codec = new PlainAvroCodec();
  const writer = Type.forSchema(EVENTS_TOPIC.schemas[EVENTS_TOPIC.schemas.length - 1] as Schema);

  it('gives each record a buffer of its own and its exact size, small and larger than the scratch', async () => {
    const records = [
      event('e1', { kills: 3 }),
      event('e2', { note: 'x'.repeat(20_000) }),
      event('e3', { kills: 4 }),
      event('e4', { note: 'é'.repeat(9_000) }),
    ];
    const encoded = await codec.encode(EVENTS_TOPIC, records);
    // Encoding later records left the earlier ones' bytes as they were.
    expect(encoded.map((b) => b.length)).toEqual(records.map((r) => writer.toBuffer(r).length));
    encoded.forEach((b, i) => expect(b.equals(writer.toBuffer(records[i]))).toBe(true));
    const decoded = [];
    for (const b of encoded) decoded.push(await codec.decode(EVENTS_TOPIC, b));
    expect(decoded).toEqual(records);
  });

  it('refuses a record that does not fit the schema, naming the field', async () => {
    const bad = { ...event('e5', {}), occurred_at: 'soon' } as unknown as EventRecord;
    await expect(codec.encode(EVENTS_TOPIC, [event('e5b', {}), bad])).rejects.toThrow(/occurred_at/);
    // The codec still encodes after a refusal.
    const [ok] = await codec.encode(EVENTS_TOPIC, [event('e6', { kills: 1 })]);
    expect(await codec.decode(EVENTS_TOPIC, ok)).toEqual(event('e6', { kills: 1 }));
  });
});
