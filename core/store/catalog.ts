/**
 * Catalog rewards (SPEC.md "Catalog reward"): what a user can buy in the store or be granted.
 * Stock is kept in `catalog_stock` (one row per reward, variant `default`, and per variant with a
 * stock; no row: unlimited), so a purchase takes a unit with one conditional UPDATE
 * (`takeStock`). docs/store.md.
 */
import type { Queryable } from '../../adapters/sql/types';
import { systemRandom, type Random } from '../random';
import { regexProblem, safeTest } from './safe-regex';

export const DEFAULT_VARIANT = 'default';

/** A patterned text field's value is at most this long (docs/store.md "Field patterns"). */
export const MAX_PATTERNED_LENGTH = 256;
/** Any submitted field value is at most this long. */
export const MAX_FIELD_VALUE_LENGTH = 2000;

export interface FieldDef {
  name: string;
  label: string;
  required?: boolean;
  type?: 'text' | 'select';
  pattern?: string;
  min_length?: number;
  max_length?: number;
  multiline?: boolean;
  placeholder?: string;
  options?: Array<{ value: string; label: string }>;
}

export interface Fulfillment {
  type: 'wallet' | 'manual' | 'api';
  item_type?: 'xp' | 'badge';
  amount?: number;
  item_id?: string;
  notes?: string;
  retry?: { max_attempts?: number; backoff_seconds?: number[] };
}

export interface Price {
  currency: string;
  amount: number;
}

export interface Purchase {
  prices: Price[];
}

export interface Variant {
  variant_id: string;
  label: string;
  purchase?: Purchase | null;
  stock?: number | null;
}

export interface CatalogReward {
  id: string;
  tenant_id: string;
  slug: string;
  name: string;
  description: string | null;
  image_url: string | null;
  active: boolean;
  fields: FieldDef[];
  fulfillment: Fulfillment;
  requires_claim: boolean;
  purchase: Purchase | null;
  stock: number | null;
  config: Record<string, unknown>;
  variants: Variant[];
  created_at: string;
  updated_at: string;
}

/** What create and update take (update: every field optional). */
export interface CatalogInput {
  slug?: string;
  name?: string;
  description?: string | null;
  image_url?: string | null;
  active?: boolean;
  fields?: FieldDef[];
  fulfillment?: Fulfillment;
  requires_claim?: boolean;
  purchase?: Purchase | null;
  stock?: number | null;
  config?: Record<string, unknown>;
  variants?: Variant[];
}

interface Row {
  tenant_id: string;
  id: string;
  slug: string;
  name: string;
  description: string | null;
  image_url: string | null;
  active: boolean;
  fields: FieldDef[];
  fulfillment: Fulfillment;
  requires_claim: boolean;
  purchase: Purchase | null;
  config: Record<string, unknown>;
  variants: Array<Omit<Variant, 'stock'>>;
  created_at: string | Date;
  updated_at: string | Date;
  stock: Record<string, number> | null;
}

const SELECT = `SELECT r.*, (SELECT jsonb_object_agg(s.variant_id, s.remaining) FROM catalog_stock s
  WHERE s.tenant_id = r.tenant_id AND s.reward_id = r.id) AS stock FROM catalog_rewards r`;

const toReward = (r: Row): CatalogReward => {
  const stock = r.stock ?? {};
  return {
    id: r.id,
    tenant_id: r.tenant_id,
    slug: r.slug,
    name: r.name,
    description: r.description,
    image_url: r.image_url,
    active: r.active,
    fields: r.fields,
    fulfillment: r.fulfillment,
    requires_claim: r.requires_claim,
    purchase: r.purchase,
    stock: stock[DEFAULT_VARIANT] ?? null,
    config: r.config,
    variants: r.variants.map((v) => ({ ...v, stock: stock[v.variant_id] ?? null })),
    created_at: new Date(r.created_at).toISOString(),
    updated_at: new Date(r.updated_at).toISOString(),
  };
};

/**
 * Checks what the schema cannot say; the first problem as a message naming the field, or null.
 * `merged` is the reward as it will be stored (create: the input; update: the input over the
 * current reward). Currencies are checked by the caller (they need the store).
 */
