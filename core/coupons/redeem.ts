/**
 * Validating and redeeming codes (SPEC.md "Query: coupons", "User coupon" states), and the
 * user's reads. A redemption is one transaction: the user coupon's row lock, the limits (a
 * conditional upsert of the user's usage row for per_user, a conditional UPDATE of the
 * definition row for global: concurrent redemptions queue on those rows and each sees the
 * count the previous one left), the move to redeemed, the grant through the granting service,
 * the journal row and the `coupon.redeemed` fact (whose outbox subscriber enqueues the webhook).
 */
import type { Queryable } from '../../adapters/sql/types';
import type { FactBus } from '../facts';
import type { Random } from '../random';
import type { Granter } from '../rewards/grant';
import { getItem } from '../rewards/items';
import { codeKey } from './codes';
import { getDefinition, usesPerUser, view, type CouponDefinition, type DefinitionRow } from './definitions';
import { couponErrors } from './errors';

export interface UserCoupon {
  id: string;
  definition_id: string;
  definition_name: string;
  tenant_id: string;
  user_id: string;
  code: string;
  status: 'active' | 'redeemed';
  generated_at: string;
  expires_at: string | null;
  redeemed_at: string | null;
  redemption_count: number;
}

export interface RewardItemView {
  item_id: string;
  name: string;
  reward_type: string;
  payload: Record<string, unknown>;
}

interface CouponRow {
  tenant_id: string;
  id: string;
  definition_id: string;
  user_id: string;
  code: string;
  shared: boolean;
  status: 'active' | 'redeemed';
  generated_at: string | number;
  redeemed_at: string | number | null;
  redemption_count: number;
}

const iso = (ms: string | number | null) => (ms === null ? null : new Date(Number(ms)).toISOString());

function toCoupon(r: CouponRow, def: { name: string; expires_at: string | null }): UserCoupon {
  return {
    id: r.id,
    definition_id: r.definition_id,
    definition_name: def.name,
    tenant_id: r.tenant_id,
    user_id: r.user_id,
    code: r.code,
    status: r.status,
    generated_at: iso(r.generated_at)!,
    expires_at: def.expires_at,
    redeemed_at: iso(r.redeemed_at),
    redemption_count: Number(r.redemption_count),
  };
}

const couponOf = (r: CouponRow, d: DefinitionRow) =>
  toCoupon(r, { name: d.name, expires_at: d.config.expires_at ?? null });

interface Resolved {
  def: DefinitionRow;
  /** The code as stored. */
  code: string;
  shared: boolean;
  /** The user's coupon of the code (null: a shared code the user has not redeemed yet, or no user given). */
  coupon: CouponRow | null;
}

/**
 * Resolves a code for a user (or for nobody) and checks everything but the limits, throwing the
 * CouponError of the first rule that fails. `lock` takes the coupon row for update.
 */
async function resolve(
  q: Queryable,
  tenantId: string,
  code: string,
  userId: string | undefined,
  now: number,
  lock: boolean,
): Promise<Resolved> {
  const r = await q.query<{ code: string; definition_id: string; coupon_id: string | null }>(
    'SELECT code, definition_id, coupon_id FROM coupon_codes WHERE tenant_id = $1 AND code_key = $2',
    [tenantId, codeKey(code)],
  );
  const row = r.rows[0];
  if (!row) throw couponErrors.unknown();
  const def = await getDefinition(q, tenantId, row.definition_id);
  if (!def || (def.config.case_sensitive && row.code !== code)) throw couponErrors.unknown();
  if (def.status === 'paused') throw couponErrors.paused();
  if (def.status === 'archived') throw couponErrors.archived();
  const c = def.config;
  if (c.starts_at !== undefined && now < Date.parse(c.starts_at)) throw couponErrors.notStarted(c.starts_at);
  if (c.expires_at !== undefined && now >= Date.parse(c.expires_at)) throw couponErrors.expired(c.expires_at);
  const forUpdate = lock ? ' FOR UPDATE' : '';
  let coupon: CouponRow | null = null;
  if (row.coupon_id !== null) {
    const x = await q.query<CouponRow>(
      `SELECT * FROM user_coupons WHERE tenant_id = $1 AND id = $2${forUpdate}`,
      [tenantId, row.coupon_id],
    );
    coupon = x.rows[0] ?? null;
    if (!coupon) throw couponErrors.unknown();
    if (userId !== undefined && coupon.user_id !== userId) throw couponErrors.notYours();
  } else if (userId !== undefined) {
    coupon = await sharedCoupon(q, def, row.code, userId, forUpdate);
  }
  if (coupon?.status === 'redeemed') throw couponErrors.redeemed();
  return { def, code: row.code, shared: row.coupon_id === null, coupon };
}

