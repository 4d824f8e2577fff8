/**
 * Credential verification for the three gateways (docs/authentication.md):
 * root key, API keys and admin JWTs on the admin gateway; tenant and end-user JWTs (HS256 with the
 * tenant's secret, or RS256/ES256 from the tenant's identity provider) and signed requests on the
 * ingestion and query gateways. Every secret comparison is constant-time.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { createRemoteJWKSet, decodeJwt, decodeProtectedHeader, jwtVerify, type JWTPayload } from 'jose';
import type { Clock } from '../../core/clock';
import { safeEqual } from '../../core/tenancy/secrets';
import type { ApiKey, Tenant, TenantSecrets, TenantStore } from '../../core/tenancy/store';
import { ApiError, errors } from '../errors';
import { FailureGate } from './failures';
import { VerifiedTokenCache } from './token-cache';
import { ReadThroughCache } from '../../shared/read-through-cache';

export type Principal =
  | { kind: 'root' }
  | { kind: 'api_key'; key: ApiKey; via: 'api_key' | 'admin_jwt' }
  | { kind: 'tenant'; tenantId: string; via: 'jwt' | 'signature' }
  | { kind: 'user'; tenantId: string; userId: string; via: 'jwt' | 'idp' };

/** Errors of the signed-request variant: `{error, code}` with AUTH_00x codes (SPEC.md). */
export class SignedRequestError extends ApiError {
  constructor(status: number, code: string, message: string) {
    super(status, code, message);
  }
  override toBody(): never {
    return { error: this.message, code: this.code } as never;
  }
}

export const signedErrors = {
  missing: (what: string) => new SignedRequestError(401, 'AUTH_002', `Missing header ${what}`),
  badSignature: () => new SignedRequestError(401, 'AUTH_001', 'Invalid signature'),
  expired: () => new SignedRequestError(401, 'AUTH_004', 'Timestamp outside the permitted window'),
  replayed: () =>
    new SignedRequestError(401, 'AUTH_004', 'Replayed request: this signature was already used; sign afresh'),
  unknownTenant: () => new SignedRequestError(401, 'AUTH_005', 'Tenant not found'),
  suspended: () => new SignedRequestError(403, 'FORBIDDEN', 'Tenant is suspended'),
  rateLimited: () => new SignedRequestError(429, 'RATE_001', 'Rate limit exceeded'),
  invalid: (code: 'VAL_001' | 'VAL_002', message: string) => new SignedRequestError(422, code, message),
};

const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;
const MAX_TOKEN = 8192;
/** Organisation values looked up per identity-provider token (its distinct top-level strings). */
const MAX_ORG_CANDIDATES = 64;
const MAX_CACHE = 10000;

/** Remembers a key for a while; true on first use (the rate limiter's store: Redis or memory). */
export interface ReplayGuard {
  firstUse(key: string, ttlMs: number, now: number): Promise<boolean>;
}

export interface AuthenticatorOptions {
  tenants: TenantStore;
  clock: Clock;
  /** Keyed hash of the root key, or null when operator routes are disabled. */
  rootKey: string | null;
  signatureSkewSeconds: number;
  tenantCacheMs: number;
  /**
   * How long a verified HS256 token is remembered (bounded by its exp; 0: verify every time).
   * See ./token-cache.ts. Default 0.
   */
  tokenCacheMs?: number;
  /** Where seen signatures are remembered until they leave the skew window. */
  replay: ReplayGuard;
}

export class Authenticator {
  /** Tenants with their secrets, and identity-provider lookups by (issuer, organisation values):
   * both with negative answers, renewed ahead of their expiry (shared/read-through-cache.ts). */
  private readonly cache: ReadThroughCache<TenantSecrets>;
  private readonly idpCache: ReadThroughCache<Tenant>;
  /** One key set per JWKS URL: jose caches its keys and refetches at most every 30 s. */
  private readonly jwks = new Map<string, ReturnType<typeof createRemoteJWKSet>>();
  /** Addresses whose failed-authentication budget is spent (http/route.ts). */
  readonly failures = new FailureGate();
  /** Verified tenant and end-user HS256 tokens (./token-cache.ts). */
  private readonly tokens: VerifiedTokenCache<Principal>;

  constructor(private readonly opts: AuthenticatorOptions) {
    this.tokens = new VerifiedTokenCache<Principal>({ ttlMs: opts.tokenCacheMs ?? 0, maxEntries: MAX_CACHE });
    const cached = {
      now: () => opts.clock.now(),
      ttlMs: opts.tenantCacheMs,
      maxEntries: MAX_CACHE,
      cacheMisses: true,
    };
    this.cache = new ReadThroughCache<TenantSecrets>(cached);
    this.idpCache = new ReadThroughCache<Tenant>(cached);
  }

