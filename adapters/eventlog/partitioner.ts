/**
 * The one key partitioner of the event log, used by every adapter and by the Kafka producer:
 * Kafka's Java client's (and kafkajs's DefaultPartitioner's) algorithm, murmur2 of the key's UTF-8
 * bytes, made positive (`& 0x7fffffff`), modulo the partition count. So `partitionFor` agrees with
 * where Kafka puts a record, and the embedded logs place every key in the partition Kafka would.
 *
 * Written here in 32-bit arithmetic (`Math.imul`) because kafkajs's murmur2 computes in BigInt
 * objects, several per four bytes of key: in the distributed ingest gateway's profile it and its
 * objects took about 5 % of the busy time (docs/performance.md, issue 19, eighteenth pass). The
 * result is the same: only the low 32 bits of its products and XORs reach the hash. The unit test
 * (partitioner.test.ts) holds it to kafkajs's DefaultPartitioner on random keys.
 */
import type { ICustomPartitioner } from 'kafkajs';

const M = 0x5bd1e995;
const SEED = 0x9747b28c;

/** UTF-8 bytes of a key, written without an allocation when it fits (3 bytes per UTF-16 unit at most). */
const scratch = Buffer.allocUnsafe(1024);

/** Kafka's murmur2 (32 bits, signed) of the UTF-8 bytes of `key`. */
export function murmur2(key: string): number {
  if (key.length * 3 <= scratch.length) return murmur2Bytes(scratch, scratch.write(key, 0, 'utf8'));
  const data = Buffer.from(key, 'utf8');
  return murmur2Bytes(data, data.length);
}

/** Kafka's murmur2 of the first `length` bytes of `data`. */
function murmur2Bytes(data: Buffer, length: number): number {
  let h = SEED ^ length;
  const whole = length & ~3;
  for (let i = 0; i < whole; i += 4) {
    let k = data[i]! | (data[i + 1]! << 8) | (data[i + 2]! << 16) | (data[i + 3]! << 24);
    k = Math.imul(k, M);
    k ^= k >>> 24;
    k = Math.imul(k, M);
    h = Math.imul(h, M) ^ k;
  }
  // The last one to three bytes (the Java original's switch falls through its cases).
  const rest = length & 3;
  if (rest === 3) h ^= data[whole + 2]! << 16;
  if (rest >= 2) h ^= data[whole + 1]! << 8;
  if (rest >= 1) h = Math.imul(h ^ data[whole]!, M);
  h ^= h >>> 13;
  h = Math.imul(h, M);
  h ^= h >>> 15;
  return h | 0;
}

/** The partition of `key` among `partitions`. */
export function partitionForKey(key: string, partitions: number): number {
  if (!Number.isInteger(partitions) || partitions < 1)
    throw new Error(`invalid partition count: ${partitions}`);
  return toPartition(murmur2(key), partitions);
}

/** Kafka's step from a hash to a partition: made positive (not the absolute value), then modulo. */
function toPartition(hash: number, partitions: number): number {
  return (hash & 0x7fffffff) % partitions;
}

/**
 * The Kafka producer's partitioner (kafkajs's `createPartitioner`): a message's own partition when
 * it names one, else `partitionForKey` of its key. Every record of the event log has a key
 * (codec.ts `encodeRecords` refuses one without), so there is no round robin for keyless messages.
 */
export const createKeyPartitioner: ICustomPartitioner =
  () =>
  ({ partitionMetadata, message }) => {
    if (message.partition !== null && message.partition !== undefined) return message.partition;
    if (message.key === null || message.key === undefined)
      throw new Error('event log records need a key to be partitioned');
    const hash =
      typeof message.key === 'string' ? murmur2(message.key) : murmur2Bytes(message.key, message.key.length);
    return toPartition(hash, partitionMetadata.length);
  };
