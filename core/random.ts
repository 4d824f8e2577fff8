/**
 * The injected random source, beside the clock (ARCHITECTURE.md invariant 5): what core/ draws at
 * random (ids now; wheel spins and jitter later) comes from a `Random` handed down by the
 * composition root, so a test can replay it. `systemRandom` draws from node:crypto (a CSPRNG);
 * `SeededRandom` is deterministic for tests: the same seed gives the same sequence.
 */
import { createHash, randomBytes, randomInt, randomUUID } from 'node:crypto';

export interface Random {
  /** A version 4 UUID (lowercase, 36 characters). */
  uuid(): string;
  /** `n` random bytes. */
  bytes(n: number): Buffer;
  /** An integer in [min, max), uniform (no modulo bias); max - min must be in 1..2^48 - 1. */
  int(min: number, max: number): number;
  /** A number in [0, 1) with 48 random bits (for weights and jitter). */
  float(): number;
}

const FLOAT_BITS = 2 ** 48;

function checkRange(min: number, max: number): void {
  if (!Number.isSafeInteger(min) || !Number.isSafeInteger(max) || max <= min || max - min >= FLOAT_BITS)
    throw new RangeError(`random int range [${min}, ${max}): max - min must be 1..2^48 - 1`);
}

/** The system's source: node:crypto. */
export const systemRandom: Random = {
  uuid: () => randomUUID(),
  bytes: (n) => randomBytes(n),
  int: (min, max) => {
    checkRange(min, max);
    return randomInt(min, max);
  },
  float: () => randomBytes(6).readUIntBE(0, 6) / FLOAT_BITS,
};

/**
 * A deterministic source for tests: SHA-256 of (seed, block counter) in counter mode. Not for
 * production (anyone who knows the seed knows every draw).
 */
export class SeededRandom implements Random {
  private pool = Buffer.alloc(0);
  private block = 0;

  constructor(private readonly seed: string | number) {}

  bytes(n: number): Buffer {
    if (!Number.isSafeInteger(n) || n < 0)
      throw new RangeError('random bytes: n must be a non-negative integer');
    while (this.pool.length < n) {
      const next = createHash('sha256')
        .update(`${String(this.seed)}\u0000${this.block++}`)
        .digest();
      this.pool = Buffer.concat([this.pool, next]);
    }
    const out = this.pool.subarray(0, n);
    this.pool = this.pool.subarray(n);
    return Buffer.from(out);
  }

  uuid(): string {
    const b = this.bytes(16);
    b[6] = (b[6]! & 0x0f) | 0x40; // version 4
    b[8] = (b[8]! & 0x3f) | 0x80; // RFC 4122 variant
    const h = b.toString('hex');
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  }

  float(): number {
    return this.bytes(6).readUIntBE(0, 6) / FLOAT_BITS;
  }

  int(min: number, max: number): number {
    checkRange(min, max);
    const span = max - min;
    // Rejection sampling over 48-bit draws: the accepted range is a multiple of span.
    const limit = FLOAT_BITS - (FLOAT_BITS % span);
    for (;;) {
      const x = this.bytes(6).readUIntBE(0, 6);
      if (x < limit) return min + (x % span);
    }
  }
}
