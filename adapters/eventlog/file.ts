/**
 * FileEventLog: the embedded shape's event log (issue 19), append-only files in the data
 * directory, so that PGlite runs the pipeline's transactions only.
 *
 * Layout: `<dir>/<topic>/meta.json` ({"partitions": n}) and per partition one or more segment
 * files, `<dir>/<topic>/<partition>.log` (the first, base offset 0) and
 * `<dir>/<topic>/<partition>-<base offset, 20 digits>.log`, each a sequence of records, each
 *
 *   u32 body length | u32 CRC-32 of the body | body
 *   body = u8 format (1) | f64 append time (Unix ms) | u16 schema version | u32 key length | key (UTF-8) | value (Avro)
 *
 * (little-endian). A record's offset is its segment's base offset plus its index in the segment.
 *
 * Segments and retention: appends go to a partition's last segment; a flush that finds it at
 * `segmentBytes` or more starts a new one first (a segment holds whole groups: one is never
 * written again once the next exists). `enforceRetention` (on open, then every
 * `retentionCheckMs`) deletes a partition's oldest segments whose last append is older than
 * `retentionMs`, never the last one, as Kafka's time retention does. A consumer whose stored
 * offset lies below the oldest record left goes on at that record, with a warning.
 *
 * Appends, group commit (group-commit.ts): `append` encodes and frames its records, queues them and
 * waits. One flush at a time takes everything queued (up to MAX_GROUP_BYTES per partition), hands out offsets,
 * writes each touched partition's bytes with one positional write, then fdatasyncs every touched
 * file; only then does it resolve the appends of the group (a 202 means durable) and make the
 * records visible to consumers and to `endOffsets`. Appends that arrive during a flush form the
 * next group, so under load one fsync serves many requests. A failed write or sync rejects every
 * append of the group and cuts the files back to their last durable size (offsets are not
 * reused by records anyone saw); if even that fails, the log refuses further appends.
 *
 * Opening (crash recovery): every segment file is read once, checking each record's length and
 * CRC. A torn or corrupt record at the end of the last segment (a crash during a write that was
 * never acknowledged) is cut off, with a warning naming the bytes dropped. Bad bytes followed by
 * more than one group's worth of data, bad bytes in an earlier segment, or segments whose offsets
 * do not follow on cannot be a torn write: the log then refuses to open rather than drop
 * acknowledged records.
 *
 * Reads: consumer loops (groups.ts, the same consumer groups as LocalEventLog) read the latest
 * records from memory (the frames of the last appends of each partition's last segment, about
 * TAIL_BYTES, kept once written and synced), the others from the files with positional reads at a
 * cursor remembered per read position, or from a sparse in-memory index (one file position every
 * INDEX_EVERY records). A stored offset beyond the end of the log is an error (the log files and
 * the SQL store do not belong together), never a silent skip.
 *
 * One process per directory: the directory is locked (`<dir>.lock`, adapters/sql/dirlock.ts), and
 * consumer groups live in this instance.
 */