export function catalogProblem(merged: CatalogInput): string | null {
  const names = new Set<string>();
  for (const [i, f] of (merged.fields ?? []).entries()) {
    const at = `body.fields[${i}]`;
    if (names.has(f.name)) return `${at}.name: ${f.name} is defined twice`;
    names.add(f.name);
    const type = f.type ?? 'text';
    if (type === 'select') {
      if (!f.options || f.options.length === 0)
        return `${at}.options: a select field needs at least one option`;
      for (const k of ['pattern', 'min_length', 'max_length', 'multiline'] as const)
        if (f[k] !== undefined) return `${at}.${k} is only for text fields`;
      const values = new Set<string>();
      for (const [j, o] of f.options.entries()) {
        if (values.has(o.value)) return `${at}.options[${j}].value: ${o.value} is listed twice`;
        values.add(o.value);
      }
    } else {
      if (f.options !== undefined) return `${at}.options is only for select fields`;
      if (f.min_length !== undefined && f.max_length !== undefined && f.min_length > f.max_length)
        return `${at}.min_length must not be greater than max_length`;
      if (f.pattern !== undefined) {
        const p = regexProblem(f.pattern);
        if (p) return `${at}.pattern ${p}`;
        if (f.max_length !== undefined && f.max_length > MAX_PATTERNED_LENGTH)
          return `${at}.max_length must be at most ${MAX_PATTERNED_LENGTH} for a field with a pattern`;
      }
    }
  }
  const ff = merged.fulfillment;
  if (ff) {
    const only = (keys: string[]) => {
      for (const k of ['item_type', 'amount', 'item_id', 'notes', 'retry'])
        if (!keys.includes(k) && ff[k as keyof Fulfillment] !== undefined)
          return `body.fulfillment.${k} is not a field of ${ff.type} fulfilment`;
      return null;
    };
    if (ff.type === 'wallet') {
      const p = only(['item_type', 'amount', 'item_id']);
      if (p) return p;
      if (!ff.item_type) return 'body.fulfillment.item_type is required for wallet fulfilment (xp or badge)';
      if (ff.item_type === 'xp' && ff.amount === undefined)
        return 'body.fulfillment.amount is required for xp';
      if (ff.item_type === 'xp' && ff.item_id !== undefined)
        return 'body.fulfillment.item_id is only for badge';
      if (ff.item_type === 'badge' && !ff.item_id) return 'body.fulfillment.item_id is required for badge';
      if (ff.item_type === 'badge' && ff.amount !== undefined)
        return 'body.fulfillment.amount is only for xp';
    } else if (ff.type === 'manual') {
      const p = only(['notes']);
      if (p) return p;
    } else {
      const p = only(['retry']);
      if (p) return p;
      const url = merged.config?.url;
      if (typeof url !== 'string')
        return 'body.config.url is required for api fulfilment (the endpoint to call)';
    }
  }
  const purchaseProblem = (p: Purchase | null | undefined, at: string) => {
    const seen = new Set<string>();
    for (const [i, price] of (p?.prices ?? []).entries()) {
      if (seen.has(price.currency)) return `${at}.prices[${i}].currency: ${price.currency} is listed twice`;
      seen.add(price.currency);
    }
    return null;
  };
  const pp = purchaseProblem(merged.purchase, 'body.purchase');
  if (pp) return pp;
  const ids = new Set<string>();
  for (const [i, v] of (merged.variants ?? []).entries()) {
    if (ids.has(v.variant_id)) return `body.variants[${i}].variant_id: ${v.variant_id} is defined twice`;
    ids.add(v.variant_id);
    const vp = purchaseProblem(v.purchase, `body.variants[${i}].purchase`);
    if (vp) return vp;
  }
  return null;
}

/** Every price of a reward and its variants, with the field that names it. */
export function pricesOf(r: CatalogInput): Array<{ at: string; currency: string }> {
  const out: Array<{ at: string; currency: string }> = [];
  (r.purchase?.prices ?? []).forEach((p, i) =>
    out.push({ at: `body.purchase.prices[${i}].currency`, currency: p.currency }),
  );
  (r.variants ?? []).forEach((v, j) =>
    (v.purchase?.prices ?? []).forEach((p, i) =>
      out.push({ at: `body.variants[${j}].purchase.prices[${i}].currency`, currency: p.currency }),
    ),
  );
  return out;
}

/**
 * Sets the remaining stock `r` gives: the reward's when `r.stock` is given, the variants' when
 * `r.variants` is (what is not given stays as it is, so a concurrent purchase's unit is not
 * undone). Rows kept are updated in place (never deleted and re-inserted, so a purchase waiting on
 * a row finds it); rows of stock made unlimited are deleted; new ones inserted.
 */
