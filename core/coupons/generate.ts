/**
 * Generating user coupons, set-based: one INSERT ... SELECT FROM unnest(...) per chunk of codes
 * and one per chunk of coupons, in the caller's transaction (all or nothing).
 *
 * - random format: codes from the cryptographic source (./codes.ts); a code already taken in the
 *   tenant (ignoring case), or twice in the batch, is drawn again, at most MAX_ROUNDS times;
 * - custom format with `custom_codes`: the given code per user; one already taken refuses the
 *   whole request (`code_taken`);
 * - custom format without them: every user gets a coupon of the definition's shared custom_code
 *   (once per user: a user who holds it already is left as is).
 *
 * `source_keys` (automatic generation) name the outcome each coupon is for: an outcome that
 * already has its coupon of the definition generates nothing.
 */
import type { Queryable } from '../../adapters/sql/types';
import type { Random } from '../random';
import { codeKey, randomCodes } from './codes';
import type { DefinitionRow } from './definitions';
import { CouponError } from './errors';

/** Rows per statement. */
const CHUNK = 10000;
/** Draws of the colliding codes before giving up (each collision is rare: see docs/coupons.md). */
const MAX_ROUNDS = 8;

export interface GeneratedCoupon {
  user_id: string;
  code: string;
  coupon_id: string;
  /** False for a shared code the user already held, or an outcome that had its coupon. */
  created: boolean;
  /** The outcome it was generated for (automatic generation), else null. */
  source_key: string | null;
}

export interface GenerateOptions {
  custom_codes?: string[];
  /** `admin`, or the trigger of automatic generation. */
  source: string;
  /** One per user: the outcome's unique key (automatic generation). */
  source_keys?: string[];
  now: number;
}

export async function generateCoupons(
  q: Queryable,
  random: Random,
  def: DefinitionRow,
  userIds: string[],
  o: GenerateOptions,
): Promise<{ generated: number; coupons: GeneratedCoupon[] }> {
  let users = userIds;
  let keys = o.source_keys;
  let customCodes = o.custom_codes;
  const skipped: GeneratedCoupon[] = [];
  if (keys) {
    // Outcomes that already have their coupon (a retried cause): nothing new for them.
    const seen = await q.query<{ source_key: string; user_id: string; code: string; id: string }>(
      `SELECT source_key, user_id, code, id FROM user_coupons
       WHERE tenant_id = $1 AND definition_id = $2 AND source_key = ANY($3::text[])`,
      [def.tenant_id, def.id, keys],
    );
    const done = new Map(seen.rows.map((r) => [r.source_key, r]));
    const keep = keys.map((k) => !done.has(k));
    for (const r of done.values())
      skipped.push({
        user_id: r.user_id,
        code: r.code,
        coupon_id: r.id,
        created: false,
        source_key: r.source_key,
      });
    users = users.filter((_, i) => keep[i]);
    keys = keys.filter((_, i) => keep[i]);
    if (customCodes) customCodes = customCodes.filter((_, i) => keep[i]);
  }
  if (users.length === 0) return { generated: 0, coupons: skipped };
  const c = def.config;
  if (c.code_format === 'custom' && !customCodes) {
    const out = await insertShared(q, random, def, users, c.custom_code!, o.source, keys, o.now);
    return { generated: out.filter((x) => x.created).length, coupons: [...skipped, ...out] };
  }
  const ids = users.map(() => random.uuid());
  const codes = customCodes
    ? await claimCustom(q, def, ids, customCodes)
    : await claimRandom(q, random, def, ids, c.code_length, c.code_prefix ?? '');
  for (let i = 0; i < users.length; i += CHUNK) {
    const end = Math.min(users.length, i + CHUNK);
    await q.query(
      `INSERT INTO user_coupons (tenant_id, id, definition_id, user_id, code, shared, status, generated_at, source, source_key)
       SELECT $1, u.id, $2, u.user_id, u.code, false, 'active', $3, $4, u.source_key
       FROM unnest($5::text[], $6::text[], $7::text[], $8::text[]) AS u(id, user_id, code, source_key)`,
      [
        def.tenant_id,
        def.id,
        o.now,
        o.source,
        ids.slice(i, end),
        users.slice(i, end),
        codes.slice(i, end),
        keys ? keys.slice(i, end) : new Array<string | null>(end - i).fill(null),
      ],
    );
  }
  const out = users.map((user_id, i) => ({
    user_id,
    code: codes[i]!,
    coupon_id: ids[i]!,
    created: true,
    source_key: keys?.[i] ?? null,
  }));
  return { generated: out.length, coupons: [...skipped, ...out] };
}

const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** Registers codes for coupon ids; returns the keys that were free (inserted). */
async function register(
  q: Queryable,
  def: DefinitionRow,
  ids: string[],
  codes: string[],
): Promise<Set<string>> {
  const free = new Set<string>();
  // In key order: two requests inserting overlapping codes wait on each other in one order, never
  // in a cycle (a deadlock).
  const keys = codes.map(codeKey);
  const order = ids.map((_, i) => i).sort((x, y) => cmp(keys[x]!, keys[y]!));
  for (let i = 0; i < order.length; i += CHUNK) {
    const part = order.slice(i, i + CHUNK);
    const r = await q.query<{ code_key: string }>(
      `INSERT INTO coupon_codes (tenant_id, code_key, code, definition_id, coupon_id)
       SELECT $1, lower(u.code), u.code, $2, u.id FROM unnest($3::text[], $4::text[]) WITH ORDINALITY AS u(id, code, n)
       ORDER BY u.n
       ON CONFLICT (tenant_id, code_key) DO NOTHING RETURNING code_key`,
      [def.tenant_id, def.id, part.map((x) => ids[x]!), part.map((x) => codes[x]!)],
    );
    for (const x of r.rows) free.add(x.code_key);
  }
  return free;
}

