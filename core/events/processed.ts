/**
 * The processed-events store: the pipeline's dedupe (an event id is applied once per tenant) and
 * the scheduler's purge of rows older than the dedupe window (docs/architecture.md "The event
 * pipeline"). Its SQL lives here, so that neither role imports the other.
 */
import type { Queryable } from '../../adapters/sql/types';

export interface EventIdentity {
  tenant_id: string;
  event_id: string;
  received_at: number;
}

/**
 * Marks events as processed, in the caller's transaction; returns the indexes of those seen for
 * the first time (a duplicate inside the list keeps its first occurrence).
 */
export async function markProcessed(q: Queryable, events: EventIdentity[]): Promise<number[]> {
  if (events.length === 0) return [];
  const r = await q.query<{ tenant_id: string; event_id: string }>(MARK_PROCESSED_SQL, markParams(events));
  return firstTimeIndexes(events, r.rows);
}

/**
 * The dedupe insert as SQL text, for a caller that folds it into a statement of its own (the
 * pipeline: with its tenants' read, as a WITH query): parameters $1..$3 are `markParams(events)`;
 * it returns (tenant_id, event_id) of the events seen for the first time (`firstTimeIndexes`).
 */
export const MARK_PROCESSED_SQL = `INSERT INTO processed_events (tenant_id, event_id, received_at)
     SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[]) ON CONFLICT DO NOTHING
     RETURNING tenant_id, event_id`;

export function markParams(events: EventIdentity[]): unknown[] {
  return [events.map((x) => x.tenant_id), events.map((x) => x.event_id), events.map((x) => x.received_at)];
}

/** Indexes of `events` whose identity the insert returned (a duplicate in the list keeps its first). */
export function firstTimeIndexes(
  events: EventIdentity[],
  rows: ReadonlyArray<{ tenant_id: string; event_id: string }>,
): number[] {
  const firstTime = new Set(rows.map((x) => `${x.tenant_id}\u0000${x.event_id}`));
  const out: number[] = [];
  events.forEach((x, i) => {
    if (firstTime.delete(`${x.tenant_id}\u0000${x.event_id}`)) out.push(i);
  });
  return out;
}

/** Purges dedupe rows older than the window plus an hour of processing lag (a scheduler job). */
export async function purgeProcessedEvents(q: Queryable, now: number, windowMs: number): Promise<number> {
  const r = await q.query('DELETE FROM processed_events WHERE received_at < $1', [now - windowMs - 3600_000]);
  return r.rowCount;
}