async function writeStock(q: Queryable, tenantId: string, id: string, r: CatalogInput): Promise<void> {
  const rows: Array<[string, number]> = [];
  const gone: string[] = [];
  if (r.stock !== undefined) {
    if (r.stock === null) gone.push(DEFAULT_VARIANT);
    else rows.push([DEFAULT_VARIANT, r.stock]);
  }
  if (r.variants !== undefined) {
    const limited = r.variants.filter((v) => v.stock !== undefined && v.stock !== null);
    for (const v of limited) rows.push([v.variant_id, v.stock!]);
    await q.query(
      `DELETE FROM catalog_stock WHERE tenant_id = $1 AND reward_id = $2 AND variant_id <> $3
         AND NOT (variant_id = ANY($4::text[]))`,
      [tenantId, id, DEFAULT_VARIANT, limited.map((v) => v.variant_id)],
    );
  }
  if (gone.length)
    await q.query(
      'DELETE FROM catalog_stock WHERE tenant_id = $1 AND reward_id = $2 AND variant_id = ANY($3::text[])',
      [tenantId, id, gone],
    );
  if (rows.length === 0) return;
  await q.query(
    `INSERT INTO catalog_stock (tenant_id, reward_id, variant_id, remaining)
     SELECT $1, $2, v, n FROM unnest($3::text[], $4::int[]) AS u(v, n)
     ON CONFLICT (tenant_id, reward_id, variant_id) DO UPDATE SET remaining = EXCLUDED.remaining`,
    [tenantId, id, rows.map((x) => x[0]), rows.map((x) => x[1])],
  );
}

const variantsOnly = (vs: Variant[] | undefined) =>
  JSON.stringify((vs ?? []).map(({ stock: _stock, ...v }) => v));

export async function createReward(
  q: Queryable,
  tenantId: string,
  b: CatalogInput & { slug: string; name: string; fulfillment: Fulfillment },
  now: number,
  random: Random = systemRandom,
): Promise<CatalogReward> {
  const at = new Date(now).toISOString();
  const id = random.uuid();
  await q.query(
    `INSERT INTO catalog_rewards (tenant_id, id, slug, name, description, image_url, active, fields, fulfillment,
       requires_claim, purchase, config, variants, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $14)`,
    [
      tenantId,
      id,
      b.slug,
      b.name,
      b.description ?? null,
      b.image_url ?? null,
      b.active ?? true,
      JSON.stringify(b.fields ?? []),
      JSON.stringify(b.fulfillment),
      b.requires_claim ?? false,
      b.purchase ? JSON.stringify(b.purchase) : null,
      JSON.stringify(b.config ?? {}),
      variantsOnly(b.variants),
      at,
    ],
  );
  await writeStock(q, tenantId, id, b);
  return (await getReward(q, tenantId, id))!;
}

/**
 * Updates a reward with the fields given (the caller validated the merged result). Stock given
 * (the reward's or a variant's) replaces the remaining stock; variants given replace the list.
 */
export async function updateReward(
  q: Queryable,
  tenantId: string,
  cur: CatalogReward,
  p: CatalogInput,
  now: number,
): Promise<CatalogReward | null> {
  const m = mergeReward(cur, p);
  const r = await q.query(
    `UPDATE catalog_rewards SET slug = $3, name = $4, description = $5, image_url = $6, active = $7, fields = $8,
       fulfillment = $9, requires_claim = $10, purchase = $11, config = $12, variants = $13, updated_at = $14
     WHERE tenant_id = $1 AND id = $2`,
    [
      tenantId,
      cur.id,
      m.slug,
      m.name,
      m.description,
      m.image_url,
      m.active,
      JSON.stringify(m.fields),
      JSON.stringify(m.fulfillment),
      m.requires_claim,
      m.purchase ? JSON.stringify(m.purchase) : null,
      JSON.stringify(m.config),
      variantsOnly(m.variants),
      new Date(now).toISOString(),
    ],
  );
  if (r.rowCount === 0) return null;
  await writeStock(q, tenantId, cur.id, p);
  return getReward(q, tenantId, cur.id);
}

/** The reward as it will be after an update with `p`. */
export function mergeReward(cur: CatalogReward, p: CatalogInput): CatalogReward {
  const defined = Object.fromEntries(Object.entries(p).filter(([, v]) => v !== undefined));
  return { ...cur, ...defined } as CatalogReward;
}

export async function getReward(q: Queryable, tenantId: string, id: string): Promise<CatalogReward | null> {
  const r = await q.query<Row>(`${SELECT} WHERE r.tenant_id = $1 AND r.id = $2`, [tenantId, id]);
  return r.rows[0] ? toReward(r.rows[0]) : null;
}

export async function getRewardBySlug(
  q: Queryable,
  tenantId: string,
  slug: string,
): Promise<CatalogReward | null> {
  const r = await q.query<Row>(`${SELECT} WHERE r.tenant_id = $1 AND r.slug = $2`, [tenantId, slug]);
  return r.rows[0] ? toReward(r.rows[0]) : null;
}

