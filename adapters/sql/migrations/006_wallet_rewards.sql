-- Wallet (currencies, balances, the ledger, earning rules, loyalty tiers), levels, reward items,
-- reward configs and grants.

ALTER TABLE tenants ADD COLUMN timezone text NOT NULL DEFAULT 'UTC';

CREATE TABLE currencies (
  tenant_id      text    NOT NULL,
  id             text    NOT NULL,
  name           text    NOT NULL,
  symbol         text,
  is_spendable   boolean NOT NULL,
  decimal_places integer NOT NULL,
  active         boolean NOT NULL DEFAULT true,
  created_at     timestamptz NOT NULL,
  updated_at     timestamptz NOT NULL,
  PRIMARY KEY (tenant_id, id)
);

-- One row per user and currency; always equal to the sum of its ledger rows.
CREATE TABLE balances (
  tenant_id       text   NOT NULL,
  user_id         text   NOT NULL,
  currency_id     text   NOT NULL,
  available       bigint NOT NULL CHECK (available >= 0),
  lifetime_earned bigint NOT NULL CHECK (lifetime_earned >= 0),
  PRIMARY KEY (tenant_id, user_id, currency_id)
);

-- The append-only ledger. `seq` orders rows for export; `idempotency_key` makes a retry return the
-- first result.
CREATE TABLE ledger (
  seq             bigserial PRIMARY KEY,
  id              text   NOT NULL UNIQUE,
  tenant_id       text   NOT NULL,
  user_id         text   NOT NULL,
  currency_id     text   NOT NULL,
  amount          bigint NOT NULL CHECK (amount <> 0),
  balance_after   bigint NOT NULL,
  source_type     text   NOT NULL,
  source_ref      text,
  description     text,
  idempotency_key text,
  created_at      bigint NOT NULL
);
CREATE UNIQUE INDEX ledger_idempotency ON ledger (tenant_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX ledger_user ON ledger (tenant_id, user_id, currency_id, seq DESC);

CREATE TABLE earning_rules (
  tenant_id     text    NOT NULL,
  id            text    NOT NULL,
  name          text    NOT NULL,
  currency_id   text    NOT NULL,
  event_type    text    NOT NULL,
  event_filter  jsonb,
  calculation   jsonb   NOT NULL,
  max_per_event bigint,
  max_per_day   bigint,
  max_per_week  bigint,
  priority      integer NOT NULL DEFAULT 0,
  active        boolean NOT NULL DEFAULT true,
  created_at    timestamptz NOT NULL,
  updated_at    timestamptz NOT NULL,
  PRIMARY KEY (tenant_id, id)
);

-- Amounts credited per rule, user and period (day or week in the tenant's time zone), for caps.
CREATE TABLE earning_usage (
  tenant_id  text   NOT NULL,
  rule_id    text   NOT NULL,
  user_id    text   NOT NULL,
  period     text   NOT NULL,
  amount     bigint NOT NULL,
  PRIMARY KEY (tenant_id, rule_id, user_id, period)
);

CREATE TABLE tiers (
  tenant_id           text    NOT NULL,
  id                  text    NOT NULL,
  tier_name           text    NOT NULL,
  tier_level          integer NOT NULL,
  min_lifetime_points bigint  NOT NULL,
  currency_id         text    NOT NULL,
  icon_url            text,
  badge_color         text,
  benefits            jsonb   NOT NULL DEFAULT '{}',
  created_at          timestamptz NOT NULL,
  updated_at          timestamptz NOT NULL,
  PRIMARY KEY (tenant_id, id),
  UNIQUE (tenant_id, currency_id, tier_level)
);

-- The tier each user was last told about (tier.changed fires when it moves).
CREATE TABLE user_tiers (
  tenant_id   text NOT NULL,
  user_id     text NOT NULL,
  currency_id text NOT NULL,
  tier_id     text,
  PRIMARY KEY (tenant_id, user_id, currency_id)
);

CREATE TABLE level_systems (
  tenant_id        text  NOT NULL,
  id               text  NOT NULL,
  name             text  NOT NULL,
  description      text,
  currency_id      text  NOT NULL,
  reward_config_id text,
  levels           jsonb NOT NULL,
  created_at       timestamptz NOT NULL,
  updated_at       timestamptz NOT NULL,
  PRIMARY KEY (tenant_id, id)
);

-- Levels each user reached, with when.
CREATE TABLE user_levels (
  tenant_id       text    NOT NULL,
  level_system_id text    NOT NULL,
  user_id         text    NOT NULL,
  level           integer NOT NULL,
  achieved_at     bigint  NOT NULL,
  PRIMARY KEY (tenant_id, level_system_id, user_id, level)
);

CREATE TABLE reward_items (
  tenant_id   text  NOT NULL,
  id          text  NOT NULL,
  name        text  NOT NULL,
  description text,
  reward_type text  NOT NULL,
  payload     jsonb NOT NULL,
  created_at  timestamptz NOT NULL,
  updated_at  timestamptz NOT NULL,
  PRIMARY KEY (tenant_id, id)
);

CREATE TABLE reward_configs (
  tenant_id   text  NOT NULL,
  id          text  NOT NULL,
  name        text  NOT NULL,
  description text,
  tiers       jsonb NOT NULL,
  created_at  timestamptz NOT NULL,
  updated_at  timestamptz NOT NULL,
  PRIMARY KEY (tenant_id, id)
);

-- Every reward item granted to a user, once per grant key (e.g. leaderboard, window, user, item).
-- Currency-like items also have a ledger row; badges and items are owned from here; physical and
-- custom items wait here for fulfilment.
CREATE TABLE reward_grants (
  id          text  NOT NULL PRIMARY KEY,
  tenant_id   text  NOT NULL,
  grant_key   text  NOT NULL,
  user_id     text  NOT NULL,
  item_id     text  NOT NULL,
  reward_type text  NOT NULL,
  payload     jsonb NOT NULL,
  status      text  NOT NULL,
  source_type text  NOT NULL,
  source_ref  text,
  transaction_id text,
  created_at  bigint NOT NULL,
  UNIQUE (tenant_id, grant_key)
);
CREATE INDEX reward_grants_user ON reward_grants (tenant_id, user_id, created_at DESC);

-- Cursors of copy jobs (e.g. the ledger export to the analytics store).
CREATE TABLE export_cursors (
  name     text   PRIMARY KEY,
  position bigint NOT NULL
);
