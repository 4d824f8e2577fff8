/**
 * The batch's tenants and what they have defined, in one statement per batch (issue 19): their
 * rows FOR KEY SHARE (the tenant-deletion guard, and the achievement backfill's seam: a backfill
 * starts and hands over under FOR UPDATE of the tenant's row, so the steps' later reads see
 * either all of it or none), their time zones, and the per-tenant definition versions and counts
 * that migration 016 keeps in the transaction of every definition write.
 *
 * With them a step issues no statement for its tenants without definitions, and loads its
 * definitions again only when their version moved (`VersionedLoads`). A definition written while a
 * batch runs: the batch applies what was committed when it read the tenants' rows (a write
 * committed after that read applies from the next batch on, as a definition committed after a
 * step's own load did before); a version is read in the same statement as the lock, so the load
 * that follows sees at least that version's definitions.
 */
import type { Queryable } from '../../adapters/sql/types';
import type { DefinitionCounts } from '../../core/definitions/presence';
import {
  firstTimeIndexes,
  MARK_PROCESSED_SQL,
  markParams,
  type EventIdentity,
} from '../../core/events/processed';

export interface TenantDefinitions {
  timezone: string;
  /** Versions of the tenant's rows of leaderboards, earning_rules and streak_definitions. */
  versions: { leaderboards: number; earning_rules: number; streak_definitions: number };
  /** Numbers of the tenant's achievements, tiers, level systems and webhook endpoints (every status). */
  counts: DefinitionCounts;
}

interface TenantRow {
  id: string;
  timezone: string;
  lv: string | number;
  ev: string | number;
  sv: string | number;
  an: number;
  tn: number;
  ln: number;
  wn: number;
}

/** The tenants' rows: $1 (or `$${n}`) the tenant ids; locked FOR KEY SHARE in id order. */
const tenantsSql = (n: number) =>
  `SELECT id, timezone, leaderboards_version AS lv, earning_rules_version AS ev,
          streak_definitions_version AS sv, achievements_n AS an, tiers_n AS tn, level_systems_n AS ln,
          webhooks_n AS wn
   FROM tenants WHERE id = ANY($${n}::text[]) ORDER BY id FOR KEY SHARE`;

/** The tenants' rows, locked FOR KEY SHARE in id order (a tenant without a row is missing). */
export async function readTenants(
  q: Queryable,
  tenants: readonly string[],
): Promise<Map<string, TenantDefinitions>> {
  if (tenants.length === 0) return new Map();
  const r = await q.query<TenantRow>(tenantsSql(1), [tenants]);
  return toDefinitions(r.rows);
}

/**
 * The batch's dedupe (core/events/processed.ts) and `readTenants` for the tenants of all its
 * records, in ONE statement: the indexes of the events seen for the first time, and the tenants.
 *
 * The identities of the events inserted come back only when some were not (a duplicate, of an
 * earlier event or within the list): otherwise one row says how many were inserted, all of them.
 * A batch of fresh events, the usual case, then sends back nothing per event (each field of each
 * row was decoded and copied across PGlite's thread, docs/performance.md twenty-fifth pass).
 */
export async function markAndReadTenants(
  q: Queryable,
  events: EventIdentity[],
): Promise<{ fresh: number[]; definitions: Map<string, TenantDefinitions> }> {
  if (events.length === 0) return { fresh: [], definitions: new Map() };
  const tenants = [...new Set(events.map((e) => e.tenant_id))];
  const r = await q.query<
    Partial<TenantRow> & { k: number; n: number | null; tenant_id: string | null; event_id: string | null }
  >(
    `WITH fresh AS (${MARK_PROCESSED_SQL}), n AS (SELECT count(*)::int AS n FROM fresh),
          t AS (${tenantsSql(4)})
     SELECT 1 AS k, n.n, f.tenant_id, f.event_id, NULL AS id, NULL AS timezone, NULL::bigint AS lv,
            NULL::bigint AS ev, NULL::bigint AS sv, NULL::int AS an, NULL::int AS tn, NULL::int AS ln,
            NULL::int AS wn
     FROM n LEFT JOIN fresh f ON n.n < $5
     UNION ALL
     SELECT 2, NULL, NULL, NULL, id, timezone, lv, ev, sv, an, tn, ln, wn FROM t`,
    [...markParams(events), tenants, events.length],
  );
  const inserted: Array<{ tenant_id: string; event_id: string }> = [];
  const rows: TenantRow[] = [];
  let all = false;
  for (const x of r.rows) {
    if (Number(x.k) === 2) rows.push(x as TenantRow);
    else if (x.event_id !== null) inserted.push({ tenant_id: x.tenant_id!, event_id: x.event_id });
    else all = Number(x.n) === events.length;
  }
  return {
    fresh: all ? events.map((_, i) => i) : firstTimeIndexes(events, inserted),
    definitions: toDefinitions(rows),
  };
}

function toDefinitions(rows: readonly TenantRow[]): Map<string, TenantDefinitions> {
  const out = new Map<string, TenantDefinitions>();
  for (const t of rows)
    out.set(t.id, {
      timezone: t.timezone,
      versions: {
        leaderboards: Number(t.lv),
        earning_rules: Number(t.ev),
        streak_definitions: Number(t.sv),
      },
      counts: {
        achievements: Number(t.an),
        tiers: Number(t.tn),
        level_systems: Number(t.ln),
        webhooks: Number(t.wn),
      },
    });
  return out;
}

/** Bound on the tenants remembered per cache (least recently used leave first). */
export const MAX_CACHED_TENANTS = 10_000;

/**
 * What a step loaded per tenant, kept by the tenant's definitions version: a tenant whose version
 * did not move since the last load costs no statement (an empty list included: no definitions).
 */
export class VersionedLoads<T> {
  private readonly entries = new Map<string, { version: number; value: T[] }>();

  constructor(private readonly max = MAX_CACHED_TENANTS) {}

  /**
   * The values of `tenants` (tenants with none are left out). `versionOf` answers undefined when
   * the version is unknown (no tenant row, or a batch without `definitions`): such a tenant is
   * loaded and not kept. `load` reads the missing tenants, in one statement.
   */
  async get(
    tenants: readonly string[],
    versionOf: (tenant: string) => number | undefined,
    load: (tenants: string[]) => Promise<Map<string, T[]>>,
  ): Promise<Map<string, T[]>> {
    const out = new Map<string, T[]>();
    const missing: string[] = [];
    for (const t of tenants) {
      const v = versionOf(t);
      const e = v === undefined ? undefined : this.entries.get(t);
      if (e !== undefined && e.version === v) {
        // Most recently used last.
        this.entries.delete(t);
        this.entries.set(t, e);
        if (e.value.length) out.set(t, e.value);
      } else missing.push(t);
    }
    if (missing.length === 0) return out;
    const loaded = await load(missing);
    for (const t of missing) {
      const value = loaded.get(t) ?? [];
      if (value.length) out.set(t, value);
      const v = versionOf(t);
      if (v === undefined) continue;
      this.entries.delete(t);
      this.entries.set(t, { version: v, value });
      if (this.entries.size > this.max) this.entries.delete(this.entries.keys().next().value!);
    }
    return out;
  }
}
