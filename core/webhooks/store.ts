/**
 * Webhook endpoints and their delivery log, per tenant (the admin routes of api/webhooks/). Every
 * query names the tenant. The signing secret is generated here, returned in clear once (on create
 * and on rotation) and stored encrypted with the server key.
 */
import { randomUUID } from 'node:crypto';
import type { Queryable, Sql } from '../../adapters/sql/types';
import type { Clock } from '../clock';
import type { SecretBox } from '../tenancy/secrets';
import { newSigningSecret } from './signing';

export interface WebhookRow {
  id: string;
  tenant_id: string;
  url: string;
  description: string | null;
  event_types: string[];
  active: boolean;
  secret_enc: string;
  previous_secret_enc: string | null;
  previous_secret_expires_at: number | null;
  secret_rotated_at: number | null;
  disabled_reason: string | null;
  disabled_at: number | null;
  failing_since: number | null;
  last_success_at: number | null;
  created_at: number;
  updated_at: number;
}

export type DeliveryStatus = 'pending' | 'succeeded' | 'dead' | 'failed';

export interface DeliveryRow {
  id: string;
  tenant_id: string;
  webhook_id: string;
  outbox_id: number | null;
  event_type: string;
  body: string;
  status: DeliveryStatus;
  attempts: number;
  round_attempts: number;
  next_attempt_at: number | null;
  last_attempt_at: number | null;
  last_status_code: number | null;
  last_error: string | null;
  created_at: number;
  updated_at: number;
  completed_at: number | null;
}

export interface AttemptRow {
  delivery_id: string;
  attempt: number;
  attempted_at: number;
  duration_ms: number;
  status_code: number | null;
  error: string | null;
  response_body: string | null;
  succeeded: boolean;
}

export interface Delivery extends DeliveryRow {
  log: AttemptRow[];
}

export interface DeliveryFilter {
  status?: DeliveryStatus;
  event_type?: string;
  /** Created at or after (ms). */
  since?: number;
  /** Created before (ms). */
  until?: number;
}

const num = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));

function webhookRow(r: Record<string, unknown>): WebhookRow {
  return {
    ...(r as unknown as WebhookRow),
    previous_secret_expires_at: num(r.previous_secret_expires_at),
    secret_rotated_at: num(r.secret_rotated_at),
    disabled_at: num(r.disabled_at),
    failing_since: num(r.failing_since),
    last_success_at: num(r.last_success_at),
    created_at: Number(r.created_at),
    updated_at: Number(r.updated_at),
  };
}

export function deliveryRow(r: Record<string, unknown>): DeliveryRow {
  return {
    ...(r as unknown as DeliveryRow),
    outbox_id: num(r.outbox_id),
    attempts: Number(r.attempts),
    round_attempts: Number(r.round_attempts),
    next_attempt_at: num(r.next_attempt_at),
    last_attempt_at: num(r.last_attempt_at),
    last_status_code: num(r.last_status_code),
    created_at: Number(r.created_at),
    updated_at: Number(r.updated_at),
    completed_at: num(r.completed_at),
  };
}

function attemptRow(r: Record<string, unknown>): AttemptRow {
  return {
    delivery_id: r.delivery_id as string,
    attempt: Number(r.attempt),
    attempted_at: Number(r.attempted_at),
    duration_ms: Number(r.duration_ms),
    status_code: num(r.status_code),
    error: (r.error as string | null) ?? null,
    response_body: (r.response_body as string | null) ?? null,
    succeeded: Boolean(r.succeeded),
  };
}

const DELIVERY_COLUMNS = `id, tenant_id, webhook_id, outbox_id, event_type, body, status, attempts, round_attempts,
  next_attempt_at, last_attempt_at, last_status_code, last_error, created_at, updated_at, completed_at`;

export class WebhookStore {
  constructor(
    private readonly sql: Sql,
    private readonly box: SecretBox,
    private readonly clock: Clock,
  ) {}

  /** Creates an endpoint with a new signing secret; the secret is returned in clear, once. */
  async create(
    tenantId: string,
    input: { url: string; event_types: string[]; description?: string | null; active?: boolean },
  ): Promise<{ webhook: WebhookRow; secret: string }> {
    const secret = newSigningSecret();
    const now = this.clock.now();
    const r = await this.sql.query(
      `INSERT INTO webhooks (id, tenant_id, url, description, event_types, active, secret_enc, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8) RETURNING *`,
      [
        randomUUID(),
        tenantId,
        input.url,
        input.description ?? null,
        input.event_types,
        input.active ?? true,
        this.box.encrypt(secret),
        now,
      ],
    );
    return { webhook: webhookRow(r.rows[0]!), secret };
  }

