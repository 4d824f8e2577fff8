/**
 * Loyalty tiers on the lifetime earnings of a currency. A user's tier is the highest tier whose
 * min_lifetime_points they reached. Tiers react to `wallet.credited` (`tierReactions`); when a
 * user's tier changes they emit `tier.changed`, whose webhook the outbox enqueues (docs/webhooks.md).
 */
import { mayHave } from '../definitions/presence';
import type { Queryable } from '../../adapters/sql/types';
import type { FactBus, Reactions, TierChanged, WalletMoved } from '../facts';
import { groupBy } from '../../shared/group-by';

export interface Tier {
  tier_id: string;
  tenant_id: string;
  tier_name: string;
  tier_level: number;
  min_lifetime_points: number;
  currency_id: string;
  icon_url: string | null;
  badge_color: string | null;
  benefits: Record<string, unknown>;
  created_at: string;
  updated_at: string;
}

interface TierRow extends Omit<Tier, 'tier_id'> {
  id: string;
}

export const toTier = (r: TierRow): Tier => {
  const { id, ...rest } = r;
  return {
    ...rest,
    tier_id: id,
    min_lifetime_points: Number(r.min_lifetime_points),
    created_at: new Date(r.created_at).toISOString(),
    updated_at: new Date(r.updated_at).toISOString(),
  };
};

export async function tiersOf(q: Queryable, tenantId: string, currencyId?: string): Promise<Tier[]> {
  const r = await q.query<TierRow>(
    `SELECT * FROM tiers WHERE tenant_id = $1 AND ($2::text IS NULL OR currency_id = $2) ORDER BY currency_id, tier_level`,
    [tenantId, currencyId ?? null],
  );
  return r.rows.map(toTier);
}

/** The tier for a lifetime amount: the highest level whose minimum is reached, or null. */
export function tierFor(tiers: Tier[], lifetime: number): Tier | null {
  let best: Tier | null = null;
  for (const t of tiers)
    if (lifetime >= t.min_lifetime_points && (!best || t.tier_level > best.tier_level)) best = t;
  return best;
}

const brief = (t: Tier | null) =>
  t ? { tier_id: t.tier_id, tier_name: t.tier_name, tier_level: t.tier_level } : null;

/**
 * What tiers listen to: each credit moves its user's tier of the currency (tiers read once per
 * tenant and currency of the batch), and every move is emitted as `tier.changed`, in order.
 */
export function tierReactions(facts: FactBus): Reactions {
  return {
    feature: 'tiers',
    on: {
      'wallet.credited': async (q, credits) => {
        const changed: TierChanged[] = [];
        for (const group of byTenantCurrency(credits)) {
          // A tenant the transaction read has no tier (a pipeline batch) is not read.
          if (!mayHave(q, group[0]!.tenant_id, 'tiers')) continue;
          const tiers = await tiersOf(q, group[0]!.tenant_id, group[0]!.currency_id);
          if (tiers.length === 0) continue;
          for (const c of group) {
            const moved = await moveTier(q, tiers, c);
            if (moved) changed.push(moved);
          }
        }
        await facts.emit(q, 'tier.changed', changed);
      },
    },
  };
}

/** Facts grouped by tenant and currency, each group in the facts' order. */
export function byTenantCurrency<T extends { tenant_id: string; currency_id: string }>(
  facts: readonly T[],
): T[][] {
  return [...groupBy(facts, (c) => `${c.tenant_id}\u0000${c.currency_id}`).values()];
}

/** Moves a user's tier to the one its lifetime earnings reach; the change, or null when none. */
async function moveTier(q: Queryable, tiers: Tier[], c: WalletMoved): Promise<TierChanged | null> {
  const next = tierFor(tiers, c.lifetime_earned);
  const prev = await q.query<{ tier_id: string | null }>(
    'SELECT tier_id FROM user_tiers WHERE tenant_id = $1 AND user_id = $2 AND currency_id = $3 FOR UPDATE',
    [c.tenant_id, c.user_id, c.currency_id],
  );
  const prevId = prev.rows[0]?.tier_id ?? null;
  if ((next?.tier_id ?? null) === prevId) return null;
  await q.query(
    `INSERT INTO user_tiers (tenant_id, user_id, currency_id, tier_id) VALUES ($1, $2, $3, $4)
     ON CONFLICT (tenant_id, user_id, currency_id) DO UPDATE SET tier_id = EXCLUDED.tier_id`,
    [c.tenant_id, c.user_id, c.currency_id, next?.tier_id ?? null],
  );
  const previous = tiers.find((t) => t.tier_id === prevId) ?? null;
  return {
    tenant_id: c.tenant_id,
    user_id: c.user_id,
    currency_id: c.currency_id,
    previous_tier_id: prevId,
    previous_tier: brief(previous),
    new_tier: brief(next),
    lifetime_points: c.lifetime_earned,
    now: c.now,
  };
}

/** SPEC "User tier view"; null when no tier is configured or the user earned nothing. */
export async function userTierView(q: Queryable, tenantId: string, userId: string) {
  const tiers = await tiersOf(q, tenantId);
  if (tiers.length === 0) return null;
  const currencyId = tiers[0]!.currency_id;
  const own = tiers.filter((t) => t.currency_id === currencyId);
  const b = await q.query<{ lifetime_earned: number }>(
    'SELECT lifetime_earned FROM balances WHERE tenant_id = $1 AND user_id = $2 AND currency_id = $3',
    [tenantId, userId, currencyId],
  );
  const lifetime = Number(b.rows[0]?.lifetime_earned ?? 0);
  if (lifetime === 0) return null;
  const current = tierFor(own, lifetime);
  const next =
    own
      .filter((t) => t.tier_level > (current?.tier_level ?? 0))
      .sort((a, z) => a.tier_level - z.tier_level)[0] ?? null;
  return {
    tier_id: current?.tier_id ?? null,
    tier_name: current?.tier_name ?? null,
    tier_level: current?.tier_level ?? 0,
    lifetime_points: lifetime,
    next_tier_name: next?.tier_name ?? null,
    next_tier_points: next?.min_lifetime_points ?? null,
    points_to_next: next ? Math.max(0, next.min_lifetime_points - lifetime) : null,
  };
}
