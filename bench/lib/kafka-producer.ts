/**
 * The bare kafkajs producer baseline, run as its own process:
 *
 *   node --import tsx bench/lib/kafka-producer.ts '<json options>'
 *
 * The same settings as the event log's producer (idempotent, acks=all, maxInFlightRequests 1,
 * kafkajs's DefaultPartitioner, keys tenant:user), the same Avro records in the same Confluent
 * wire format (the event log's RegistryAvroCodec), sent in batches of 100 with `concurrency`
 * sends outstanding (the HTTP load generator's connection count), for `durationS` seconds.
 * Prints one line: BASELINE {"events", "seconds", "eventsPerS", "sendMs": {p50, p99}}.
 */
import { Kafka, logLevel, Partitioners } from 'kafkajs';
import { RegistryAvroCodec } from '../../adapters/eventlog/codec';
import { EVENTS_TOPIC, eventKey } from '../../schemas/topics';
import { eventRecord, generate } from './events';
import { percentile } from './util';

interface Options {
  brokers: string;
  registryUrl: string;
  topicPrefix: string;
  durationS: number;
  warmupS: number;
  concurrency: number;
  batch: number;
  tenants: string[];
  users: number;
  seed: number;
}

async function main(): Promise<void> {
  const o = JSON.parse(process.argv[2]!) as Options;
  const codec = new RegistryAvroCodec({ url: o.registryUrl, subjectPrefix: o.topicPrefix });
  const kafka = new Kafka({
    clientId: 'ludus-bench-baseline',
    brokers: o.brokers.split(','),
    logLevel: logLevel.WARN,
  });
  const admin = kafka.admin();
  const producer = kafka.producer({
    idempotent: true,
    maxInFlightRequests: 1,
    allowAutoTopicCreation: false,
    createPartitioner: Partitioners.DefaultPartitioner,
  });
  await Promise.all([admin.connect(), producer.connect()]);
  const topic = `${o.topicPrefix}${EVENTS_TOPIC.name}`;
  await admin.createTopics({
    topics: [{ topic, numPartitions: EVENTS_TOPIC.partitions }],
    waitForLeaders: true,
  });
  await codec.writerSchemaId(EVENTS_TOPIC);
  const pool = generate(100 * 64, { tenants: o.tenants, users: o.users, seed: o.seed, idPrefix: 'base' });

  let seq = 0;
  const send = async (): Promise<number> => {
    const s = seq++;
    const at = Date.now();
    const t = performance.now();
    const records = Array.from({ length: o.batch }, (_, j) => {
      const e = pool[(s * o.batch + j) % pool.length]!;
      return eventRecord({ ...e, event_id: `base-${s}-${j}` }, at);
    });
    const values = await codec.encode(EVENTS_TOPIC, records);
    const messages = records.map((r, i) => ({ key: eventKey(r.tenant_id, r.user_id), value: values[i] }));
    await producer.send({ topic, acks: -1, messages });
    return performance.now() - t;
  };

  const run = async (seconds: number) => {
    const latencies: number[] = [];
    let events = 0;
    const end = performance.now() + seconds * 1000;
    const start = performance.now();
    await Promise.all(
      Array.from({ length: o.concurrency }, async () => {
        while (performance.now() < end) {
          latencies.push(await send());
          events += o.batch;
        }
      }),
    );
    return { events, seconds: (performance.now() - start) / 1000, latencies };
  };

  if (o.warmupS > 0) await run(o.warmupS);
  const r = await run(o.durationS);
  process.stdout.write(
    `BASELINE ${JSON.stringify({
      events: r.events,
      seconds: r.seconds,
      eventsPerS: r.events / r.seconds,
      sendMs: { p50: percentile(r.latencies, 50), p99: percentile(r.latencies, 99) },
    })}\n`,
  );
  await Promise.all([producer.disconnect(), admin.disconnect()]);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`kafka-producer: ${(err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  },
);
