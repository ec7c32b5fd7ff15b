import type * as IoRedis from 'ioredis';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { redisBuckets } from './bucket';
import { admitted, rateLimited, type RateLimiter } from './rate-limiter';
import { createRedisOutage, type RedisFailureMode } from './redis-outage';

export type { RedisFailureMode } from './redis-outage';

export interface RedisRateLimiterOptions {
  readonly redis: Redis;
  /** Requests per minute per API key, shared by every core on this Redis; 0 turns limits off. */
  readonly requestsPerMinute: number;
  readonly failure: RedisFailureMode;
  readonly logger: Logger;
  /** Namespaces the keys, so that two deployments can share one Redis (default `svc:rlb`). */
  readonly keyPrefix?: string;
  /** The core's clock (default Date.now): the buckets refill by it. */
  readonly now?: () => number;
}

/**
 * Connects to `url` (redis:// or rediss://) the way the limiter needs: commands fail at once
 * while Redis is away (no offline queue, one try, a short timeout) so that a request never waits
 * on Redis; ioredis keeps reconnecting in the background.
 */
export function connectRedis(url: string): Redis {
  // Required on first use: without SVC_REDIS_URL the client is never loaded (docs/performance.md).
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { Redis } = require('ioredis') as typeof IoRedis;
  return new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: 500,
    connectTimeout: 2000,
    lazyConnect: false,
    retryStrategy: (times) => Math.min(times * 200, 2000),
  });
}

/**
 * Requests per minute per API key, counted in Redis so that every core sharing it shares one
 * budget per key: the same bucket as the in-process limiter (`./bucket`), kept in a Redis hash
 * and changed atomically by a Lua script. When Redis fails the request is admitted (`open`, the
 * default) or refused with `unavailable` (`closed`); the first failure of an outage and the
 * recovery are logged once each.
 */
export function createRedisRateLimiter(options: RedisRateLimiterOptions): RateLimiter {
  const limit = options.requestsPerMinute;
  const outage = createRedisOutage({ logger: options.logger, failure: options.failure, what: 'rate limits' });
  const buckets = redisBuckets(options.redis);
  // Not `svc:rl`, where the fixed-window limiter svc used before kept strings: a hash under that
  // name would answer WRONGTYPE while an older core still writes there.
  const prefix = options.keyPrefix ?? 'svc:rlb';
  const now = options.now ?? Date.now;

  return {
    async take(key) {
      if (limit <= 0) return { limit: 0, remaining: 0, resetMs: 0 };
      let answer: { admitted: boolean; tokens: number };
      try {
        answer = await buckets.take(`${prefix}:${key}`, limit, now());
      } catch (error) {
        return outage.failed(error);
      }
      outage.answered();
      if (!answer.admitted) throw rateLimited(limit, answer.tokens);
      return admitted(limit, answer.tokens);
    },
  };
}

/** Resolves true once `redis` is connected, false if it is not within `timeoutMs`. */
export async function redisReady(redis: Redis, timeoutMs: number): Promise<boolean> {
  if (redis.status === 'ready') return true;
  return new Promise((resolve) => {
    const timer = setTimeout(() => done(false), timeoutMs);
    const onReady = (): void => done(true);
    function done(ok: boolean): void {
      clearTimeout(timer);
      redis.off('ready', onReady);
      resolve(ok);
    }
    redis.on('ready', onReady);
  });
}

/** `host:port` of a Redis URL, for the log: never its user or password. */
export function redisHost(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.hostname}:${parsed.port === '' ? '6379' : parsed.port}`;
  } catch {
    return '(unparsable SVC_REDIS_URL)';
  }
}
