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
 *
 * One record cannot stop a partition: when a batch's transaction throws (an error that may be the
 * record's fault, see `isRecordError`), the batch is retried record by record, each in its own
 * transaction; a record that still throws (twice) becomes a dead letter whose reason is the error,
 * written in one transaction with the move of the offset past it (exactly once), and the other
 * records apply normally. Store outages (connection errors, deadlocks, shutdown) are not the
 * record's fault: the batch is retried whole, as before, and nothing is dead-lettered.
 */
import type { Batch, Consumer, EventLog, LogRecord } from '../adapters/eventlog/types';
import type { Queryable, Sql } from '../adapters/sql/types';
import type { Topic } from '../schemas/topics';
import type { Logger } from '../shared/logger';
import type { Metrics } from '../shared/metrics';
import { readOffsets } from './offsets';

export type Outcome =
  | { kind: 'ok' }
  | { kind: 'skip'; reason: string }
  | { kind: 'dead_letter'; reason: string; reasonClass?: string };

export const ok: Outcome = { kind: 'ok' };
export const skip = (reason: string): Outcome => ({ kind: 'skip', reason });
/** `reasonClass` labels the dead-letter metric (default `rejected`): keep it to a few values. */
export const deadLetter = (reason: string, reasonClass = 'rejected'): Outcome => ({
  kind: 'dead_letter',
  reason,
  reasonClass,
});

/** A fault of the processor itself (not of a record): never retried record by record. */
export class FrameworkError extends Error {
  override readonly name = 'FrameworkError';
}

/** Node's network error codes: the store is unreachable, not the record at fault. */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
]);
const TRANSIENT_MESSAGE =
  /connection terminated|connection (closed|ended|error|timeout)|timeout exceeded|socket hang up|pool after calling end|is closed/i;

/**
 * True when a failed transaction may be the fault of one record, so that the batch is retried
 * record by record; false for faults of the store or the process (the batch is retried whole,
 * later): network errors, SQLSTATE classes 08 (connection), 40 (serialization failure, deadlock),
 * 53 (insufficient resources), 57 (operator intervention: shutdown, cancel), 58 (system error),
 * a stopped processor, and FrameworkError.
 */
export function isRecordError(err: unknown): boolean {
  if (err instanceof FrameworkError) return false;
  const e = err as { code?: unknown; message?: unknown } | null;
  const code = typeof e?.code === 'string' ? e.code : '';
  if (NETWORK_CODES.has(code)) return false;
  if (/^(08|40|53|57|58)[0-9A-Z]{3}$/.test(code)) return false;
  const message = typeof e?.message === 'string' ? e.message : '';
  if (message.startsWith('processor stopped:')) return false;
  return !TRANSIENT_MESSAGE.test(message);
}

/** The metric label of a thrown error: `sql_<SQLSTATE>` for database errors, else its name. */
export function errorClass(err: unknown): string {
  const e = err as { code?: unknown; name?: unknown } | null;
  if (typeof e?.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code)) return `sql_${e.code}`;
  const name = typeof e?.name === 'string' && /^[A-Za-z]{1,40}$/.test(e.name) ? e.name : 'Error';
  return name;
}

const errorMessage = (err: unknown): string =>
  err instanceof Error ? err.message : typeof err === 'string' ? err : JSON.stringify(err);

/** The record as JSON, or a note saying why it cannot be (a value nested too deeply, say). */
function storablePayload(value: unknown): string {
  try {
    return JSON.stringify(value) ?? 'null';
  } catch (err) {
    return JSON.stringify({ unserialisable: storableText(errorMessage(err)) });
  }
}

