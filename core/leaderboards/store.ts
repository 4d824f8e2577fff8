/**
 * SQL access for leaderboards: definitions, windows and scores. Every statement carries the
 * tenant in its WHERE clause or key (invariant 4).
 */
import type { Queryable } from '../../adapters/sql/types';
import type { ScoreState } from './aggregate';
import { definitionTable } from '../definitions/table';
import type { Leaderboard, LeaderboardConfig, LeaderboardStatus } from './definition';

interface BoardRow {
  tenant_id: string;
  id: string;
  name: string;
  description: string | null;
  reward_config_id: string | null;
  status: LeaderboardStatus;
  config: LeaderboardConfig | string;
  version: number;
  created_at: Date | string;
  updated_at: Date | string;
}

function toBoard(r: BoardRow): Leaderboard {
  return {
    tenant_id: r.tenant_id,
    leaderboard_id: r.id,
    name: r.name,
    description: r.description,
    reward_config_id: r.reward_config_id,
    status: r.status,
    config: typeof r.config === 'string' ? (JSON.parse(r.config) as LeaderboardConfig) : r.config,
    version: r.version,
    created_at: new Date(r.created_at).toISOString(),
    updated_at: new Date(r.updated_at).toISOString(),
  };
}

export async function createBoard(
  q: Queryable,
  b: Omit<Leaderboard, 'status' | 'version' | 'created_at' | 'updated_at'>,
  now: number,
): Promise<Leaderboard | null> {
  const at = new Date(now).toISOString();
  const r = await q.query<BoardRow>(
    `INSERT INTO leaderboards (tenant_id, id, name, description, reward_config_id, config, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $7) ON CONFLICT (tenant_id, id) DO NOTHING RETURNING *`,
    [b.tenant_id, b.leaderboard_id, b.name, b.description, b.reward_config_id, JSON.stringify(b.config), at],
  );
  return r.rows[0] ? toBoard(r.rows[0]) : null;
}

/** The leaderboard definitions table; a config change bumps the version (future events only). */
const boards = definitionTable<BoardRow, Leaderboard>({
  table: 'leaderboards',
  columns: ['name', 'description', 'reward_config_id', 'config', 'status'],
  json: ['config'],
  versioned: ['config'],
  toView: toBoard,
});

export async function getBoard(
  q: Queryable,
  tenantId: string,
  id: string,
  lock = false,
): Promise<Leaderboard | null> {
  return boards.get(q, tenantId, id, { lock });
}

export async function listBoards(
  q: Queryable,
  tenantId: string,
  opts: { status?: LeaderboardStatus; limit: number; offset: number },
): Promise<{ items: Leaderboard[]; total: number }> {
  return boards.page(q, tenantId, {
    filters: { status: opts.status },
    limit: opts.limit,
    offset: opts.offset,
  });
}

/** Replaces the fields given (docs: core/definitions/table.ts). */
export async function updateBoard(
  q: Queryable,
  tenantId: string,
  id: string,
  patch: {
    name?: string;
    description?: string | null;
    reward_config_id?: string | null;
    config?: LeaderboardConfig;
    status?: LeaderboardStatus;
  },
  now: number,
): Promise<Leaderboard | null> {
  return boards.patch(q, tenantId, id, patch, now);
}

/** Active boards of some tenants (the pipeline's per-batch read). */
export async function activeBoards(q: Queryable, tenantIds: string[]): Promise<Leaderboard[]> {
  if (tenantIds.length === 0) return [];
  const r = await q.query<BoardRow>(
    "SELECT * FROM leaderboards WHERE tenant_id = ANY($1::text[]) AND status = 'active'",
    [tenantIds],
  );
  return r.rows.map(toBoard);
}

// ---- windows ------------------------------------------------------------------------------

export interface WindowRow {
  tenant_id: string;
  leaderboard_id: string;
  window_key: string;
  starts_at: number;
  ends_at: number;
  closes_at: number;
  status: 'open' | 'closed';
  closed_at: number | null;
  entries: number | null;
  exported: boolean;
  /** Why the close could not pay its rewards in full, or null (core/leaderboards/closing.ts). */
  payout_error: string | null;
}

export interface WindowKey {
  tenant_id: string;
  leaderboard_id: string;
  window_key: string;
}

/**
 * Creates missing windows and returns every asked window's row, locked FOR SHARE so that a close
 * waits for this transaction (and this transaction sees a close that committed before it).
 */
export async function ensureWindows(
  q: Queryable,
  ws: Array<WindowKey & { starts_at: number; ends_at: number; closes_at: number }>,
): Promise<Map<string, WindowRow>> {
  if (ws.length === 0) return new Map();
  // Most batches write to windows that exist already: one statement reads and locks them; only
  // the missing ones are inserted (in `ws` order, the caller's one order), then read and locked.
  const out = await lockWindows(q, ws);
  const missing = ws.filter((w) => !out.has(windowId(w)));
  if (missing.length === 0) return out;
  await q.query(
    `INSERT INTO leaderboard_windows (tenant_id, leaderboard_id, window_key, starts_at, ends_at, closes_at)
     SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[])
     ON CONFLICT DO NOTHING`,
    unzip(missing, ['tenant_id', 'leaderboard_id', 'window_key', 'starts_at', 'ends_at', 'closes_at']),
  );
  for (const [id, w] of await lockWindows(q, missing)) out.set(id, w);
  return out;
}

