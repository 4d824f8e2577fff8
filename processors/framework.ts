/**
 * The consumer framework every SQL-backed processor uses.
 *
 * Each batch of one partition runs in ONE SQL transaction that (1) locks the partition's stored
 * offset, (2) applies the records not yet applied, (3) writes dead letters, and (4) stores the new
 * offset. Because the offset row is locked first, a stale member still working on a partition
 * after a rebalance (kafkajs has no generation fencing) waits, then sees the advanced offset and
 * applies nothing twice. Records below the stored offset are handed to the processor as
 * `replayed` (already applied), so derived indexes can be resynchronised from them.
 *
 * Outcomes are typed per record: ok, skip (nothing to do), dead_letter (cannot be applied; kept in
 * the dead_letters table). More than `maxDeadLetters` dead letters within `deadLetterWindowMs`
 * stops the consumer instead of dead-lettering everything (a poison deployment, not poison data):
 * the batch that would pass the limit rolls back, so its records wait for the fixed deployment.
 */
import type { Batch, Consumer, EventLog, LogRecord } from '../adapters/eventlog/types';
import type { Queryable, Sql } from '../adapters/sql/types';
import type { Topic } from '../schemas/topics';
import type { Logger } from '../runtime/logger';
import type { Metrics } from '../runtime/metrics';
import { readOffsets } from './offsets';

export type Outcome =
  { kind: 'ok' } | { kind: 'skip'; reason: string } | { kind: 'dead_letter'; reason: string };

export const ok: Outcome = { kind: 'ok' };
export const skip = (reason: string): Outcome => ({ kind: 'skip', reason });
export const deadLetter = (reason: string): Outcome => ({ kind: 'dead_letter', reason });

export interface ApplyResult {
  /** One outcome per fresh record, in order. */
  outcomes: Outcome[];
  /** Runs after the commit (derived indexes). When it throws, the batch is redelivered as replay. */
  afterCommit?: () => Promise<void>;
}

export interface Processor<T> {
  group: string;
  topic: Topic<T>;
  maxBatchSize?: number;
  /**
   * Applies `fresh` (not yet applied) inside the transaction `q`. `replayed` are records of the same
   * batch that an earlier transaction already applied: no effects, only derived-index resync.
   */
  apply(
    q: Queryable,
    batch: { partition: number; nextOffset: number; fresh: LogRecord<T>[]; replayed: LogRecord<T>[] },
  ): Promise<ApplyResult>;
  /**
   * Where to resume, given the offsets stored in SQL. Default: those offsets. A processor with a
   * derived index may resume earlier (to resync the index from replayed records).
   */
  resumeFrom?(partitions: number[], stored: Map<number, number>): Promise<Map<number, number>>;
  onAssignment?(partitions: number[]): void;
  /**
   * Called every `lagIntervalMs` with the partitions this member owns and the offsets applied to
   * them: upkeep of derived indexes that can lose their state while no record arrives (a Redis
   * restarted empty). Runs beside batches; a failure is logged and retried at the next tick.
   */
  maintain?(partitions: number[], applied: Map<number, number>): Promise<void>;
}

export interface FrameworkDeps {
  sql: Sql;
  eventLog: EventLog;
  log: Logger;
  metrics: Metrics;
}

export interface RunningProcessor {
  consumer: Consumer;
  /** Null while healthy; the reason when the dead-letter limit stopped it. */
  stoppedBecause(): string | null;
  stop(): Promise<void>;
}

export interface FrameworkOptions {
  maxDeadLetters?: number;
  deadLetterWindowMs?: number;
  /** How often lag is measured, ms. */
  lagIntervalMs?: number;
}