  /** Forget cached credentials of a tenant (after an update in this process). */
  invalidate(tenantId?: string): void {
    if (tenantId === undefined) this.cache.clear();
    else this.cache.forget(tenantId);
    this.tokens.invalidate(tenantId);
    // Identity-provider answers are keyed by issuer, not tenant: any tenant change drops them all.
    this.idpCache.clear();
  }

  /**
   * A tenant with its secrets, cached for tenantCacheMs (negative answers too). Concurrent misses
   * of one tenant share one store read; an entry in use is renewed in the background before it
   * runs out; `invalidate` drops the read in flight, and a read whose tenant was invalidated
   * meanwhile is not remembered.
   */
  tenant(id: string): Promise<TenantSecrets | null> {
    return this.cache.get(id, () => this.opts.tenants.getTenantSecrets(id));
  }

  // ---- admin gateway -------------------------------------------------------------------

  /** Root key, API key (`X-API-Key` or `Authorization: Bearer`) or admin JWT. */
  async admin(headers: { apiKey?: string; authorization?: string }): Promise<Principal> {
    const presented = headers.apiKey || bearer(headers.authorization);
    if (!presented) throw errors.unauthorized('Missing credential: send X-API-Key or Authorization: Bearer');
    if (presented.length > MAX_TOKEN) throw errors.unauthorized('Credential too long');
    if (this.opts.rootKey !== null && safeEqual(presented, this.opts.rootKey)) return { kind: 'root' };
    if (presented.startsWith('ldk_')) {
      const key = await this.opts.tenants.verifyApiKey(presented);
      if (!key) throw errors.unauthorized('Invalid or revoked API key');
      return { kind: 'api_key', key, via: 'api_key' };
    }
    if (JWT_SHAPE.test(presented)) return this.adminJwt(presented);
    throw errors.unauthorized('Invalid credential');
  }

  private async adminJwt(token: string): Promise<Principal> {
    const claims = unverifiedClaims(token);
    if (claims.sub_type !== 'admin' || typeof claims.sub_id !== 'string') {
      throw errors.unauthorized('Admin JWT must carry sub_type "admin" and sub_id, the API key id');
    }
    const found = await this.opts.tenants.getApiKeyForJwt(claims.sub_id);
    if (!found) throw errors.unauthorized('Invalid or revoked API key');
    await verifyHs256(token, found.plaintext, this.opts.clock);
    return { kind: 'api_key', key: found.key, via: 'admin_jwt' };
  }

  // ---- ingestion and query gateways ----------------------------------------------------

  /** A tenant or end-user JWT from `Authorization: Bearer`. */
  async token(authorization: string | undefined): Promise<{ principal: Principal; tenant: Tenant }> {
    const token = bearer(authorization);
    if (!token) throw errors.unauthorized('Missing credential: send Authorization: Bearer <JWT>');
    if (token.length > MAX_TOKEN || !JWT_SHAPE.test(token)) throw errors.unauthorized('Malformed token');
    const hit = this.tokens.get(token, this.opts.clock.now());
    if (hit) {
      // The tenant as it is now (through the tenant cache): the token stays accepted only while
      // its secret is the one it was verified with and the tenant is active, as without the cache.
      const t = await this.tenant(hit.tenantId);
      if (t && (t === hit.secrets || safeEqual(t.jwtSecret, hit.secrets.jwtSecret))) {
        // The same secret, read again: compare with this object from now on.
        hit.secrets = t;
        if (t.tenant.status !== 'active') throw errors.forbidden('Tenant is suspended');
        return { principal: hit.principal, tenant: t.tenant };
      }
      this.tokens.invalidate(hit.tenantId);
    }
    let alg: string | undefined;
    try {
      alg = decodeProtectedHeader(token).alg;
    } catch {
      throw errors.unauthorized('Malformed token');
    }
    if (alg === 'RS256' || alg === 'ES256') return this.idpToken(token);
    if (alg !== 'HS256') throw errors.unauthorized(`Unsupported token algorithm ${String(alg)}`);

    const claims = unverifiedClaims(token);
    let tenantId: unknown;
    if (claims.sub_type === 'tenant') tenantId = claims.sub_id;
    else if (claims.sub_type === 'user') tenantId = claims.tenant_id;
    else throw errors.unauthorized('Token must carry sub_type "tenant" or "user"');
    if (typeof tenantId !== 'string' || tenantId === '') throw errors.unauthorized('Token names no tenant');
    const t = await this.tenant(tenantId);
    if (!t) throw errors.unauthorized('Invalid token');
    const verifiedAt = this.opts.clock.now();
    await verifyHs256(token, t.jwtSecret, this.opts.clock);
    if (t.tenant.status !== 'active') throw errors.forbidden('Tenant is suspended');
    let principal: Principal;
    if (claims.sub_type === 'tenant') principal = { kind: 'tenant', tenantId, via: 'jwt' };
    else if (typeof claims.sub !== 'string' || claims.sub === '')
      throw errors.unauthorized('End-user token must carry sub, the user id');
    else principal = { kind: 'user', tenantId, userId: claims.sub, via: 'jwt' };
    // The claims are the verified token's (same bytes); exp bounds the entry.
    this.tokens.set(token, { principal, tenantId, secrets: t, exp: claims.exp }, verifiedAt);
    return { principal, tenant: t.tenant };
  }

