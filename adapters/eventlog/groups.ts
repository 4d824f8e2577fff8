/**
 * Consumer groups of the in-process event logs (LocalEventLog on SQL, FileEventLog on files): the
 * members of a group split the topic's partitions round-robin in join order; every join or leave
 * rebalances. A rebalance first revokes moved partitions and waits for their in-flight batch, then
 * hands them to the new owner, which asks `resumeFrom` before delivering anything.
 *
 * Delivery: one loop per assigned partition reads up to maxBatchSize records from its position
 * (through the adapter's `read`); an idle loop sleeps until an append of this instance notifies it
 * (EventEmitter) or the member's poll (the adapter's `heads` every pollIntervalMs) shows new records.
 */
import type { EventEmitter } from 'node:events';
import { Mutex } from '../../shared/mutex';
import type { Topic } from '../../schemas/topics';
import type { Batch, Consumer, ConsumerHandlers, ConsumerOptions, LogRecord } from './types';
import {
  backoffDelay,
  errorMessage,
  Semaphore,
  Signal,
  sleepUnless,
  type BackoffOptions,
  type EventLogLogger,
} from './common';

/** Where a member's loops read from: the adapter's storage. */
export interface PartitionSource<T> {
  /** Up to `max` records of `partition` from offset `position` on, in offset order (may be empty). */
  read(partition: number, position: number, max: number): Promise<LogRecord<T>[]>;
  /** The next offset to be written per partition (for the poll of appends made elsewhere). */
  heads(): Promise<Map<number, number>>;
}

/** The members of one group of one topic, in join order, and who owns which partition. */
export class LocalGroup {
  readonly members: LocalMember<unknown>[] = [];
  private readonly lock = new Mutex();

  constructor(
    private readonly partitions: number,
    private readonly log: EventLogLogger,
    private readonly label: string,
  ) {}

  join(m: LocalMember<unknown>): Promise<void> {
    return this.lock.run(async () => {
      this.members.push(m);
      await this.rebalance();
    });
  }

  leave(m: LocalMember<unknown>): Promise<void> {
    return this.lock.run(async () => {
      await m.revoke(m.assignment());
      const i = this.members.indexOf(m);
      if (i >= 0) this.members.splice(i, 1);
      await this.rebalance();
    });
  }

  /** Round-robin in join order: partition p goes to member p mod n. Revoke first, then assign. */
  private async rebalance(): Promise<void> {
    const n = this.members.length;
    if (n === 0) return;
    const target = new Map<LocalMember<unknown>, number[]>(this.members.map((m) => [m, []]));
    for (let p = 0; p < this.partitions; p++) target.get(this.members[p % n])!.push(p);
    await Promise.all(
      this.members.map((m) => m.revoke(m.assignment().filter((p) => !target.get(m)!.includes(p)))),
    );
    for (const m of this.members) m.assign(target.get(m)!);
    this.log('debug', 'local consumer group rebalanced', {
      group: this.label,
      assignment: this.members.map((m) => m.assignment()),
    });
  }
}

export interface MemberDeps<T> {
  source: PartitionSource<T>;
  topic: Topic<T>;
  physicalName: string;
  group: LocalGroup;
  opts: ConsumerOptions;
  handlers: ConsumerHandlers<T>;
  notifier: EventEmitter;
  pollIntervalMs: number;
  backoff: BackoffOptions;
  log: EventLogLogger;
  onStopped: (m: LocalMember<T>) => void;
}

/** One partition's delivery loop of one member. */
class PartitionLoop {
  /** Next offset to deliver; undefined until resumeFrom answered. */
  position: number | undefined;
  /** Fired when the partition is revoked or the member stops. */
  readonly stopped = new Signal();
  /** Set by a wake-up that arrives while the loop is busy, so it is not lost. */
  dirty = false;
  private waiter: (() => void) | undefined;
  done: Promise<void> = Promise.resolve();

  constructor(readonly partition: number) {}

  wake(): void {
    this.dirty = true;
    const w = this.waiter;
    this.waiter = undefined;
    w?.();
  }

