-- The rewards catalog, its stock, and orders (issue 17, docs/store.md).

-- Catalog rewards: what can be bought or granted. `variants` holds each variant's label and prices;
-- stock lives in catalog_stock so a purchase decrements it with one conditional UPDATE.
CREATE TABLE catalog_rewards (
  tenant_id      text    NOT NULL,
  id             text    NOT NULL,
  slug           text    NOT NULL,
  name           text    NOT NULL,
  description    text,
  image_url      text,
  active         boolean NOT NULL DEFAULT true,
  fields         jsonb   NOT NULL DEFAULT '[]',
  fulfillment    jsonb   NOT NULL,
  requires_claim boolean NOT NULL DEFAULT false,
  purchase       jsonb,
  config         jsonb   NOT NULL DEFAULT '{}',
  variants       jsonb   NOT NULL DEFAULT '[]',
  created_at     timestamptz NOT NULL,
  updated_at     timestamptz NOT NULL,
  PRIMARY KEY (tenant_id, id),
  UNIQUE (tenant_id, slug)
);
CREATE INDEX catalog_rewards_active ON catalog_rewards (tenant_id, active, created_at);

-- Remaining stock of a reward (variant_id 'default') or of one of its variants. No row: unlimited.
CREATE TABLE catalog_stock (
  tenant_id  text    NOT NULL,
  reward_id  text    NOT NULL,
  variant_id text    NOT NULL,
  remaining  integer NOT NULL CHECK (remaining >= 0),
  PRIMARY KEY (tenant_id, reward_id, variant_id),
  FOREIGN KEY (tenant_id, reward_id) REFERENCES catalog_rewards (tenant_id, id) ON DELETE CASCADE
);

-- Orders: one per reward bought, granted, or awaiting fulfilment. `state` is the state machine's
-- (core/store/order-states.ts); `status` the rest of the status object (started_at, tracking, ...).
-- reward_id names a catalog reward, or, for an order a granted reward item made without naming
-- a catalog reward, the reward item (docs/store.md "Orders of granted reward items").
CREATE TABLE reward_orders (
  tenant_id       text    NOT NULL,
  id              text    NOT NULL,
  user_id         text    NOT NULL,
  reward_id       text    NOT NULL,
  reward_slug     text,
  reward_name     text    NOT NULL,
  reward_image_url text,
  variant_id      text    NOT NULL DEFAULT 'default',
  source_type     text    NOT NULL,
  source_ref      text,
  state           text    NOT NULL,
  status          jsonb   NOT NULL DEFAULT '{}',
  fields          jsonb   NOT NULL DEFAULT '{}',
  fulfillment     jsonb   NOT NULL,
  config          jsonb   NOT NULL DEFAULT '{}',
  requires_claim  boolean NOT NULL DEFAULT false,
  expires_at      bigint,
  -- Every move bumps it: the dedupe keys of the order's webhooks.
  version         integer NOT NULL DEFAULT 0,
  -- A purchase: its idempotency key and a hash of the request, the price and its ledger rows.
  idempotency_key text,
  request_hash    text,
  price_currency  text,
  price_amount    bigint,
  debit_tx_id     text,
  refund_tx_id    text,
  -- Whether the order holds one unit of stock (given back on expiry and refund).
  stock_held      boolean NOT NULL DEFAULT false,
  -- The grant row's key for an order a reward grant created (idempotency through the grant).
  grant_key       text,
  -- api fulfilment: attempts made, when the next is due, and the lease of the dispatcher calling.
  attempts        integer NOT NULL DEFAULT 0,
  next_attempt_at bigint,
  lease_owner     text,
  lease_until     bigint,
  created_at      bigint  NOT NULL,
  updated_at      bigint  NOT NULL,
  PRIMARY KEY (tenant_id, id)
);
CREATE UNIQUE INDEX reward_orders_idempotency ON reward_orders (tenant_id, user_id, idempotency_key)
  WHERE idempotency_key IS NOT NULL;
CREATE UNIQUE INDEX reward_orders_grant_key ON reward_orders (tenant_id, grant_key) WHERE grant_key IS NOT NULL;
CREATE INDEX reward_orders_user ON reward_orders (tenant_id, user_id, created_at DESC);
CREATE INDEX reward_orders_state ON reward_orders (tenant_id, state, created_at DESC);
CREATE INDEX reward_orders_due ON reward_orders (next_attempt_at) WHERE state = 'fulfilling' AND next_attempt_at IS NOT NULL;
CREATE INDEX reward_orders_expiring ON reward_orders (expires_at) WHERE state = 'pending_claim' AND expires_at IS NOT NULL;

-- A grant row points to the order that holds its reward (docs/architecture.md "Grants and orders").
ALTER TABLE reward_grants ADD COLUMN order_id text;

-- Each reward that waited as a pending_fulfilment grant row becomes its order, the same way the
-- granting service now creates one: a manual order of the catalog reward its item's payload names
-- (payload.catalog_reward_id), else of the item itself, in state fulfilling, keyed by the grant.
INSERT INTO reward_orders (tenant_id, id, user_id, reward_id, reward_slug, reward_name, reward_image_url,
  variant_id, source_type, source_ref, state, status, fields, fulfillment, config, requires_claim,
  grant_key, created_at, updated_at)
SELECT g.tenant_id, g.id, g.user_id, COALESCE(c.id, g.item_id), c.slug,
  COALESCE(c.name, i.name, g.reward_type), c.image_url, 'default', g.source_type, g.source_ref, 'fulfilling',
  jsonb_build_object('started_at', to_char(to_timestamp(g.created_at / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')),
  '{}', COALESCE(c.fulfillment, '{"type": "manual"}'), COALESCE(c.config, '{}'), false,
  g.grant_key, g.created_at, g.created_at
FROM reward_grants g
LEFT JOIN reward_items i ON i.tenant_id = g.tenant_id AND i.id = g.item_id
LEFT JOIN catalog_rewards c ON c.tenant_id = g.tenant_id AND c.id = g.payload->>'catalog_reward_id'
WHERE g.status = 'pending_fulfilment';

UPDATE reward_grants SET status = 'ordered', order_id = id WHERE status = 'pending_fulfilment';
