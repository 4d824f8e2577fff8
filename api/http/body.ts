import type Koa from 'koa';
import getRawBody from 'raw-body';
import { errors } from './errors';

/** 1 MB: SPEC.md "Limits" for ingestion; the admin and query gateways use the same. */
export const DEFAULT_BODY_LIMIT = 1024 * 1024;

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Reads the request body as raw bytes (kept for signature checks) and parses it as JSON.
 * Too large: 413 PAYLOAD_TOO_LARGE. Malformed UTF-8 or JSON: 400 VALIDATION_ERROR.
 * An empty body parses as undefined.
 */
export async function readJsonBody(
  ctx: Koa.Context,
  limit = DEFAULT_BODY_LIMIT,
): Promise<{ raw: Buffer; json: unknown }> {
  const declared = Number(ctx.get('content-length') || NaN);
  if (declared > limit) throw errors.tooLarge(`Request body exceeds ${limit} bytes`);
  let raw: Buffer;
  try {
    raw = await getRawBody(ctx.req, { limit, length: Number.isFinite(declared) ? declared : undefined });
  } catch (err) {
    const e = err as { type?: string; status?: number };
    if (e.type === 'entity.too.large') throw errors.tooLarge(`Request body exceeds ${limit} bytes`);
    throw errors.validation('Request body could not be read');
  }
  if (raw.length === 0) return { raw, json: undefined };
  const type = ctx.get('content-type');
  if (type && !/^application\/([\w.+-]+\+)?json\b/i.test(type)) {
    throw errors.validation('Content-Type must be application/json');
  }
  let text: string;
  try {
    text = utf8.decode(raw);
  } catch {
    throw errors.validation('Request body is not valid UTF-8');
  }
  try {
    return { raw, json: JSON.parse(text) };
  } catch (err) {
    throw errors.validation(`Malformed JSON: ${(err as Error).message}`);
  }
}
