/**
 * Setting a deployment up through the admin gateway (root key): tenants, a currency, leaderboards
 * and earning rules; and minting tenant JWTs (HS256 with the tenant's jwt_secret, as clients do).
 */
import { SignJWT } from 'jose';

export interface TenantSecrets {
  id: string;
  jwt_secret: string;
}

async function call(method: string, url: string, rootKey: string, body?: unknown): Promise<unknown> {
  const r = await fetch(url, {
    method,
    headers: { 'x-api-key': rootKey, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(30000),
  });
  const text = await r.text();
  if (r.status >= 300) throw new Error(`${method} ${url}: ${r.status} ${text.slice(0, 300)}`);
  return text ? JSON.parse(text) : undefined;
}

export async function createTenant(adminUrl: string, rootKey: string, id: string): Promise<TenantSecrets> {
  const t = (await call('POST', `${adminUrl}/v1/tenants`, rootKey, { id, name: id })) as TenantSecrets;
  return { id: t.id, jwt_secret: t.jwt_secret };
}

export async function createCurrency(adminUrl: string, rootKey: string, tenant: string, id: string) {
  await call('POST', `${adminUrl}/v1/tenants/${tenant}/wallet/currencies`, rootKey, {
    id,
    name: id,
    is_spendable: true,
    decimal_places: 0,
  });
}

export async function createBoard(adminUrl: string, rootKey: string, tenant: string, board: object) {
  await call('POST', `${adminUrl}/v1/tenants/${tenant}/leaderboards`, rootKey, board);
}

export async function createRule(adminUrl: string, rootKey: string, tenant: string, rule: object) {
  await call('POST', `${adminUrl}/v1/tenants/${tenant}/wallet/earning-rules`, rootKey, rule);
}

export function tenantToken(t: TenantSecrets, expInSeconds = 7 * 86400): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ sub_type: 'tenant', sub_id: t.id })
    .setProtectedHeader({ alg: 'HS256' })
    .setIssuedAt(now)
    .setExpirationTime(now + expInSeconds)
    .sign(new TextEncoder().encode(t.jwt_secret));
}

/** Runs `fn` over items with at most `n` in flight. */
export async function pool<T>(items: T[], n: number, fn: (x: T) => Promise<void>): Promise<void> {
  let i = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, items.length) }, async () => {
      while (i < items.length) await fn(items[i++]!);
    }),
  );
}