async function sharedCoupon(
  q: Queryable,
  def: DefinitionRow,
  code: string,
  userId: string,
  forUpdate: string,
): Promise<CouponRow | null> {
  const x = await q.query<CouponRow>(
    `SELECT * FROM user_coupons WHERE tenant_id = $1 AND definition_id = $2 AND user_id = $3 AND shared AND lower(code) = $4${forUpdate}`,
    [def.tenant_id, def.id, userId, codeKey(code)],
  );
  return x.rows[0] ?? null;
}

/** The user's redemptions of a definition so far. */
async function userUses(q: Queryable, def: DefinitionRow, userId: string): Promise<number> {
  const r = await q.query<{ uses: number }>(
    'SELECT uses FROM coupon_usage WHERE tenant_id = $1 AND definition_id = $2 AND user_id = $3',
    [def.tenant_id, def.id, userId],
  );
  return Number(r.rows[0]?.uses ?? 0);
}

export interface Validation {
  valid: boolean;
  coupon: UserCoupon | null;
  definition: CouponDefinition | null;
  error: string | null;
}

/**
 * Whether `code` can be redeemed (by `userId` when given) now: SPEC.md's `{valid, coupon,
 * definition, error}`. Throws only unexpected errors; a CouponError becomes `error`, and
 * `failure` tells the caller that it was one (failed attempts are counted against guessing).
 */
export async function validateCode(
  q: Queryable,
  tenantId: string,
  code: string,
  userId: string | undefined,
  now: number,
): Promise<Validation> {
  const r = await resolve(q, tenantId, code, userId, now, false);
  const u = r.def.config.usage_limit;
  if (u.limit_type === 'global' && r.def.uses >= u.max_uses!) throw couponErrors.globalLimit(u.max_uses!);
  if (
    u.limit_type === 'per_user' &&
    userId !== undefined &&
    (await userUses(q, r.def, userId)) >= u.max_uses!
  )
    throw couponErrors.userLimit(u.max_uses!);
  return {
    valid: true,
    coupon: r.coupon ? couponOf(r.coupon, r.def) : null,
    definition: view(r.def),
    error: null,
  };
}

export interface RedeemDeps {
  granter: Granter;
  facts: FactBus;
  random: Random;
}

