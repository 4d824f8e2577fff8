/**
 * Concurrent grants sharing one idempotency key (issue 11, item 8), in both shapes (the race
 * needs Postgres's concurrent sessions; PGlite serialises and must agree): exactly one movement
 * is written, every other request answers the same result (identical movement) or 409 CONFLICT
 * (another user, currency or amount), never 500, and the ledger matches the balances.
 */
import { call, createKey, createTenant, SHAPES, startTestApp, type TestApp } from '../support/app';

const N = 20;

describe.each(SHAPES)('grants sharing one idempotency key [%s]', (shape) => {
  let app: TestApp;
  let tenantId: string;
  let key: string;

  beforeAll(async () => {
    app = await startTestApp(shape, {
      env: { LUDUS_RATE_LIMIT_ADMIN: 'off' },
      roles: 'api,processors',
    });
    tenantId = (await createTenant(app)).id;
    key = (await createKey(app, [tenantId])).key;
    for (const id of ['coins', 'gems']) {
      const r = await call('POST', `${app.url.admin}/v1/wallet/currencies?tenant_id=${tenantId}`, {
        headers: { 'x-api-key': key },
        body: { id, name: id, is_spendable: true, decimal_places: 0 },
      });
      expect(r.status).toBe(201);
    }
  }, 120_000);
  afterAll(() => app?.stop());

  const grant = (body: Record<string, unknown>) =>
    call('POST', `${app.url.admin}/v1/wallet/grant?tenant_id=${tenantId}`, {
      headers: { 'x-api-key': key },
      body: { currency_id: 'coins', amount: 1, ...body },
    });

  async function ledgerRows(idempotencyKey: string): Promise<number> {
    const r = await app.ctx.adapters.sql.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM ledger WHERE tenant_id = $1 AND idempotency_key = $2',
      [tenantId, idempotencyKey],
    );
    return Number(r.rows[0]!.n);
  }

  /** Invariant 3: every balance is the sum of its ledger rows. */
  async function expectLedgerMatchesBalances() {
    const r = await app.ctx.adapters.sql.query<{
      user_id: string;
      currency_id: string;
      available: number;
      sum: number;
    }>(
      `SELECT b.user_id, b.currency_id, b.available::bigint AS available,
              COALESCE((SELECT sum(l.amount) FROM ledger l WHERE l.tenant_id = b.tenant_id
                 AND l.user_id = b.user_id AND l.currency_id = b.currency_id), 0)::bigint AS sum
       FROM balances b WHERE b.tenant_id = $1`,
      [tenantId],
    );
    for (const row of r.rows)
      expect([row.user_id, Number(row.available)]).toEqual([row.user_id, Number(row.sum)]);
    return r.rows;
  }

  it(`${N} parallel grants with one key for ${N} different users: one is written, the rest 409`, async () => {
    const k = `same-key-users-${shape}`;
    const res = await Promise.all(
      Array.from({ length: N }, (_, i) => grant({ user_id: `u${i}`, idempotency_key: k })),
    );
    const statuses = res.map((r) => r.status);
    expect(statuses).not.toContain(500);
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
    expect(statuses.filter((s) => s === 409)).toHaveLength(N - 1);
    for (const r of res.filter((x) => x.status === 409)) expect(r.body.error.code).toBe('CONFLICT');
    expect(await ledgerRows(k)).toBe(1);
    const rows = await expectLedgerMatchesBalances();
    expect(rows.filter((r) => /^u\d+$/.test(r.user_id) && Number(r.available) > 0)).toHaveLength(1);
  });

  it(`${N} parallel grants with one key alternating two currencies: one currency wins, the same result or 409`, async () => {
    const k = `same-key-currencies-${shape}`;
    const currencies = Array.from({ length: N }, (_, i) => (i % 2 ? 'gems' : 'coins'));
    const res = await Promise.all(
      currencies.map((currency_id) => grant({ user_id: 'zoe', currency_id, idempotency_key: k })),
    );
    expect(res.map((r) => r.status)).not.toContain(500);
    const ok = res.map((r, i) => ({ r, c: currencies[i] })).filter(({ r }) => r.status === 200);
    const refused = res.map((r, i) => ({ r, c: currencies[i] })).filter(({ r }) => r.status === 409);
    expect(ok.length + refused.length).toBe(N);
    const winner = ok[0]!.c;
    // Every identical request got the one movement; every other currency was refused.
    expect(ok.every(({ c }) => c === winner)).toBe(true);
    expect(ok).toHaveLength(N / 2);
    expect(new Set(ok.map(({ r }) => r.body.transaction_id)).size).toBe(1);
    expect(ok.filter(({ r }) => r.body.was_cached === false)).toHaveLength(1);
    expect(refused.every(({ c }) => c !== winner)).toBe(true);
    expect(await ledgerRows(k)).toBe(1);
    await expectLedgerMatchesBalances();
  });

  it(`${N} parallel identical grants with one key: one movement, every answer the same`, async () => {
    const k = `same-key-identical-${shape}`;
    const res = await Promise.all(
      Array.from({ length: N }, () => grant({ user_id: 'yan', amount: 7, idempotency_key: k })),
    );
    expect(res.map((r) => r.status)).toEqual(new Array(N).fill(200));
    expect(new Set(res.map((r) => r.body.transaction_id)).size).toBe(1);
    expect(res.every((r) => r.body.balance_after === 7)).toBe(true);
    expect(await ledgerRows(k)).toBe(1);
    await expectLedgerMatchesBalances();
    // And the service still serves: a fresh key writes a new movement.
    const next = await grant({ user_id: 'yan', amount: 1, idempotency_key: `${k}-next` });
    expect([next.status, next.body.balance_after]).toEqual([200, 8]);
  });
});