/** The rows of these windows (those that exist), locked FOR SHARE in key order. */
async function lockWindows(q: Queryable, ws: WindowKey[]): Promise<Map<string, WindowRow>> {
  const r = await q.query<WindowRow>(
    `SELECT w.* FROM leaderboard_windows w
     JOIN unnest($1::text[], $2::text[], $3::text[]) AS k(t, l, wk)
       ON w.tenant_id = k.t AND w.leaderboard_id = k.l AND w.window_key = k.wk
     ORDER BY w.tenant_id, w.leaderboard_id, w.window_key
     FOR SHARE OF w`,
    unzip(ws, ['tenant_id', 'leaderboard_id', 'window_key']),
  );
  return new Map(r.rows.map((w) => [windowId(w), normalizeWindow(w)]));
}

export function windowId(k: WindowKey): string {
  return `${k.tenant_id}\u0000${k.leaderboard_id}\u0000${k.window_key}`;
}

function normalizeWindow(w: WindowRow): WindowRow {
  return {
    ...w,
    starts_at: Number(w.starts_at),
    ends_at: Number(w.ends_at),
    closes_at: Number(w.closes_at),
    closed_at: w.closed_at === null ? null : Number(w.closed_at),
  };
}

export async function getWindow(q: Queryable, k: WindowKey, lock = false): Promise<WindowRow | null> {
  const r = await q.query<WindowRow>(
    `SELECT * FROM leaderboard_windows WHERE tenant_id = $1 AND leaderboard_id = $2 AND window_key = $3${lock ? ' FOR UPDATE' : ''}`,
    [k.tenant_id, k.leaderboard_id, k.window_key],
  );
  return r.rows[0] ? normalizeWindow(r.rows[0]) : null;
}

/** The latest closed window of a board that has entries (SPEC window rule 1 fallback). */
export async function latestClosedWindow(
  q: Queryable,
  tenantId: string,
  leaderboardId: string,
): Promise<WindowRow | null> {
  const r = await q.query<WindowRow>(
    `SELECT * FROM leaderboard_windows WHERE tenant_id = $1 AND leaderboard_id = $2 AND status = 'closed' AND entries > 0
     ORDER BY ends_at DESC LIMIT 1`,
    [tenantId, leaderboardId],
  );
  return r.rows[0] ? normalizeWindow(r.rows[0]) : null;
}

/** Open windows whose grace period has passed. */
export async function dueWindows(q: Queryable, now: number, limit: number): Promise<WindowRow[]> {
  const r = await q.query<WindowRow>(
    "SELECT * FROM leaderboard_windows WHERE status = 'open' AND closes_at <= $1 ORDER BY closes_at LIMIT $2",
    [now, limit],
  );
  return r.rows.map(normalizeWindow);
}

export async function unexportedWindows(q: Queryable, limit: number): Promise<WindowRow[]> {
  const r = await q.query<WindowRow>(
    "SELECT * FROM leaderboard_windows WHERE status = 'closed' AND NOT exported ORDER BY closed_at LIMIT $1",
    [limit],
  );
  return r.rows.map(normalizeWindow);
}

export async function markClosed(q: Queryable, k: WindowKey, now: number, entries: number): Promise<void> {
  await q.query(
    `UPDATE leaderboard_windows SET status = 'closed', closed_at = $4, entries = $5
     WHERE tenant_id = $1 AND leaderboard_id = $2 AND window_key = $3`,
    [k.tenant_id, k.leaderboard_id, k.window_key, now, entries],
  );
}

export async function markPayoutError(q: Queryable, k: WindowKey, error: string): Promise<void> {
  await q.query(
    'UPDATE leaderboard_windows SET payout_error = $4 WHERE tenant_id = $1 AND leaderboard_id = $2 AND window_key = $3',
    [k.tenant_id, k.leaderboard_id, k.window_key, error],
  );
}

export async function markExported(q: Queryable, k: WindowKey): Promise<void> {
  await q.query(
    'UPDATE leaderboard_windows SET exported = true WHERE tenant_id = $1 AND leaderboard_id = $2 AND window_key = $3',
    [k.tenant_id, k.leaderboard_id, k.window_key],
  );
}

// ---- scores -------------------------------------------------------------------------------

export interface ScoreKey extends WindowKey {
  user_id: string;
}

export interface ScoreRow extends ScoreKey, ScoreState {
  partition: number;
}

export function scoreId(k: ScoreKey): string {
  return `${windowId(k)}\u0000${k.user_id}`;
}

function normalizeScore(r: ScoreRow): ScoreRow {
  return {
    ...r,
    score: Number(r.score),
    total: Number(r.total),
    n: Number(r.n),
    tiebreak: Number(r.tiebreak),
    partition: Number(r.partition),
  };
}

