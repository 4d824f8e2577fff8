/**
 * Level systems (SPEC.md "Level system"): thresholds on the lifetime earnings of a currency
 * (normally xp). Level 1 needs 0. Levels react to `wallet.credited`: reaching a level records it
 * (user_levels) and emits `level.reached`, to which levels react too by granting the items of the
 * system's reward config whose milestone (or threshold range) on metric `level` matches.
 */
import { mayHave } from '../definitions/presence';
import { randomUUID } from 'node:crypto';
import type { Queryable } from '../../adapters/sql/types';
import { definitionTable } from '../definitions/table';
import type { FactBus, LevelReached, Reactions, WalletMoved } from '../facts';
import { getConfig, itemsForMetric } from '../rewards/configs';
import { grantFromConfig } from '../rewards/from-config';
import type { Granter } from '../rewards/grant';
import { getItems } from '../rewards/items';
import { byTenantCurrency } from '../wallet/tiers';

export interface LevelDef {
  level: number;
  xp_required: number;
  name: string;
  description?: string | null;
}

export interface LevelSystem {
  level_system_id: string;
  tenant_id: string;
  name: string;
  description: string | null;
  currency_id: string;
  reward_config_id: string | null;
  levels: LevelDef[];
  created_at: string;
  updated_at: string;
}

interface Row extends Omit<LevelSystem, 'level_system_id'> {
  id: string;
}

const toSystem = (r: Row): LevelSystem => ({
  level_system_id: r.id,
  tenant_id: r.tenant_id,
  name: r.name,
  description: r.description,
  currency_id: r.currency_id,
  reward_config_id: r.reward_config_id,
  levels: r.levels,
  created_at: new Date(r.created_at).toISOString(),
  updated_at: new Date(r.updated_at).toISOString(),
});

/** Levels sorted, with level 1 at 0 (added when missing). Null when invalid, with the reason. */
export function normalizeLevels(
  levels: LevelDef[],
): { ok: true; levels: LevelDef[] } | { ok: false; error: string } {
  const sorted = [...levels].sort((a, b) => a.level - b.level);
  if (sorted[0]?.level !== 1) sorted.unshift({ level: 1, xp_required: 0, name: 'Level 1' });
  if (sorted[0]!.xp_required !== 0) return { ok: false, error: 'body.levels: level 1 must need 0' };
  for (let i = 1; i < sorted.length; i++) {
    if (sorted[i]!.level === sorted[i - 1]!.level)
      return { ok: false, error: `body.levels: level ${sorted[i]!.level} appears twice` };
    if (sorted[i]!.xp_required <= sorted[i - 1]!.xp_required) {
      return {
        ok: false,
        error: `body.levels: level ${sorted[i]!.level} must need more than level ${sorted[i - 1]!.level}`,
      };
    }
  }
  return { ok: true, levels: sorted };
}

export function levelFor(levels: LevelDef[], total: number): LevelDef {
  let cur = levels[0]!;
  for (const l of levels) if (total >= l.xp_required) cur = l;
  return cur;
}

export async function createSystem(
  q: Queryable,
  tenantId: string,
  b: {
    name: string;
    description?: string | null;
    currency_id: string;
    reward_config_id?: string | null;
    levels: LevelDef[];
  },
  now: number,
): Promise<LevelSystem> {
  const at = new Date(now).toISOString();
  const r = await q.query<Row>(
    `INSERT INTO level_systems (tenant_id, id, name, description, currency_id, reward_config_id, levels, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8) RETURNING *`,
    [
      tenantId,
      randomUUID(),
      b.name,
      b.description ?? null,
      b.currency_id,
      b.reward_config_id ?? null,
      JSON.stringify(b.levels),
      at,
    ],
  );
  return toSystem(r.rows[0]!);
}

const systems = definitionTable<Row, LevelSystem>({
  table: 'level_systems',
  columns: ['name', 'description', 'currency_id', 'reward_config_id', 'levels'],
  json: ['levels'],
  toView: toSystem,
});

