/**
 * Webhook signing secrets and signatures (docs/webhooks.md "Verifying a delivery").
 *
 * A secret is `whsec_<base64 of 32 random bytes>`, the Standard Webhooks format, so receivers can
 * hand it to the `standardwebhooks` libraries as it is. The HMAC key of both signatures is the
 * 32 bytes the base64 part decodes to.
 *
 * Every delivery carries two signature schemes over the same raw body:
 * - `X-Webhook-Signature: sha256=<hex>`, HMAC-SHA256 of `<X-Webhook-Timestamp>.<body>` (SPEC.md);
 * - `webhook-signature: v1,<base64>`, HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<body>`
 *   (Standard Webhooks).
 * While a rotated-out secret is still valid, each header carries one signature per secret,
 * separated by a space (newest first); a receiver accepts the delivery when any one matches.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

export const SECRET_PREFIX = 'whsec_';

/** A new signing secret, `whsec_` + base64 (standard alphabet, padded) of 32 random bytes. */
export function newSigningSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(32).toString('base64')}`;
}

/** The HMAC key of a secret: the bytes its base64 part decodes to. */
export function secretKey(secret: string): Buffer {
  const b64 = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret;
  const key = Buffer.from(b64, 'base64');
  if (key.length === 0) throw new Error('empty signing secret');
  return key;
}

export interface SignedHeaders {
  'X-Webhook-Id': string;
  'X-Webhook-Timestamp': string;
  'X-Webhook-Signature': string;
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
}

/**
 * The signature headers of one attempt. `secrets` newest first; `timestampSec` Unix seconds;
 * `id` the delivery id, stable across retries and redeliveries.
 */
export function signatureHeaders(
  secrets: string[],
  id: string,
  timestampSec: number,
  body: string,
): SignedHeaders {
  if (secrets.length === 0) throw new Error('no signing secret');
  const ts = String(Math.floor(timestampSec));
  const ours = secrets.map((s) => `sha256=${hmac(s, `${ts}.${body}`).toString('hex')}`);
  const standard = secrets.map((s) => `v1,${hmac(s, `${id}.${ts}.${body}`).toString('base64')}`);
  return {
    'X-Webhook-Id': id,
    'X-Webhook-Timestamp': ts,
    'X-Webhook-Signature': ours.join(' '),
    'webhook-id': id,
    'webhook-timestamp': ts,
    'webhook-signature': standard.join(' '),
  };
}

function hmac(secret: string, content: string): Buffer {
  return createHmac('sha256', secretKey(secret)).update(content, 'utf8').digest();
}

export type VerifyResult = { ok: true } | { ok: false; reason: string };

/**
 * The receiver's check of `X-Webhook-Signature` (what docs/webhooks.md shows): the timestamp is
 * within `toleranceSec` of `nowSec`, and one `sha256=` entry matches HMAC(`<timestamp>.<body>`).
 */
export function verifySignature(
  secret: string,
  headers: { timestamp: string | undefined; signature: string | undefined },
  body: string,
  nowSec: number,
  toleranceSec = 300,
): VerifyResult {
  const { timestamp, signature } = headers;
  if (!timestamp || !signature) return { ok: false, reason: 'missing signature headers' };
  if (!/^\d+$/.test(timestamp)) return { ok: false, reason: 'malformed timestamp' };
  if (Math.abs(nowSec - Number(timestamp)) > toleranceSec)
    return { ok: false, reason: 'timestamp outside the tolerance' };
  const expected = hmac(secret, `${timestamp}.${body}`);
  for (const entry of signature.split(' ')) {
    const m = /^sha256=([0-9a-f]{64})$/.exec(entry);
    if (m && timingSafeEqual(Buffer.from(m[1]!, 'hex'), expected)) return { ok: true };
  }
  return { ok: false, reason: 'no matching signature' };
}