  /** A token from the tenant's identity provider: the issuer and organisation claim name the tenant. */
  private async idpToken(token: string): Promise<{ principal: Principal; tenant: Tenant }> {
    const claims = unverifiedClaims(token);
    if (typeof claims.iss !== 'string' || claims.iss === '')
      throw errors.unauthorized('Token names no issuer');
    const tenant = await this.idpTenant(claims.iss, claims);
    if (!tenant || !tenant.idp)
      throw errors.unauthorized('No tenant for this identity provider and organisation');
    let jwks = this.jwks.get(tenant.idp.jwks_url);
    if (!jwks) {
      jwks = createRemoteJWKSet(new URL(tenant.idp.jwks_url), {
        timeoutDuration: 3000,
        cooldownDuration: 30000,
      });
      if (this.jwks.size >= 1000) this.jwks.clear();
      this.jwks.set(tenant.idp.jwks_url, jwks);
    }
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, jwks, {
        algorithms: ['RS256', 'ES256'],
        issuer: tenant.idp.issuer,
        currentDate: new Date(this.opts.clock.now()),
      }));
    } catch (err) {
      throw errors.unauthorized(tokenFailure(err));
    }
    if (tenant.status !== 'active') throw errors.forbidden('Tenant is suspended');
    if (typeof payload.sub !== 'string' || payload.sub === '')
      throw errors.unauthorized('Token must carry sub, the user id');
    return { principal: { kind: 'user', tenantId: tenant.id, userId: payload.sub, via: 'idp' }, tenant };
  }

  /**
   * The tenant whose identity provider has this issuer and whose organisation claim holds its
   * value: one indexed lookup with the token's distinct top-level string claims as candidate
   * values (never a list of tenants), cached for tenantCacheMs with negative answers.
   */
  private async idpTenant(issuer: string, claims: Record<string, unknown>): Promise<Tenant | null> {
    const values = [
      ...new Set(Object.values(claims).filter((v): v is string => typeof v === 'string' && v !== '')),
    ]
      .sort()
      .slice(0, MAX_ORG_CANDIDATES);
    // The answer depends on which claim holds which value (the filter below), so the key holds the
    // string claims by name, not only their values.
    const named = Object.entries(claims)
      .filter((e): e is [string, string] => typeof e[1] === 'string' && e[1] !== '')
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    const key = createHash('sha256')
      .update(JSON.stringify([issuer, named]))
      .digest('base64');
    return this.idpCache.get(key, async () => {
      const found = (await this.opts.tenants.findTenantsByIdpValues(issuer, values)).filter(
        (t) => t.idp && claims[t.idp.org_claim] === t.idp.org_value,
      );
      return found[0] ?? null;
    });
  }

  /**
   * A signed request: `X-Signature: hmac-sha256=<hex>` over
   * `METHOD \n TARGET \n TIMESTAMP \n BODY`, keyed with the tenant's hmac_secret, where TARGET
   * is the path and the canonical query (canonicalTarget). A signature is accepted once: it is
   * remembered (per tenant, in the rate limiter's store) until its timestamp leaves the window.
   */
  async signed(req: {
    method: string;
    path: string;
    /** The raw query string, without `?`. */
    query: string;
    tenantId?: string;
    timestamp?: string;
    signature?: string;
    raw: Buffer;
  }): Promise<{ principal: Principal; tenant: Tenant }> {
    if (!req.tenantId) throw signedErrors.missing('X-Tenant-Id');
    if (!req.timestamp) throw signedErrors.missing('X-Timestamp');
    if (!req.signature) throw signedErrors.missing('X-Signature');
    if (!/^\d{1,12}$/.test(req.timestamp)) throw signedErrors.expired();
    const skew = Math.abs(this.opts.clock.now() / 1000 - Number(req.timestamp));
    if (skew > this.opts.signatureSkewSeconds) throw signedErrors.expired();
    const m = /^hmac-sha256=([0-9a-fA-F]{64})$/.exec(req.signature);
    const t = await this.tenant(req.tenantId);
    if (!t) throw signedErrors.unknownTenant();
    if (!m) throw signedErrors.badSignature();
    let target: string;
    try {
      target = canonicalTarget(req.path, req.query);
    } catch {
      throw signedErrors.badSignature();
    }
    const expected = signRequest(t.hmacSecret, req.method, target, req.timestamp, req.raw);
    const presented = m[1]!.toLowerCase();
    if (!timingSafeEqual(Buffer.from(expected, 'hex'), Buffer.from(presented, 'hex'))) {
      throw signedErrors.badSignature();
    }
    if (t.tenant.status !== 'active') throw signedErrors.suspended();
    // Remembered until the timestamp leaves the window (plus a second): after that the window refuses it.
    const now = this.opts.clock.now();
    const ttlMs = (Number(req.timestamp) + this.opts.signatureSkewSeconds) * 1000 - now + 1000;
    if (!(await this.opts.replay.firstUse(`sig:${t.tenant.id}:${presented}`, ttlMs, now))) {
      throw signedErrors.replayed();
    }
    return { principal: { kind: 'tenant', tenantId: t.tenant.id, via: 'signature' }, tenant: t.tenant };
  }
}