import { EventEmitter } from 'node:events';
import { mkdirSync, openSync, fsyncSync, closeSync } from 'node:fs';
import { mkdir, open, readdir, rename, rm, stat, unlink, writeFile, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import { lockDir, type DirLock } from '../sql/dirlock';
import { Mutex } from '../../shared/mutex';
import type { Topic } from '../../schemas/topics';
import type { AppendRecord, Consumer, ConsumerHandlers, ConsumerOptions, EventLog, LogRecord } from './types';
import { PlainAvroCodec, encodeRecords, type SchemaCodec } from './codec';
import { defaultLogger, errorMessage, type BackoffOptions, type EventLogLogger } from './common';
import { partitionForKey } from './partitioner';
import { LocalGroups, type PartitionSource } from './groups';
import { GroupCommit } from './group-commit';

/** A record as the SQL log (002_event_log) held it, for the one-time import of an older data directory. */
export interface ImportedRecord {
  offset: number;
  key: string;
  schemaVersion: number;
  value: Buffer;
  timestamp: number;
}

export interface FileEventLogOptions {
  /** The log directory (created when missing), locked for this instance. */
  dir: string;
  /** Bare Avro (avsc) by default. */
  codec?: SchemaCodec;
  /** Prepended to topic names (tests isolate themselves with a unique prefix). */
  topicPrefix?: string;
  /** How often an idle consumer compares the partition heads with its positions. Default 200 ms. */
  pollIntervalMs?: number;
  /** Backoff after a handler (or read) error. Default 100 ms doubling up to 5 s. */
  retryBackoff?: BackoffOptions;
  /** Diagnostics. Default: errors to stderr. */
  log?: EventLogLogger;
  /** A partition's last segment is closed for appends at this size. Default 64 MiB. */
  segmentBytes?: number;
  /** Segments whose last append is older than this are deleted (never a partition's last). Default 30 days (720 h, as ops/stack's Kafka). */
  retentionMs?: number;
  /** How often retention is enforced. Default: a tenth of retentionMs, at most every 5 minutes. */
  retentionCheckMs?: number;
  /** The clock of retention (tests). Default Date.now. */
  now?: () => number;
  /**
   * Records to carry over when a topic's files are first created (a data directory whose log was
   * a SQL table): pages of `partition`'s records in offset order from `from` on, empty at the end.
   */
  importer?: {
    heads(physicalName: string): Promise<Map<number, number>>;
    page(physicalName: string, partition: number, from: number, limit: number): Promise<ImportedRecord[]>;
  };
}

const HEADER = 8;
const FORMAT = 1;
/** Fixed part of a body: format, time, schema version, key length. */
const BODY_FIXED = 1 + 8 + 2 + 4;
/** Upper bound of one partition's bytes in one group (and of one append's bytes per partition). */
export const MAX_GROUP_BYTES = 16 * 1024 * 1024;
/** A body longer than this is corruption, not a record. */
const MAX_BODY = MAX_GROUP_BYTES;
/** One file position kept in memory every this many records. */
const INDEX_EVERY = 256;
/** Bytes read from a file at a time by a consumer. */
const READ_CHUNK = 1024 * 1024;
/** The latest appended bytes a segment keeps in memory, so consumers that keep up read no file. */
const TAIL_BYTES = 256 * 1024;
export const DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024;
export const DEFAULT_RETENTION_MS = 30 * 24 * 3600 * 1000;

/** A partition's segment file name: `<p>.log` for base offset 0, `<p>-<base, 20 digits>.log` after. */
export function segmentFileName(partition: number, base: number): string {
  return base === 0 ? `${partition}.log` : `${partition}-${String(base).padStart(20, '0')}.log`;
}

/** Base offset of a segment file of `partition`, or null when the name is not one. */
function segmentBase(partition: number, name: string): number | null {
  if (name === `${partition}.log`) return 0;
  const m = /^(\d+)-(\d{20})\.log$/.exec(name);
  return m && Number(m[1]) === partition ? Number(m[2]) : null;
}

/** Frames one record (header + body). */
export function frameRecord(timestamp: number, schemaVersion: number, key: string, value: Buffer): Buffer {
  const keyLen = Buffer.byteLength(key, 'utf8');
  const bodyLen = BODY_FIXED + keyLen + value.length;
  const buf = Buffer.allocUnsafe(HEADER + bodyLen);
  buf.writeUInt32LE(bodyLen, 0);
  let o = HEADER;
  buf.writeUInt8(FORMAT, o);
  buf.writeDoubleLE(timestamp, o + 1);
  buf.writeUInt16LE(schemaVersion, o + 9);
  buf.writeUInt32LE(keyLen, o + 11);
  o += BODY_FIXED;
  o += buf.write(key, o, 'utf8');
  value.copy(buf, o);
  buf.writeUInt32LE(crc32(buf.subarray(HEADER)) >>> 0, 4);
  return buf;
}

interface Parsed {
  timestamp: number;
  schemaVersion: number;
  key: string;
  value: Buffer;
  /** Bytes of the whole record. */
  size: number;
}

/**
 * Parses the record at `at` in `buf`: the record, 'short' when `buf` ends inside it, or 'bad'
 * when its length or checksum is wrong.
 */
function parseRecord(buf: Buffer, at: number): Parsed | 'short' | 'bad' {
  if (buf.length - at < HEADER) return 'short';
  const bodyLen = buf.readUInt32LE(at);
  if (bodyLen < BODY_FIXED || bodyLen > MAX_BODY) return 'bad';
  if (buf.length - at - HEADER < bodyLen) return 'short';
  const body = buf.subarray(at + HEADER, at + HEADER + bodyLen);
  if (crc32(body) >>> 0 !== buf.readUInt32LE(at + 4)) return 'bad';
  if (body.readUInt8(0) !== FORMAT) return 'bad';
  const keyLen = body.readUInt32LE(11);
  if (BODY_FIXED + keyLen > bodyLen) return 'bad';
  return {
    timestamp: body.readDoubleLE(1),
    schemaVersion: body.readUInt16LE(9),
    key: body.toString('utf8', BODY_FIXED, BODY_FIXED + keyLen),
    value: body.subarray(BODY_FIXED + keyLen),
    size: HEADER + bodyLen,
  };
}

/** A group's frames in a segment's tail: the bytes as written, the first offset, each frame's end. */
interface TailChunk {
  base: number;
  buf: Buffer;
  ends: number[];
}

/** One segment file: its base offset, durable size and record count, and where records start. */
class Segment {
  /** Durable (synced) bytes and records: what readers may see. */
  size = 0;
  count = 0;
  /** When its last record was appended (Unix ms): what retention goes by. */
  lastAppend = 0;
  /** index[i] = file position of record i * INDEX_EVERY (of this segment). */
  readonly index: number[] = [];
  /** Where the next record after a read ended: next offset → file position (small, recent). */
  private readonly cursors = new Map<number, number>();
  /**
   * The latest appends (their bytes as written and synced, about TAIL_BYTES at most), one chunk per
   * group: a consumer that keeps up reads them instead of the file.
   */
  private tail: TailChunk[] = [];
  private tailBytes = 0;

  constructor(
    readonly path: string,
    readonly fh: FileHandle,
    readonly base: number,
  ) {}

  /** Offset after its last record. */
  get end(): number {
    return this.base + this.count;
  }

  /** Records that `count` records of the given sizes were appended durably. */
  advance(sizes: number[]): void {
    for (const s of sizes) {
      if (this.count % INDEX_EVERY === 0) this.index.push(this.size);
      this.size += s;
      this.count++;
    }
  }

  /**
   * Records that `frames` were appended durably (`advance`), keeping `written` (their bytes, as one
   * buffer) as the tail's newest chunk.
   */
  appended(frames: Buffer[], written: Buffer): void {
    const base = this.end;
    this.advance(frames.map((b) => b.length));
    const ends: number[] = [];
    let at = 0;
    for (const b of frames) ends.push((at += b.length));
    this.tail.push({ base, buf: written, ends });
    this.tailBytes += written.length;
    while (this.tailBytes > TAIL_BYTES && this.tail.length > 1)
      this.tailBytes -= this.tail.shift()!.buf.length;
  }

  /** Forgets the tail (the segment is no longer the last: appends go to the next one). */
  dropTail(): void {
    this.tail = [];
    this.tailBytes = 0;
  }

  /** Up to `max` frames from `offset` on when the tail holds `offset`, else null (read the file). */
  fromTail(offset: number, max: number): Buffer[] | null {
    if (this.tail.length === 0 || offset < this.tail[0]!.base || offset >= this.end) return null;
    let i = this.tail.length - 1;
    while (this.tail[i]!.base > offset) i--;
    const frames: Buffer[] = [];
    for (; i < this.tail.length && frames.length < max; i++) {
      const { base, buf, ends } = this.tail[i]!;
      for (let k = Math.max(0, offset - base); k < ends.length && frames.length < max; k++)
        frames.push(buf.subarray(k === 0 ? 0 : ends[k - 1], ends[k]));
    }
    return frames;
  }

  remember(offset: number, position: number): void {
    this.cursors.set(offset, position);
    if (this.cursors.size > 64) this.cursors.delete(this.cursors.keys().next().value as number);
  }

  /** File position of record `offset` (base <= offset < end) and how many records to skip from there. */
  locate(offset: number): { position: number; skip: number } {
    const known = this.cursors.get(offset);
    if (known !== undefined) return { position: known, skip: 0 };
    const slot = Math.floor((offset - this.base) / INDEX_EVERY);
    return { position: this.index[slot], skip: offset - this.base - slot * INDEX_EVERY };
  }
}

/** One partition: its segments in offset order (at least one; appends go to the last). */
class PartitionLog {
  constructor(
    readonly partition: number,
    readonly dir: string,
    readonly segments: Segment[],
  ) {}

  get last(): Segment {
    return this.segments[this.segments.length - 1];
  }

  /** The next offset to be written. */
  get count(): number {
    return this.last.end;
  }

  /** The oldest offset still on disk. */
  get start(): number {
    return this.segments[0].base;
  }

  /** The segment holding `offset` (start <= offset < count). */
  segmentOf(offset: number): Segment {
    let lo = 0;
    let hi = this.segments.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.segments[mid].base <= offset) lo = mid;
      else hi = mid - 1;
    }
    return this.segments[lo];
  }
}

