-- Outbound webhooks (docs/webhooks.md): endpoints, one delivery per (outbox event, endpoint), and
-- the log of every attempt. Times are Unix milliseconds of the injected clock.

-- A tenant's webhook endpoints. The signing secret is stored encrypted with the server key
-- (core/tenancy/secrets.ts); after a rotation the previous secret keeps signing until
-- previous_secret_expires_at. `active` is false when an admin turned the endpoint off or the
-- dispatcher disabled it (then disabled_reason says why). lease_owner / lease_until: the
-- dispatcher instance that is delivering to the endpoint (one at a time, in order).
CREATE TABLE webhooks (
  id                         text    PRIMARY KEY,
  tenant_id                  text    NOT NULL,
  url                        text    NOT NULL,
  description                text,
  event_types                text[]  NOT NULL,
  active                     boolean NOT NULL DEFAULT true,
  secret_enc                 text    NOT NULL,
  previous_secret_enc        text,
  previous_secret_expires_at bigint,
  secret_rotated_at          bigint,
  disabled_reason            text,
  disabled_at                bigint,
  failing_since              bigint,
  last_success_at            bigint,
  lease_owner                text,
  lease_until                bigint,
  created_at                 bigint  NOT NULL,
  updated_at                 bigint  NOT NULL
);
CREATE INDEX webhooks_tenant ON webhooks (tenant_id, created_at);

-- One row per (outbox event, endpoint), made by the dispatcher's fan-out, and one per test ping.
-- `id` is the delivery id sent as webhook-id / X-Webhook-Id: stable across retries, replays and
-- redeliveries, so receivers can drop duplicates. `seq` orders an endpoint's deliveries.
-- status: pending (waiting for its next attempt), succeeded, dead (every attempt of the schedule
-- failed: a dead letter, replayable), failed (a ping that failed; pings are not retried).
-- round_attempts counts the attempts since the delivery was (re)queued: the schedule restarts
-- with a replay or a redelivery.
CREATE TABLE webhook_deliveries (
  id               text    PRIMARY KEY,
  seq              bigserial,
  tenant_id        text    NOT NULL,
  webhook_id       text    NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
  outbox_id        bigint,
  event_type       text    NOT NULL,
  body             text    NOT NULL,
  status           text    NOT NULL CHECK (status IN ('pending', 'succeeded', 'dead', 'failed')),
  attempts         integer NOT NULL DEFAULT 0,
  round_attempts   integer NOT NULL DEFAULT 0,
  next_attempt_at  bigint,
  last_attempt_at  bigint,
  last_status_code integer,
  last_error       text,
  created_at       bigint  NOT NULL,
  updated_at       bigint  NOT NULL,
  completed_at     bigint,
  UNIQUE (webhook_id, outbox_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_queue ON webhook_deliveries (webhook_id, seq) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_log ON webhook_deliveries (tenant_id, webhook_id, created_at DESC);
CREATE INDEX webhook_deliveries_done ON webhook_deliveries (completed_at) WHERE status <> 'pending';

-- The delivery log: every attempt with its time, status code, duration and error.
CREATE TABLE webhook_attempts (
  id            bigserial PRIMARY KEY,
  tenant_id     text    NOT NULL,
  delivery_id   text    NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
  attempt       integer NOT NULL,
  attempted_at  bigint  NOT NULL,
  duration_ms   integer NOT NULL,
  status_code   integer,
  error         text,
  response_body text,
  succeeded     boolean NOT NULL
);
CREATE INDEX webhook_attempts_delivery ON webhook_attempts (delivery_id, attempt);

-- Fan-out progress: a row is fanned out once, in the transaction that creates its deliveries.
-- (A cursor over `id` would skip a row whose transaction commits after a later id was read.)
ALTER TABLE outbox ADD COLUMN fanned_out_at bigint;
CREATE INDEX outbox_fanout_pending ON outbox (id) WHERE fanned_out_at IS NULL;
CREATE INDEX outbox_fanned_out ON outbox (fanned_out_at) WHERE fanned_out_at IS NOT NULL;
