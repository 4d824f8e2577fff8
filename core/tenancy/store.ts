/**
 * Tenants and API keys: the operator surface (SPEC.md does not show it; docs/authentication.md).
 * Every secret is generated here, returned in clear once, and stored encrypted.
 */
import { randomUUID } from 'node:crypto';
import type { Queryable } from '../../adapters/sql/types';
import type { Clock } from '../clock';
import { newSecret, type SecretBox } from './secrets';

export type TenantStatus = 'active' | 'suspended';

export interface Tenant {
  id: string;
  name: string;
  status: TenantStatus;
  /** IANA zone of the tenant's days and weeks (earning caps). */
  timezone: string;
  idp: { jwks_url: string; issuer: string; org_claim: string; org_value: string } | null;
  created_at: string;
  updated_at: string;
}

/** A tenant with its secrets in clear, for verification only; never rendered. */
export interface TenantSecrets {
  tenant: Tenant;
  jwtSecret: string;
  hmacSecret: string;
}

export interface ApiKey {
  id: string;
  name: string;
  /** Last characters of the key, so an operator can tell keys apart. */
  hint: string;
  tenant_ids: string[];
  scopes: string[];
  created_at: string;
  revoked_at: string | null;
}

/** The API key record and its plaintext, as verified from a request. */
export interface VerifiedKey {
  key: ApiKey;
  plaintext: string;
}

interface TenantRow {
  id: string;
  name: string;
  status: TenantStatus;
  timezone: string;
  jwt_secret_enc: string;
  hmac_secret_enc: string;
  idp_jwks_url: string | null;
  idp_issuer: string | null;
  idp_org_claim: string | null;
  idp_org_value: string | null;
  created_at: Date | string;
  updated_at: Date | string;
}

interface KeyRow {
  id: string;
  name: string;
  key_hash: string;
  key_enc: string;
  key_hint: string;
  tenant_ids: string[];
  scopes: string[];
  created_at: Date | string;
  revoked_at: Date | string | null;
}

const iso = (v: Date | string): string => new Date(v).toISOString();

function toTenant(r: TenantRow): Tenant {
  return {
    id: r.id,
    name: r.name,
    status: r.status,
    timezone: r.timezone ?? 'UTC',
    idp:
      r.idp_jwks_url && r.idp_issuer && r.idp_org_claim && r.idp_org_value
        ? {
            jwks_url: r.idp_jwks_url,
            issuer: r.idp_issuer,
            org_claim: r.idp_org_claim,
            org_value: r.idp_org_value,
          }
        : null,
    created_at: iso(r.created_at),
    updated_at: iso(r.updated_at),
  };
}

function toKey(r: KeyRow): ApiKey {
  return {
    id: r.id,
    name: r.name,
    hint: r.key_hint,
    tenant_ids: r.tenant_ids,
    scopes: r.scopes,
    created_at: iso(r.created_at),
    revoked_at: r.revoked_at ? iso(r.revoked_at) : null,
  };
}

export class TenantStore {
  constructor(
    private readonly db: Queryable,
    private readonly box: SecretBox,
    private readonly clock: Clock,
  ) {}

  private now(): string {
    return new Date(this.clock.now()).toISOString();
  }

  /** Creates a tenant; `id` defaults to a UUID. Returns the secrets in clear, once. */
  async createTenant(input: { name: string; id?: string }): Promise<TenantSecrets> {
    const id = input.id ?? randomUUID();
    const jwtSecret = newSecret('ldt');
    const hmacSecret = newSecret('ldh');
    const now = this.now();
    const r = await this.db.query<TenantRow>(
      `INSERT INTO tenants (id, name, jwt_secret_enc, hmac_secret_enc, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $5) ON CONFLICT (id) DO NOTHING RETURNING *`,
      [id, input.name, this.box.encrypt(jwtSecret), this.box.encrypt(hmacSecret), now],
    );
    if (r.rowCount === 0) throw new TenancyError('conflict', `tenant ${id} already exists`);
    return { tenant: toTenant(r.rows[0]!), jwtSecret, hmacSecret };
  }

  async listTenants(): Promise<Tenant[]> {
    const r = await this.db.query<TenantRow>('SELECT * FROM tenants ORDER BY created_at, id');
    return r.rows.map(toTenant);
  }

  async getTenant(id: string): Promise<Tenant | null> {
    const r = await this.db.query<TenantRow>('SELECT * FROM tenants WHERE id = $1', [id]);
    return r.rows[0] ? toTenant(r.rows[0]) : null;
  }

  /** The tenant with its secrets decrypted, for credential checks. */
  async getTenantSecrets(id: string): Promise<TenantSecrets | null> {
    const r = await this.db.query<TenantRow>('SELECT * FROM tenants WHERE id = $1', [id]);
    const row = r.rows[0];
    if (!row) return null;
    return {
      tenant: toTenant(row),
      jwtSecret: this.box.decrypt(row.jwt_secret_enc),
      hmacSecret: this.box.decrypt(row.hmac_secret_enc),
    };
  }