  /** Waits for a wake-up or a stop; returns at once when one came since the last check. */
  idle(): Promise<void> {
    if (this.dirty || this.stopped.fired) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const off = this.stopped.on(() => {
        this.waiter = undefined;
        resolve();
      });
      this.waiter = () => {
        off();
        resolve();
      };
    });
  }
}

export class LocalMember<T> implements Consumer {
  private readonly loops = new Map<number, PartitionLoop>();
  private readonly limiter: Semaphore;
  private readonly maxBatchSize: number;
  private readonly onAppend = (): void => this.wakeAll();
  private pollTimer: NodeJS.Timeout | undefined;
  private stopping: Promise<void> | undefined;
  private polling = false;

  constructor(private readonly d: MemberDeps<T>) {
    this.maxBatchSize = d.opts.maxBatchSize ?? 500;
    if (!(this.maxBatchSize >= 1)) throw new Error(`invalid maxBatchSize: ${d.opts.maxBatchSize}`);
    this.limiter = new Semaphore(d.opts.concurrency ?? d.topic.partitions);
    d.notifier.on(d.physicalName, this.onAppend);
    this.schedulePoll();
  }

  assignment(): number[] {
    return [...this.loops.keys()].sort((a, b) => a - b);
  }

  stop(): Promise<void> {
    if (!this.stopping) {
      this.stopping = (async () => {
        this.d.notifier.off(this.d.physicalName, this.onAppend);
        if (this.pollTimer) clearTimeout(this.pollTimer);
        this.pollTimer = undefined;
        await this.d.group.leave(this as LocalMember<unknown>);
        this.d.onStopped(this);
      })();
    }
    return this.stopping;
  }

  /** Stops the loops of `partitions` and waits for their in-flight batch. Called under the group lock. */
  async revoke(partitions: number[]): Promise<void> {
    const loops = partitions.map((p) => this.loops.get(p)).filter((l): l is PartitionLoop => !!l);
    for (const l of loops) {
      l.stopped.fire();
      this.loops.delete(l.partition);
    }
    await Promise.all(loops.map((l) => l.done));
  }

  /** Takes `partitions` (the member's full new assignment). Called under the group lock. */
  assign(partitions: number[]): void {
    const added = partitions.filter((p) => !this.loops.has(p));
    const fresh = added.map((p) => new PartitionLoop(p));
    for (const l of fresh) this.loops.set(l.partition, l);
    try {
      this.d.handlers.onAssignment?.(this.assignment());
    } catch (err) {
      this.d.log('warn', 'onAssignment threw', { error: errorMessage(err) });
    }
    if (fresh.length > 0) void this.start(fresh);
  }

  /** Asks resumeFrom for the new partitions (one call, retried with backoff), then runs their loops. */
  private async start(fresh: PartitionLoop[]): Promise<void> {
    const live = () => fresh.filter((l) => !l.stopped.fired);
    let positions: Map<number, number> | undefined;
    const startingDone = new Signal();
    // revoke() must be able to wait for this phase too.
    for (const l of fresh) l.done = new Promise<void>((r) => startingDone.on(r));
    for (let attempt = 1; !positions; attempt++) {
      const pending = live();
      if (pending.length === 0) break;
      try {
        positions = await this.d.handlers.resumeFrom(pending.map((l) => l.partition));
      } catch (err) {
        this.d.log('error', 'resumeFrom failed; retrying', {
          topic: this.d.topic.name,
          error: errorMessage(err),
        });
        await sleepUnless(
          backoffDelay(attempt, this.d.backoff),
          pending.map((l) => l.stopped),
        );
      }
    }
    for (const l of live()) {
      l.position = positions?.get(l.partition) ?? 0;
      l.done = this.run(l);
    }
    startingDone.fire();
  }