  async list(
    tenantId: string,
    q: { active?: boolean; limit: number; offset: number },
  ): Promise<{ items: WebhookRow[]; total: number }> {
    const params: unknown[] = [tenantId];
    let where = 'tenant_id = $1';
    if (q.active !== undefined) {
      params.push(q.active);
      where += ` AND active = $${params.length}`;
    }
    const total = await this.sql.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM webhooks WHERE ${where}`,
      params,
    );
    const r = await this.sql.query(
      `SELECT * FROM webhooks WHERE ${where} ORDER BY created_at, id LIMIT $${params.length + 1} OFFSET $${params.length + 2}`,
      [...params, q.limit, q.offset],
    );
    return { items: r.rows.map(webhookRow), total: Number(total.rows[0]!.n) };
  }

  async get(tenantId: string, id: string, q: Queryable = this.sql): Promise<WebhookRow | null> {
    const r = await q.query('SELECT * FROM webhooks WHERE tenant_id = $1 AND id = $2', [tenantId, id]);
    return r.rows[0] ? webhookRow(r.rows[0]) : null;
  }

  /**
   * Changes the given fields. Turning an endpoint on (`active: true`) clears the reason it was
   * disabled and its failure streak; its held pending deliveries resume.
   */
  async update(
    tenantId: string,
    id: string,
    patch: { url?: string; event_types?: string[]; description?: string | null; active?: boolean },
  ): Promise<WebhookRow | null> {
    const r = await this.sql.query(
      `UPDATE webhooks SET
         url = COALESCE($3::text, url),
         event_types = COALESCE($4::text[], event_types),
         description = CASE WHEN $5::boolean THEN $6::text ELSE description END,
         active = COALESCE($7::boolean, active),
         disabled_reason = CASE WHEN $7::boolean IS NULL THEN disabled_reason ELSE NULL END,
         disabled_at = CASE WHEN $7::boolean IS NULL THEN disabled_at ELSE NULL END,
         failing_since = CASE WHEN $7::boolean IS TRUE THEN NULL ELSE failing_since END,
         updated_at = $8
       WHERE tenant_id = $1 AND id = $2 RETURNING *`,
      [
        tenantId,
        id,
        patch.url ?? null,
        patch.event_types ?? null,
        patch.description !== undefined,
        patch.description ?? null,
        patch.active ?? null,
        this.clock.now(),
      ],
    );
    return r.rows[0] ? webhookRow(r.rows[0]) : null;
  }

  /** Deletes an endpoint with its deliveries and their log. */
  async delete(tenantId: string, id: string): Promise<boolean> {
    const r = await this.sql.query('DELETE FROM webhooks WHERE tenant_id = $1 AND id = $2', [tenantId, id]);
    return r.rowCount > 0;
  }

  /**
   * A new signing secret. The current one keeps signing (beside the new one) for `overlapMs`;
   * with 0 it stops at once. A secret still in its overlap from an earlier rotation is dropped.
   */
  async rotateSecret(
    tenantId: string,
    id: string,
    overlapMs: number,
  ): Promise<{ webhook: WebhookRow; secret: string } | null> {
    const secret = newSigningSecret();
    const now = this.clock.now();
    const r = await this.sql.query(
      `UPDATE webhooks SET
         previous_secret_enc = CASE WHEN $4::bigint > 0 THEN secret_enc ELSE NULL END,
         previous_secret_expires_at = CASE WHEN $4::bigint > 0 THEN $5::bigint + $4::bigint ELSE NULL END,
         secret_enc = $3, secret_rotated_at = $5, updated_at = $5
       WHERE tenant_id = $1 AND id = $2 RETURNING *`,
      [tenantId, id, this.box.encrypt(secret), overlapMs, now],
    );
    return r.rows[0] ? { webhook: webhookRow(r.rows[0]), secret } : null;
  }

  /** The secrets that sign at `now`, newest first (two during a rotation's overlap). */
  signingSecrets(w: WebhookRow, now: number): string[] {
    const secrets = [this.box.decrypt(w.secret_enc)];
    if (w.previous_secret_enc && w.previous_secret_expires_at !== null && w.previous_secret_expires_at > now)
      secrets.push(this.box.decrypt(w.previous_secret_enc));
    return secrets;
  }

  /** An endpoint by id alone, for the dispatcher (which works across tenants). */
  async byId(id: string): Promise<WebhookRow | null> {
    const r = await this.sql.query('SELECT * FROM webhooks WHERE id = $1', [id]);
    return r.rows[0] ? webhookRow(r.rows[0]) : null;
  }

  /** The delivery log of an endpoint, newest first, each delivery with its attempts. */
  async listDeliveries(
    tenantId: string,
    webhookId: string,
    f: DeliveryFilter & { limit: number; offset: number },
  ): Promise<{ items: Delivery[]; total: number }> {
    const { where, params } = deliveryWhere(tenantId, webhookId, f);
    const total = await this.sql.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM webhook_deliveries WHERE ${where}`,
      params,
    );
    const r = await this.sql.query(
      `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries WHERE ${where}
       ORDER BY created_at DESC, seq DESC LIMIT $${params.length + 1} OFFSET $${params.length + 2}`,
      [...params, f.limit, f.offset],
    );
    const items = r.rows.map(deliveryRow);
    const log = await this.attemptsOf(
      tenantId,
      items.map((d) => d.id),
    );
    return { items: items.map((d) => ({ ...d, log: log.get(d.id) ?? [] })), total: Number(total.rows[0]!.n) };
  }

  async getDelivery(tenantId: string, webhookId: string, id: string): Promise<Delivery | null> {
    const r = await this.sql.query(
      `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries WHERE tenant_id = $1 AND webhook_id = $2 AND id = $3`,
      [tenantId, webhookId, id],
    );
    if (!r.rows[0]) return null;
    const d = deliveryRow(r.rows[0]);
    return { ...d, log: (await this.attemptsOf(tenantId, [d.id])).get(d.id) ?? [] };
  }

  private async attemptsOf(tenantId: string, ids: string[]): Promise<Map<string, AttemptRow[]>> {
    const out = new Map<string, AttemptRow[]>();
    if (ids.length === 0) return out;
    const r = await this.sql.query(
      `SELECT delivery_id, attempt, attempted_at, duration_ms, status_code, error, response_body, succeeded
       FROM webhook_attempts WHERE tenant_id = $1 AND delivery_id = ANY($2::text[]) ORDER BY delivery_id, attempt`,
      [tenantId, ids],
    );
    for (const row of r.rows.map(attemptRow)) {
      const list = out.get(row.delivery_id) ?? [];
      list.push(row);
      out.set(row.delivery_id, list);
    }
    return out;
  }

  /**
   * Puts a delivery back in the queue with a fresh retry schedule, keeping its id (receivers
   * that already have it can drop it). `onlyDead`: a replay of a dead letter. Returns the
   * delivery, or why not.
   */
  async requeue(
    tenantId: string,
    webhookId: string,
    id: string,
    onlyDead: boolean,
  ): Promise<Delivery | 'not_found' | 'not_dead'> {
    const now = this.clock.now();
    const r = await this.sql.query(
      `UPDATE webhook_deliveries SET status = 'pending', round_attempts = 0, next_attempt_at = $4,
         completed_at = NULL, updated_at = $4
       WHERE tenant_id = $1 AND webhook_id = $2 AND id = $3 AND ($5::boolean IS FALSE OR status = 'dead')
       RETURNING id`,
      [tenantId, webhookId, id, now, onlyDead],
    );
    if (r.rowCount === 0) {
      const exists = await this.getDelivery(tenantId, webhookId, id);
      return exists ? 'not_dead' : 'not_found';
    }
    return (await this.getDelivery(tenantId, webhookId, id))!;
  }

  /** Replays every dead letter of an endpoint matching the filter; returns how many. */
  async replayDead(tenantId: string, webhookId: string, f: Omit<DeliveryFilter, 'status'>): Promise<number> {
    const { where, params } = deliveryWhere(tenantId, webhookId, { ...f, status: 'dead' });
    const now = this.clock.now();
    const r = await this.sql.query(
      `UPDATE webhook_deliveries SET status = 'pending', round_attempts = 0, next_attempt_at = $${params.length + 1},
         completed_at = NULL, updated_at = $${params.length + 1}
       WHERE ${where}`,
      [...params, now],
    );
    return r.rowCount;
  }
}

function deliveryWhere(
  tenantId: string,
  webhookId: string,
  f: DeliveryFilter,
): { where: string; params: unknown[] } {
  const params: unknown[] = [tenantId, webhookId];
  const cond = ['tenant_id = $1', 'webhook_id = $2'];
  const add = (sql: string, v: unknown) => {
    params.push(v);
    cond.push(sql.replace('?', `$${params.length}`));
  };
  if (f.status) add('status = ?', f.status);
  if (f.event_type) add('event_type = ?', f.event_type);
  if (f.since !== undefined) add('created_at >= ?', f.since);
  if (f.until !== undefined) add('created_at < ?', f.until);
  return { where: cond.join(' AND '), params };
}
