import type { Redis } from 'ioredis';

/**
 * The one limiter algorithm of svc, for requests and for model tokens, in this process and in
 * Redis alike: a bucket per key that holds up to `limit`, refills continuously at limit/60 per
 * second, and is full for a key never seen. A request takes 1 when the bucket holds at least 1; a
 * model call's tokens are taken after it ran and may take the bucket below zero. The arithmetic
 * below is the same in the Lua scripts, so a sequence of calls at the same times gives the same
 * answers from either store.
 */
export interface Bucket {
  tokens: number;
  /** When `tokens` was last brought up to date, in milliseconds. */
  at: number;
}

/** Tokens per millisecond of a per-minute limit. */
export const perMs = (limit: number): number => limit / 60_000;

/** The bucket's tokens at `now`: refilled since `at`, never above `limit` (a clock going back refills nothing). */
export function refilled(limit: number, bucket: Bucket | undefined, now: number): number {
  if (bucket === undefined) return limit;
  return Math.min(limit, bucket.tokens + Math.max(0, now - bucket.at) * perMs(limit));
}

/** Milliseconds until a bucket holding `tokens` holds `target`. */
export const msUntil = (limit: number, tokens: number, target: number): number =>
  Math.max(0, Math.ceil((target - tokens) / perMs(limit)));

// Lua numbers are doubles like JavaScript's; "%.17g" writes them back exactly.
const LUA_PRELUDE = `
local limit = tonumber(ARGV[1])
local now = tonumber(ARGV[2])
local state = redis.call('HMGET', KEYS[1], 't', 'a')
local tokens = limit
if state[1] then
  tokens = math.min(limit, tonumber(state[1]) + math.max(0, now - tonumber(state[2])) * (limit / 60000))
end
local function save(value)
  redis.call('HSET', KEYS[1], 't', string.format('%.17g', value), 'a', string.format('%.17g', now))
  -- A bucket left alone is full again after its deficit refills; then it is as good as absent.
  redis.call('PEXPIRE', KEYS[1], math.max(1000, math.ceil((limit - value) / (limit / 60000))))
end
`;

/** Takes one token when there is one; answers whether it did and the tokens left (as a string). */
const TAKE = `${LUA_PRELUDE}
if tokens < 1 then return {0, string.format('%.17g', tokens)} end
tokens = tokens - 1
save(tokens)
return {1, string.format('%.17g', tokens)}
`;

/** Takes ARGV[3] tokens, below zero if need be; answers the tokens left. */
const SPEND = `${LUA_PRELUDE}
tokens = tokens - tonumber(ARGV[3])
save(tokens)
return string.format('%.17g', tokens)
`;

/** Reads the tokens at ARGV[2] without writing. */
const PEEK = `${LUA_PRELUDE}
return string.format('%.17g', tokens)
`;

interface BucketCommands {
  svcBucketTake(key: string, limit: number, now: number): Promise<[number, string]>;
  svcBucketSpend(key: string, limit: number, now: number, amount: number): Promise<string>;
  svcBucketPeek(key: string, limit: number, now: number): Promise<string>;
}

/**
 * The bucket in Redis, one hash per key (`t` tokens, `a` time), changed atomically by a Lua
 * script. `now` is the calling core's clock: cores sharing a Redis keep NTP time, and a bucket
 * never refills for a clock that went back.
 */
export interface RedisBuckets {
  take(key: string, limit: number, now: number): Promise<{ admitted: boolean; tokens: number }>;
  spend(key: string, limit: number, now: number, amount: number): Promise<number>;
  peek(key: string, limit: number, now: number): Promise<number>;
}

export function redisBuckets(redis: Redis): RedisBuckets {
  // defineCommand loads each script once per connection (EVALSHA, EVAL on a cache miss).
  const commands = redis as unknown as Partial<BucketCommands> & Redis;
  if (commands.svcBucketTake === undefined) {
    redis.defineCommand('svcBucketTake', { numberOfKeys: 1, lua: TAKE });
    redis.defineCommand('svcBucketSpend', { numberOfKeys: 1, lua: SPEND });
    redis.defineCommand('svcBucketPeek', { numberOfKeys: 1, lua: PEEK });
  }
  const c = redis as unknown as BucketCommands;
  return {
    async take(key, limit, now) {
      const [admitted, tokens] = await c.svcBucketTake(key, limit, now);
      return { admitted: admitted === 1, tokens: Number(tokens) };
    },
    async spend(key, limit, now, amount) {
      return Number(await c.svcBucketSpend(key, limit, now, amount));
    },
    async peek(key, limit, now) {
      return Number(await c.svcBucketPeek(key, limit, now));
    },
  };
}
