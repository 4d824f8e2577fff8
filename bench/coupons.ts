/**
 * Coupon benchmark (issue 16), standalone and short:
 *
 *   node --import tsx bench/coupons.ts [--users 100000] [--shape embedded|distributed|both]
 *        [--seconds 10] [--concurrency 16]
 *
 * 1. Generation: one `POST /v1/coupons/{id}/generate` request for N users (random codes), timed
 *    end to end through the admin gateway; baseline in the same run: the bare SQL insert of the
 *    same rows (N codes and N user coupons, `INSERT ... SELECT FROM unnest(...)` in chunks of
 *    10,000 in one transaction) on the same store.
 * 2. Redemption: `POST /v1/coupons/redeem/{code}` of distinct pre-generated codes (unlimited
 *    definition, a 1-coin currency item) by `--concurrency` clients for `--seconds`; baseline in
 *    the same run: `POST /v1/wallet/grant` of 1 coin (one transaction with the same balance and
 *    ledger writes) at the same concurrency.
 *
 * The app runs in this process (tests/support/app.ts, both shapes, rate limits and guess limits
 * off), so client and server share the CPU. Results: stdout (markdown) and bench/results/coupons.json.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { codeKey, randomCodes } from '../core/coupons/codes';
import { systemRandom } from '../core/random';
import { call, startTestApp, tenantWithCredentials, type Shape, type TestApp } from '../tests/support/app';

const args = process.argv.slice(2);
const val = (f: string, d: string) => {
  const i = args.indexOf(f);
  return i >= 0 ? args[i + 1]! : d;
};
const USERS = Number(val('--users', '100000'));
const SECONDS = Number(val('--seconds', '10'));
const CONC = Number(val('--concurrency', '16'));
const SHAPES: Shape[] =
  val('--shape', 'both') === 'both' ? ['embedded', 'distributed'] : [val('--shape', 'both') as Shape];

interface ShapeResult {
  shape: Shape;
  users: number;
  generate_ms: number;
  generate_codes_per_s: number;
  baseline_insert_ms: number;
  baseline_rows_per_s: number;
  redeem_rps: number;
  redeem_ok: number;
  baseline_grant_rps: number;
}

async function run(shape: Shape): Promise<ShapeResult> {
  const app: TestApp = await startTestApp(shape, {
    roles: 'ingest,api,processors',
    env: {
      LUDUS_RATE_LIMIT_ADMIN: 'off',
      LUDUS_RATE_LIMIT_QUERY: 'off',
      LUDUS_COUPON_GUESS_LIMIT_USER: 'off',
      LUDUS_COUPON_GUESS_LIMIT_TENANT: 'off',
      LUDUS_LOG_LEVEL: 'warn',
    },
  });
  try {
    const { tenant, key, token } = await tenantWithCredentials(app);
    const admin = (method: string, path: string, body?: unknown) =>
      call(method, `${app.url.admin}${path}?tenant_id=${tenant.id}`, { headers: { 'x-api-key': key }, body });
    await admin('POST', '/v1/wallet/currencies', {
      id: 'coins',
      name: 'Coins',
      is_spendable: true,
      decimal_places: 0,
    });
    const item = (
      await admin('POST', '/v1/reward-items', {
        name: '1 coin',
        reward_type: 'currency',
        payload: { currency_id: 'coins', amount: 1 },
      })
    ).body.item_id as string;
    const def = (
      await admin('POST', '/v1/coupons', {
        name: 'bench',
        config: {
          reward_item_id: item,
          code_format: 'random',
          code_length: 10,
          usage_limit: { limit_type: 'unlimited' },
        },
      })
    ).body.id as string;

    // 1. Generation through the gateway (fetch directly: no response check on the timed call).
    const users = Array.from({ length: USERS }, (_, i) => `bench-user-${i}`);
    let t = performance.now();
    const res = await fetch(`${app.url.admin}/v1/coupons/${def}/generate?tenant_id=${tenant.id}`, {
      method: 'POST',
      headers: { 'x-api-key': key, 'content-type': 'application/json' },
      body: JSON.stringify({ user_ids: users }),
    });
    const out = (await res.json()) as {
      generated: number;
      coupons: Array<{ user_id: string; code: string }>;
    };
    const generateMs = performance.now() - t;
    if (res.status !== 200 || out.generated !== USERS) throw new Error(`generate answered ${res.status}`);

    // Baseline: the same rows, bare SQL, same store (another definition of the same tenant).
    const sql = app.ctx.adapters.sql;
    const def2 = (
      await admin('POST', '/v1/coupons', {
        name: 'baseline',
        config: {
          reward_item_id: item,
          code_format: 'random',
          code_length: 10,
          usage_limit: { limit_type: 'unlimited' },
        },
      })
    ).body.id as string;
    const codes = randomCodes(systemRandom, USERS, 10, 'B');
    const ids = users.map(() => systemRandom.uuid());
    t = performance.now();
    await sql.tx(async (q) => {
      for (let i = 0; i < USERS; i += 10000) {
        const e = Math.min(USERS, i + 10000);
        await q.query(
          `INSERT INTO coupon_codes (tenant_id, code_key, code, definition_id, coupon_id)
           SELECT $1, u.k, u.code, $2, u.id FROM unnest($3::text[], $4::text[], $5::text[]) AS u(id, code, k)`,
          [tenant.id, def2, ids.slice(i, e), codes.slice(i, e), codes.slice(i, e).map(codeKey)],
        );
        await q.query(
          `INSERT INTO user_coupons (tenant_id, id, definition_id, user_id, code, shared, status, generated_at, source)
           SELECT $1, u.id, $2, u.user_id, u.code, false, 'active', $3, 'admin'
           FROM unnest($4::text[], $5::text[], $6::text[]) AS u(id, user_id, code)`,
          [tenant.id, def2, Date.now(), ids.slice(i, e), users.slice(i, e), codes.slice(i, e)],
        );
      }
    });
    const baselineMs = performance.now() - t;

    // 2. Redemption rps, then the grant baseline, same concurrency and duration.
    const loop = async (next: () => Promise<number>) => {
      const end = performance.now() + SECONDS * 1000;
      let ok = 0;
      let n = 0;
      await Promise.all(
        Array.from({ length: CONC }, async () => {
          while (performance.now() < end) {
            const status = await next();
            n++;
            if (status === 200) ok++;
          }
        }),
      );
      return { rps: n / SECONDS, ok };
    };
    let at = 0;
    const redeem = await loop(async () => {
      const c = out.coupons[at++ % out.coupons.length]!;
      const r = await fetch(`${app.url.query}/v1/coupons/redeem/${c.code}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ user_id: c.user_id }),
      });
      await r.arrayBuffer();
      return r.status;
    });
    let g = 0;
    const grant = await loop(async () => {
      const r = await fetch(`${app.url.admin}/v1/wallet/grant?tenant_id=${tenant.id}`, {
        method: 'POST',
        headers: { 'x-api-key': key, 'content-type': 'application/json' },
        body: JSON.stringify({ user_id: `bench-user-${g++ % USERS}`, currency_id: 'coins', amount: 1 }),
      });
      await r.arrayBuffer();
      return r.status;
    });
    return {
      shape,
      users: USERS,
      generate_ms: Math.round(generateMs),
      generate_codes_per_s: Math.round(USERS / (generateMs / 1000)),
      baseline_insert_ms: Math.round(baselineMs),
      baseline_rows_per_s: Math.round(USERS / (baselineMs / 1000)),
      redeem_rps: Math.round(redeem.rps),
      redeem_ok: redeem.ok,
      baseline_grant_rps: Math.round(grant.rps),
    };
  } finally {
    await app.stop();
  }
}

async function main() {
  const results: ShapeResult[] = [];
  for (const shape of SHAPES) {
    process.stderr.write(`[coupons bench] ${shape}: ${USERS} users ...\n`);
    results.push(await run(shape));
  }
  const lines = [
    '| shape | generate N codes (one request) | codes/s | baseline: bare SQL insert of the same rows | rows/s | ratio | redeem req/s | baseline: wallet grant req/s | ratio |',
    '|---|---|---|---|---|---|---|---|---|',
    ...results.map(
      (r) =>
        `| ${r.shape} | ${r.users} in ${r.generate_ms} ms | ${r.generate_codes_per_s} | ${r.baseline_insert_ms} ms | ${r.baseline_rows_per_s} | ${(r.baseline_insert_ms / r.generate_ms).toFixed(2)} | ${r.redeem_rps} | ${r.baseline_grant_rps} | ${(r.redeem_rps / r.baseline_grant_rps).toFixed(2)} |`,
    ),
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  writeFileSync(
    join(__dirname, 'results', 'coupons.json'),
    `${JSON.stringify({ at: new Date().toISOString(), seconds: SECONDS, concurrency: CONC, note: 'busy machine, 5 builders running', results }, null, 2)}\n`,
  );
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`${String(err?.stack ?? err)}\n`);
    process.exit(1);
  },
);