export async function listRewards(
  q: Queryable,
  tenantId: string,
  f: { active?: boolean; limit: number; offset: number },
): Promise<{ rewards: CatalogReward[]; total: number }> {
  const where = 'r.tenant_id = $1 AND ($2::boolean IS NULL OR r.active = $2)';
  const params = [tenantId, f.active ?? null];
  const [rows, total] = await Promise.all([
    q.query<Row>(`${SELECT} WHERE ${where} ORDER BY r.created_at, r.id LIMIT $3 OFFSET $4`, [
      ...params,
      f.limit,
      f.offset,
    ]),
    q.query<{ n: number }>(`SELECT count(*)::int AS n FROM catalog_rewards r WHERE ${where}`, params),
  ]);
  return { rewards: rows.rows.map(toReward), total: total.rows[0]?.n ?? 0 };
}

/** Soft delete: the reward is deactivated (orders keep it). */
export async function deactivateReward(
  q: Queryable,
  tenantId: string,
  id: string,
  now: number,
): Promise<CatalogReward | null> {
  const r = await q.query(
    'UPDATE catalog_rewards SET active = false, updated_at = $3 WHERE tenant_id = $1 AND id = $2',
    [tenantId, id, new Date(now).toISOString()],
  );
  return r.rowCount ? getReward(q, tenantId, id) : null;
}

/**
 * Takes one unit of a reward's (or variant's) stock: 'unlimited' when it has no stock row,
 * 'taken' when a unit was left (one conditional UPDATE: concurrent takers serialise on the row
 * and never go below zero), 'out' when none was.
 */
export async function takeStock(
  q: Queryable,
  tenantId: string,
  rewardId: string,
  variantId: string,
): Promise<'unlimited' | 'taken' | 'out'> {
  const r = await q.query(
    `UPDATE catalog_stock SET remaining = remaining - 1
     WHERE tenant_id = $1 AND reward_id = $2 AND variant_id = $3 AND remaining > 0`,
    [tenantId, rewardId, variantId],
  );
  if (r.rowCount > 0) return 'taken';
  const exists = await q.query(
    'SELECT 1 FROM catalog_stock WHERE tenant_id = $1 AND reward_id = $2 AND variant_id = $3',
    [tenantId, rewardId, variantId],
  );
  return exists.rows.length > 0 ? 'out' : 'unlimited';
}

/** Gives a unit back (expiry, refund); a stock made unlimited since stays so. */
export async function returnStock(
  q: Queryable,
  tenantId: string,
  rewardId: string,
  variantId: string,
): Promise<void> {
  await q.query(
    'UPDATE catalog_stock SET remaining = remaining + 1 WHERE tenant_id = $1 AND reward_id = $2 AND variant_id = $3',
    [tenantId, rewardId, variantId],
  );
}

/** The prices of a reward or one of its variants (a variant without prices: the reward's). */
export function pricesFor(r: CatalogReward, variantId: string): Price[] {
  if (variantId === DEFAULT_VARIANT) return r.purchase?.prices ?? [];
  const v = r.variants.find((x) => x.variant_id === variantId);
  return v?.purchase?.prices ?? r.purchase?.prices ?? [];
}

/** Problems of submitted field values against a reward's definitions: field name → message. */
export function fieldProblems(defs: FieldDef[], values: Record<string, unknown>): Record<string, string> {
  const out: Record<string, string> = {};
  const known = new Set(defs.map((d) => d.name));
  for (const k of Object.keys(values)) if (!known.has(k)) out[k] = `${k} is not a field of this reward`;
  for (const d of defs) {
    const v = values[d.name];
    const label = d.label || d.name;
    if (v === undefined || v === null || v === '') {
      if (d.required) out[d.name] = `${label} is required`;
      continue;
    }
    if (typeof v !== 'string') {
      out[d.name] = `${label} must be a string`;
      continue;
    }
    if ((d.type ?? 'text') === 'select') {
      if (!d.options?.some((o) => o.value === v))
        out[d.name] = `${label} must be one of ${(d.options ?? []).map((o) => o.value).join(', ')}`;
      continue;
    }
    const len = [...v].length;
    const max = Math.min(
      d.max_length ?? MAX_FIELD_VALUE_LENGTH,
      d.pattern ? MAX_PATTERNED_LENGTH : MAX_FIELD_VALUE_LENGTH,
    );
    if (len > max) out[d.name] = `${label} must be at most ${max} characters`;
    else if (d.min_length !== undefined && len < d.min_length)
      out[d.name] = `${label} must be at least ${d.min_length} characters`;
    else if (!d.multiline && /[\r\n]/.test(v)) out[d.name] = `${label} must be a single line`;
    else if (d.pattern) {
      const ok = safeTest(d.pattern, v);
      if (ok === 'timeout') out[d.name] = `${label} could not be checked against its format in time`;
      else if (!ok) out[d.name] = `${label} does not match the expected format`;
    }
  }
  return out;
}
