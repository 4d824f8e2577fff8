-- Coupons (issue 16): definitions, the codes of a tenant, user coupons, per-user usage and the
-- redemption journal. docs/coupons.md explains the model.

CREATE TABLE coupon_definitions (
  tenant_id      text    NOT NULL,
  id             text    NOT NULL,
  name           text    NOT NULL,
  description    text,
  config         jsonb   NOT NULL,
  -- Copied out of config for the foreign key: a reward item a definition names cannot be deleted.
  reward_item_id text    NOT NULL,
  status         text    NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused', 'archived')),
  -- Redemptions counted against a global max_uses (a conditional UPDATE of this row is the lock).
  uses           integer NOT NULL DEFAULT 0,
  created_at     timestamptz NOT NULL,
  updated_at     timestamptz NOT NULL,
  PRIMARY KEY (tenant_id, id),
  FOREIGN KEY (tenant_id, reward_item_id) REFERENCES reward_items (tenant_id, id)
);
CREATE INDEX coupon_definitions_list ON coupon_definitions (tenant_id, created_at, id);

-- Every code of a tenant, whatever its definition: `code_key` is the code in lower case, so a code
-- is unique in its tenant ignoring case and never matches two coupons (a case-sensitive
-- definition then also requires the exact case). A per-user code names its coupon; a shared code
-- (a custom-format definition's custom_code) names none.
CREATE TABLE coupon_codes (
  tenant_id     text NOT NULL,
  code_key      text NOT NULL,
  code          text NOT NULL,
  definition_id text NOT NULL,
  coupon_id     text,
  PRIMARY KEY (tenant_id, code_key),
  FOREIGN KEY (tenant_id, definition_id) REFERENCES coupon_definitions (tenant_id, id)
);

CREATE TABLE user_coupons (
  tenant_id        text    NOT NULL,
  id               text    NOT NULL,
  definition_id    text    NOT NULL,
  user_id          text    NOT NULL,
  code             text    NOT NULL,
  -- true: the definition's shared code (one coupon per user and code).
  shared           boolean NOT NULL DEFAULT false,
  status           text    NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'redeemed')),
  generated_at     bigint  NOT NULL,
  redeemed_at      bigint,
  redemption_count integer NOT NULL DEFAULT 0,
  -- What generated it: `admin`, or the outcome of an automatic trigger (unique per definition,
  -- so an outcome generates once).
  source           text    NOT NULL,
  source_key       text,
  PRIMARY KEY (tenant_id, id),
  FOREIGN KEY (tenant_id, definition_id) REFERENCES coupon_definitions (tenant_id, id)
);
CREATE INDEX user_coupons_user ON user_coupons (tenant_id, user_id, generated_at DESC, id);
CREATE UNIQUE INDEX user_coupons_shared ON user_coupons (tenant_id, definition_id, user_id, lower(code)) WHERE shared;
CREATE UNIQUE INDEX user_coupons_source ON user_coupons (tenant_id, definition_id, source_key) WHERE source_key IS NOT NULL;

-- Redemptions per user and definition, for a per_user max_uses (a conditional upsert is the lock).
CREATE TABLE coupon_usage (
  tenant_id     text    NOT NULL,
  definition_id text    NOT NULL,
  user_id       text    NOT NULL,
  uses          integer NOT NULL,
  PRIMARY KEY (tenant_id, definition_id, user_id)
);

-- The redemption journal (the history route); reward_item is the item as granted.
CREATE TABLE coupon_redemptions (
  tenant_id     text   NOT NULL,
  id            text   NOT NULL,
  coupon_id     text   NOT NULL,
  definition_id text   NOT NULL,
  user_id       text   NOT NULL,
  code          text   NOT NULL,
  reward_item   jsonb  NOT NULL,
  redeemed_at   bigint NOT NULL,
  PRIMARY KEY (tenant_id, id)
);
CREATE INDEX coupon_redemptions_user ON coupon_redemptions (tenant_id, user_id, redeemed_at DESC, id);
