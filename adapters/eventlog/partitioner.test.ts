import { Partitioners, type PartitionMetadata } from 'kafkajs';
import { createKeyPartitioner, murmur2, partitionForKey } from './partitioner';

const metadatas = new Map<number, PartitionMetadata[]>();
const metadata = (n: number): PartitionMetadata[] => {
  let m = metadatas.get(n);
  if (!m)
    metadatas.set(
      n,
      (m = Array.from({ length: n }, (_, partitionId) => ({
        partitionErrorCode: 0,
        partitionId,
        leader: 0,
        replicas: [0],
        isr: [0],
        offlineReplicas: [],
      }))),
    );
  return m;
};

/** kafkajs's own DefaultPartitioner (murmur2 in BigInt arithmetic): the reference. */
const kafkajs = Partitioners.DefaultPartitioner();
const reference = (key: string | Buffer, n: number) =>
  kafkajs({ topic: 't', partitionMetadata: metadata(n), message: { key, value: null } });

/** A deterministic random generator (mulberry32), so a failure names a reproducible key. */
function rng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Keys of 0 to 600 UTF-16 units: ASCII, Latin-1, CJK, emoji (surrogate pairs), NUL separators. */
function randomKey(r: () => number): string {
  const alphabets = ['abcdefghijklmnopqrstuvwxyz0123456789:-_', 'éüßñø€', '漢字カナ', '😀🎮🏆', '\u0000'];
  const length = r() < 0.1 ? Math.floor(r() * 600) : Math.floor(r() * 40);
  let key = '';
  while (key.length < length) {
    const chars = [...alphabets[Math.floor(r() * alphabets.length)]!];
    key += chars[Math.floor(r() * chars.length)]!;
  }
  return key;
}

describe('the event log key partitioner', () => {
  it("gives Kafka's Java client's murmur2 values (its UtilsTest vectors)", () => {
    expect(murmur2('21')).toBe(-973932308);
    expect(murmur2('foobar')).toBe(-790332482);
    expect(murmur2('a-little-bit-long-string')).toBe(-985981536);
    expect(murmur2('a-little-bit-longer-string')).toBe(-1486304829);
    expect(murmur2('lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8')).toBe(-58897971);
    expect(murmur2('abc')).toBe(479470107);
  });

  it("agrees with kafkajs's DefaultPartitioner on 2,000 random keys and several partition counts", () => {
    const r = rng(19);
    const keys = [
      '',
      'a',
      'ab',
      'abc',
      'x'.repeat(341),
      'x'.repeat(1100),
      '漢'.repeat(341),
      '漢'.repeat(400),
      '😀'.repeat(200),
    ];
    for (let i = 0; i < 2000; i++) keys.push(randomKey(r));
    for (const key of keys)
      for (const n of [1, 8, 12, 997]) {
        const want = reference(key, n);
        if (partitionForKey(key, n) !== want)
          throw new Error(`key ${JSON.stringify(key)} of ${n}: ${partitionForKey(key, n)}, kafkajs ${want}`);
      }
  });

  it("is the Kafka producer's partitioner: a message's own partition, else its key's, string or bytes", () => {
    const partition = createKeyPartitioner();
    const args = (message: { key?: string | Buffer | null; partition?: number }) => ({
      topic: 't',
      partitionMetadata: metadata(8),
      message: { value: null, ...message },
    });
    expect(partition(args({ key: 'acme:alice', partition: 5 }))).toBe(5);
    for (const key of ['acme:alice', 'acme:bob', 'tenant\u0000user-😀']) {
      expect(partition(args({ key }))).toBe(reference(key, 8));
      expect(partition(args({ key: Buffer.from(key) }))).toBe(reference(key, 8));
    }
    // Bytes that are not UTF-8 hash as they are, as kafkajs does.
    const bytes = Buffer.from([0xff, 0xfe, 0x00, 0x80, 0xc3]);
    expect(partition(args({ key: bytes }))).toBe(reference(bytes, 8));
    expect(() => partition(args({ key: null }))).toThrow(/need a key/);
  });

  it('refuses a partition count that is not a positive integer', () => {
    for (const n of [0, -1, 1.5, Number.NaN])
      expect(() => partitionForKey('k', n)).toThrow(/invalid partition count/);
  });
});
