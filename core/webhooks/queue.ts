/**
 * The delivery queue in SQL, as the dispatcher (dispatcher/dispatcher.ts) drives it:
 *
 * 1. Fan-out: outbox rows not yet fanned out become one delivery per matching active endpoint of
 *    their tenant, and are marked, in one transaction per batch. Idempotent twice over: the mark,
 *    and UNIQUE (webhook_id, outbox_id). A transaction-scoped advisory lock lets one instance fan
 *    out at a time, so deliveries are numbered (`seq`) in outbox order.
 * 2. Claim: an instance leases endpoints that have due deliveries (FOR UPDATE SKIP LOCKED, a lease
 *    with an expiry); it alone delivers to a leased endpoint, one delivery at a time, in `seq`
 *    order. A crashed instance's leases expire and another takes over: at least once.
 * 3. Record: each attempt is logged and the delivery moves on (succeeded, next retry, dead) in one
 *    transaction that also renews the lease and applies the disabling rule.
 */
import { randomUUID } from 'node:crypto';
import type { Queryable, Sql } from '../../adapters/sql/types';
import { bodyOf, PING } from './events';
import { afterFailure } from './schedule';
import { deliveryRow, type DeliveryRow, type DeliveryStatus } from './store';

/** Any constant: one fan-out at a time across instances. */
const FANOUT_LOCK = 7_461_006;

export interface FanOutResult {
  events: number;
  deliveries: number;
}

/** Fans out up to `batch` outbox rows; `events: 0` when there was nothing (or another instance is at it). */
export async function fanOut(sql: Sql, now: number, batch = 200): Promise<FanOutResult> {
  return sql.tx(async (q) => {
    const lock = await q.query<{ ok: boolean }>('SELECT pg_try_advisory_xact_lock($1) AS ok', [FANOUT_LOCK]);
    if (!lock.rows[0]?.ok) return { events: 0, deliveries: 0 };
    const rows = await q.query<{
      id: number;
      tenant_id: string;
      event_type: string;
      payload: Record<string, unknown> | string;
    }>(
      `SELECT id, tenant_id, event_type, payload FROM outbox WHERE fanned_out_at IS NULL ORDER BY id LIMIT $1
       FOR UPDATE SKIP LOCKED`,
      [batch],
    );
    if (rows.rows.length === 0) return { events: 0, deliveries: 0 };
    const tenants = [...new Set(rows.rows.map((r) => r.tenant_id))];
    const hooks = await q.query<{ id: string; tenant_id: string; event_types: string[] }>(
      'SELECT id, tenant_id, event_types FROM webhooks WHERE active AND tenant_id = ANY($1::text[]) ORDER BY created_at, id',
      [tenants],
    );
    const cols: {
      id: string[];
      tenant: string[];
      hook: string[];
      outbox: number[];
      type: string[];
      body: string[];
    } = { id: [], tenant: [], hook: [], outbox: [], type: [], body: [] };
    for (const row of rows.rows) {
      const matching = hooks.rows.filter(
        (h) =>
          h.tenant_id === row.tenant_id &&
          (h.event_types.includes('*') || h.event_types.includes(row.event_type)),
      );
      if (matching.length === 0) continue;
      const payload = typeof row.payload === 'string' ? JSON.parse(row.payload) : row.payload;
      const body = bodyOf(payload as Record<string, unknown>);
      for (const h of matching) {
        cols.id.push(randomUUID());
        cols.tenant.push(row.tenant_id);
        cols.hook.push(h.id);
        cols.outbox.push(Number(row.id));
        cols.type.push(row.event_type);
        cols.body.push(body);
      }
    }
    let deliveries = 0;
    if (cols.id.length > 0) {
      const r = await q.query(
        `INSERT INTO webhook_deliveries
           (id, tenant_id, webhook_id, outbox_id, event_type, body, status, next_attempt_at, created_at, updated_at)
         SELECT u.id, u.tenant_id, u.webhook_id, u.outbox_id, u.event_type, u.body, 'pending', $7, $7, $7
         FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[])
           WITH ORDINALITY AS u(id, tenant_id, webhook_id, outbox_id, event_type, body, ord)
         ORDER BY u.ord
         ON CONFLICT (webhook_id, outbox_id) DO NOTHING`,
        [cols.id, cols.tenant, cols.hook, cols.outbox, cols.type, cols.body, now],
      );
      deliveries = r.rowCount;
    }
    await q.query('UPDATE outbox SET fanned_out_at = $1 WHERE id = ANY($2::bigint[])', [
      now,
      rows.rows.map((r) => Number(r.id)),
    ]);
    return { events: rows.rows.length, deliveries };
  });
}

/**
 * Leases up to `n` active endpoints that have a due delivery and no live lease, least recently
 * served first. Returns their ids.
 */