export async function upsertScores(q: Queryable, rows: ScoreRow[]): Promise<void> {
  if (rows.length === 0) return;
  await q.query(
    `INSERT INTO leaderboard_scores (tenant_id, leaderboard_id, window_key, user_id, score, total, n, tiebreak, partition)
     SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::float8[], $6::float8[], $7::bigint[], $8::bigint[], $9::int[])
     ON CONFLICT (tenant_id, leaderboard_id, window_key, user_id) DO UPDATE SET
       score = EXCLUDED.score, total = EXCLUDED.total, n = EXCLUDED.n, tiebreak = EXCLUDED.tiebreak, partition = EXCLUDED.partition`,
    unzip(rows, [
      'tenant_id',
      'leaderboard_id',
      'window_key',
      'user_id',
      'score',
      'total',
      'n',
      'tiebreak',
      'partition',
    ]),
  );
}

/**
 * The condition that keeps a score `s` of board `b` in the rank index: at least the board's
 * `ranking.min_score`, when it has one (the pipeline drops entries under it from the index).
 */
export const RANKED_SCORE_SQL = `s.score >= COALESCE((b.config->'ranking'->>'min_score')::float8, '-Infinity'::float8)`;

/** Ranked scores of open windows whose users live on one log partition (rank-index rebuild). */
export async function openScoresOfPartition(q: Queryable, partition: number): Promise<ScoreRow[]> {
  const r = await q.query<ScoreRow>(
    `SELECT s.* FROM leaderboard_scores s
     JOIN leaderboard_windows w ON w.tenant_id = s.tenant_id AND w.leaderboard_id = s.leaderboard_id AND w.window_key = s.window_key
     JOIN leaderboards b ON b.tenant_id = s.tenant_id AND b.id = s.leaderboard_id
     WHERE s.partition = $1 AND w.status = 'open' AND ${RANKED_SCORE_SQL}`,
    [partition],
  );
  return r.rows.map(normalizeScore);
}

/** Standings of a window in board order (score desc, tiebreak asc, user id by bytes), paged. */
export async function standings(
  q: Queryable,
  k: WindowKey,
  offset: number,
  limit: number,
): Promise<ScoreRow[]> {
  const r = await q.query<ScoreRow>(
    `SELECT * FROM leaderboard_scores WHERE tenant_id = $1 AND leaderboard_id = $2 AND window_key = $3
     ORDER BY score DESC, tiebreak ASC, user_id COLLATE "C" ASC LIMIT $4 OFFSET $5`,
    [k.tenant_id, k.leaderboard_id, k.window_key, limit, offset],
  );
  return r.rows.map(normalizeScore);
}

export async function countEntries(q: Queryable, k: WindowKey): Promise<number> {
  const r = await q.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM leaderboard_scores WHERE tenant_id = $1 AND leaderboard_id = $2 AND window_key = $3',
    [k.tenant_id, k.leaderboard_id, k.window_key],
  );
  return r.rows[0]?.n ?? 0;
}

export async function getScore(q: Queryable, k: ScoreKey): Promise<ScoreRow | null> {
  const r = await q.query<ScoreRow>(
    'SELECT * FROM leaderboard_scores WHERE tenant_id = $1 AND leaderboard_id = $2 AND window_key = $3 AND user_id = $4',
    [k.tenant_id, k.leaderboard_id, k.window_key, k.user_id],
  );
  return r.rows[0] ? normalizeScore(r.rows[0]) : null;
}

/** 0-based position of a user in a window's order (SQL; used for closed windows). */
export async function positionOf(q: Queryable, s: ScoreRow): Promise<number> {
  const r = await q.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM leaderboard_scores WHERE tenant_id = $1 AND leaderboard_id = $2 AND window_key = $3
     AND (score > $4 OR (score = $4 AND (tiebreak < $5 OR (tiebreak = $5 AND user_id COLLATE "C" < $6 COLLATE "C"))))`,
    [s.tenant_id, s.leaderboard_id, s.window_key, s.score, s.tiebreak, s.user_id],
  );
  return r.rows[0]?.n ?? 0;
}

/** Entries with a strictly greater score, and distinct greater scores (shared and dense ranks). */
export async function countAbove(
  q: Queryable,
  k: WindowKey,
  score: number,
): Promise<{ entries: number; distinct: number }> {
  const r = await q.query<{ entries: number; distinct: number }>(
    `SELECT count(*)::int AS entries, count(DISTINCT score)::int AS "distinct" FROM leaderboard_scores
     WHERE tenant_id = $1 AND leaderboard_id = $2 AND window_key = $3 AND score > $4`,
    [k.tenant_id, k.leaderboard_id, k.window_key, score],
  );
  return r.rows[0] ?? { entries: 0, distinct: 0 };
}

function unzip<T>(rows: T[], cols: Array<keyof T>): unknown[][] {
  return cols.map((c) => rows.map((r) => r[c]));
}
