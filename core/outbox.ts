/**
 * The outbox: outbound events (webhooks) written in the same transaction as the change that caused
 * them, so a committed change always has its event and a rolled-back one never does. The
 * dispatcher delivers them (issue 6). `dedupe_key` makes enqueueing idempotent per tenant.
 */
import type { Queryable } from '../adapters/sql/types';

export interface OutboxEvent {
  tenant_id: string;
  event_type: string;
  /** Unique per tenant for one logical event, e.g. `leaderboard.window_completed:<lb>:<window>`. */
  dedupe_key: string;
  payload: Record<string, unknown>;
  created_at: number;
}

/** Enqueues an event; a second call with the same dedupe key changes nothing. Returns true when new. */
export async function enqueue(q: Queryable, e: OutboxEvent): Promise<boolean> {
  const r = await q.query(
    `INSERT INTO outbox (tenant_id, event_type, dedupe_key, payload, created_at) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (tenant_id, dedupe_key) DO NOTHING`,
    [e.tenant_id, e.event_type, e.dedupe_key, JSON.stringify(e.payload), e.created_at],
  );
  return r.rowCount > 0;
}
