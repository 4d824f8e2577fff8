-- Spin wheels and wheel themes (issue 18, docs/wheels.md).

-- A tenant's own themes. The system templates are not rows: they live in code
-- (core/wheels/themes.ts) with fixed ids, the same for every tenant.
CREATE TABLE wheel_themes (
  tenant_id   text  NOT NULL,
  id          text  NOT NULL,
  name        text  NOT NULL,
  description text,
  theme_type  text  NOT NULL CHECK (theme_type IN ('template', 'custom')),
  status      text  NOT NULL CHECK (status IN ('active', 'archived')),
  config      jsonb NOT NULL,
  created_at  timestamptz NOT NULL,
  updated_at  timestamptz NOT NULL,
  PRIMARY KEY (tenant_id, id)
);

-- A wheel; DELETE deactivates it (its spins stay readable).
CREATE TABLE wheels (
  tenant_id   text    NOT NULL,
  id          text    NOT NULL,
  name        text    NOT NULL,
  description text,
  config      jsonb   NOT NULL,
  active      boolean NOT NULL DEFAULT true,
  created_at  timestamptz NOT NULL,
  updated_at  timestamptz NOT NULL,
  PRIMARY KEY (tenant_id, id)
);

-- The reward items a wheel's segments name, kept in step with wheels.config by core/wheels/wheels.ts,
-- so that an item a wheel can pay cannot be deleted (as reward_config_items does for configs).
CREATE TABLE wheel_items (
  tenant_id text NOT NULL,
  wheel_id  text NOT NULL,
  item_id   text NOT NULL,
  PRIMARY KEY (tenant_id, wheel_id, item_id),
  FOREIGN KEY (tenant_id, wheel_id) REFERENCES wheels (tenant_id, id) ON DELETE CASCADE,
  FOREIGN KEY (tenant_id, item_id) REFERENCES reward_items (tenant_id, id)
);
CREATE INDEX wheel_items_item ON wheel_items (tenant_id, item_id);

-- Per user and wheel: the counters the frequency limits read, and the row a spin locks
-- (FOR UPDATE), so concurrent spins of one user on one wheel are judged one after the other.
CREATE TABLE wheel_user_spins (
  tenant_id    text    NOT NULL,
  wheel_id     text    NOT NULL,
  user_id      text    NOT NULL,
  total_spins  bigint  NOT NULL DEFAULT 0,
  day          text,
  day_spins    integer NOT NULL DEFAULT 0,
  last_spun_at bigint,
  PRIMARY KEY (tenant_id, wheel_id, user_id)
);

-- Every spin, with what audits its draw: the weights in force, the drawn number and the cost paid.
CREATE TABLE wheel_spins (
  seq            bigserial,
  tenant_id      text    NOT NULL,
  id             text    NOT NULL,
  wheel_id       text    NOT NULL,
  user_id        text    NOT NULL,
  result_index   integer NOT NULL,
  reward_item_id text,
  draw           jsonb   NOT NULL,
  cost           jsonb,
  prize          jsonb,
  spun_at        bigint  NOT NULL,
  PRIMARY KEY (tenant_id, id),
  FOREIGN KEY (tenant_id, wheel_id) REFERENCES wheels (tenant_id, id)
);
CREATE INDEX wheel_spins_user ON wheel_spins (tenant_id, user_id, seq DESC);
CREATE INDEX wheel_spins_wheel ON wheel_spins (tenant_id, wheel_id, seq DESC);