/**
 * The hex HMAC-SHA256 of a signed request (also what clients compute; see docs/authentication.md).
 * `target` is the path with its query, if any (`/v1/x?b=2&a=1`); it is signed in canonical form.
 */
export function signRequest(
  secret: string,
  method: string,
  target: string,
  timestamp: string,
  body: Buffer | string,
): string {
  const q = target.indexOf('?');
  const canonical = q < 0 ? target : canonicalTarget(target.slice(0, q), target.slice(q + 1));
  return createHmac('sha256', secret)
    .update(`${method.toUpperCase()}\n${canonical}\n${timestamp}\n`)
    .update(body)
    .digest('hex');
}

/**
 * The signed form of a request target: the path exactly as sent, then, when the query has any
 * parameter, `?` and the parameters as the server reads them (WHATWG form decoding: `+` is a
 * space, `%XX` a byte of UTF-8), each name and value percent-encoded per RFC 3986 (everything but
 * `A-Z a-z 0-9 - . _ ~`, upper-case hex), sorted by name then value, `name=value` joined by `&`.
 * `/v1/w?user_id=bob&x=a+b&a` gives `/v1/w?a=&user_id=bob&x=a%20b`.
 */
export function canonicalTarget(path: string, query: string): string {
  const pairs = [...new URLSearchParams(query)].map(([k, v]) => [rfc3986(k), rfc3986(v)] as const);
  if (pairs.length === 0) return path;
  pairs.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
  return `${path}?${pairs.map(([k, v]) => `${k}=${v}`).join('&')}`;
}

function rfc3986(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

function bearer(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return m?.[1];
}

function unverifiedClaims(token: string): JWTPayload & Record<string, unknown> {
  try {
    return decodeJwt(token) as JWTPayload & Record<string, unknown>;
  } catch {
    throw errors.unauthorized('Malformed token');
  }
}

async function verifyHs256(token: string, secret: string, clock: Clock): Promise<void> {
  try {
    await jwtVerify(token, new TextEncoder().encode(secret), {
      algorithms: ['HS256'],
      currentDate: new Date(clock.now()),
    });
  } catch (err) {
    throw errors.unauthorized(tokenFailure(err));
  }
}

function tokenFailure(err: unknown): string {
  const code = (err as { code?: string }).code;
  if (code === 'ERR_JWT_EXPIRED') return 'Token expired';
  if (code === 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED') return 'Invalid token signature';
  if (code === 'ERR_JOSE_ALG_NOT_ALLOWED') return 'Token algorithm not allowed';
  if (code === 'ERR_JWT_CLAIM_VALIDATION_FAILED')
    return `Token claim check failed: ${(err as Error).message}`;
  return 'Invalid token';
}