  /** The tenant whose identity provider issued a token with this issuer and organisation value. */
  async findTenantByIdp(issuer: string, orgValue: string): Promise<Tenant | null> {
    const r = await this.db.query<TenantRow>(
      'SELECT * FROM tenants WHERE idp_issuer = $1 AND idp_org_value = $2',
      [issuer, orgValue],
    );
    return r.rows[0] ? toTenant(r.rows[0]) : null;
  }

  /**
   * Tenants whose identity provider has this issuer and one of these organisation values: one
   * lookup on the unique index (idp_issuer, idp_org_value), whatever the number of tenants.
   */
  async findTenantsByIdpValues(issuer: string, orgValues: string[]): Promise<Tenant[]> {
    if (orgValues.length === 0) return [];
    const r = await this.db.query<TenantRow>(
      'SELECT * FROM tenants WHERE idp_issuer = $1 AND idp_org_value = ANY($2::text[])',
      [issuer, orgValues],
    );
    return r.rows.map(toTenant);
  }

  async updateTenant(
    id: string,
    patch: { name?: string; status?: TenantStatus; idp?: Tenant['idp']; timezone?: string },
  ): Promise<Tenant | null> {
    const idp = patch.idp === undefined ? undefined : patch.idp;
    const r = await this.db.query<TenantRow>(
      `UPDATE tenants SET
         name = COALESCE($2, name),
         status = COALESCE($3, status),
         timezone = COALESCE($10, timezone),
         idp_jwks_url = CASE WHEN $4::boolean THEN $5 ELSE idp_jwks_url END,
         idp_issuer = CASE WHEN $4::boolean THEN $6 ELSE idp_issuer END,
         idp_org_claim = CASE WHEN $4::boolean THEN $7 ELSE idp_org_claim END,
         idp_org_value = CASE WHEN $4::boolean THEN $8 ELSE idp_org_value END,
         updated_at = $9
       WHERE id = $1 RETURNING *`,
      [
        id,
        patch.name ?? null,
        patch.status ?? null,
        idp !== undefined,
        idp?.jwks_url ?? null,
        idp?.issuer ?? null,
        idp?.org_claim ?? null,
        idp?.org_value ?? null,
        this.now(),
        patch.timezone ?? null,
      ],
    );
    return r.rows[0] ? toTenant(r.rows[0]) : null;
  }

  /** New JWT and HMAC secrets; the old ones stop working at once. */
  async rotateSecrets(id: string): Promise<TenantSecrets | null> {
    const jwtSecret = newSecret('ldt');
    const hmacSecret = newSecret('ldh');
    const r = await this.db.query<TenantRow>(
      'UPDATE tenants SET jwt_secret_enc = $2, hmac_secret_enc = $3, updated_at = $4 WHERE id = $1 RETURNING *',
      [id, this.box.encrypt(jwtSecret), this.box.encrypt(hmacSecret), this.now()],
    );
    return r.rows[0] ? { tenant: toTenant(r.rows[0]), jwtSecret, hmacSecret } : null;
  }

  /** Creates an API key; the plaintext is returned once. */
  async createApiKey(input: { name: string; tenant_ids: string[]; scopes: string[] }): Promise<VerifiedKey> {
    const id = randomUUID();
    const plaintext = newSecret('ldk');
    const r = await this.db.query<KeyRow>(
      `INSERT INTO api_keys (id, name, key_hash, key_enc, key_hint, tenant_ids, scopes, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING *`,
      [
        id,
        input.name,
        this.box.hash(plaintext),
        this.box.encrypt(plaintext),
        plaintext.slice(-4),
        input.tenant_ids,
        input.scopes,
        this.now(),
      ],
    );
    return { key: toKey(r.rows[0]!), plaintext };
  }

  async listApiKeys(): Promise<ApiKey[]> {
    const r = await this.db.query<KeyRow>('SELECT * FROM api_keys ORDER BY created_at, id');
    return r.rows.map(toKey);
  }

  /** Revokes a key; returns null when it does not exist. Revoked keys stop working at once. */
  async revokeApiKey(id: string): Promise<ApiKey | null> {
    const r = await this.db.query<KeyRow>(
      'UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1 RETURNING *',
      [id, this.now()],
    );
    return r.rows[0] ? toKey(r.rows[0]) : null;
  }

  /** The live key matching a presented plaintext (keyed-hash lookup, constant-time check). */
  async verifyApiKey(presented: string): Promise<ApiKey | null> {
    const hash = this.box.hash(presented);
    const r = await this.db.query<KeyRow>(
      'SELECT * FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL',
      [hash],
    );
    const row = r.rows[0];
    return row && this.box.verifyHash(presented, row.key_hash) ? toKey(row) : null;
  }

  /** A live key by id with its plaintext, to verify an admin JWT signed with it. */
  async getApiKeyForJwt(id: string): Promise<VerifiedKey | null> {
    const r = await this.db.query<KeyRow>('SELECT * FROM api_keys WHERE id = $1 AND revoked_at IS NULL', [
      id,
    ]);
    const row = r.rows[0];
    return row ? { key: toKey(row), plaintext: this.box.decrypt(row.key_enc) } : null;
  }
}

export class TenancyError extends Error {
  constructor(
    readonly kind: 'conflict' | 'not_found',
    message: string,
  ) {
    super(message);
  }
}