interface TopicFiles {
  name: string;
  partitions: PartitionLog[];
}

/** One append call waiting for its group's flush. */
interface PendingAppend {
  topic: TopicFiles;
  /** partition → framed records, in call order. */
  frames: Map<number, Buffer[]>;
}

export class FileEventLog implements EventLog {
  readonly kind = 'file' as const;
  private readonly codec: SchemaCodec;
  private readonly prefix: string;
  private readonly log: EventLogLogger;
  private readonly dir: string;
  private readonly lock: DirLock;
  /** Emits the physical topic name after every durable append. */
  private readonly appended = new EventEmitter();
  private readonly topics = new Map<string, Promise<TopicFiles>>();
  private readonly consumers: LocalGroups;
  /** Appends, one group at a time: one write and one fsync per partition file per group. */
  private readonly appends = new GroupCommit<PendingAppend>({
    maxBytes: MAX_GROUP_BYTES,
    flush: (group) => this.flushGroup(group),
  });
  /** Set when a failed group could not be cut back off the files: no further appends. */
  private broken: Error | undefined;
  private closed = false;
  /** Topics are created one at a time. */
  private readonly creating = new Mutex();
  private readonly segmentBytes: number;
  private readonly retentionMs: number;
  private readonly now: () => number;
  private retentionTimer: NodeJS.Timeout | undefined;
  /** Files of deleted segments, closed at the next enforcement (a read may still be using one). */
  private retired: FileHandle[] = [];
  /** Partitions already warned about for reads below their start ("<topic>/<partition>"). */
  private readonly warnedBelowStart = new Set<string>();

