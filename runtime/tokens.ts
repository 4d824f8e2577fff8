/**
 * HS256 tokens the gateways accept (docs/authentication.md), minted for operators and newcomers:
 * by `ludus tokens` and the first-start welcome (runtime/welcome.ts).
 */
import { SignJWT } from 'jose';
import { ConfigError } from './config';

export type TokenKind =
  | { sub_type: 'tenant'; tenant_id: string }
  | { sub_type: 'user'; tenant_id: string; user_id: string }
  | { sub_type: 'admin'; key_id: string };

const UNIT_S: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400 };
const MAX_EXPIRES_IN_S = 366 * 86400;

/** `90s`, `15m`, `1h`, `30d` into seconds (at most 366 days). */
export function parseExpiresIn(option: string, raw: string): number {
  const m = /^(\d{1,6})([smhd])$/.exec(raw);
  const s = m ? Number(m[1]) * UNIT_S[m[2]!]! : 0;
  if (!m || s < 1 || s > MAX_EXPIRES_IN_S)
    throw new ConfigError(option, `must be a duration like 90s, 15m, 1h or 30d, at most 366d (got "${raw}")`);
  return s;
}

/**
 * Signs a token: tenant and end-user tokens with the tenant's jwt_secret, admin tokens with the
 * API key itself. `nowS`: the issue time, Unix seconds.
 */
export async function mintToken(
  kind: TokenKind,
  secret: string,
  nowS: number,
  expiresInS: number,
): Promise<{ token: string; expires_at: string }> {
  const claims =
    kind.sub_type === 'tenant'
      ? { sub_type: 'tenant', sub_id: kind.tenant_id }
      : kind.sub_type === 'user'
        ? { sub_type: 'user', tenant_id: kind.tenant_id, sub: kind.user_id }
        : { sub_type: 'admin', sub_id: kind.key_id };
  const token = await new SignJWT(claims)
    .setProtectedHeader({ alg: 'HS256' })
    .setIssuedAt(nowS)
    .setExpirationTime(nowS + expiresInS)
    .sign(new TextEncoder().encode(secret));
  return { token, expires_at: new Date((nowS + expiresInS) * 1000).toISOString() };
}
