import Redis from 'ioredis';
import { decide, type RateDecision, type RateLimiter, type RateWindow } from './types';

/**
 * Fixed-window counters in Redis, shared by every instance. One script per hit reads every
 * window's counter and increments them all only when each is under its limit.
 * KEYS: one counter per window; ARGV: limits..., then ttl ms per window.
 */
const SCRIPT = `
local n = #KEYS
local counts = {}
local allowed = 1
for i = 1, n do
  local c = tonumber(redis.call('GET', KEYS[i]) or '0')
  counts[i] = c
  if c >= tonumber(ARGV[i]) then allowed = 0 end
end
if allowed == 1 then
  for i = 1, n do
    local v = redis.call('INCR', KEYS[i])
    if v == 1 then redis.call('PEXPIRE', KEYS[i], ARGV[n + i]) end
  end
end
return counts
`;

export class RedisRateLimiter implements RateLimiter {
  readonly kind = 'redis' as const;
  private readonly redis: Redis;

  constructor(opts: { url: string; prefix: string }) {
    this.redis = new Redis(opts.url, { keyPrefix: `${opts.prefix}rl:`, maxRetriesPerRequest: 2 });
    // Connection errors surface as rejected commands; without a listener ioredis prints them.
    this.redis.on('error', () => undefined);
    this.redis.defineCommand('ludusRateHit', { lua: SCRIPT });
  }

  async hit(key: string, windows: RateWindow[], now: number): Promise<RateDecision> {
    // One hash tag per key keeps every window of a key on one cluster slot.
    const keys = windows.map((w) => `{${key}}:${w.windowMs}:${Math.floor(now / w.windowMs)}`);
    const ttls = windows.map((w) => (Math.floor(now / w.windowMs) + 1) * w.windowMs - now + 1000);
    const counts = (await (this.redis as unknown as RateCommand).ludusRateHit(
      keys.length,
      ...keys,
      ...windows.map((w) => w.limit),
      ...ttls,
    )) as number[];
    return decide(windows, counts.map(Number), now);
  }

  async peek(key: string, windows: RateWindow[], now: number): Promise<RateDecision> {
    const keys = windows.map((w) => `{${key}}:${w.windowMs}:${Math.floor(now / w.windowMs)}`);
    const counts = keys.length ? await this.redis.mget(...keys) : [];
    const d = decide(
      windows,
      counts.map((c) => Number(c ?? 0)),
      now,
    );
    return d.allowed ? { ...d, remaining: d.remaining + 1 } : d;
  }

  async firstUse(key: string, ttlMs: number): Promise<boolean> {
    const ok = await this.redis.set(`once:${key}`, '1', 'PX', Math.max(1, Math.ceil(ttlMs)), 'NX');
    return ok === 'OK';
  }

  async ping(): Promise<void> {
    await this.redis.ping();
  }

  async close(): Promise<void> {
    if (this.redis.status === 'ready') await this.redis.quit().catch(() => undefined);
    else this.redis.disconnect();
  }
}

interface RateCommand {
  ludusRateHit(numKeys: number, ...args: Array<string | number>): Promise<unknown>;
}