  constructor(private readonly opts: FileEventLogOptions) {
    this.dir = opts.dir;
    mkdirSync(this.dir, { recursive: true });
    this.lock = lockDir(this.dir);
    this.codec = opts.codec ?? new PlainAvroCodec();
    this.prefix = opts.topicPrefix ?? '';
    this.log = opts.log ?? defaultLogger;
    this.appended.setMaxListeners(0);
    this.segmentBytes = opts.segmentBytes ?? DEFAULT_SEGMENT_BYTES;
    this.retentionMs = opts.retentionMs ?? DEFAULT_RETENTION_MS;
    if (!(this.segmentBytes >= 1)) throw new Error(`invalid segmentBytes: ${opts.segmentBytes}`);
    if (!(this.retentionMs >= 1)) throw new Error(`invalid retentionMs: ${opts.retentionMs}`);
    this.now = opts.now ?? Date.now;
    const every = opts.retentionCheckMs ?? Math.min(this.retentionMs / 10, 5 * 60 * 1000);
    this.retentionTimer = setInterval(
      () => {
        this.enforceRetention().catch((err: unknown) =>
          this.log('warn', 'event log retention failed', { error: errorMessage(err) }),
        );
      },
      Math.max(1, every),
    );
    this.retentionTimer.unref();
    this.consumers = new LocalGroups({
      notifier: this.appended,
      pollIntervalMs: opts.pollIntervalMs ?? 200,
      backoff: opts.retryBackoff ?? {},
      log: this.log,
    });
  }

  physicalName(topic: Topic<unknown>): string {
    return this.prefix + topic.name;
  }

  partitionFor(topic: Topic<unknown>, key: string): number {
    return partitionForKey(key, topic.partitions);
  }

  async ensureTopic(topic: Topic<unknown>): Promise<void> {
    this.assertOpen();
    const name = this.physicalName(topic);
    const topicDir = join(this.dir, name);
    await this.creating.run(async () => {
      if (!(await exists(join(topicDir, 'meta.json')))) await this.createTopic(name, topic.partitions);
    });
    const t = await this.topicFiles(name);
    if (t.partitions.length !== topic.partitions) {
      throw new Error(
        `topic ${name} exists with ${t.partitions.length} partitions, the code expects ${topic.partitions}: ` +
          'changing the count would move keys to other partitions',
      );
    }
  }

