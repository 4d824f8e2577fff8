/**
 * Turning request bodies into event records: validation of one event (nested shape, or the flat
 * shape of the signed-request variant), the tenant stamped from the credential, and the checks
 * SPEC.md names (occurred_at at most 1 hour ahead, an end-user token only for its own user).
 * Identifiers that become store keys (event_id, type, user_id) are at most 256 UTF-8 bytes (the
 * schemas' `x-max-bytes`); every string and free-form object obeys http/input.ts.
 */
import { AnalyticsInputError, checkEvent } from '../core/history/rows';
import type { EventRecord } from '../schemas/topics';
import type { Principal } from '../http/auth/authenticator';
import { inputProblem } from '../http/input';
import { describeError, schemas } from '../http/validate';

export const MAX_FUTURE_MS = 3600_000;

export type Parsed =
  | { ok: true; record: EventRecord }
  | { ok: false; event_id: string | null; reason: string; forbidden?: boolean };

interface Nested {
  event_id: string;
  type: string;
  actor: { user_id: string; metadata?: Record<string, unknown> };
  subject?: Record<string, unknown>;
  occurred_at: string;
  attrs: Record<string, unknown>;
}

interface Flat {
  event_id: string;
  event_type: string;
  user_id: string;
  timestamp: string;
  attributes: Record<string, unknown>;
}

/** Record fields under the names of each body shape, for messages that say what to fix. */
const NESTED_NAMES = {
  event_id: 'event_id',
  type: 'type',
  user_id: 'actor.user_id',
  occurred_at: 'occurred_at',
  attrs_json: 'attrs',
};
const FLAT_NAMES: typeof NESTED_NAMES = {
  event_id: 'event_id',
  type: 'event_type',
  user_id: 'user_id',
  occurred_at: 'timestamp',
  attrs_json: 'attributes',
};

/** A refused event's result (a function of its own: a closure per event cost time for valid ones). */
function failed(raw: unknown, reason: string, forbidden = false): Parsed {
  const id = (raw as { event_id?: unknown } | null)?.event_id;
  return { ok: false, event_id: typeof id === 'string' ? id : null, reason, forbidden };
}

/** Validates one event body and builds its record; never throws for bad input. */
export function parseEvent(
  raw: unknown,
  ctx: { tenantId: string; principal: Principal; now: number; allowFlat: boolean },
): Parsed {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    return failed(raw, 'event must be a JSON object');
  // The one input rule (http/input.ts), per event: before anything recurses into the event.
  const problem = inputProblem(raw, 'event');
  if (problem)
    return failed(
      raw,
      problem.replace(/^event[.[]/, (m) => (m === 'event[' ? '[' : '')),
    );

  const flat = ctx.allowFlat && 'event_type' in raw && !('type' in raw);
  const schemaId = flat ? 'event.flat' : 'event';
  const validate = schemas().get(schemaId);
  const copy = { ...(raw as object) };
  if (!validate(copy))
    return failed(raw, describeError(validate.errors?.[0], 'event').replace(/^event\./, ''));

  let e: Nested;
  if (flat) {
    const f = copy as Flat;
    e = {
      event_id: f.event_id,
      type: f.event_type,
      actor: { user_id: f.user_id },
      occurred_at: f.timestamp,
      attrs: f.attributes,
    };
  } else {
    e = copy as Nested;
  }
  // Messages name the fields as the client sent them (the flat shape has other names).
  const names = flat ? FLAT_NAMES : NESTED_NAMES;
  const occurred = Date.parse(e.occurred_at);
  if (!Number.isFinite(occurred)) return failed(raw, `${names.occurred_at} must be an ISO 8601 timestamp`);
  if (occurred > ctx.now + MAX_FUTURE_MS)
    return failed(raw, `${names.occurred_at} is more than 1 hour in the future`);
  if (occurred < 0) return failed(raw, `${names.occurred_at} must be after 1970-01-01`);
  if (ctx.principal.kind === 'user' && e.actor.user_id !== ctx.principal.userId) {
    return failed(raw, `${names.user_id} must be the token's own user`, true);
  }
  const record: EventRecord = {
    tenant_id: ctx.tenantId,
    event_id: e.event_id,
    type: e.type,
    user_id: e.actor.user_id,
    occurred_at: occurred,
    received_at: ctx.now,
    attrs_json: JSON.stringify(e.attrs ?? {}),
    actor_metadata_json: e.actor.metadata ? JSON.stringify(e.actor.metadata) : null,
    subject_json: e.subject ? JSON.stringify(e.subject) : null,
  };
  try {
    // The analytics store's rules (no NUL, well-formed Unicode) hold for every accepted event.
    checkEvent(record);
  } catch (err) {
    if (err instanceof AnalyticsInputError)
      return failed(
        raw,
        err.message.replace(/^\w+/, (field) => names[field as keyof typeof names] ?? field),
      );
    throw err;
  }
  return { ok: true, record };
}
