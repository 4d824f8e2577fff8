/**
 * Per-user streak state in SQL, and what a batch of moves does: the history of periods, milestones
 * (granted through the one granting service with a key naming the source, then the
 * `streak.milestone_reached` fact), and the facts of breaks, freezes used and at-risk notices. The
 * pipeline step (events) and the deadline sweep (time) both write through here, in their own
 * transaction, so every effect happens exactly when the state change commits.
 */
import type { Queryable } from '../../adapters/sql/types';
import type { FactBus, FactTypes } from '../facts';
import { itemsForMetric } from '../rewards/configs';
import { grantFromConfig } from '../rewards/from-config';
import type { Granted, Granter } from '../rewards/grant';
import { getItems } from '../rewards/items';
import type { StreakDefinition } from './definitions';
import { dueAt, type Move, type Progress, type StreakConfig } from './engine';

/** The metric of a reward config's `milestone` tiers that streaks read (the value is the threshold). */
export const MILESTONE_METRIC = 'streak_days';

export interface ProgressKey {
  tenant_id: string;
  streak_id: string;
  user_id: string;
}

export interface ProgressRow extends ProgressKey {
  current_count: number;
  longest_count: number;
  run: number;
  freezes: number;
  period_key: string | null;
  period_start: number | null;
  period_end: number | null;
  period_value: number;
  qualified: boolean;
  frozen: boolean;
  at_risk_start: number | null;
  due_at: number | null;
  last_event_at: number | null;
  updated_at: number;
}

const num = (x: unknown) => (x === null || x === undefined ? null : Number(x));

export function progressFromSql(r: Record<string, unknown>): ProgressRow {
  return {
    tenant_id: String(r.tenant_id),
    streak_id: String(r.streak_id),
    user_id: String(r.user_id),
    current_count: Number(r.current_count),
    longest_count: Number(r.longest_count),
    run: Number(r.run),
    freezes: Number(r.freezes),
    period_key: (r.period_key as string | null) ?? null,
    period_start: num(r.period_start),
    period_end: num(r.period_end),
    period_value: Number(r.period_value),
    qualified: Boolean(r.qualified),
    frozen: Boolean(r.frozen),
    at_risk_start: num(r.at_risk_start),
    due_at: num(r.due_at),
    last_event_at: num(r.last_event_at),
    updated_at: Number(r.updated_at),
  };
}

export function toProgress(r: ProgressRow | undefined): Progress {
  if (!r)
    return {
      current_count: 0,
      longest_count: 0,
      run: 0,
      freezes: 0,
      period: null,
      value: 0,
      qualified: false,
      frozen: false,
      at_risk_start: null,
      last_event_at: null,
    };
  return {
    current_count: r.current_count,
    longest_count: r.longest_count,
    run: r.run,
    freezes: r.freezes,
    period:
      r.period_start !== null && r.period_end !== null
        ? { key: r.period_key ?? '', start: r.period_start, end: r.period_end }
        : null,
    value: r.period_value,
    qualified: r.qualified,
    frozen: r.frozen,
    at_risk_start: r.at_risk_start,
    last_event_at: r.last_event_at,
  };
}

export function toRow(k: ProgressKey, cfg: StreakConfig, p: Progress, now: number): ProgressRow {
  return {
    ...k,
    current_count: p.current_count,
    longest_count: p.longest_count,
    run: p.run,
    freezes: p.freezes,
    period_key: p.period?.key ?? null,
    period_start: p.period?.start ?? null,
    period_end: p.period?.end ?? null,
    period_value: p.value,
    qualified: p.qualified,
    frozen: p.frozen,
    at_risk_start: p.at_risk_start,
    due_at: dueAt(cfg, p),
    last_event_at: p.last_event_at,
    updated_at: now,
  };
}

export const keyId = (k: ProgressKey) => `${k.tenant_id}\u0000${k.streak_id}\u0000${k.user_id}`;

const COLUMNS: Array<[keyof ProgressRow, string]> = [
  ['tenant_id', 'text'],
  ['streak_id', 'text'],
  ['user_id', 'text'],
  ['current_count', 'integer'],
  ['longest_count', 'integer'],
  ['run', 'integer'],
  ['freezes', 'integer'],
  ['period_key', 'text'],
  ['period_start', 'bigint'],
  ['period_end', 'bigint'],
  ['period_value', 'float8'],
  ['qualified', 'boolean'],
  ['frozen', 'boolean'],
  ['at_risk_start', 'bigint'],
  ['due_at', 'bigint'],
  ['last_event_at', 'bigint'],
  ['updated_at', 'bigint'],
];

/**
 * The rows of these keys, locked FOR UPDATE in key order (one order in every transaction, so two
 * batches touching the same users wait instead of deadlocking). Absent keys are missing.
 */