  private async run(l: PartitionLoop): Promise<void> {
    const { source, topic, handlers, log } = this.d;
    let failures = 0;
    let needsResume = false;
    while (!l.stopped.fired) {
      if (needsResume) {
        try {
          const m = await handlers.resumeFrom([l.partition]);
          l.position = m.get(l.partition) ?? 0;
          needsResume = false;
        } catch (err) {
          failures++;
          log('error', 'resumeFrom failed; retrying', {
            topic: topic.name,
            partition: l.partition,
            error: errorMessage(err),
          });
          await sleepUnless(backoffDelay(failures, this.d.backoff), l.stopped);
          continue;
        }
      }
      l.dirty = false;
      let delivered = false;
      try {
        delivered = await this.limiter.run(async () => {
          if (l.stopped.fired) return false;
          const records = await source.read(l.partition, l.position!, this.maxBatchSize);
          if (records.length === 0) return false;
          const batch: Batch<T> = {
            topic: topic.name,
            partition: l.partition,
            records,
            nextOffset: records[records.length - 1].offset + 1,
          };
          await handlers.handleBatch(batch);
          l.position = batch.nextOffset;
          return true;
        });
        failures = 0;
      } catch (err) {
        failures++;
        const wait = backoffDelay(failures, this.d.backoff);
        log('error', 'batch failed; redelivering from the stored offset', {
          topic: topic.name,
          partition: l.partition,
          position: l.position,
          attempt: failures,
          retryInMs: wait,
          error: errorMessage(err),
        });
        await sleepUnless(wait, l.stopped);
        needsResume = true;
        continue;
      }
      if (!delivered) await l.idle();
    }
  }

  private wakeAll(): void {
    for (const l of this.loops.values()) l.wake();
  }

  /** Fallback for appends this instance did not make: compare partition heads with positions. */
  private schedulePoll(): void {
    this.pollTimer = setTimeout(() => void this.poll(), this.d.pollIntervalMs);
    this.pollTimer.unref();
  }

  private async poll(): Promise<void> {
    if (this.stopping || this.polling) return;
    this.polling = true;
    try {
      const started = [...this.loops.values()].filter((l) => l.position !== undefined);
      if (started.length > 0) {
        const heads = await this.d.source.heads();
        for (const [p, next] of heads) {
          const l = this.loops.get(p);
          if (l && l.position !== undefined && next > l.position) l.wake();
        }
      }
    } catch (err) {
      this.d.log('warn', 'event log poll failed', { topic: this.d.topic.name, error: errorMessage(err) });
    } finally {
      this.polling = false;
      if (!this.stopping) this.schedulePoll();
    }
  }
}

/**
 * The consumer groups of one log instance: a group per (topic, group name), and the members that
 * run in this instance (so that closing the log stops them). Both in-process logs join through it.
 */
export class LocalGroups {
  private readonly groups = new Map<string, LocalGroup>();
  private readonly members = new Set<LocalMember<unknown>>();

  constructor(
    private readonly d: {
      notifier: EventEmitter;
      pollIntervalMs: number;
      backoff: BackoffOptions;
      log: EventLogLogger;
    },
  ) {}

  /** A new member of `opts.group` on the topic (stored as `physicalName`), reading from `source`. */
  async join<T>(
    physicalName: string,
    topic: Topic<T>,
    opts: ConsumerOptions,
    handlers: ConsumerHandlers<T>,
    source: PartitionSource<T>,
  ): Promise<Consumer> {
    const groupKey = `${physicalName}\u0000${opts.group}`;
    let group = this.groups.get(groupKey);
    if (!group) {
      group = new LocalGroup(topic.partitions, this.d.log, `${physicalName}/${opts.group}`);
      this.groups.set(groupKey, group);
    }
    const member = new LocalMember<T>({
      source,
      topic,
      physicalName,
      group,
      opts,
      handlers,
      notifier: this.d.notifier,
      pollIntervalMs: this.d.pollIntervalMs,
      backoff: this.d.backoff,
      log: this.d.log,
      onStopped: (m) => this.members.delete(m as LocalMember<unknown>),
    });
    this.members.add(member as LocalMember<unknown>);
    await group.join(member as LocalMember<unknown>);
    return member;
  }

  /** Stops every member of this instance (in-flight batches finish). */
  async stopAll(): Promise<void> {
    await Promise.all([...this.members].map((m) => m.stop()));
  }
}
