import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import { createRedisOutage, type RedisFailureMode } from './redis-outage';
import type { TokenLimiter } from './token-limiter';

export interface RedisTokenLimiterOptions {
  readonly redis: Redis;
  /** Tokens per minute per API key, shared by every core on this Redis; 0 turns the limit off. */
  readonly tokensPerMinute: number;
  readonly failure: RedisFailureMode;
  readonly logger: Logger;
  /** Namespaces the keys, so that two deployments can share one Redis (default `svc:tpm`). */
  readonly keyPrefix?: string;
}

/**
 * Tokens per minute per API key, counted in Redis so that every core sharing it shares one
 * budget per key: a fixed 60-second window per key (rate-limiter-flexible), to which each call
 * adds the tokens it used once it ends. A call is admitted while the window has tokens left.
 * When Redis fails, `state` admits (`open`) or refuses with `unavailable` (`closed`), and a count
 * that cannot be made is dropped; the outage and the recovery are logged once each.
 */
export function createRedisTokenLimiter(options: RedisTokenLimiterOptions): TokenLimiter {
  const limit = options.tokensPerMinute;
  const outage = createRedisOutage({ logger: options.logger, failure: options.failure, what: 'token limits' });
  const limiter = new RateLimiterRedis({
    storeClient: options.redis,
    keyPrefix: options.keyPrefix ?? 'svc:tpm',
    points: Math.max(1, limit),
    duration: 60,
  });

  return {
    async state(key) {
      if (limit <= 0) return { limit: 0, remaining: 0, resetMs: 0 };
      let used: number;
      let resetMs: number;
      try {
        const res = await limiter.get(key);
        used = res?.consumedPoints ?? 0;
        resetMs = res?.msBeforeNext ?? 0;
      } catch (error) {
        return outage.failed(error);
      }
      outage.answered();
      return { limit, remaining: Math.max(0, limit - used), resetMs: used === 0 ? 0 : Math.max(1, resetMs) };
    },
    async spend(key, tokens) {
      if (limit <= 0 || !(tokens > 0)) return;
      try {
        await limiter.penalty(key, Math.ceil(tokens));
        outage.answered();
      } catch (error) {
        try {
          outage.failed(error);
        } catch {
          // Closed or open, a count that cannot be made is dropped: the call already ran.
        }
      }
    },
  };
}
