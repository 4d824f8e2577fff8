import { randomBytes } from 'node:crypto';
import { newSecret, safeEqual, SecretBox } from './secrets';

describe('SecretBox', () => {
  const box = new SecretBox(randomBytes(32));

  it('round-trips a secret and never stores it in clear', () => {
    const s = newSecret('ldk');
    const sealed = box.encrypt(s);
    expect(sealed).not.toContain(s.slice(4));
    expect(box.decrypt(sealed)).toBe(s);
    expect(box.encrypt(s)).not.toBe(sealed); // fresh IV each time
  });

  it('refuses a tampered or foreign ciphertext', () => {
    const sealed = box.encrypt('secret');
    const parts = sealed.split('.');
    parts[3] = Buffer.from('SECRET').toString('base64url');
    expect(() => box.decrypt(parts.join('.'))).toThrow();
    expect(() => new SecretBox(randomBytes(32)).decrypt(sealed)).toThrow();
    expect(() => box.decrypt('garbage')).toThrow('unknown secret format');
  });

  it('verifies keyed hashes in constant time and rejects near misses', () => {
    const s = newSecret('ldk');
    const h = box.hash(s);
    expect(box.verifyHash(s, h)).toBe(true);
    expect(box.verifyHash(s + 'x', h)).toBe(false);
    expect(box.verifyHash(s, h.slice(0, -2))).toBe(false);
    expect(box.verifyHash(s, '')).toBe(false);
    expect(new SecretBox(randomBytes(32)).verifyHash(s, h)).toBe(false);
  });

  it('compares strings of different lengths safely', () => {
    expect(safeEqual('abc', 'abc')).toBe(true);
    expect(safeEqual('abc', 'abcd')).toBe(false);
    expect(safeEqual('', '')).toBe(true);
  });

  it('requires a 32-byte server key', () => {
    expect(() => new SecretBox(randomBytes(16))).toThrow('32 bytes');
  });
});
