/**
 * The consumer framework every SQL-backed processor uses.
 *
 * Each batch of one partition runs in ONE SQL transaction that (1) locks the partition's stored
 * offset, (2) applies the records not yet applied, (3) writes dead letters, and (4) stores the new
 * offset. Because the offset row is locked first, a stale member still working on a partition
 * after a rebalance (kafkajs has no generation fencing) waits, then sees the advanced offset and
 * applies nothing twice. Records below the stored offset are handed to the processor as
 * `replayed` (already applied), so derived indexes can be resynchronised from them.
 * A batch that continues where this member's last commit left its partition does not wait for the
 * offset's answer: `apply` starts behind the lock, and a stored offset found moved (another
 * member's commit) rolls the transaction back to apply the batch the usual way (`commit`).
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
 *
 * Rounds (option `transactions`): with a limit on the transactions in flight, the batches of other
 * partitions that arrive while the limit is reached wait, and the next transaction applies all of
 * them together (up to `maxRoundRecords`): one transaction, one offset lock and one offset update
 * for the round, and one call of `apply` with the records of every partition of the round. The
 * fixed cost of a transaction (its statements' round trips) is then paid once per round instead of
 * once per partition, which is what the embedded store (one session) needs under a steady load.
 * The guarantees do not change: a round's transaction locks the offset rows of its partitions (in
 * partition order, so two rounds never deadlock) and stores every partition's new offset with the
 * effects. When a round's transaction throws an error that may be a record's fault, each of its
 * batches is retried alone (and then record by record, as above). With `gatherMs`, a round waits up to
 * that long for a batch of every assigned partition that is not in a round in flight (the batches
 * of one Kafka fetch arrive a few milliseconds apart; the partitions a round released deliver their
 * next batches just after it ended).
 *
 * Derived indexes in rounds: with a limit, a round's batches are done once its transaction has
 * committed, and its `afterCommit` (the rank index's update) runs behind it, after every earlier
 * round's, once the next round's first statements have gone out (the store works on the next round
 * while the index is updated). An update that fails leaves its partitions `behind`: no round takes
 * their batches until their records have been applied again as replayed (a transaction of their
 * own, no effects: the index resync) and that update succeeded, retried with a backoff. Without a
 * limit, a batch ends with its `afterCommit`, and one that fails redelivers the batch (replayed).
 *
 * A transaction too large for the store's lock table (SQLSTATE 53200, `isTooLarge`) is not a store
 * outage to wait out: a round's batches are applied alone, a batch in halves (down to single
 * records), and the next transactions take at most half as many records, doubled again after a
 * hundred that succeed. A single record still too large is tried five times over about four
 * seconds (other sessions' locks pass), then dead-lettered with the error as its reason.
 */
import type { Batch, Consumer, EventLog, LogRecord } from '../adapters/eventlog/types';
import type { Queryable, Sql } from '../adapters/sql/types';
import { WriteBehind } from '../core/write-behind';
import type { Topic } from '../schemas/topics';
import type { Logger } from '../shared/logger';
import { exponentialDelay } from '../shared/backoff';
import type { Metrics } from '../shared/metrics';
import { readOffsets } from './offsets';
import { RoundBudget } from './round-budget';

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

/** A transaction found its partitions' stored offsets moved by another member: applied again (`commit`). */
class OffsetsMoved extends Error {
  override readonly name = 'OffsetsMoved';
}

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
/** Transactions that succeed at a lowered size before the size is doubled again (`isTooLarge`). */
const SIZE_PROBE_AFTER = 100;
/** Attempts of one record too large for the lock table, with pauses doubling from the second. */
const TOO_LARGE_ATTEMPTS = 5;
const TOO_LARGE_PAUSE_MS = 250;

/** Pauses between attempts to bring a derived index up to date: doubling from the first to the cap. */
const REPAIR_PAUSE_MS = 100;
const REPAIR_MAX_PAUSE_MS = 5000;

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

