/**
 * The registry codec against the real schema registry: processes that start together (a gateway
 * and the processors of one deployment) register a new subject at the same moment, and every one
 * of them gets the subject's id. The registry refuses all but one of the racers setting the
 * subject's compatibility level (Apicurio answers 409); before the codec retried, the losers failed
 * to start (seen in the pipeline benchmark right after a clean-up).
 */
import { RegistryAvroCodec } from '../../adapters/eventlog/codec';
import { EVENTS_TOPIC } from '../../schemas/topics';
import { deleteSubjectsByPrefix } from '../support/cleanup';
import { stack, uniqueName } from '../support/stack';

describe('RegistryAvroCodec [schema registry]', () => {
  const prefixes: string[] = [];
  afterAll(async () => {
    for (const p of prefixes) await deleteSubjectsByPrefix(p);
  });

  it('gives every codec racing to register a new subject the same id', async () => {
    for (let round = 0; round < 5; round++) {
      const prefix = `${uniqueName('t')}.`;
      prefixes.push(prefix);
      const codecs = Array.from(
        { length: 4 },
        () => new RegistryAvroCodec({ url: stack.schemaRegistryUrl, subjectPrefix: prefix }),
      );
      const ids = await Promise.all(codecs.map((c) => c.writerSchemaId(EVENTS_TOPIC)));
      expect(new Set(ids).size).toBe(1);
      const latest = (await (
        await fetch(`${stack.schemaRegistryUrl}/subjects/${prefix}${EVENTS_TOPIC.name}-value/versions/latest`)
      ).json()) as { id: number };
      expect(latest.id).toBe(ids[0]);
    }
  });
});
