/**
 * Coupon codes: random codes from the injected cryptographic source (core/random.ts) over an
 * alphabet without look-alike characters, and the key a code is unique under in its tenant.
 */
import type { Random } from '../random';

/** Upper-case letters and digits without I, L, O, 0 and 1 (31 characters). */
export const CODE_ALPHABET = 'ABCDEFGHJKMNPQRSTUVWXYZ23456789';

/** Bytes below this map to the alphabet without modulo bias (8 * 31); the rest are drawn again. */
const UNBIASED = Math.floor(256 / CODE_ALPHABET.length) * CODE_ALPHABET.length;

/** `count` random codes of `length` alphabet characters after `prefix`. */
export function randomCodes(random: Random, count: number, length: number, prefix = ''): string[] {
  const out: string[] = new Array<string>(count);
  let pool = random.bytes(Math.ceil(count * length * 1.1) + 16);
  let at = 0;
  const next = (): string => {
    for (;;) {
      if (at >= pool.length) {
        pool = random.bytes(Math.max(64, length * 16));
        at = 0;
      }
      const b = pool[at++]!;
      if (b < UNBIASED) return CODE_ALPHABET[b % CODE_ALPHABET.length]!;
    }
  };
  for (let i = 0; i < count; i++) {
    let s = prefix;
    for (let j = 0; j < length; j++) s += next();
    out[i] = s;
  }
  return out;
}

/**
 * The key a code is unique under in its tenant: the code in lower case, whatever the definition's
 * case rule, so no code can match two coupons; a case-sensitive definition also needs the exact case.
 */
export const codeKey = (code: string): string => code.toLowerCase();