/**
 * True when the store refused a transaction for its size, not for a record's content: SQLSTATE
 * 53200, out of shared memory. Every transaction takes locks per key it touches (the wallet one per
 * idempotency key, achievements one per user), and the lock table is shared by all sessions and
 * bounded (max_locks_per_transaction × max_connections: about 12,000–16,000 locks on a default
 * Postgres, 16,000–32,000 in PGlite), so a round of thousands of events of a tenant with several
 * earning rules on one event type can pass it. Such a transaction is applied again in smaller parts
 * (`startProcessor`): retried whole, it would fail the same way forever. Only a single record that
 * is still too large after pauses is dead-lettered.
 */
export function isTooLarge(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === '53200';
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

/** The offsets of one partition that a transaction covers. */
export interface PartRange {
  partition: number;
  /** Offset of the part's first fresh record, else of its first replayed record. */
  firstOffset: number;
  /** Offset after the part's last record: stored with the effects. */
  nextOffset: number;
}

/** What one transaction applies: the batches of one or more partitions. */
export interface ApplyBatch<T> {
  /** The partitions of the transaction, each once, in partition order. */
  parts: PartRange[];
  /** Records not yet applied: partition after partition (in `parts` order), each in offset order. */
  fresh: LogRecord<T>[];
  /** Records an earlier transaction already applied (same order): derived-index resync only. */
  replayed: LogRecord<T>[];
}

export interface Processor<T> {
  group: string;
  topic: Topic<T>;
  maxBatchSize?: number;
  /**
   * Applies `fresh` (not yet applied) inside the transaction `q`. `replayed` are records of the same
   * batches that an earlier transaction already applied: no effects, only derived-index resync.
   * The records may come from several partitions (a round); the records of one key always come
   * from one partition, in order.
   */
  apply(q: Queryable, batch: ApplyBatch<T>): Promise<ApplyResult>;
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
  /**
   * Transactions in flight at most (default: no limit, one transaction per batch). With a limit,
   * batches that arrive while it is reached are applied together in the next transaction (a round;
   * see the module comment). The embedded shape uses 1: its SQL store has one session.
   */
  transactions?: number;
  /** Records of one round at most (default 4 × the processor's maxBatchSize). */
  maxRoundRecords?: number;
  /**
   * With a limit: how long (ms) a round may wait, after its first batch arrived or after the last
   * round ended (whichever is later), for a batch of every assigned partition that is not in a
   * round in flight (default 0: a round starts with what is waiting). Without it, the partitions
   * split into groups that take turns: the batches of one Kafka fetch arrive a few milliseconds
   * apart and the first ones start alone, and the partitions a round released deliver their next
   * batches just after the next round started, then wait a whole round.
   */
  gatherMs?: number;
  /**
   * With a limit: how long (ms) a round should hold the store at most (default 0: no bound but
   * `maxRoundRecords`). A round then takes batches only up to this time's worth of records at the
   * time per record the rounds before it taught (processors/round-budget.ts; the first batch
   * whatever its size).
   * The embedded shape uses it: its gateways' store reads wait for the round running on the one
   * session, and a round of 4,000 records took 1.3 s on a slow machine (docs/performance.md, tenth
   * pass).
   */
  maxRoundMs?: number;
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
  const limit = opts.transactions ?? Number.POSITIVE_INFINITY;
  const inRounds = Number.isFinite(limit);
  /** Rounds only: the last derived-index update queued (they run one at a time, in commit order). */
  let indexing: Promise<void> = Promise.resolve();
  /** Rounds only: partitions whose index update failed, with the committed records it missed. */
  const behind = new Map<number, LogRecord<T>[]>();
  let stopping = false;
  /** What a batch of a partition behind gets when the processor stops before the repair. */
  const indexBehind = () => new Error('processor stopped: its derived index is behind');

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
    /** One outcome per fresh record, in the order `apply` was given them. */
    outcomes: Outcome[];
    /** The fresh records, in that order. */
    fresh: LogRecord<T>[];
    afterCommit?: () => Promise<void>;
    /** The stored offset of each partition after the commit. */
    applied: Map<number, number>;
  }

  /** What one transaction covers of one partition. */
  interface Part {
    partition: number;
    records: LogRecord<T>[];
    nextOffset: number;
  }

  const partOf = (b: Batch<T>): Part => ({
    partition: b.partition,
    records: b.records,
    nextOffset: b.nextOffset,
  });

  /** What a transaction covers, given the stored offset of each of its partitions. */
  const split = (parts: Part[], from: Map<number, number>) => {
    const ranges: PartRange[] = [];
    const fresh: LogRecord<T>[] = [];
    const replayed: LogRecord<T>[] = [];
    const moved: Array<[number, number]> = [];
    const applied = new Map<number, number>();
    for (const part of parts) {
      const start = from.get(part.partition);
      if (start === undefined) throw new FrameworkError(`${p.group}: no offset row for ${part.partition}`);
      const own = part.records.filter((x) => x.offset >= start);
      fresh.push(...own);
      replayed.push(...part.records.filter((x) => x.offset < start));
      ranges.push({
        partition: part.partition,
        firstOffset: own[0]?.offset ?? part.records[0]?.offset ?? part.nextOffset,
        nextOffset: part.nextOffset,
      });
      if (part.nextOffset > start) moved.push([part.partition, part.nextOffset]);
      applied.set(part.partition, Math.max(start, part.nextOffset));
    }
    return { ranges, fresh, replayed, moved, applied };
  };

  /**
   * The stored offsets a transaction over `parts` can take for granted: those of batches that
   * start exactly where this member's last commit (or the resume) left their partitions, or null
   * when one does not (a redelivery, a partition's first batch).
   */
  const expectedOffsets = (parts: Part[]): Map<number, number> | null => {
    const from = new Map<number, number>();
    for (const part of parts) {
      const first = part.records[0]?.offset;
      if (first === undefined || stored.get(part.partition) !== first) return null;
      from.set(part.partition, first);
    }
    return from;
  };

  /**
   * One transaction over `parts` (whole batches of one or more partitions, or one record of a batch
   * in the fallback), each ending at its `nextOffset`. With `poison`, the fresh records are not
   * applied: they become dead letters with that reason, in the same transaction as the offset move.
   *
   * When the batches continue where this member's last commit left them (`expectedOffsets`), the
   * processor's `apply` starts at once, its first statements going out right behind the offsets'
   * lock instead of after its answer (one round trip to the store fewer per transaction). The
   * lock's answer still decides: when another member committed these partitions in between (a
   * rebalance), the transaction is rolled back once its statements are done, and applied again
   * the usual way.
   */
  const commit = async (
    parts: Part[],
    poison?: { reason: string; reasonClass: string },
  ): Promise<Committed> => {
    const expected = poison ? null : expectedOffsets(parts);
    if (expected) {
      try {
        return await transact(parts, undefined, expected);
      } catch (err) {
        if (!(err instanceof OffsetsMoved)) throw err;
      }
    }
    return transact(parts, poison, null);
  };

  const transact = async (
    parts: Part[],
    poison: { reason: string; reasonClass: string } | undefined,
    expected: Map<number, number> | null,
  ): Promise<Committed> => {
    let dead = 0;
    let reservedAt: number | null = null;
    const partitions = parts.map((x) => x.partition);
    try {
      return await deps.sql.tx(async (q) => {
        // The partitions' rows, locked in partition order (two rounds never deadlock): one statement
        // once they exist (every batch but a partition's first).
        const lockOffsets = async () => {
          const r = await q.query<{ partition: number; next_offset: number | string }>(
            `SELECT partition, next_offset FROM consumer_offsets
             WHERE group_id = $1 AND topic = $2 AND partition = ANY($3::int[]) ORDER BY partition FOR UPDATE`,
            [p.group, topicName, partitions],
          );
          return new Map(r.rows.map((x) => [Number(x.partition), Number(x.next_offset)]));
        };
        // The writes that read nothing back go out without waiting (write-behind): the
        // processor's, then the dead letters and the offsets; all of them have succeeded before
        // the transaction commits (settled below, or refused by the store's COMMIT).
        const wq = new WriteBehind(q);
        let covered: ReturnType<typeof split>;
        let res: ApplyResult;
        if (expected) {
          covered = split(parts, expected);
          const locking = lockOffsets();
          const applying = p
            .apply(wq, { parts: covered.ranges, fresh: covered.fresh, replayed: covered.replayed })
            .then(
              (r) => ({ r }),
              (err: unknown) => ({ err }),
            );
          let from: Map<number, number>;
          try {
            from = await locking;
          } finally {
            // Nothing of this transaction may still be running when it ends, whichever way.
            await applying;
          }
          if (partitions.some((part) => from.get(part) !== expected.get(part))) {
            await wq.settle().catch(() => undefined);
            throw new OffsetsMoved();
          }
          const outcome = await applying;
          if ('err' in outcome) throw outcome.err;
          res = outcome.r;
        } else {
          let from = await lockOffsets();
          if (from.size < parts.length) {
            await q.query(
              `INSERT INTO consumer_offsets (group_id, topic, partition, next_offset)
               SELECT $1, $2, x, 0 FROM unnest($3::int[]) AS x ON CONFLICT DO NOTHING`,
              [p.group, topicName, partitions],
            );
            from = await lockOffsets();
          }
          covered = split(parts, from);
          if (poison)
            res = { outcomes: covered.fresh.map(() => deadLetter(poison.reason, poison.reasonClass)) };
          else
            res = await p.apply(wq, {
              parts: covered.ranges,
              fresh: covered.fresh,
              replayed: covered.replayed,
            });
        }
        const { fresh, moved, applied } = covered;
        if (res.outcomes.length !== fresh.length)
          throw new FrameworkError(`${p.group}: ${res.outcomes.length} outcomes for ${fresh.length} records`);
        // The limit is checked before anything is written: the batch that would pass it rolls back.
        dead = res.outcomes.filter((o) => o.kind === 'dead_letter').length;
        reservedAt = admitDeadLetters(dead);
        for (const [i, o] of res.outcomes.entries()) {
          if (o.kind !== 'dead_letter') continue;
          const rec = fresh[i]!;
          wq.send(
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
        if (moved.length) {
          wq.send(
            `UPDATE consumer_offsets c SET next_offset = v.n, updated_at = now()
             FROM unnest($3::int[], $4::bigint[]) AS v(p, n)
             WHERE c.group_id = $1 AND c.topic = $2 AND c.partition = v.p`,
            [p.group, topicName, moved.map((m) => m[0]), moved.map((m) => m[1])],
          );
        }
        // A store whose COMMIT refuses a transaction with a failed statement takes the last
        // writes and the COMMIT in one go; any other is waited for here.
        if (!deps.sql.commitChecksStatements) await wq.settle();
        return { outcomes: res.outcomes, fresh, afterCommit: res.afterCommit, applied };
      });
    } catch (err) {
      // Not committed: its dead letters do not count.
      for (let i = 0; reservedAt !== null && i < dead; i++)
        deadTimes.splice(deadTimes.lastIndexOf(reservedAt), 1);
      throw err;
    }
  };

  /** Records the outcomes of a commit of `batches` and runs its afterCommit. */
  const finish = async (batches: Batch<T>[], c: Committed): Promise<void> => {
    for (const [partition, offset] of c.applied) stored.set(partition, offset);
    const counts = { ok: 0, skip: 0, dead_letter: 0 };
    for (const o of c.outcomes) {
      counts[o.kind]++;
      if (o.kind === 'dead_letter')
        deps.metrics.deadLetters.inc({ group: p.group, reason_class: o.reasonClass ?? 'rejected' });
    }
    for (const [outcome, n] of Object.entries(counts))
      if (n) deps.metrics.consumerRecords.inc({ ...labels, outcome }, n);
    if (counts.dead_letter) {
      const first = c.outcomes.findIndex((o) => o.kind === 'dead_letter');
      const o = c.outcomes[first] as { reason: string };
      log.warn(
        { partition: c.fresh[first]!.partition, dead_letters: counts.dead_letter, reason: o.reason },
        'records dead-lettered',
      );
    }
    if (!c.afterCommit) return;
    if (inRounds) return indexInOrder(batches, c.afterCommit);
    try {
      await c.afterCommit();
    } catch (err) {
      // Redeliver these batches (as replayed records) even though the stored offsets are past them.
      for (const b of batches) {
        const first = b.records[0]!.offset;
        replayFrom.set(b.partition, Math.min(replayFrom.get(b.partition) ?? first, first));
      }
      throw err;
    }
  };

  /**
   * Rounds: queues the index update of committed `batches` behind every earlier one. It waits for
   * the event loop's next turn, so the next round's first statements (its batches were handed over
   * at the commit) go out before it. When one of the batches' partitions is already behind, or the
   * update fails, the batches' records join the ones the repair applies again.
   */
  const indexInOrder = (batches: Batch<T>[], afterCommit: () => Promise<void>): void => {
    indexing = indexing.then(async () => {
      await new Promise<void>((resolve) => setImmediate(resolve));
      if (batches.some((b) => behind.has(b.partition))) return leaveBehind(batches);
      try {
        await afterCommit();
      } catch (err) {
        log.warn(
          { partitions: batches.map((b) => b.partition), err: errorMessage(err) },
          'derived index update failed; applying its records again (replayed) until it succeeds',
        );
        leaveBehind(batches);
      }
    });
  };

  const leaveBehind = (batches: Batch<T>[]): void => {
    for (const b of batches) {
      const missed = behind.get(b.partition);
      if (missed) missed.push(...b.records);
      else behind.set(b.partition, [...b.records]);
    }
    pump();
  };

  /** Consecutive failed repairs (for the backoff), and whether one is running or waiting to retry. */
  let repairFailures = 0;
  let repairing = false;
  /** The repair's transaction and update while they run (stop waits for them). */
  let repairRun: Promise<unknown> = Promise.resolve();

  /**
   * Applies the records of the partitions behind again, as replayed (they are below the stored
   * offsets: no effects, the processor resyncs its index from SQL), in a transaction that takes a
   * round's turn, then runs that update in order. A partition leaves `behind` once an update covered
   * every record it had missed. Returns how long to wait before trying again (0: it succeeded).
   */
  const repair = async (parts: Part[]): Promise<number> => {
    try {
      const c = await commit(parts);
      const ran = indexing.then(() => c.afterCommit?.());
      indexing = ran.catch(() => undefined);
      await ran;
    } catch (err) {
      repairFailures++;
      const wait = exponentialDelay(repairFailures, REPAIR_PAUSE_MS, REPAIR_MAX_PAUSE_MS);
      log.warn(
        { partitions: parts.map((x) => x.partition), err: errorMessage(err), retry_in_ms: wait },
        'derived index still behind; retrying',
      );
      return wait;
    }
    for (const part of parts) {
      const left = behind.get(part.partition)!.filter((r) => r.offset >= part.nextOffset);
      if (left.length) behind.set(part.partition, left);
      else behind.delete(part.partition);
    }
    repairFailures = 0;
    log.info({ partitions: parts.map((x) => x.partition) }, 'derived index caught up');
    return 0;
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
      const part = {
        partition: batch.partition,
        records: [rec],
        nextOffset: i + 1 < records.length ? records[i + 1]!.offset : batch.nextOffset,
      };
      let c: Committed | null = null;
      let failure: unknown;
      for (let attempt = 1; c === null; attempt++) {
        try {
          c = await commit([part]);
        } catch (err) {
          failure = err;
          if (isTooLarge(err) && !fatal) {
            // One record too large for the lock table: other sessions' locks may be passing, so
            // it is tried again after pauses; one that needs more locks than the table holds is
            // dead-lettered, instead of holding up its partition for good.
            if (attempt >= TOO_LARGE_ATTEMPTS) break;
            await new Promise((r) => setTimeout(r, TOO_LARGE_PAUSE_MS * 2 ** (attempt - 1)));
            continue;
          }
          if (!isRecordError(err)) throw err;
          if (attempt >= 2) break;
        }
      }
      if (c === null) {
        const reasonClass = errorClass(failure);
        c = await commit([part], {
          reason: `${reasonClass}: ${errorMessage(failure)}`.slice(0, 2000),
          reasonClass,
        });
      }
      await finish([batch], c);
    }
  };

  /**
   * Records per transaction after one was too large for the store's lock table (`isTooLarge`):
   * half of that transaction's records; doubled again after every SIZE_PROBE_AFTER transactions
   * that succeed, so that a passing shortage (another session holding many locks) does not shrink
   * the rounds for good.
   */
  let sizeCap = Number.POSITIVE_INFINITY;
  let sinceShrunk = 0;
  const shrink = (records: number) => {
    sizeCap = Math.max(1, Math.floor(records / 2));
    sinceShrunk = 0;
    log.warn(
      { records, now_at_most: sizeCap },
      'a transaction ran out of lock space (SQLSTATE 53200: raise max_locks_per_transaction to allow larger ones); applying it in smaller parts',
    );
  };
  const succeeded = () => {
    if (sizeCap === Number.POSITIVE_INFINITY || ++sinceShrunk < SIZE_PROBE_AFTER) return;
    sinceShrunk = 0;
    sizeCap = sizeCap * 2 >= roundCap ? Number.POSITIVE_INFINITY : sizeCap * 2;
  };
  /** `batch` in consecutive parts of at most `size` records (the last one ends at its nextOffset). */
  const slices = (batch: Batch<T>, size: number): Batch<T>[] => {
    const out: Batch<T>[] = [];
    for (let i = 0; i < batch.records.length; i += size) {
      const records = batch.records.slice(i, i + size);
      const next = batch.records[i + size];
      out.push({ ...batch, records, nextOffset: next ? next.offset : batch.nextOffset });
    }
    return out;
  };

  /**
   * One batch in a transaction of its own, with the record-by-record fallback; one too large for
   * the store's lock table is applied in parts (halves, down to single records).
   */
  const alone = async (batch: Batch<T>): Promise<void> => {
    if (batch.records.length > sizeCap) {
      for (const part of slices(batch, sizeCap)) await alone(part);
      return;
    }
    let whole: Committed | null = null;
    try {
      whole = await commit([partOf(batch)]);
      succeeded();
    } catch (err) {
      const tooLarge = isTooLarge(err) && !fatal;
      if (tooLarge && batch.records.length > 1) {
        shrink(batch.records.length);
        return alone(batch); // now in parts of at most half its size (above)
      }
      if (!tooLarge && (!isRecordError(err) || fatal)) throw err;
      await recordByRecord(batch, err);
    }
    if (whole) await finish([batch], whole);
    replayFrom.delete(batch.partition);
  };

  interface Waiting {
    batch: Batch<T>;
    arrivedAt: number;
    resolve: () => void;
    reject: (err: unknown) => void;
  }
  const roundCap = opts.maxRoundRecords ?? 4 * (p.maxBatchSize ?? 500);
  const budget = new RoundBudget(inRounds ? (opts.maxRoundMs ?? 0) : 0, roundCap);
  const waiting: Waiting[] = [];
  let inFlight = 0;
  const gatherMs = inRounds ? (opts.gatherMs ?? 0) : 0;
  /** Partitions in a round in flight, when a round last ended, and the gather's pending timer. */
  const busy = new Set<number>();
  let releasedAt = 0;
  let gatherTimer: NodeJS.Timeout | null = null;

  /** The batches of a round: one per partition, up to the cap (the first one whatever its size). */
  const takeRound = (): Waiting[] => {
    const round: Waiting[] = [];
    const seen = new Set<number>();
    const cap = Math.min(budget.cap(), sizeCap);
    let records = 0;
    for (let i = 0; i < waiting.length;) {
      const w = waiting[i]!;
      const n = w.batch.records.length;
      if (
        seen.has(w.batch.partition) ||
        behind.has(w.batch.partition) ||
        (round.length > 0 && records + n > cap)
      ) {
        i++;
        continue;
      }
      waiting.splice(i, 1);
      round.push(w);
      seen.add(w.batch.partition);
      records += n;
    }
    return round.sort((a, b) => a.batch.partition - b.batch.partition);
  };

  const runRound = async (round: Waiting[]): Promise<void> => {
    const timers = round.map(() => deps.metrics.consumerBatchSeconds.startTimer(labels));
    const settle = async (i: number, work: () => Promise<void>) => {
      try {
        await work();
        timers[i]!();
        round[i]!.resolve();
      } catch (err) {
        round[i]!.reject(err);
      }
    };
    if (round.length === 1) return settle(0, () => alone(round[0]!.batch));
    const batches = round.map((w) => w.batch);
    let c: Committed;
    try {
      if (fatal) throw new Error(`processor stopped: ${fatal}`);
      c = await commit(batches.map(partOf));
      succeeded();
    } catch (err) {
      const tooLarge = isTooLarge(err) && !fatal;
      if (!tooLarge && (!isRecordError(err) || fatal)) {
        for (const w of round) w.reject(err);
        return;
      }
      // Too large: the batches in smaller transactions. Else one of them may hold the record at
      // fault: each alone, then record by record.
      if (tooLarge) shrink(batches.reduce((a, b) => a + b.records.length, 0));
      for (const [i, w] of round.entries()) await settle(i, () => alone(w.batch));
      return;
    }
    // One afterCommit for the round: every batch of it succeeds or fails with it.
    const finished = finish(batches, c).then(() => {
      for (const b of batches) replayFrom.delete(b.partition);
    });
    await Promise.all(round.map((_, i) => settle(i, () => finished)));
  };

  /**
   * True while the next round should wait: some assigned partition outside the rounds in flight has
   * no batch waiting yet, and `gatherMs` has not passed since the oldest waiting batch arrived or
   * since a round last ended, whichever is later. Arms one timer to look again at the deadline.
   */
  const gathering = (): boolean => {
    if (gatherMs === 0 || !consumer || waiting.length === 0) return false;
    const deadline = Math.max(releasedAt, Math.min(...waiting.map((w) => w.arrivedAt))) + gatherMs;
    const wait = deadline - Date.now();
    if (wait <= 0) return false;
    const have = new Set(waiting.map((w) => w.batch.partition));
    if (consumer.assignment().every((part) => busy.has(part) || have.has(part))) return false;
    gatherTimer ??= setTimeout(() => {
      gatherTimer = null;
      pump();
    }, wait + 1).unref();
    return true;
  };

  /** Starts the repair of the partitions behind in a round's turn; a failed one is retried later. */
  const startRepair = (): void => {
    const parts: Part[] = [...behind.entries()]
      .sort(([a], [b]) => a - b)
      .map(([partition, records]) => ({
        partition,
        records: [...records],
        nextOffset: records[records.length - 1]!.offset + 1,
      }));
    repairing = true;
    inFlight++;
    for (const part of parts) busy.add(part.partition);
    repairRun = repair(parts).then((wait) => {
      inFlight--;
      for (const part of parts) busy.delete(part.partition);
      const again = () => {
        repairing = false;
        pump();
      };
      if (wait > 0) setTimeout(again, wait).unref();
      else again();
    });
  };

  const pump = (): void => {
    if (inFlight < limit && behind.size > 0 && !repairing && !stopping && !fatal) startRepair();
    while (inFlight < limit && waiting.length > 0 && !gathering()) {
      const round = takeRound();
      if (round.length === 0) return;
      inFlight++;
      for (const w of round) busy.add(w.batch.partition);
      const started = performance.now();
      const records = round.reduce((a, w) => a + w.batch.records.length, 0);
      void runRound(round).finally(() => {
        budget.timed(performance.now() - started, records);
        inFlight--;
        for (const w of round) busy.delete(w.batch.partition);
        releasedAt = Date.now();
        pump();
      });
    }
  };

  const handleBatch = (batch: Batch<T>): Promise<void> => {
    if (fatal) return Promise.reject(new Error(`processor stopped: ${fatal}`));
    if (stopping && behind.has(batch.partition)) return Promise.reject(indexBehind());
    return new Promise<void>((resolve, reject) => {
      waiting.push({ batch, arrivedAt: Date.now(), resolve, reject });
      pump();
    });
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
      stopping = true;
      // Batches of partitions behind wait for a repair that no longer runs: handed back, so the
      // consumer can stop (a restart resumes them from the index's watermark).
      for (let i = waiting.length - 1; i >= 0; i--) {
        const w = waiting[i]!;
        if (!behind.has(w.batch.partition)) continue;
        waiting.splice(i, 1);
        w.reject(indexBehind());
      }
      await consumer!.stop();
      await repairRun;
      await indexing;
    },
  };
}