/** Text Postgres can store: NUL and lone surrogates become U+FFFD (the payload keeps the original as JSON). */
function storableText(s: string): string {
  return s.replaceAll('\u0000', '\uFFFD').replace(/\p{Cs}/gu, '\uFFFD');
}

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

  interface Committed {
    outcomes: Outcome[];
    afterCommit?: () => Promise<void>;
    /** The stored offset after the commit. */
    applied: number;
  }

  /**
   * One transaction over `records` (the whole batch, or one record of it in the fallback) that
   * ends at `nextOffset`. With `poison`, the fresh records are not applied: they become dead
   * letters with that reason, in the same transaction as the offset move.
   */
  const commit = async (
    partition: number,
    records: LogRecord<T>[],
    nextOffset: number,
    poison?: { reason: string; reasonClass: string },
  ): Promise<Committed> => {
    let dead = 0;
    let reservedAt: number | null = null;
    try {
      return await deps.sql.tx(async (q) => {
        // The partition's row, locked: one statement once it exists (every batch but the first).
        const lockOffset = () =>
          q.query<{ next_offset: number }>(
            'SELECT next_offset FROM consumer_offsets WHERE group_id = $1 AND topic = $2 AND partition = $3 FOR UPDATE',
            [p.group, topicName, partition],
          );
        let r = await lockOffset();
        if (r.rows.length === 0) {
          await q.query(
            `INSERT INTO consumer_offsets (group_id, topic, partition, next_offset) VALUES ($1, $2, $3, 0)
             ON CONFLICT DO NOTHING`,
            [p.group, topicName, partition],
          );
          r = await lockOffset();
        }
        const from = Number(r.rows[0]!.next_offset);
        const fresh = records.filter((x) => x.offset >= from);
        const replayed = records.filter((x) => x.offset < from);
        let res: ApplyResult;
        if (poison) res = { outcomes: fresh.map(() => deadLetter(poison.reason, poison.reasonClass)) };
        else {
          res = await p.apply(q, { partition, nextOffset, fresh, replayed });
          if (res.outcomes.length !== fresh.length)
            throw new FrameworkError(
              `${p.group}: ${res.outcomes.length} outcomes for ${fresh.length} records`,
            );
        }
        // The limit is checked before anything is written: the batch that would pass it rolls back.
        dead = res.outcomes.filter((o) => o.kind === 'dead_letter').length;
        reservedAt = admitDeadLetters(dead);
        for (const [i, o] of res.outcomes.entries()) {
          if (o.kind !== 'dead_letter') continue;
          const rec = fresh[i]!;
          await q.query(
            `INSERT INTO dead_letters (group_id, topic, partition, "offset", key, reason, payload) VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT DO NOTHING`,
            [
              p.group,
              topicName,
              rec.partition,
              rec.offset,
              storableText(rec.key),
              storableText(o.reason),
              storablePayload(rec.value),
            ],
          );
        }
        if (nextOffset > from) {
          await q.query(
            'UPDATE consumer_offsets SET next_offset = $4, updated_at = now() WHERE group_id = $1 AND topic = $2 AND partition = $3',
            [p.group, topicName, partition, nextOffset],
          );
        }
        return { ...res, applied: Math.max(from, nextOffset) };
      });
    } catch (err) {
      // Not committed: its dead letters do not count.
      for (let i = 0; reservedAt !== null && i < dead; i++)
        deadTimes.splice(deadTimes.lastIndexOf(reservedAt), 1);
      throw err;
    }
  };

  /** Records the outcomes of a commit and runs its afterCommit. */
  const finish = async (batch: Batch<T>, c: Committed): Promise<void> => {
    stored.set(batch.partition, c.applied);
    const counts = { ok: 0, skip: 0, dead_letter: 0 };
    for (const o of c.outcomes) {
      counts[o.kind]++;
      if (o.kind === 'dead_letter')
        deps.metrics.deadLetters.inc({ group: p.group, reason_class: o.reasonClass ?? 'rejected' });
    }
    for (const [outcome, n] of Object.entries(counts))
      if (n) deps.metrics.consumerRecords.inc({ ...labels, outcome }, n);
    if (counts.dead_letter) {
      const reasons = c.outcomes.flatMap((o) => (o.kind === 'dead_letter' ? [o.reason] : []));
      log.warn(
        { partition: batch.partition, dead_letters: counts.dead_letter, reason: reasons[0] },
        'records dead-lettered',
      );
    }
    if (c.afterCommit) {
      try {
        await c.afterCommit();
      } catch (err) {
        // Redeliver this batch (as replayed records) even though the stored offset is past it.
        const first = batch.records[0]!.offset;
        replayFrom.set(batch.partition, Math.min(replayFrom.get(batch.partition) ?? first, first));
        throw err;
      }
    }
  };

  /**
   * The fallback of a batch whose transaction threw: each record in a transaction of its own
   * (attempted twice); a record that still throws becomes a dead letter with the error as its
   * reason, in one transaction with the offset move, and the records after it go on.
   */
  const recordByRecord = async (batch: Batch<T>, cause: unknown): Promise<void> => {
    log.warn(
      { partition: batch.partition, records: batch.records.length, err: errorMessage(cause) },
      'batch failed; retrying it record by record',
    );
    const records = batch.records;
    for (const [i, rec] of records.entries()) {
      const next = i + 1 < records.length ? records[i + 1]!.offset : batch.nextOffset;
      let c: Committed | null = null;
      let failure: unknown;
      for (let attempt = 0; attempt < 2 && c === null; attempt++) {
        try {
          c = await commit(batch.partition, [rec], next);
        } catch (err) {
          if (!isRecordError(err)) throw err;
          failure = err;
        }
      }
      if (c === null) {
        const reasonClass = errorClass(failure);
        c = await commit(batch.partition, [rec], next, {
          reason: `${reasonClass}: ${errorMessage(failure)}`.slice(0, 2000),
          reasonClass,
        });
      }
      await finish(batch, c);
    }
  };

  const handleBatch = async (batch: Batch<T>): Promise<void> => {
    if (fatal) throw new Error(`processor stopped: ${fatal}`);
    const end = deps.metrics.consumerBatchSeconds.startTimer(labels);
    let whole: Committed | null = null;
    try {
      whole = await commit(batch.partition, batch.records, batch.nextOffset);
    } catch (err) {
      if (!isRecordError(err) || fatal) throw err;
      await recordByRecord(batch, err);
    }
    if (whole) await finish(batch, whole);
    end();
    replayFrom.delete(batch.partition);
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