/** Random codes for every id, unique in the tenant; colliding ones are drawn again. */
async function claimRandom(
  q: Queryable,
  random: Random,
  def: DefinitionRow,
  ids: string[],
  length: number,
  prefix: string,
): Promise<string[]> {
  const codes = new Array<string>(ids.length);
  let pending = ids.map((_, i) => i);
  for (let round = 0; pending.length > 0; round++) {
    if (round === MAX_ROUNDS)
      throw new CouponError(
        'codes_exhausted',
        `Could not find ${pending.length} free codes of length ${length} after ${MAX_ROUNDS} draws; use a longer code_length`,
      );
    const drawn = randomCodes(random, pending.length, length, prefix);
    // A code drawn twice in this batch goes to the first index only; the others draw again.
    const inBatch = new Set<string>();
    const tryIdx: number[] = [];
    const again: number[] = [];
    pending.forEach((idx, j) => {
      const k = codeKey(drawn[j]!);
      if (inBatch.has(k)) again.push(idx);
      else {
        inBatch.add(k);
        codes[idx] = drawn[j]!;
        tryIdx.push(idx);
      }
    });
    const free = await register(
      q,
      def,
      tryIdx.map((i) => ids[i]!),
      tryIdx.map((i) => codes[i]!),
    );
    for (const idx of tryIdx) if (!free.has(codeKey(codes[idx]!))) again.push(idx);
    pending = again;
  }
  return codes;
}

/** The given codes, all or nothing: one that is taken or repeated refuses the request. */
async function claimCustom(
  q: Queryable,
  def: DefinitionRow,
  ids: string[],
  codes: string[],
): Promise<string[]> {
  const seen = new Set<string>();
  for (const code of codes) {
    const k = codeKey(code);
    if (seen.has(k))
      throw new CouponError(
        'code_taken',
        `body.custom_codes: ${code} appears twice (codes are unique ignoring case)`,
      );
    seen.add(k);
  }
  const free = await register(q, def, ids, codes);
  const taken = codes.filter((code) => !free.has(codeKey(code)));
  if (taken.length)
    throw new CouponError(
      'code_taken',
      `body.custom_codes: ${taken.slice(0, 10).join(', ')}${taken.length > 10 ? ` and ${taken.length - 10} more` : ''} already used in this tenant`,
    );
  return codes;
}

/** Coupons of the shared code, one per user (a user holding it already keeps the one it has). */
async function insertShared(
  q: Queryable,
  random: Random,
  def: DefinitionRow,
  users: string[],
  code: string,
  source: string,
  keys: string[] | undefined,
  now: number,
): Promise<GeneratedCoupon[]> {
  // Sorted: concurrent requests for overlapping users lock their rows in one order.
  const unique = [...new Set(users)].sort(cmp);
  const keyOf = new Map<string, string | null>();
  users.forEach((u, i) => {
    if (!keyOf.has(u)) keyOf.set(u, keys?.[i] ?? null);
  });
  const created = new Map<string, string>();
  for (let i = 0; i < unique.length; i += CHUNK) {
    const part = unique.slice(i, i + CHUNK);
    const r = await q.query<{ id: string; user_id: string }>(
      `INSERT INTO user_coupons (tenant_id, id, definition_id, user_id, code, shared, status, generated_at, source, source_key)
       SELECT $1, u.id, $2, u.user_id, $3, true, 'active', $4, $5, u.source_key
       FROM unnest($6::text[], $7::text[], $8::text[]) WITH ORDINALITY AS u(id, user_id, source_key, n)
       ORDER BY u.n
       ON CONFLICT DO NOTHING RETURNING id, user_id`,
      [
        def.tenant_id,
        def.id,
        code,
        now,
        source,
        part.map(() => random.uuid()),
        part,
        part.map((u) => keyOf.get(u) ?? null),
      ],
    );
    for (const x of r.rows) created.set(x.user_id, x.id);
  }
  const held = await q.query<{ id: string; user_id: string }>(
    `SELECT id, user_id FROM user_coupons
     WHERE tenant_id = $1 AND definition_id = $2 AND shared AND lower(code) = $3 AND user_id = ANY($4::text[])`,
    [def.tenant_id, def.id, codeKey(code), unique],
  );
  const idOf = new Map(held.rows.map((x) => [x.user_id, x.id]));
  const first = new Set<string>();
  return users.map((user_id) => {
    const isNew = created.has(user_id) && !first.has(user_id);
    first.add(user_id);
    return {
      user_id,
      code,
      coupon_id: idOf.get(user_id) ?? created.get(user_id)!,
      created: isNew,
      source_key: keyOf.get(user_id) ?? null,
    };
  });
}
