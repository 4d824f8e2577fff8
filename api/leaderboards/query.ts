/**
 * Query routes of leaderboards and snapshots: tenant (and user) from the JWT. A window key that
 * names no window of the board answers 404 (core's WindowNotFound, http/domain-errors.ts).
 */
import type { Analytics } from '../../adapters/analytics/types';
import type { Sql } from '../../adapters/sql/types';
import type { LeaderboardCache } from '../../core/leaderboards/cache';
import type { Leaderboard } from '../../core/leaderboards/definition';
import { LeaderboardQueries, type Page } from '../../core/leaderboards/queries';
import { errors } from '../../http/errors';
import { RenderedJson } from '../../http/rendered';
import { route, type RouteSpec } from '../../http/route';
import { UnstartedReads } from './unstarted-reads';

export interface LeaderboardQueryDeps {
  sql: Sql;
  analytics: Analytics;
  queries: LeaderboardQueries;
  /** Board definitions cached per process (every query route reads one first). */
  cache: LeaderboardCache;
  /** Reward tiers of a completed window's board (the rewards feature), or null. */
  rewardConfig?: (board: Leaderboard) => Promise<unknown | null>;
}

const auth = { kind: 'tenant', signed: false } as const;

export function leaderboardQueryRoutes(deps: LeaderboardQueryDeps): RouteSpec[] {
  const pages = new UnstartedReads<Leaderboard, RenderedJson>();
  const board = async (tenantId: string, id: string) => {
    const b = await deps.cache.board(deps.sql, tenantId, id);
    if (!b) throw errors.notFound(`Leaderboard ${id} not found`);
    return b;
  };
  const presentPage = async (b: Leaderboard, p: Page) => {
    const out: Record<string, unknown> = {
      leaderboard_id: b.leaderboard_id,
      tenant_id: b.tenant_id,
      window_key: p.window.key.window_key,
      window_status: p.window.source === 'closed' ? 'completed' : 'live',
      entries: p.entries,
      total_entries: p.total,
      limit: p.limit,
      offset: p.offset,
    };
    if (p.window.source === 'closed' && deps.rewardConfig) {
      const rc = await deps.rewardConfig(b);
      if (rc) out.reward_config = rc;
    }
    return out;
  };
  const snapshotTime = (raw: string): number => {
    const t = /^\d{1,16}$/.test(raw) ? Number(raw) : Date.parse(raw);
    if (!Number.isFinite(t))
      throw errors.invalidInput(
        `snapshot_time must be an RFC 3339 timestamp or Unix milliseconds (got "${raw}")`,
      );
    return t;
  };
  const common = {
    gateway: 'query',
    method: 'GET',
    tag: 'Leaderboards',
    auth,
    queryErrorCode: 'INVALID_INPUT',
  } as const;

  return [
    route({
      ...common,
      path: '/v1/leaderboards/:leaderboard_id',
      summary: 'A page of standings (window rules: omitted, current, or a window key)',
      query: 'leaderboard.page.query',
      response: 'leaderboard.page.view',
      handler: async ({ params, query: q, tenant }) => {
        const b = await board(tenant.id, params.leaderboard_id);
        // Identical pages asked in the same turn share one read and one rendering, started after
        // all of them arrived (./unstarted-reads.ts: every answer is as fresh as its own read).
        const key = `${q.window_key ?? ''}\u0000${q.offset}\u0000${q.limit}`;
        return pages.join(b, key, async () =>
          RenderedJson.of(
            await presentPage(b, await deps.queries.pageOf(b, q.window_key, q.offset, q.limit)),
          ),
        );
      },
    }),
    route({
      ...common,
      path: '/v1/leaderboards/:leaderboard_id/user/:user_id',
      summary: 'A page centred on the user (the top when the user has no score)',
      query: 'leaderboard.around.query',
      response: 'leaderboard.around.view',
      handler: async ({ params, query: q, tenant }) => {
        const b = await board(tenant.id, params.leaderboard_id);
        const p = await deps.queries.aroundOf(b, q.window_key, params.user_id, q.limit);
        return { ...(await presentPage(b, p)), user_id: params.user_id, found: p.found };
      },
    }),
    route({
      ...common,
      path: '/v1/leaderboards/:leaderboard_id/rank/:user_id',
      summary: "The user's rank in the latest window",
      response: 'leaderboard.rank.view',
      handler: async ({ params, tenant }) => {
        const b = await board(tenant.id, params.leaderboard_id);
        const { window: w, me } = await deps.queries.latestWith(b, params.user_id);
        const r = await deps.queries.rankOf(b, w, me);
        return {
          leaderboard_id: b.leaderboard_id,
          window_key: w.key.window_key,
          user_id: params.user_id,
          ...r,
        };
      },
    }),
    route({
      ...common,
      path: '/v1/leaderboards/:leaderboard_id/score/:user_id',
      summary: "The user's score in the latest window",
      response: 'leaderboard.score.view',
      handler: async ({ params, tenant }) => {
        const b = await board(tenant.id, params.leaderboard_id);
        const { window: w, me } = await deps.queries.latestWith(b, params.user_id);
        return {
          leaderboard_id: b.leaderboard_id,
          window_key: w.key.window_key,
          user_id: params.user_id,
          found: me !== null,
          score: me?.score ?? 0,
        };
      },
    }),
    route({
      ...common,
      tag: 'Snapshots',
      path: '/v1/snapshots/:leaderboard_id',
      summary: 'Historical snapshots of completed windows, newest first',
      query: 'snapshot.list.query',
      response: 'snapshot.list.view',
      handler: async ({ params, query: q, tenant }) => {
        await board(tenant.id, params.leaderboard_id);
        const from = q.from ? Date.parse(q.from) : 0;
        const to = q.to ? Date.parse(q.to) : 4_294_967_295_999;
        if (from > to) throw errors.invalidInput('from must not be after to');
        const list = await deps.analytics.listSnapshots(tenant.id, params.leaderboard_id, from, to, q.limit);
        return {
          leaderboard_id: params.leaderboard_id,
          snapshots: list.map((s) => ({
            leaderboard_id: s.leaderboard_id,
            window_key: s.window_key,
            snapshot_time: new Date(s.snapshot_time).toISOString(),
            total_entries: s.entries,
          })),
        };
      },
    }),
    route({
      ...common,
      tag: 'Snapshots',
      path: '/v1/snapshots/:leaderboard_id/:snapshot_time',
      summary: 'Top entries of a snapshot',
      query: 'snapshot.page.query',
      response: 'snapshot.page.view',
      handler: async ({ params, query: q, tenant }) => {
        await board(tenant.id, params.leaderboard_id);
        const t = snapshotTime(params.snapshot_time);
        const entries = await deps.analytics.snapshotEntries(
          tenant.id,
          params.leaderboard_id,
          t,
          q.offset,
          q.limit,
        );
        const meta = (await deps.analytics.listSnapshots(tenant.id, params.leaderboard_id, t, t + 1, 1))[0];
        if (!meta) throw errors.notFound(`No snapshot at ${params.snapshot_time}`);
        return {
          leaderboard_id: params.leaderboard_id,
          window_key: meta.window_key,
          snapshot_time: new Date(t).toISOString(),
          entries: entries.map((e) => ({ user_id: e.user_id, score: e.score, rank: e.rank })),
          total_entries: meta.entries,
          limit: q.limit,
          offset: q.offset,
        };
      },
    }),
    route({
      ...common,
      tag: 'Snapshots',
      path: '/v1/snapshots/:leaderboard_id/:snapshot_time/user/:user_id',
      summary: "A user's rank in a snapshot",
      response: 'snapshot.user.view',
      handler: async ({ params, tenant }) => {
        await board(tenant.id, params.leaderboard_id);
        const t = snapshotTime(params.snapshot_time);
        const meta = (await deps.analytics.listSnapshots(tenant.id, params.leaderboard_id, t, t + 1, 1))[0];
        if (!meta) throw errors.notFound(`No snapshot at ${params.snapshot_time}`);
        const e = await deps.analytics.snapshotUser(tenant.id, params.leaderboard_id, t, params.user_id);
        return {
          leaderboard_id: params.leaderboard_id,
          window_key: meta.window_key,
          snapshot_time: new Date(t).toISOString(),
          user_id: params.user_id,
          found: e !== null,
          rank: e?.rank ?? 0,
          score: e?.score ?? 0,
        };
      },
    }),
  ];
}
