import { createHmac } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { newSigningSecret, secretKey, signatureHeaders, verifySignature } from './signing';

describe('webhook signing', () => {
  const body = '{"event_type":"ping","tenant_id":"t1","timestamp":"2026-11-22T10:00:00.000Z"}';
  const now = Math.floor(Date.now() / 1000);

  it('makes Standard Webhooks secrets: whsec_ + base64 of 32 random bytes', () => {
    const s = newSigningSecret();
    expect(s).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(secretKey(s)).toHaveLength(32);
    expect(newSigningSecret()).not.toBe(s);
  });

  it('signs sha256=<hex> over "<timestamp>.<body>" with the decoded key', () => {
    const s = newSigningSecret();
    const h = signatureHeaders([s], 'd-1', now, body);
    const expected = createHmac('sha256', secretKey(s)).update(`${now}.${body}`).digest('hex');
    expect(h['X-Webhook-Signature']).toBe(`sha256=${expected}`);
    expect(h['X-Webhook-Timestamp']).toBe(String(now));
    expect(h['X-Webhook-Id']).toBe('d-1');
    expect(
      verifySignature(s, { timestamp: String(now), signature: h['X-Webhook-Signature'] }, body, now),
    ).toEqual({
      ok: true,
    });
  });

  it('produces webhook-signature headers that the standardwebhooks library verifies', () => {
    const s = newSigningSecret();
    const h = signatureHeaders([s], 'msg_1', now, body);
    expect(new Webhook(s).verify(body, h as unknown as Record<string, string>)).toEqual(JSON.parse(body));
    expect(() =>
      new Webhook(newSigningSecret()).verify(body, h as unknown as Record<string, string>),
    ).toThrow();
  });

  it('signs with every secret during a rotation overlap, newest first', () => {
    const [oldS, newS] = [newSigningSecret(), newSigningSecret()];
    const h = signatureHeaders([newS, oldS], 'msg_2', now, body);
    expect(h['X-Webhook-Signature'].split(' ')).toHaveLength(2);
    expect(h['webhook-signature'].split(' ')).toHaveLength(2);
    for (const s of [oldS, newS]) {
      expect(new Webhook(s).verify(body, h as unknown as Record<string, string>)).toBeTruthy();
      const v = verifySignature(
        s,
        { timestamp: String(now), signature: h['X-Webhook-Signature'] },
        body,
        now,
      );
      expect(v.ok).toBe(true);
    }
  });

  it('refuses tampered bodies, other timestamps, stale deliveries and malformed headers', () => {
    const s = newSigningSecret();
    const h = signatureHeaders([s], 'msg_3', now, body);
    const sig = h['X-Webhook-Signature'];
    expect(verifySignature(s, { timestamp: String(now), signature: sig }, `${body} `, now)).toMatchObject({
      ok: false,
    });
    expect(verifySignature(s, { timestamp: String(now + 1), signature: sig }, body, now + 1).ok).toBe(false);
    expect(verifySignature(s, { timestamp: String(now), signature: sig }, body, now + 301)).toEqual({
      ok: false,
      reason: 'timestamp outside the tolerance',
    });
    expect(verifySignature(s, { timestamp: undefined, signature: sig }, body, now).ok).toBe(false);
    expect(verifySignature(s, { timestamp: 'soon', signature: sig }, body, now).ok).toBe(false);
    expect(verifySignature(s, { timestamp: String(now), signature: 'sha256=zz' }, body, now).ok).toBe(false);
    expect(() => signatureHeaders([], 'x', now, body)).toThrow();
  });
});
