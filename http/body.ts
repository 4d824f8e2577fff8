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
  const raw = await readRawBody(ctx, limit);
  return { raw, json: parseJsonBody(ctx, raw) };
}

/** The request's bytes, within `limit` (413 PAYLOAD_TOO_LARGE beyond it, declared or streamed). */
export async function readRawBody(ctx: Koa.Context, limit = DEFAULT_BODY_LIMIT): Promise<Buffer> {
  const declared = Number(ctx.get('content-length') || NaN);
  if (declared > limit) throw errors.tooLarge(`Request body exceeds ${limit} bytes`);
  try {
    return await getRawBody(ctx.req, { limit, length: Number.isFinite(declared) ? declared : undefined });
  } catch (err) {
    const e = err as { type?: string; status?: number };
    if (e.type === 'entity.too.large') throw errors.tooLarge(`Request body exceeds ${limit} bytes`);
    throw errors.validation('Request body could not be read');
  }
}

/**
 * Parses bytes read by `readRawBody` as JSON: undefined when empty; 400 VALIDATION_ERROR for a
 * Content-Type other than JSON, malformed UTF-8 or malformed JSON. Separate from reading so that a
 * signed request is authenticated over its bytes before its body is judged (http/route.ts).
 */
export function parseJsonBody(ctx: Koa.Context, raw: Buffer): unknown {
  if (raw.length === 0) return undefined;
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
    return JSON.parse(text);
  } catch (err) {
    throw errors.validation(`Malformed JSON: ${(err as Error).message}`);
  }
}