export async function claimEndpoints(
  sql: Sql,
  owner: string,
  now: number,
  leaseMs: number,
  n: number,
  skip: string[] = [],
): Promise<string[]> {
  if (n <= 0) return [];
  const r = await sql.query<{ id: string }>(
    `UPDATE webhooks SET lease_owner = $1, lease_until = $2
     WHERE id IN (
       SELECT w.id FROM webhooks w
       WHERE w.active AND (w.lease_owner IS NULL OR w.lease_until < $3)
         AND NOT (w.id = ANY($5::text[]))
         AND EXISTS (SELECT 1 FROM webhook_deliveries d
                     WHERE d.webhook_id = w.id AND d.status = 'pending' AND d.next_attempt_at <= $3)
       ORDER BY w.lease_until NULLS FIRST, w.id
       LIMIT $4
       FOR UPDATE SKIP LOCKED)
     RETURNING id`,
    [owner, now + leaseMs, now, n, skip],
  );
  return r.rows.map((x) => x.id);
}

/** Gives a lease back (the time stays as "last served", for fairness). */
export async function releaseEndpoint(sql: Queryable, id: string, owner: string, now: number): Promise<void> {
  await sql.query(
    'UPDATE webhooks SET lease_owner = NULL, lease_until = $3 WHERE id = $1 AND lease_owner = $2',
    [id, owner, now],
  );
}

/** An endpoint's due deliveries, in order. */
export async function dueDeliveries(sql: Queryable, webhookId: string, now: number, limit: number) {
  const r = await sql.query(
    `SELECT * FROM webhook_deliveries
     WHERE webhook_id = $1 AND status = 'pending' AND next_attempt_at <= $2 ORDER BY seq LIMIT $3`,
    [webhookId, now, limit],
  );
  return r.rows.map(deliveryRow);
}

/** What one HTTP attempt gave. */
export interface AttemptResult {
  ok: boolean;
  statusCode: number | null;
  durationMs: number;
  error: string | null;
  responseBody: string | null;
}

export interface RecordOptions {
  scheduleMs: number[];
  /** 0: never disable. */
  disableAfterMs: number;
  /** The lease to renew, when the dispatcher made the attempt. */
  lease?: { owner: string; ms: number };
  random?: () => number;
}

export interface Recorded {
  status: DeliveryStatus;
  /** Set when this attempt disabled the endpoint. */
  disabledReason: string | null;
  /** False when the lease was lost (another instance took the endpoint over). */
  leaseHeld: boolean;
}

/**
 * Logs an attempt of a pending delivery and moves it on. `startedAt` is when the attempt began,
 * `now` when it ended. A delivery that is no longer pending (finished meanwhile by another
 * instance) keeps its status; the attempt is still logged.
 */
export async function recordAttempt(
  sql: Sql,
  d: Pick<DeliveryRow, 'id' | 'tenant_id' | 'webhook_id' | 'event_type'>,
  result: AttemptResult,
  startedAt: number,
  now: number,
  opts: RecordOptions,
): Promise<Recorded> {
  return sql.tx(async (q) => {
    const cur = await q.query<{ status: DeliveryStatus; attempts: number; round_attempts: number }>(
      'SELECT status, attempts, round_attempts FROM webhook_deliveries WHERE id = $1 FOR UPDATE',
      [d.id],
    );
    const row = cur.rows[0];
    if (!row) return { status: 'succeeded', disabledReason: null, leaseHeld: true }; // endpoint deleted
    const attempt = Number(row.attempts) + 1;
    const round = Number(row.round_attempts) + 1;
    await insertAttempt(q, d, attempt, result, startedAt);

    let status: DeliveryStatus = row.status;
    let next: number | null = null;
    if (row.status === 'pending') {
      if (result.ok) status = 'succeeded';
      else if (d.event_type === PING) status = 'failed';
      else {
        const step = afterFailure(opts.scheduleMs, round, now, opts.random);
        if (step.kind === 'dead') status = 'dead';
        else next = step.at;
      }
    }
    await q.query(
      `UPDATE webhook_deliveries SET attempts = $2, round_attempts = $3, status = $4, next_attempt_at = $5,
         last_attempt_at = $6, last_status_code = $7, last_error = $8, updated_at = $9,
         completed_at = CASE WHEN $4 = 'pending' THEN NULL ELSE $9::bigint END
       WHERE id = $1`,
      [
        d.id,
        attempt,
        row.status === 'pending' ? round : Number(row.round_attempts),
        status,
        status === 'pending' ? next : null,
        startedAt,
        result.statusCode,
        result.error,
        now,
      ],
    );

    const disabledReason =
      d.event_type === PING ? null : await endpointHealth(q, d.webhook_id, result, now, opts.disableAfterMs);
    let leaseHeld = true;
    if (opts.lease) {
      const l = await q.query('UPDATE webhooks SET lease_until = $3 WHERE id = $1 AND lease_owner = $2', [
        d.webhook_id,
        opts.lease.owner,
        now + opts.lease.ms,
      ]);
      leaseHeld = l.rowCount > 0;
    }
    return { status, disabledReason, leaseHeld };
  });
}

