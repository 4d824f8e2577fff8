/**
 * Issue 19: the ingest gateway's warm-up (ingest/warm-up.ts) on the real Kafka and schema
 * registry. It appends synthetic events of a synthetic tenant to `ludus.warm-up` only (never to
 * the events topic), creates that topic with an hour's retention, stops at its budget, and a
 * failing event log ends it with a warning instead of failing the start. In the embedded shape it
 * appends to a scratch file log that is removed afterwards (last describe).
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kafka, logLevel, ConfigResourceTypes } from 'kafkajs';
import { FileEventLog } from '../../adapters/eventlog/file';
import { KafkaEventLog } from '../../adapters/eventlog/kafka';
import type { EventLog } from '../../adapters/eventlog/types';
import { warmUpIngest, WARM_UP_TENANT } from '../../ingest/warm-up';
import { EVENTS_TOPIC, WARM_UP_TOPIC, type EventRecord } from '../../schemas/topics';
import { openWarmUpEventLog, type Adapters } from '../../runtime/compose';
import { loadConfig } from '../../runtime/config';
import { createLogger } from '../../shared/logger';
import { startTestApp } from '../support/app';
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

/**
 * The embedded shape's warm-up appends to a scratch file log in `<data dir>/log-warm-up`
 * (runtime/compose.ts `openWarmUpEventLog`), because the file log keeps a partition's last segment
 * for ever: the data directory's own log gets nothing, and the scratch directory is gone after.
 */
describe('ingest warm-up [embedded file log]', () => {
  let dataDir: string;
  let real: FileEventLog;

  beforeEach(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'ludus-iw-'));
    real = new FileEventLog({ dir: join(dataDir, 'log') });
    await real.ensureTopic(EVENTS_TOPIC);
  });
  afterEach(async () => {
    await real.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const adapters = (eventLog: EventLog) => ({ eventLog }) as unknown as Adapters;

  it('appends to a scratch log, then removes it; the real log gets nothing', async () => {
    // A scratch directory a crash left behind is removed first.
    mkdirSync(join(dataDir, 'log-warm-up', 'leftover'), { recursive: true });
    const config = loadConfig({ LUDUS_DATA_DIR: dataDir });
    const scratch = await openWarmUpEventLog(config, adapters(real), log);
    expect(scratch).not.toBeNull();
    expect(scratch!.eventLog).not.toBe(real);
    expect(existsSync(join(dataDir, 'log-warm-up', 'leftover'))).toBe(false);
    const r = await warmUpIngest({ eventLog: scratch!.eventLog, log, now: Date.now }, { budgetMs: 300 });
    expect(r.failed).toBeUndefined();
    expect(r.events).toBeGreaterThanOrEqual(800);
    const appended = [...(await scratch!.eventLog.endOffsets(WARM_UP_TOPIC)).values()].reduce(
      (a, b) => a + b,
    );
    expect(appended).toBe(r.events);
    await scratch!.dispose();
    expect(existsSync(join(dataDir, 'log-warm-up'))).toBe(false);
    expect(readdirSync(join(dataDir, 'log'))).toEqual([EVENTS_TOPIC.name]);
    expect([...(await real.endOffsets(EVENTS_TOPIC)).values()].every((n) => n === 0)).toBe(true);
  });

  it('starts the embedded app with its warm-up, and nothing of it is left in the data directory', async () => {
    const app = await startTestApp('embedded', { env: { LUDUS_INGEST_WARM_UP_MS: '200' } });
    try {
      const dir = app.ctx.config.dataDir;
      expect(existsSync(join(dir, 'log-warm-up'))).toBe(false);
      expect(existsSync(join(dir, 'log', WARM_UP_TOPIC.name))).toBe(false);
      const res = await fetch(`${app.url.ingest}/health`);
      expect(res.status).toBe(200);
    } finally {
      await app.stop();
    }
  }, 120_000);

  it('refuses to open a scratch log where there can be none (the caller then starts cold)', async () => {
    const file = join(dataDir, 'not-a-directory');
    writeFileSync(file, 'x');
    const config = loadConfig({ LUDUS_DATA_DIR: file });
    await expect(openWarmUpEventLog(config, adapters(real), log)).rejects.toThrow(/ENOTDIR|not a directory/i);
  });

  it('uses the process log with Kafka, and none with the SQL-table log', async () => {
    const config = loadConfig({ LUDUS_DATA_DIR: dataDir });
    const kafka = { kind: 'kafka' } as unknown as EventLog;
    const same = await openWarmUpEventLog(config, adapters(kafka), log);
    expect(same!.eventLog).toBe(kafka);
    await same!.dispose();
    expect(
      await openWarmUpEventLog(config, adapters({ kind: 'local' } as unknown as EventLog), log),
    ).toBeNull();
  });
});
