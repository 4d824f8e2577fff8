/**
 * The registry codec against the real schema registry: processes that start together (a gateway
 * and the processors of one deployment) register a new subject at the same moment, and every one
 * of them gets the subject's id. The registry refuses all but one of the racers setting the
 * subject's compatibility level (Apicurio answers 409); before the codec retried, the losers failed
 * to start (seen in the pipeline benchmark right after a clean-up).
 */
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
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
        await fetch(
          `${stack.schemaRegistryUrl}/subjects/${prefix}${EVENTS_TOPIC.name}-value/versions/latest`,
          {
            signal: AbortSignal.timeout(10_000),
          },
        )
      ).json()) as { id: number };
      expect(latest.id).toBe(ids[0]);
    }
  });

  it('keeps a level an operator set, and refuses at once to register against it', async () => {
    const prefix = `${uniqueName('t')}.`;
    prefixes.push(prefix);
    const subject = `${prefix}${EVENTS_TOPIC.name}-value`;
    const headers = { 'Content-Type': 'application/vnd.schemaregistry.v1+json' };
    const codec = new RegistryAvroCodec({ url: stack.schemaRegistryUrl, subjectPrefix: prefix });
    await codec.writerSchemaId(EVENTS_TOPIC); // the subject exists, at BACKWARD
    const put = await fetch(`${stack.schemaRegistryUrl}/config/${subject}`, {
      method: 'PUT',
      headers,
      body: JSON.stringify({ compatibility: 'FULL' }),
      signal: AbortSignal.timeout(10_000),
    });
    expect(put.ok).toBe(true);
    const started = Date.now();
    const other = new RegistryAvroCodec({ url: stack.schemaRegistryUrl, subjectPrefix: prefix });
    await expect(other.writerSchemaId(EVENTS_TOPIC)).rejects.toThrow(/Compatibility does not match/);
    expect(Date.now() - started).toBeLessThan(2_000); // not after every attempt and pause
    const config = (await (
      await fetch(`${stack.schemaRegistryUrl}/config/${subject}`, { signal: AbortSignal.timeout(10_000) })
    ).json()) as { compatibilityLevel: string };
    expect(config.compatibilityLevel).toBe('FULL');
  });

  it('tries a request the registry never answers again, and registers', async () => {
    // A proxy in front of the real registry that leaves the first request of each method and path
    // unanswered (the connection stays open), and forwards every later one. The first PUT of the
    // subject's level is among them: the schema is registered, the level is not.
    const target = new URL(stack.schemaRegistryUrl);
    const seen = new Set<string>();
    let swallowed = 0;
    const proxy: Server = createServer((req, res) => {
      const key = `${req.method} ${req.url}`;
      if (!seen.has(key)) {
        seen.add(key);
        swallowed++;
        req.resume();
        return;
      }
      const upstream = request(
        { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers },
        (up) => {
          res.writeHead(up.statusCode ?? 502, up.headers);
          up.pipe(res);
        },
      );
      upstream.on('error', () => res.destroy());
      req.pipe(upstream);
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    try {
      const { port } = proxy.address() as AddressInfo;
      const prefix = `${uniqueName('t')}.`;
      prefixes.push(prefix);
      const codec = new RegistryAvroCodec({
        url: `http://127.0.0.1:${port}${target.pathname}`,
        subjectPrefix: prefix,
        requestTimeoutMs: 300,
      });
      const id = await codec.writerSchemaId(EVENTS_TOPIC);
      expect(swallowed).toBeGreaterThan(0);
      const latest = (await (
        await fetch(
          `${stack.schemaRegistryUrl}/subjects/${prefix}${EVENTS_TOPIC.name}-value/versions/latest`,
          {
            signal: AbortSignal.timeout(10_000),
          },
        )
      ).json()) as { id: number };
      expect(latest.id).toBe(id);
      // The lost request that set the subject's level was made good on a later attempt.
      const config = (await (
        await fetch(`${stack.schemaRegistryUrl}/config/${prefix}${EVENTS_TOPIC.name}-value`, {
          signal: AbortSignal.timeout(10_000),
        })
      ).json()) as { compatibilityLevel: string };
      expect(config.compatibilityLevel).toBe('BACKWARD');
    } finally {
      proxy.closeAllConnections();
      await new Promise((r) => proxy.close(r));
    }
  });
});