async function insertAttempt(
  q: Queryable,
  d: Pick<DeliveryRow, 'id' | 'tenant_id'>,
  attempt: number,
  result: AttemptResult,
  startedAt: number,
): Promise<void> {
  await q.query(
    `INSERT INTO webhook_attempts
       (tenant_id, delivery_id, attempt, attempted_at, duration_ms, status_code, error, response_body, succeeded)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
    [
      d.tenant_id,
      d.id,
      attempt,
      startedAt,
      Math.max(0, Math.round(result.durationMs)),
      result.statusCode,
      result.error,
      result.responseBody,
      result.ok,
    ],
  );
}

/**
 * The disabling rule: a success ends the failure streak; a failure starts it (failing_since) or,
 * when the endpoint has had no success for `disableAfterMs` since the streak began, disables the
 * endpoint with the reason. Returns the reason when this call disabled it.
 */
async function endpointHealth(
  q: Queryable,
  webhookId: string,
  result: AttemptResult,
  now: number,
  disableAfterMs: number,
): Promise<string | null> {
  if (result.ok) {
    await q.query('UPDATE webhooks SET failing_since = NULL, last_success_at = $2 WHERE id = $1', [
      webhookId,
      now,
    ]);
    return null;
  }
  const r = await q.query<{ failing_since: number; active: boolean }>(
    'UPDATE webhooks SET failing_since = COALESCE(failing_since, $2) WHERE id = $1 RETURNING failing_since, active',
    [webhookId, now],
  );
  const w = r.rows[0];
  if (!w || !w.active || disableAfterMs <= 0) return null;
  const since = Number(w.failing_since);
  if (now - since < disableAfterMs) return null;
  const last = result.statusCode !== null ? `HTTP ${result.statusCode}` : (result.error ?? 'error');
  const reason =
    `No successful delivery for ${duration(now - since)} (failing since ${new Date(since).toISOString()}; ` +
    `last attempt: ${last}). Fix the endpoint, then turn it back on with PUT {"active": true}; ` +
    `replay its dead letters with POST .../deliveries/replay.`;
  await q.query(
    'UPDATE webhooks SET active = false, disabled_reason = $2, disabled_at = $3, updated_at = $3 WHERE id = $1',
    [webhookId, reason, now],
  );
  return reason;
}

function duration(ms: number): string {
  const s = Math.floor(ms / 1000);
  if (s >= 86400) return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
  if (s >= 3600) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  if (s >= 60) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${(ms / 1000).toFixed(1)} s`;
}

/** Stores a test ping and its one attempt (pings are sent at once and not retried). */
export async function recordPing(
  sql: Sql,
  p: { id: string; tenant_id: string; webhook_id: string; body: string },
  result: AttemptResult,
  startedAt: number,
  now: number,
): Promise<void> {
  await sql.tx(async (q) => {
    await q.query(
      `INSERT INTO webhook_deliveries
         (id, tenant_id, webhook_id, outbox_id, event_type, body, status, attempts, round_attempts,
          last_attempt_at, last_status_code, last_error, created_at, updated_at, completed_at)
       VALUES ($1, $2, $3, NULL, $4, $5, $6, 1, 1, $7, $8, $9, $7, $10, $10)`,
      [
        p.id,
        p.tenant_id,
        p.webhook_id,
        PING,
        p.body,
        result.ok ? 'succeeded' : 'failed',
        startedAt,
        result.statusCode,
        result.error,
        now,
      ],
    );
    await insertAttempt(q, p, 1, result, startedAt);
  });
}

/** The body of a test ping. */
export function pingBody(tenantId: string, webhookId: string, now: number): string {
  return bodyOf({
    event_type: PING,
    tenant_id: tenantId,
    timestamp: new Date(now).toISOString(),
    webhook_id: webhookId,
    message: 'Test ping from Ludus: this endpoint receives signed webhooks.',
  });
}

/**
 * Retention: deletes finished deliveries (with their attempts) completed before `cutoff`, and outbox
 * rows fanned out before it, in batches. Pending deliveries are never deleted. Returns counts.
 */
export async function purgeBefore(
  sql: Sql,
  cutoff: number,
  batch = 5000,
): Promise<{ deliveries: number; events: number }> {
  let deliveries = 0;
  let events = 0;
  for (;;) {
    const r = await sql.query(
      `DELETE FROM webhook_deliveries WHERE id IN (
         SELECT id FROM webhook_deliveries WHERE status <> 'pending' AND completed_at < $1 LIMIT $2)`,
      [cutoff, batch],
    );
    deliveries += r.rowCount;
    if (r.rowCount < batch) break;
  }
  for (;;) {
    const r = await sql.query(
      `DELETE FROM outbox WHERE id IN (
         SELECT id FROM outbox WHERE fanned_out_at IS NOT NULL AND fanned_out_at < $1 LIMIT $2)`,
      [cutoff, batch],
    );
    events += r.rowCount;
    if (r.rowCount < batch) break;
  }
  return { deliveries, events };
}