  async append<T>(topic: Topic<T>, records: AppendRecord<T>[]): Promise<void> {
    this.assertOpen();
    if (this.broken) throw new Error(`the event log cannot append any more: ${this.broken.message}`);
    if (records.length === 0) return;
    const name = this.physicalName(topic);
    const files = await this.topicFiles(name);
    const version = this.codec.writerVersion(topic);
    const now = Date.now();
    // Encode before queueing: a record that does not fit the schema fails the whole call.
    const frames = new Map<number, Buffer[]>();
    /** The bytes of each partition's file, the bins of the group commit. */
    const bytes = new Map<PartitionLog, number>();
    const values = await encodeRecords(this.codec, topic, name, records);
    for (let i = 0; i < records.length; i++) {
      const r = records[i]!;
      const frame = frameRecord(now, version, r.key, values[i]!);
      const p = this.partitionFor(topic, r.key);
      let list = frames.get(p);
      if (!list) frames.set(p, (list = []));
      list.push(frame);
      const part = files.partitions[p];
      bytes.set(part, (bytes.get(part) ?? 0) + frame.length);
    }
    for (const [part, n] of bytes) {
      if (n > MAX_GROUP_BYTES)
        throw new Error(
          `append to ${name}: ${n} bytes for partition ${part.partition}, more than ${MAX_GROUP_BYTES}`,
        );
    }
    await this.appends.submit({ topic: files, frames }, bytes);
    this.appended.emit(name);
  }

  async consume<T>(topic: Topic<T>, opts: ConsumerOptions, handlers: ConsumerHandlers<T>): Promise<Consumer> {
    this.assertOpen();
    if (!opts.group) throw new Error('consume: a consumer group is required');
    const name = this.physicalName(topic);
    const files = await this.topicFiles(name);
    return this.consumers.join(name, topic, opts, handlers, this.source(topic, files));
  }

  async endOffsets(topic: Topic<unknown>): Promise<Map<number, number>> {
    const files = await this.topicFiles(this.physicalName(topic));
    return new Map(files.partitions.map((f, p) => [p, f.count]));
  }

  async ping(): Promise<void> {
    this.assertOpen();
    if (this.broken) throw new Error(`the event log cannot append any more: ${this.broken.message}`);
  }

  /** Stops every consumer, lets queued appends finish, closes the files and releases the lock. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.retentionTimer);
    await this.consumers.stopAll();
    await this.appends.idle();
    while (this.pruning) await this.pruning;
    this.appended.removeAllListeners();
    for (const t of this.topics.values()) {
      const files = await t.catch(() => undefined);
      for (const f of files?.partitions ?? [])
        for (const seg of f.segments) await seg.fh.close().catch(() => undefined);
    }
    for (const fh of this.retired.splice(0)) await fh.close().catch(() => undefined);
    this.lock.release();
  }

  private pruning: Promise<void> | undefined;

  /**
   * Deletes every partition's oldest segments whose last append is older than the retention,
   * never a partition's last segment. Runs on open and on a timer; one run at a time.
   */
  enforceRetention(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.pruning ??= (async () => {
      try {
        for (const fh of this.retired.splice(0)) await fh.close().catch(() => undefined);
        const cutoff = this.now() - this.retentionMs;
        for (const t of [...this.topics.values()]) {
          const files = await t.catch(() => undefined);
          for (const part of files?.partitions ?? []) await this.prune(files!.name, part, cutoff);
        }
      } finally {
        this.pruning = undefined;
      }
    })();
    return this.pruning;
  }