export async function updateSystem(
  q: Queryable,
  tenantId: string,
  id: string,
  p: {
    name?: string;
    description?: string | null;
    currency_id?: string;
    reward_config_id?: string | null;
    levels?: LevelDef[];
  },
  now: number,
): Promise<LevelSystem | null> {
  return systems.patch(q, tenantId, id, p, now);
}

export async function listSystems(q: Queryable, tenantId: string): Promise<LevelSystem[]> {
  return systems.list(q, tenantId);
}

/** The system named by id, or the tenant's first when no id is given. */
export async function getSystem(q: Queryable, tenantId: string, id?: string): Promise<LevelSystem | null> {
  if (id) return systems.get(q, tenantId, id);
  return (await systems.page(q, tenantId, { limit: 1, offset: 0 })).items[0] ?? null;
}

async function lifetime(q: Queryable, tenantId: string, userId: string, currencyId: string): Promise<number> {
  const r = await q.query<{ lifetime_earned: number }>(
    'SELECT lifetime_earned FROM balances WHERE tenant_id = $1 AND user_id = $2 AND currency_id = $3',
    [tenantId, userId, currencyId],
  );
  return Number(r.rows[0]?.lifetime_earned ?? 0);
}

async function achieved(q: Queryable, s: LevelSystem, userId: string): Promise<Map<number, number>> {
  const r = await q.query<{ level: number; achieved_at: number }>(
    'SELECT level, achieved_at FROM user_levels WHERE tenant_id = $1 AND level_system_id = $2 AND user_id = $3',
    [s.tenant_id, s.level_system_id, userId],
  );
  return new Map(r.rows.map((x) => [x.level, Number(x.achieved_at)]));
}

/**
 * What levels listen to: a credit records the levels its lifetime amount reached in every system
 * on that currency and emits them as `level.reached` (per credit and system, lowest first, right
 * away, so a reward that credits more of the currency is counted before the next credit); a
 * reached level grants its rewards, once each (the grant key names system, user and level).
 */
export function levelReactions(facts: FactBus, granter: Granter): Reactions {
  return {
    feature: 'levels',
    on: {
      'wallet.credited': async (q, credits) => {
        for (const group of byTenantCurrency(credits)) {
          // A tenant the transaction read has no level system (a pipeline batch) is not read.
          if (!mayHave(q, group[0]!.tenant_id, 'level_systems')) continue;
          const r = await q.query<Row>(
            'SELECT * FROM level_systems WHERE tenant_id = $1 AND currency_id = $2',
            [group[0]!.tenant_id, group[0]!.currency_id],
          );
          const systems = r.rows.map(toSystem);
          if (systems.length) for (const c of group) await reachLevels(q, facts, systems, c);
        }
      },
      'level.reached': (q, reached) => grantLevelRewards(q, granter, reached),
    },
  };
}

/** Records the levels a lifetime amount reached and emits the new ones. */
async function reachLevels(q: Queryable, facts: FactBus, systems: LevelSystem[], c: WalletMoved) {
  for (const s of systems) {
    const reached = s.levels.filter((l) => l.xp_required <= c.lifetime_earned);
    const fresh = await q.query<{ level: number }>(
      `INSERT INTO user_levels (tenant_id, level_system_id, user_id, level, achieved_at)
         SELECT $1, $2, $3, unnest($4::int[]), $5 ON CONFLICT DO NOTHING RETURNING level`,
      [c.tenant_id, s.level_system_id, c.user_id, reached.map((l) => l.level), c.now],
    );
    await facts.emit(
      q,
      'level.reached',
      fresh.rows
        .map((x) => x.level)
        .sort((a, b) => a - b)
        .map((level) => ({
          tenant_id: c.tenant_id,
          user_id: c.user_id,
          level_system_id: s.level_system_id,
          currency_id: s.currency_id,
          level,
          reward_config_id: s.reward_config_id,
          now: c.now,
        })),
    );
  }
}