export async function lockProgress(
  q: Queryable,
  keys: readonly ProgressKey[],
): Promise<Map<string, ProgressRow>> {
  if (keys.length === 0) return new Map();
  const uniq = [...new Map(keys.map((k) => [keyId(k), k])).values()];
  const r = await q.query<Record<string, unknown>>(
    `SELECT s.* FROM streak_progress s
       JOIN unnest($1::text[], $2::text[], $3::text[]) AS k(tenant_id, streak_id, user_id)
         ON s.tenant_id = k.tenant_id AND s.streak_id = k.streak_id AND s.user_id = k.user_id
     ORDER BY s.tenant_id, s.streak_id, s.user_id FOR UPDATE OF s`,
    [uniq.map((k) => k.tenant_id), uniq.map((k) => k.streak_id), uniq.map((k) => k.user_id)],
  );
  return new Map(r.rows.map((x) => [keyId(progressFromSql(x)), progressFromSql(x)]));
}

/**
 * Writes rows in one statement. `freezes` is written as the change (`freezeDelta`): freezes
 * granted by a concurrent transaction between the read and this write are kept (an admin grant
 * creating the row the pipeline saw absent).
 */
export async function writeProgress(
  q: Queryable,
  rows: ReadonlyArray<ProgressRow & { freezeDelta: number }>,
): Promise<void> {
  if (rows.length === 0) return;
  const sorted = [...rows].sort((a, b) => (keyId(a) < keyId(b) ? -1 : keyId(a) > keyId(b) ? 1 : 0));
  const cols = COLUMNS.map(([c]) => c);
  const set = cols
    .filter((c) => !['tenant_id', 'streak_id', 'user_id'].includes(c))
    .map((c) =>
      c === 'freezes'
        ? 'freezes = GREATEST(streak_progress.freezes + EXCLUDED.freezes, 0)'
        : `${c} = EXCLUDED.${c}`,
    );
  await q.query(
    `INSERT INTO streak_progress (${cols.join(', ')})
     SELECT * FROM unnest(${COLUMNS.map(([, t], i) => `$${i + 1}::${t}[]`).join(', ')})
     ON CONFLICT (tenant_id, streak_id, user_id) DO UPDATE SET ${set.join(', ')}`,
    COLUMNS.map(([c]) => sorted.map((r) => (c === 'freezes' ? r.freezeDelta : r[c]))),
  );
}

/** The moves of one user's streak of one definition, as the step or the sweep produced them. */
export interface UserMoves {
  def: StreakDefinition;
  user_id: string;
  moves: Move[];
}

export interface MoveDeps {
  facts: FactBus;
  granter: Granter;
}

type Fact<K extends keyof FactTypes> = FactTypes[K]['fact'];

const brief = (g: Granted) => ({
  item_id: g.item_id,
  name: g.name,
  reward_type: g.reward_type,
  payload: g.payload,
});

/**
 * Records a batch's moves in the caller's transaction: period history, milestones reached (each
 * once per run when repeatable, once per user ever otherwise; granted with the key
 * `streak:<definition>:<user>:<threshold>:<run or once>`), then one emit per fact name.
 */
