/**
 * Issue 19: the ingest gateway's warm-up (ingest/warm-up.ts) on the real Kafka and schema
 * registry. It appends synthetic events of a synthetic tenant to `ludus.warm-up` only (never to
 * the events topic), creates that topic with an hour's retention, stops at its budget, and a
 * failing event log ends it with a warning instead of failing the start.
 */
import { Kafka, logLevel, ConfigResourceTypes } from 'kafkajs';
import { KafkaEventLog } from '../../adapters/eventlog/kafka';
import type { EventLog } from '../../adapters/eventlog/types';
import { warmUpIngest, WARM_UP_TENANT } from '../../ingest/warm-up';
import { EVENTS_TOPIC, WARM_UP_TOPIC, type EventRecord } from '../../schemas/topics';
import { createLogger } from '../../shared/logger';
import { deleteKafkaByPrefix, deleteSubjectsByPrefix } from '../support/cleanup';
import { stack, uniqueName } from '../support/stack';

const log = createLogger('silent');

describe('ingest warm-up [kafka]', () => {
  const prefix = `${uniqueName('iw')}.`;
  let eventLog: KafkaEventLog;

  beforeAll(async () => {
    eventLog = new KafkaEventLog({
      brokers: stack.kafkaBrokers,
      schemaRegistryUrl: stack.schemaRegistryUrl,
      topicPrefix: prefix,
      replicationFactor: 1,
      log: () => undefined,
    });
    await eventLog.ensureTopic(EVENTS_TOPIC);
  });

  afterAll(async () => {
    await eventLog?.close();
    await deleteKafkaByPrefix(prefix);
    await deleteSubjectsByPrefix(prefix);
  });

  const total = async (topic: typeof EVENTS_TOPIC) =>
    [...(await eventLog.endOffsets(topic)).values()].reduce((a, b) => a + b, 0);

  it('appends synthetic events to ludus.warm-up only, kept an hour, for about its budget', async () => {
    const r = await warmUpIngest({ eventLog, log, now: Date.now }, { budgetMs: 400 });
    expect(r.failed).toBeUndefined();
    expect(r.events).toBeGreaterThanOrEqual(800);
    expect(r.events % 100).toBe(0);
    expect(r.ms).toBeGreaterThanOrEqual(400);
    expect(r.ms).toBeLessThan(10_000);
    expect(await total(WARM_UP_TOPIC)).toBe(r.events);
    expect(await total(EVENTS_TOPIC)).toBe(0);

    const admin = new Kafka({ brokers: stack.kafkaBrokers, logLevel: logLevel.NOTHING }).admin();
    await admin.connect();
    try {
      const { resources } = await admin.describeConfigs({
        includeSynonyms: false,
        resources: [
          {
            type: ConfigResourceTypes.TOPIC,
            name: `${prefix}${WARM_UP_TOPIC.name}`,
            configNames: ['retention.ms'],
          },
        ],
      });
      expect(resources[0]!.configEntries.find((c) => c.configName === 'retention.ms')?.configValue).toBe(
        '3600000',
      );
    } finally {
      await admin.disconnect();
    }
  });

  it('does nothing with a budget of 0', async () => {
    const before = await total(WARM_UP_TOPIC);
    expect(await warmUpIngest({ eventLog, log, now: Date.now }, { budgetMs: 0 })).toEqual({
      events: 0,
      ms: 0,
    });
    expect(await total(WARM_UP_TOPIC)).toBe(before);
  });
});

describe('ingest warm-up with a failing event log', () => {
  it('stops at the first failure, says why, and leaves no append running', async () => {
    const appended: EventRecord[][] = [];
    let calls = 0;
    const failing = {
      ensureTopic: async () => undefined,
      append: async (_t: unknown, records: Array<{ key: string; value: EventRecord }>) => {
        calls++;
        if (calls > 3) throw new Error('broker gone');
        appended.push(records.map((r) => r.value));
        await new Promise((r) => setTimeout(r, 5));
      },
    } as unknown as EventLog;
    const warnings: unknown[] = [];
    const spy = {
      ...log,
      warn: (o: unknown) => warnings.push(o),
      info: () => undefined,
    } as unknown as typeof log;
    const r = await warmUpIngest({ eventLog: failing, log: spy, now: Date.now }, { budgetMs: 60_000 });
    expect(r.failed).toBe('broker gone');
    expect(r.ms).toBeLessThan(5_000);
    expect(warnings).toHaveLength(1);
    const callsAtReturn = calls;
    await new Promise((res) => setTimeout(res, 50));
    expect(calls).toBe(callsAtReturn);
    // Every synthetic record belongs to the synthetic tenant and passed the route's own checks.
    expect(
      appended.flat().every((e) => e.tenant_id === WARM_UP_TENANT && e.event_id.startsWith('warm-up-')),
    ).toBe(true);
    expect(appended.flat().length).toBe(300);
  });
});