/**
 * Grants each reached level's rewards (the items of its reward config on metric `level`) through
 * the one grant-from-config path, per run of levels with one config. What could not be granted
 * (a config or item gone) is left out silently, as it always was for levels.
 */
async function grantLevelRewards(q: Queryable, granter: Granter, reached: readonly LevelReached[]) {
  for (let i = 0; i < reached.length;) {
    const first = reached[i]!;
    const run: LevelReached[] = [];
    for (; i < reached.length && sameConfig(reached[i]!, first); i++) run.push(reached[i]!);
    if (!first.reward_config_id) continue;
    await grantFromConfig(
      q,
      granter,
      first.tenant_id,
      first.reward_config_id,
      run.map((l) => ({
        ...l,
        source_type: 'level_up',
        source_ref: `${l.level_system_id}:${l.level}`,
        grant_key: `level:${l.level_system_id}:${l.user_id}:${l.level}`,
      })),
      (config, l) => itemsForMetric(config, 'level', l.level),
    );
  }
}

const sameConfig = (a: LevelReached, b: LevelReached) =>
  a.tenant_id === b.tenant_id && a.reward_config_id === b.reward_config_id;

/** SPEC "User level view". */
export async function userLevelView(q: Queryable, s: LevelSystem, userId: string) {
  const total = await lifetime(q, s.tenant_id, userId, s.currency_id);
  const cur = levelFor(s.levels, total);
  const next = s.levels.find((l) => l.level > cur.level) ?? null;
  const span = next ? next.xp_required - cur.xp_required : 0;
  return {
    tenant_id: s.tenant_id,
    user_id: userId,
    level_system_id: s.level_system_id,
    current_level: cur.level,
    level_name: cur.name,
    total_xp: total,
    xp_for_current_level: cur.xp_required,
    xp_for_next_level: next?.xp_required ?? null,
    xp_to_next_level: next ? next.xp_required - total : 0,
    progress_percentage: next ? Math.round(((total - cur.xp_required) / span) * 10000) / 100 : 100,
  };
}

/** SPEC "Level detail", with the rewards of reaching it. */
export async function levelDetail(q: Queryable, s: LevelSystem, level: number) {
  const l = s.levels.find((x) => x.level === level);
  if (!l) return null;
  const config = s.reward_config_id ? await getConfig(q, s.tenant_id, s.reward_config_id) : null;
  const ids = config ? itemsForMetric(config, 'level', level) : [];
  const items = await getItems(q, s.tenant_id, ids);
  return {
    level: l.level,
    name: l.name,
    xp_required: l.xp_required,
    description: l.description ?? null,
    rewards: ids
      .map((id) => items.get(id))
      .filter((x) => x !== undefined)
      .map((i) => ({ item_id: i.item_id, name: i.name, reward_type: i.reward_type })),
  };
}

/** SPEC "Progression": achieved levels with when, and the next one with progress. */
export async function progression(q: Queryable, s: LevelSystem, userId: string) {
  const total = await lifetime(q, s.tenant_id, userId, s.currency_id);
  const cur = levelFor(s.levels, total);
  const when = await achieved(q, s, userId);
  const levels: Array<Record<string, unknown>> = s.levels
    .filter((l) => l.level <= cur.level)
    .map((l) => ({
      level: l.level,
      name: l.name,
      xp_required: l.xp_required,
      achieved: true,
      achieved_at: when.has(l.level) ? new Date(when.get(l.level)!).toISOString() : null,
    }));
  const next = s.levels.find((l) => l.level > cur.level);
  if (next) {
    const span = next.xp_required - cur.xp_required;
    levels.push({
      level: next.level,
      name: next.name,
      xp_required: next.xp_required,
      achieved: false,
      xp_progress: total - cur.xp_required,
      progress_percentage: Math.round(((total - cur.xp_required) / span) * 10000) / 100,
    });
  }
  return {
    user_id: userId,
    level_system_id: s.level_system_id,
    current_level: cur.level,
    total_xp: total,
    levels,
  };
}