export async function startProcessor<T>(
  deps: FrameworkDeps,
  p: Processor<T>,
  opts: FrameworkOptions = {},
): Promise<RunningProcessor> {
  const maxDead = opts.maxDeadLetters ?? 100;
  const deadWindow = opts.deadLetterWindowMs ?? 60_000;
  const topicName = deps.eventLog.physicalName(p.topic);
  const labels = { group: p.group, topic: topicName };
  const log = deps.log.child({ processor: p.group });
  const deadTimes: number[] = [];
  let fatal: string | null = null;
  let consumer: Consumer | null = null;
  const stored = new Map<number, number>();
  /** Partitions whose afterCommit failed: the first offset to redeliver, below the stored one. */
  const replayFrom = new Map<number, number>();

  await deps.eventLog.ensureTopic(p.topic);

  /**
   * Counts `n` new dead letters against the window, or stops the processor when they would pass
   * the limit (throws, so the batch's transaction rolls back). Returns when they were counted.
   */
  const admitDeadLetters = (n: number): number | null => {
    if (n === 0) return null;
    const now = Date.now();
    while (deadTimes.length && deadTimes[0]! < now - deadWindow) deadTimes.shift();
    if (deadTimes.length + n > maxDead) {
      fatal = `${deadTimes.length + n} dead letters within ${deadWindow} ms (limit ${maxDead}); fix the cause, then restart`;
      log.fatal({ reason: fatal }, 'processor stopped');
      void consumer?.stop();
      throw new Error(`processor stopped: ${fatal}`);
    }
    for (let i = 0; i < n; i++) deadTimes.push(now);
    return now;
  };

  const handleBatch = async (batch: Batch<T>): Promise<void> => {
    if (fatal) throw new Error(`processor stopped: ${fatal}`);
    const end = deps.metrics.consumerBatchSeconds.startTimer(labels);
    let dead = 0;
    let reservedAt: number | null = null;
    const committed = deps.sql.tx(async (q) => {
      await q.query(
        `INSERT INTO consumer_offsets (group_id, topic, partition, next_offset) VALUES ($1, $2, $3, 0)
         ON CONFLICT DO NOTHING`,
        [p.group, topicName, batch.partition],
      );
      const r = await q.query<{ next_offset: number }>(
        'SELECT next_offset FROM consumer_offsets WHERE group_id = $1 AND topic = $2 AND partition = $3 FOR UPDATE',
        [p.group, topicName, batch.partition],
      );
      const from = Number(r.rows[0]!.next_offset);
      const fresh = batch.records.filter((x) => x.offset >= from);
      const replayed = batch.records.filter((x) => x.offset < from);
      const res = await p.apply(q, {
        partition: batch.partition,
        nextOffset: batch.nextOffset,
        fresh,
        replayed,
      });
      if (res.outcomes.length !== fresh.length)
        throw new Error(`${p.group}: ${res.outcomes.length} outcomes for ${fresh.length} records`);
      // The limit is checked before anything is written: the batch that would pass it rolls back.
      dead = res.outcomes.filter((o) => o.kind === 'dead_letter').length;
      reservedAt = admitDeadLetters(dead);
      for (const [i, o] of res.outcomes.entries()) {
        if (o.kind !== 'dead_letter') continue;
        const rec = fresh[i]!;
        await q.query(
          `INSERT INTO dead_letters (group_id, topic, partition, "offset", key, reason, payload) VALUES ($1, $2, $3, $4, $5, $6, $7)
           ON CONFLICT DO NOTHING`,
          [p.group, topicName, rec.partition, rec.offset, rec.key, o.reason, JSON.stringify(rec.value)],
        );
      }
      if (batch.nextOffset > from) {
        await q.query(
          'UPDATE consumer_offsets SET next_offset = $4, updated_at = now() WHERE group_id = $1 AND topic = $2 AND partition = $3',
          [p.group, topicName, batch.partition, batch.nextOffset],
        );
      }
      return { ...res, applied: Math.max(from, batch.nextOffset) };
    });
    const { outcomes, afterCommit, applied } = await committed.catch((err: unknown) => {
      // Not committed: its dead letters do not count.
      for (let i = 0; reservedAt !== null && i < dead; i++)
        deadTimes.splice(deadTimes.lastIndexOf(reservedAt), 1);
      throw err;
    });
    stored.set(batch.partition, applied);
    end();

    const counts = { ok: 0, skip: 0, dead_letter: 0 };
    for (const o of outcomes) counts[o.kind]++;
    for (const [outcome, n] of Object.entries(counts))
      if (n) deps.metrics.consumerRecords.inc({ ...labels, outcome }, n);
    if (counts.dead_letter) {
      log.warn({ partition: batch.partition, dead_letters: counts.dead_letter }, 'records dead-lettered');
    }
    if (afterCommit) {
      try {
        await afterCommit();
      } catch (err) {
        // Redeliver this batch (as replayed records) even though the stored offset is past it.
        const first = batch.records[0]!.offset;
        replayFrom.set(batch.partition, Math.min(replayFrom.get(batch.partition) ?? first, first));
        throw err;
      }
      replayFrom.delete(batch.partition);
    }
  };

  consumer = await deps.eventLog.consume(
    p.topic,
    { group: p.group, maxBatchSize: p.maxBatchSize ?? 500 },
    {
      resumeFrom: async (partitions) => {
        const offsets = await readOffsets(deps.sql, p.group, topicName, partitions);
        for (const [k, v] of offsets) stored.set(k, v);
        const from = p.resumeFrom ? await p.resumeFrom(partitions, new Map(offsets)) : offsets;
        for (const part of partitions) {
          const r = replayFrom.get(part);
          if (r !== undefined) from.set(part, Math.min(from.get(part) ?? 0, r));
        }
        return from;
      },
      handleBatch,
      onAssignment: (partitions) => {
        log.info({ partitions }, 'partitions assigned');
        p.onAssignment?.(partitions);
      },
    },
  );

  let maintaining = false;
  const lagTimer = setInterval(() => {
    if (p.maintain && !maintaining && !fatal && consumer) {
      maintaining = true;
      p.maintain(consumer.assignment(), new Map(stored))
        .catch((err: unknown) => log.warn({ err: (err as Error).message }, 'maintenance failed; retrying'))
        .finally(() => (maintaining = false));
    }
    deps.eventLog
      .endOffsets(p.topic)
      .then((ends) => {
        for (const part of consumer!.assignment()) {
          const lag = Math.max(0, (ends.get(part) ?? 0) - (stored.get(part) ?? 0));
          deps.metrics.consumerLag.set({ ...labels, partition: String(part) }, lag);
        }
      })
      .catch(() => undefined);
  }, opts.lagIntervalMs ?? 5000);
  lagTimer.unref();

  return {
    consumer,
    stoppedBecause: () => fatal,
    stop: async () => {
      clearInterval(lagTimer);
      await consumer!.stop();
    },
  };
}