export async function recordMoves(
  q: Queryable,
  deps: MoveDeps,
  batch: readonly UserMoves[],
  now: number,
): Promise<void> {
  const history: Array<[string, string, string, number, number, string, string, number, number, number]> = [];
  const reached: Fact<'streak.milestone_reached'>[] = [];
  const broken: Fact<'streak.broken'>[] = [];
  const frozen: Fact<'streak.freeze_used'>[] = [];
  const atRisk: Fact<'streak.at_risk'>[] = [];
  const pending: Array<{
    def: StreakDefinition;
    user_id: string;
    threshold: number;
    count: number;
    run: number;
    ms: { threshold: number; reward_item_id: string | null; repeatable: boolean };
  }> = [];
  for (const { def, user_id, moves } of batch) {
    const base = { tenant_id: def.tenant_id, user_id, streak_id: def.id };
    for (const m of moves) {
      switch (m.kind) {
        case 'qualified':
          history.push([
            def.tenant_id,
            def.id,
            user_id,
            m.period.start,
            m.period.end,
            m.period.key,
            'qualified',
            m.value,
            m.count,
            m.at,
          ]);
          break;
        case 'frozen':
          history.push([
            def.tenant_id,
            def.id,
            user_id,
            m.period.start,
            m.period.end,
            m.period.key,
            'frozen',
            m.value,
            m.count,
            m.at,
          ]);
          frozen.push({
            ...base,
            current_count: m.count,
            freezes_left: m.freezes_left,
            period_start: m.period.start,
            period_end: m.period.end,
            now,
          });
          break;
        case 'broken':
          history.push([
            def.tenant_id,
            def.id,
            user_id,
            m.period.start,
            m.period.end,
            m.period.key,
            'broken',
            m.value,
            0,
            m.at,
          ]);
          broken.push({
            ...base,
            previous_count: m.previous_count,
            longest_count: m.longest,
            run: m.run,
            period_start: m.period.start,
            period_end: m.period.end,
            now,
          });
          break;
        case 'at_risk':
          atRisk.push({
            ...base,
            current_count: m.count,
            period_start: m.period.start,
            period_end: m.period.end,
            value: m.value,
            min: def.config.condition.min,
            now,
          });
          break;
        case 'milestone': {
          const ms = (def.config.milestones ?? []).find((x) => x.threshold === m.threshold);
          if (ms)
            pending.push({
              def,
              user_id,
              threshold: m.threshold,
              count: m.count,
              run: ms.repeatable ? m.run : 0,
              ms,
            });
          break;
        }
      }
    }
  }
  // Milestones: recorded in one statement (a once-ever milestone reached before inserts nothing),
  // then granted in order, each with a key naming its source.
  if (pending.length) {
    const ins = await q.query<{
      tenant_id: string;
      streak_id: string;
      user_id: string;
      threshold: number;
      run: number;
    }>(
      `INSERT INTO streak_milestones (tenant_id, streak_id, user_id, threshold, run, reached_at)
       SELECT *, $6::bigint FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::int[])
       ON CONFLICT DO NOTHING RETURNING tenant_id, streak_id, user_id, threshold, run`,
      [
        pending.map((x) => x.def.tenant_id),
        pending.map((x) => x.def.id),
        pending.map((x) => x.user_id),
        pending.map((x) => x.threshold),
        pending.map((x) => x.run),
        now,
      ],
    );
    const id = (t: string, s: string, u: string, th: number, r: number) =>
      `${t}\u0000${s}\u0000${u}\u0000${th}\u0000${r}`;
    const fresh = new Set(
      ins.rows.map((r) => id(r.tenant_id, r.streak_id, r.user_id, Number(r.threshold), Number(r.run))),
    );
    for (const x of pending) {
      const k = id(x.def.tenant_id, x.def.id, x.user_id, x.threshold, x.run);
      if (!fresh.delete(k)) continue; // reached before (once ever), or twice in this batch
      const { def, user_id, ms } = x;
      const key = `streak:${def.id}:${user_id}:${x.threshold}:${ms.repeatable ? `run${x.run}` : 'once'}`;
      const items: Granted[] = [];
      const source = { source_type: 'streak_milestone', source_ref: `${def.id}:${x.threshold}` };
      if (ms.reward_item_id) {
        const found = await getItems(q, def.tenant_id, [ms.reward_item_id]);
        const item = found.get(ms.reward_item_id);
        if (item)
          items.push(
            ...(await deps.granter.grant(q, {
              tenant_id: def.tenant_id,
              user_id,
              items: [item],
              ...source,
              grant_key: key,
              now,
            })),
          );
      }
      if (def.reward_config_id) {
        const r = await grantFromConfig(
          q,
          deps.granter,
          def.tenant_id,
          def.reward_config_id,
          [{ user_id, ...source, grant_key: `${key}:config`, now }],
          (c) => itemsForMetric(c, MILESTONE_METRIC, x.threshold),
        );
        for (const g of r.granted) items.push(...g.granted);
      }
      reached.push({
        tenant_id: def.tenant_id,
        user_id,
        streak_id: def.id,
        threshold: x.threshold,
        streak_days: x.count,
        reward_item_id: ms.reward_item_id,
        reward_config_id: def.reward_config_id,
        run: x.run,
        items: items.filter((g) => g.status !== 'failed').map(brief),
        now,
      });
    }
  }
  if (history.length) {
    const col = (i: number) => history.map((h) => h[i]);
    await q.query(
      `INSERT INTO streak_periods (tenant_id, streak_id, user_id, period_start, period_end, period_key, outcome, value, streak_count, at)
       SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::text[], $7::text[], $8::float8[], $9::int[], $10::bigint[])
       ON CONFLICT (tenant_id, streak_id, user_id, period_start) DO UPDATE SET
         outcome = EXCLUDED.outcome, value = EXCLUDED.value, streak_count = EXCLUDED.streak_count, at = EXCLUDED.at`,
      [col(0), col(1), col(2), col(3), col(4), col(5), col(6), col(7), col(8), col(9)],
    );
  }
  await deps.facts.emit(q, 'streak.milestone_reached', reached);
  await deps.facts.emit(q, 'streak.freeze_used', frozen);
  await deps.facts.emit(q, 'streak.broken', broken);
  await deps.facts.emit(q, 'streak.at_risk', atRisk);
}
