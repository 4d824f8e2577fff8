-- Tenants and API keys. Secrets are stored encrypted with the server key (core/tenancy/secrets.ts);
-- API keys are found by a keyed hash and their encrypted copy verifies admin JWTs signed with them.
CREATE TABLE tenants (
  id              text PRIMARY KEY,
  name            text NOT NULL,
  status          text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended')),
  jwt_secret_enc  text NOT NULL,
  hmac_secret_enc text NOT NULL,
  -- Optional identity provider: tokens signed by keys of jwks_url (RS256/ES256), the tenant named
  -- by the claim org_claim whose value must be org_value.
  idp_jwks_url    text,
  idp_issuer      text,
  idp_org_claim   text,
  idp_org_value   text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX tenants_idp ON tenants (idp_issuer, idp_org_value) WHERE idp_issuer IS NOT NULL;

CREATE TABLE api_keys (
  id          text PRIMARY KEY,
  name        text NOT NULL,
  key_hash    text NOT NULL UNIQUE,
  key_enc     text NOT NULL,
  key_hint    text NOT NULL,
  tenant_ids  text[] NOT NULL,
  scopes      text[] NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  revoked_at  timestamptz
);