/** Redeems `code` for `userId` in the transaction `q` (see the module comment). */
export async function redeemCode(
  q: Queryable,
  deps: RedeemDeps,
  tenantId: string,
  code: string,
  userId: string,
  now: number,
): Promise<UserCoupon & { reward_item: RewardItemView }> {
  const r = await resolve(q, tenantId, code, userId, now, true);
  const { def } = r;
  let coupon = r.coupon;
  if (!coupon) {
    // A shared code's first redemption by this user: its coupon is created here (and locked).
    await q.query(
      `INSERT INTO user_coupons (tenant_id, id, definition_id, user_id, code, shared, status, generated_at, source)
       VALUES ($1, $2, $3, $4, $5, true, 'active', $6, 'redeem') ON CONFLICT DO NOTHING`,
      [tenantId, deps.random.uuid(), def.id, userId, r.code, now],
    );
    coupon = await sharedCoupon(q, def, r.code, userId, ' FOR UPDATE');
    if (!coupon) throw couponErrors.unknown();
    if (coupon.status === 'redeemed') throw couponErrors.redeemed();
  }
  const u = def.config.usage_limit;
  let usedByUser = Number(coupon.redemption_count) + 1;
  if (u.limit_type === 'per_user') {
    const x = await q.query<{ uses: number }>(
      `INSERT INTO coupon_usage AS cu (tenant_id, definition_id, user_id, uses) VALUES ($1, $2, $3, 1)
       ON CONFLICT (tenant_id, definition_id, user_id) DO UPDATE SET uses = cu.uses + 1 WHERE cu.uses < $4
       RETURNING uses`,
      [tenantId, def.id, userId, u.max_uses],
    );
    if (!x.rows[0]) throw couponErrors.userLimit(u.max_uses!);
    usedByUser = Number(x.rows[0].uses);
  } else if (u.limit_type === 'global') {
    const x = await q.query(
      'UPDATE coupon_definitions SET uses = uses + 1 WHERE tenant_id = $1 AND id = $2 AND uses < $3 RETURNING uses',
      [tenantId, def.id, u.max_uses],
    );
    if (!x.rows[0]) throw couponErrors.globalLimit(u.max_uses!);
  }
  const n = Number(coupon.redemption_count) + 1;
  const status = usedByUser >= usesPerUser(def.config) ? 'redeemed' : 'active';
  const updated = await q.query<CouponRow>(
    `UPDATE user_coupons SET redemption_count = $3, redeemed_at = $4, status = $5
     WHERE tenant_id = $1 AND id = $2 RETURNING *`,
    [tenantId, coupon.id, n, now, status],
  );
  const item = await getItem(q, tenantId, def.config.reward_item_id);
  if (!item) throw couponErrors.rewardFailed(`reward item ${def.config.reward_item_id} does not exist`);
  const [granted] = await deps.granter.grant(q, {
    tenant_id: tenantId,
    user_id: userId,
    items: [item],
    source_type: 'coupon',
    source_ref: coupon.id,
    grant_key: `coupon:${coupon.id}:${n}`,
    now,
  });
  if (granted?.status === 'failed')
    throw couponErrors.rewardFailed(`the wallet refused the credit of ${JSON.stringify(item.payload)}`);
  const reward_item: RewardItemView = {
    item_id: item.item_id,
    name: item.name,
    reward_type: item.reward_type,
    payload: item.payload,
  };
  const redemptionId = deps.random.uuid();
  await q.query(
    `INSERT INTO coupon_redemptions (tenant_id, id, coupon_id, definition_id, user_id, code, reward_item, redeemed_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [tenantId, redemptionId, coupon.id, def.id, userId, coupon.code, JSON.stringify(reward_item), now],
  );
  await deps.facts.emit(q, 'coupon.redeemed', [
    {
      tenant_id: tenantId,
      user_id: userId,
      definition_id: def.id,
      coupon_id: coupon.id,
      redemption_id: redemptionId,
      code: coupon.code,
      reward_item_id: item.item_id,
      reward_item,
      now,
    },
  ]);
  return { ...couponOf(updated.rows[0]!, def), reward_item };
}

const COUPON_SELECT = `SELECT uc.*, d.name AS definition_name, d.config->>'expires_at' AS def_expires_at
  FROM user_coupons uc JOIN coupon_definitions d ON d.tenant_id = uc.tenant_id AND d.id = uc.definition_id`;

type JoinedRow = CouponRow & { definition_name: string; def_expires_at: string | null };

const fromJoined = (r: JoinedRow) => toCoupon(r, { name: r.definition_name, expires_at: r.def_expires_at });

/** A user's coupons, newest first. */
export async function userCoupons(
  q: Queryable,
  tenantId: string,
  userId: string,
  limit: number,
  offset: number,
) {
  const total = await q.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM user_coupons WHERE tenant_id = $1 AND user_id = $2',
    [tenantId, userId],
  );
  const r = await q.query<JoinedRow>(
    `${COUPON_SELECT} WHERE uc.tenant_id = $1 AND uc.user_id = $2 ORDER BY uc.generated_at DESC, uc.id LIMIT $3 OFFSET $4`,
    [tenantId, userId, limit, offset],
  );
  return { coupons: r.rows.map(fromJoined), total: total.rows[0]?.n ?? 0 };
}

export async function userCoupon(q: Queryable, tenantId: string, userId: string, id: string) {
  const r = await q.query<JoinedRow>(
    `${COUPON_SELECT} WHERE uc.tenant_id = $1 AND uc.user_id = $2 AND uc.id = $3`,
    [tenantId, userId, id],
  );
  return r.rows[0] ? fromJoined(r.rows[0]) : null;
}

/** A user's redemptions, newest first. */
export async function redemptions(
  q: Queryable,
  tenantId: string,
  userId: string,
  limit: number,
  offset: number,
) {
  const total = await q.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM coupon_redemptions WHERE tenant_id = $1 AND user_id = $2',
    [tenantId, userId],
  );
  const r = await q.query<{
    id: string;
    definition_id: string;
    definition_name: string;
    code: string;
    redeemed_at: string | number;
    reward_item: RewardItemView;
  }>(
    `SELECT r.id, r.definition_id, d.name AS definition_name, r.code, r.redeemed_at, r.reward_item
     FROM coupon_redemptions r JOIN coupon_definitions d ON d.tenant_id = r.tenant_id AND d.id = r.definition_id
     WHERE r.tenant_id = $1 AND r.user_id = $2 ORDER BY r.redeemed_at DESC, r.id LIMIT $3 OFFSET $4`,
    [tenantId, userId, limit, offset],
  );
  return {
    redemptions: r.rows.map((x) => ({
      id: x.id,
      definition_id: x.definition_id,
      definition_name: x.definition_name,
      code: x.code,
      redeemed_at: iso(x.redeemed_at)!,
      reward_item: x.reward_item,
    })),
    total: total.rows[0]?.n ?? 0,
  };
}
