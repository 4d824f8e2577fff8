/**
 * The minimal rank-lookup handler: the baseline of the query workload (bench/workloads/query.ts,
 * issue 19). It does the work of `GET /v1/leaderboards/:leaderboard_id/rank/:user_id` with the
 * same libraries and nothing else: Koa + @koa/router (the HTTP stack of the gateways,
 * http/gateway.ts), jose to verify the tenant's HS256 JWT (as http/auth/authenticator.ts), one
 * `ZREVRANK` with ioredis, and a JSON answer. No request ids, access logs, metrics, rate limits,
 * input rules, board definitions or window lookup.
 *
 * The sorted set is a plain one the bench builds beside the board (member = user id, score =
 * score): the board's own set stores encoded members (adapters/ranks/redis.ts: score, tiebreak
 * and id) that only the board's hash can name.
 *
 * Run as its own process, like the service: `node --import tsx bench/minimal-query.ts` with
 * LUDUS_HOST, LUDUS_QUERY_PORT, MINIMAL_REDIS_URL, MINIMAL_ZSET (the sorted set's key),
 * MINIMAL_JWT_SECRET (the tenant's jwt_secret) and MINIMAL_TENANT (the tenant id).
 */
import { createServer } from 'node:http';
import Router from '@koa/router';
import { jwtVerify } from 'jose';
import Koa from 'koa';
import Redis from 'ioredis';

const env = (name: string): string => {
  const v = process.env[name];
  if (!v) throw new Error(`minimal-query: ${name} is not set`);
  return v;
};

const redis = new Redis(env('MINIMAL_REDIS_URL'));
const zset = env('MINIMAL_ZSET');
const secret = new TextEncoder().encode(env('MINIMAL_JWT_SECRET'));
const tenant = env('MINIMAL_TENANT');

const app = new Koa();
const router = new Router();
router.get('/health', (ctx) => {
  ctx.body = { status: 'healthy' };
});
router.get('/v1/leaderboards/:leaderboard_id/rank/:user_id', async (ctx) => {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(ctx.get('authorization'));
  if (!m) {
    ctx.status = 401;
    ctx.body = { error: 'missing token' };
    return;
  }
  try {
    const { payload } = await jwtVerify(m[1]!, secret, { algorithms: ['HS256'] });
    if (payload.sub_type !== 'tenant' || payload.sub_id !== tenant) throw new Error('wrong tenant');
  } catch {
    ctx.status = 401;
    ctx.body = { error: 'invalid token' };
    return;
  }
  const userId = ctx.params.user_id!;
  const rank = await redis.zrevrank(zset, userId);
  ctx.body = {
    leaderboard_id: ctx.params.leaderboard_id,
    user_id: userId,
    found: rank !== null,
    rank: rank === null ? 0 : rank + 1,
  };
});
app.use(router.routes());

const server = createServer(app.callback());
server.listen(Number(env('LUDUS_QUERY_PORT')), process.env.LUDUS_HOST ?? '127.0.0.1');
process.once('SIGTERM', () => {
  server.close();
  redis.disconnect();
  server.closeAllConnections();
});