  private async prune(topic: string, part: PartitionLog, cutoff: number): Promise<void> {
    let deleted = 0;
    let records = 0;
    while (part.segments.length > 1 && part.segments[0].lastAppend < cutoff) {
      const seg = part.segments[0];
      await unlink(seg.path);
      part.segments.shift();
      this.retired.push(seg.fh);
      deleted++;
      records += seg.count;
    }
    if (deleted > 0) {
      syncPath(part.dir);
      this.log('info', 'event log: deleted segments past the retention', {
        topic,
        partition: part.partition,
        segments: deleted,
        records,
        start: part.start,
      });
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Group commit (group-commit.ts queues the appends and takes them in groups)

  /**
   * Writes a group's frames, one write and one fsync per partition file. On failure the files are
   * cut back to where they were, and the group is refused (every append of it rejects).
   */
  private async flushGroup(group: PendingAppend[]): Promise<void> {
    const frames = new Map<PartitionLog, Buffer[]>();
    for (const a of group) {
      for (const [p, list] of a.frames) {
        const part = a.topic.partitions[p];
        let all = frames.get(part);
        if (!all) frames.set(part, (all = []));
        for (const b of list) all.push(b);
      }
    }
    const writes = new Map<Segment, { list: Buffer[]; buf: Buffer }>();
    try {
      for (const [part, list] of frames) {
        const full = part.last.size >= this.segmentBytes && part.last.count > 0;
        const buf = list.length === 1 ? list[0] : Buffer.concat(list);
        writes.set(full ? await this.roll(part) : part.last, { list, buf });
      }
      await Promise.all(
        [...writes].map(async ([seg, { buf }]) => {
          let done = 0;
          while (done < buf.length) {
            const { bytesWritten } = await seg.fh.write(buf, done, buf.length - done, seg.size + done);
            done += bytesWritten;
          }
          await seg.fh.datasync();
        }),
      );
    } catch (err) {
      const e = err instanceof Error ? err : new Error(String(err));
      this.log('error', 'event log write failed; the appends of this group are refused', {
        error: e.message,
      });
      for (const [seg] of writes) {
        try {
          await seg.fh.truncate(seg.size);
          await seg.fh.datasync();
        } catch (cut) {
          this.broken = new Error(`${seg.path}: could not cut a failed write off: ${errorMessage(cut)}`);
          this.log('error', 'event log is broken', { error: this.broken.message });
        }
      }
      throw new Error(`event log write failed: ${e.message}`);
    }
    const at = this.now();
    for (const [seg, { list, buf }] of writes) {
      seg.appended(list, buf);
      seg.lastAppend = at;
    }
  }

  /** Starts a partition's next segment (its last one is full) and returns it. */
  private async roll(part: PartitionLog): Promise<Segment> {
    const last = part.last;
    const path = join(part.dir, segmentFileName(part.partition, last.end));
    const fh = await open(path, 'wx+');
    const seg = new Segment(path, fh, last.end);
    seg.lastAppend = this.now();
    try {
      syncPath(part.dir);
    } catch (err) {
      await fh.close().catch(() => undefined);
      await unlink(path).catch(() => undefined);
      throw err;
    }
    part.segments.push(seg);
    last.dropTail();
    return seg;
  }

  // ---------------------------------------------------------------------------------------------
  // Topics on disk

  private topicFiles(name: string): Promise<TopicFiles> {
    let t = this.topics.get(name);
    if (!t) {
      t = this.openTopic(name);
      this.topics.set(name, t);
      t.then(
        () =>
          this.enforceRetention().catch((err: unknown) =>
            this.log('warn', 'event log retention failed', { error: errorMessage(err) }),
          ),
        () => this.topics.delete(name),
      );
    }
    return t;
  }

  /** Creates a topic's files (importing its records from the SQL log when there are any). */
  private async createTopic(name: string, partitions: number): Promise<void> {
    const topicDir = join(this.dir, name);
    const tmp = `${topicDir}.creating`;
    await rm(tmp, { recursive: true, force: true });
    await mkdir(tmp, { recursive: true });
    let imported = 0;
    const heads = (await this.opts.importer?.heads(name)) ?? new Map<number, number>();
    for (let p = 0; p < partitions; p++) {
      const fh = await open(join(tmp, `${p}.log`), 'w');
      try {
        const end = heads.get(p) ?? 0;
        for (let from = 0; from < end;) {
          const page = await this.opts.importer!.page(name, p, from, 5000);
          if (page.length === 0 || page[0].offset !== from)
            throw new Error(
              `cannot carry the SQL event log of ${name} over: partition ${p} has no record at offset ${from}`,
            );
          const frames: Buffer[] = [];
          for (const r of page) {
            if (r.offset !== from)
              throw new Error(
                `cannot carry the SQL event log of ${name} over: partition ${p} skips offset ${from}`,
              );
            frames.push(frameRecord(r.timestamp, r.schemaVersion, r.key, r.value));
            from++;
          }
          await fh.write(Buffer.concat(frames));
          imported += page.length;
        }
        await fh.sync();
      } finally {
        await fh.close();
      }
    }
    if (heads.size > 0 && [...heads.keys()].some((p) => p >= partitions))
      throw new Error(`topic ${name} has more partitions in the SQL event log than the code expects`);
    await writeFile(join(tmp, 'meta.json'), JSON.stringify({ partitions }));
    syncPath(join(tmp, 'meta.json'));
    syncPath(tmp);
    await rename(tmp, topicDir);
    syncPath(this.dir);
    if (imported > 0)
      this.log('info', 'event log carried over from the SQL store', { topic: name, records: imported });
  }

  /** Opens a topic's partition files, checking every record and cutting a torn tail off. */
  private async openTopic(name: string): Promise<TopicFiles> {
    const topicDir = join(this.dir, name);
    let partitions: number;
    try {
      ({ partitions } = JSON.parse(await readText(join(topicDir, 'meta.json'))) as { partitions: number });
    } catch {
      throw new Error(`topic ${name} does not exist: call ensureTopic first`);
    }
    const names = await readdir(topicDir);
    const parts: PartitionLog[] = [];
    try {
      for (let p = 0; p < partitions; p++) parts.push(await this.openPartition(topicDir, p, names));
    } catch (err) {
      for (const part of parts) for (const seg of part.segments) await seg.fh.close().catch(() => undefined);
      throw err;
    }
    return { name, partitions: parts };
  }

  /** Opens a partition's segments in offset order; only the last may lose a torn tail. */
  private async openPartition(topicDir: string, p: number, names: string[]): Promise<PartitionLog> {
    const bases = names
      .map((n) => segmentBase(p, n))
      .filter((b): b is number => b !== null)
      .sort((a, b) => a - b);
    if (bases.length === 0)
      throw new Error(`${join(topicDir, `${p}.log`)}: the partition has no segment file`);
    const segments: Segment[] = [];
    try {
      for (let i = 0; i < bases.length; i++) {
        const path = join(topicDir, segmentFileName(p, bases[i]));
        const prev = segments[i - 1];
        if (prev && prev.end !== bases[i]) {
          throw new Error(
            `${path}: starts at offset ${bases[i]}, but the segment before it ends at ${prev.end}; ` +
              'refusing to open a partition with missing or damaged records (restore the data directory from a backup)',
          );
        }
        segments.push(await this.recover(path, bases[i], i === bases.length - 1));
      }
    } catch (err) {
      for (const seg of segments) await seg.fh.close().catch(() => undefined);
      throw err;
    }
    return new PartitionLog(p, topicDir, segments);
  }

  private async recover(path: string, base: number, last: boolean): Promise<Segment> {
    const fh = await open(path, 'r+');
    const f = new Segment(path, fh, base);
    try {
      const total = (await fh.stat()).size;
      const sizes: number[] = [];
      let pos = 0;
      let buf = Buffer.alloc(0);
      let bufStart = 0;
      let bad = false;
      while (pos < total) {
        const parsed = parseRecord(buf, pos - bufStart);
        if (parsed === 'bad') {
          bad = true;
          break;
        }
        if (parsed === 'short') {
          if (bufStart + buf.length >= total) break; // the file ends inside this record: torn
          const rel = pos - bufStart;
          const need = buf.length - rel >= HEADER ? HEADER + buf.readUInt32LE(rel) : HEADER;
          const next = Buffer.allocUnsafe(Math.min(Math.max(READ_CHUNK * 4, need), total - pos));
          const { bytesRead } = await fh.read(next, 0, next.length, pos);
          if (bytesRead === 0) break;
          buf = next.subarray(0, bytesRead);
          bufStart = pos;
          continue;
        }
        sizes.push(parsed.size);
        if (parsed.timestamp > f.lastAppend) f.lastAppend = parsed.timestamp;
        pos += parsed.size;
      }
      if (pos < total) {
        const dropped = total - pos;
        if (dropped > MAX_GROUP_BYTES || !last) {
          throw new Error(
            `${path}: ${bad ? 'a corrupt record' : 'a torn record'} at byte ${pos} followed by ${dropped} bytes` +
              (last
                ? ': more than one write could have left unfinished, so this is damage, not a crash during an append; '
                : ' in a segment that a later one follows (never written again), so this is damage; ') +
              'refusing to cut acknowledged records off (restore the data directory from a backup)',
          );
        }
        this.log('warn', 'event log: cut an unfinished write off the end (a crash during an append)', {
          file: path,
          at: pos,
          bytes: dropped,
        });
        await fh.truncate(pos);
        await fh.datasync();
      }
      f.advance(sizes);
      return f;
    } catch (err) {
      await fh.close().catch(() => undefined);
      throw err;
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Reads for the consumer loops

  private source<T>(topic: Topic<T>, files: TopicFiles): PartitionSource<T> {
    const codec = this.codec;
    return {
      heads: async () => new Map(files.partitions.map((f, p) => [p, f.count])),
      read: async (partition, from, max) => {
        const part = files.partitions[partition];
        if (from > part.count) {
          throw new Error(
            `stored offset ${from} of ${files.name}[${partition}] is beyond the end of the log (${part.count}): ` +
              'the log files do not belong to this SQL store (restored separately?); refusing to skip records',
          );
        }
        let offset = from;
        if (offset < part.start) {
          const key = `${files.name}/${partition}`;
          if (!this.warnedBelowStart.has(key)) {
            this.warnedBelowStart.add(key);
            this.log(
              'warn',
              'event log: records below the log start were deleted by retention; going on at the start',
              {
                topic: files.name,
                partition,
                position: from,
                start: part.start,
              },
            );
          }
          offset = part.start;
        }
        if (offset === part.count) return [];
        // One segment per read: a read that stops at a segment's end is followed by the next one.
        const f = part.segmentOf(offset);
        const record = async (parsed: Parsed, at: number): Promise<LogRecord<T>> => ({
          topic: topic.name,
          partition,
          offset: at,
          key: parsed.key,
          value: await codec.decode(topic, parsed.value, parsed.schemaVersion),
          timestamp: parsed.timestamp,
        });
        // A consumer that keeps up finds its records in the segment's tail: no file read.
        const tail = f.fromTail(offset, max);
        if (tail) {
          const records: LogRecord<T>[] = [];
          for (const frame of tail) {
            const parsed = parseRecord(frame, 0);
            if (typeof parsed === 'string') throw new Error(`${f.path}: bad record ${offset} in memory`);
            records.push(await record(parsed, offset++));
          }
          return records;
        }
        let { position, skip } = f.locate(offset);
        const end = f.size;
        const records: LogRecord<T>[] = [];
        let buf = Buffer.alloc(0);
        let bufStart = position;
        let next = offset - skip;
        while (records.length < max && position < end) {
          const parsed = parseRecord(buf, position - bufStart);
          if (parsed === 'bad') throw new Error(`${f.path}: corrupt record at byte ${position}`);
          if (parsed === 'short') {
            const have = buf.length - (position - bufStart);
            const need = have >= HEADER ? HEADER + buf.readUInt32LE(position - bufStart) : HEADER;
            const chunk = Buffer.allocUnsafe(Math.min(Math.max(READ_CHUNK, need), end - position));
            const { bytesRead } = await f.fh.read(chunk, 0, chunk.length, position);
            if (bytesRead === 0) throw new Error(`${f.path}: unexpected end of file at byte ${position}`);
            buf = chunk.subarray(0, bytesRead);
            bufStart = position;
            continue;
          }
          position += parsed.size;
          if (skip > 0) {
            skip--;
            next++;
            continue;
          }
          records.push(await record(parsed, next++));
        }
        f.remember(next, position);
        return records;
      },
    };
  }

  private assertOpen(): void {
    if (this.closed) throw new Error('the event log is closed');
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}

async function readText(path: string): Promise<string> {
  const fh = await open(path, 'r');
  try {
    return await fh.readFile('utf8');
  } finally {
    await fh.close();
  }
}

/** fsync of a file or a directory (a directory's entries: created and renamed files). */
function syncPath(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Topic directories present in a log directory (for tools and tests). */
export async function listTopics(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  return entries.filter((e) => e.isDirectory() && !e.name.endsWith('.creating')).map((e) => e.name);
}
