/**
 * Secrets at rest. Tenant secrets and API keys must be usable (an admin JWT is signed with the
 * plaintext API key, a tenant JWT with the tenant's secret), so they are kept encrypted with the
 * server key (AES-256-GCM), never in plain text. API keys are found by a keyed hash (HMAC-SHA256
 * with the server key) and every comparison of secrets is constant-time.
 */
import { createCipheriv, createDecipheriv, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

export class SecretBox {
  private readonly encKey: Buffer;
  private readonly macKey: Buffer;

  /** serverKey: 32 random bytes. Sub-keys for encryption and hashing are derived from it. */
  constructor(serverKey: Buffer) {
    if (serverKey.length !== 32) throw new Error('the server key must be 32 bytes');
    this.encKey = createHmac('sha256', serverKey).update('ludus:enc:v1').digest();
    this.macKey = createHmac('sha256', serverKey).update('ludus:mac:v1').digest();
  }

  /** `v1.<iv>.<tag>.<ciphertext>`, base64url parts. */
  encrypt(plain: string): string {
    const iv = randomBytes(12);
    const c = createCipheriv('aes-256-gcm', this.encKey, iv);
    const body = Buffer.concat([c.update(plain, 'utf8'), c.final()]);
    return [
      'v1',
      iv.toString('base64url'),
      c.getAuthTag().toString('base64url'),
      body.toString('base64url'),
    ].join('.');
  }

  decrypt(sealed: string): string {
    const [v, iv, tag, body] = sealed.split('.');
    if (v !== 'v1' || !iv || !tag || body === undefined) throw new Error('unknown secret format');
    const d = createDecipheriv('aes-256-gcm', this.encKey, Buffer.from(iv, 'base64url'));
    d.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([d.update(Buffer.from(body, 'base64url')), d.final()]).toString('utf8');
  }

  /** Keyed hash of a presented secret, hex. */
  hash(secret: string): string {
    return createHmac('sha256', this.macKey).update(secret, 'utf8').digest('hex');
  }

  /** Constant-time check of a presented secret against a stored keyed hash. */
  verifyHash(presented: string, storedHex: string): boolean {
    return safeEqualHex(this.hash(presented), storedHex);
  }
}

/** Constant-time equality of two strings of any length (compares fixed-size digests). */
export function safeEqual(a: string, b: string): boolean {
  const da = createHmac('sha256', 'ludus:cmp').update(a).digest();
  const db = createHmac('sha256', 'ludus:cmp').update(b).digest();
  return timingSafeEqual(da, db);
}

function safeEqualHex(a: string, b: string): boolean {
  const ba = Buffer.from(a, 'hex');
  const bb = Buffer.from(b, 'hex');
  return ba.length === bb.length && ba.length > 0 && timingSafeEqual(ba, bb);
}

/** A random secret with a readable prefix: `<prefix>_<43 base64url chars>` (256 bits). */
export function newSecret(prefix: string): string {
  return `${prefix}_${randomBytes(32).toString('base64url')}`;
}
