import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { redisBuckets } from './bucket';
import { createRedisOutage, type RedisFailureMode } from './redis-outage';
import { tokenState, type TokenLimiter } from './token-limiter';

export interface RedisTokenLimiterOptions {
  readonly redis: Redis;
  /** Tokens per minute per API key, shared by every core on this Redis; 0 turns the limit off. */
  readonly tokensPerMinute: number;
  readonly failure: RedisFailureMode;
  readonly logger: Logger;
  /** Namespaces the keys, so that two deployments can share one Redis (default `svc:tpmb`). */
  readonly keyPrefix?: string;
  /** The core's clock (default Date.now): the buckets refill by it. */
  readonly now?: () => number;
}

/**
 * Tokens per minute per API key, counted in Redis so that every core sharing it shares one
 * budget per key: the same bucket as the in-process limiter (`./bucket`), to which each call
 * adds the tokens it used once it ends. A call is admitted while the bucket holds tokens.
 * When Redis fails, `state` admits (`open`) or refuses with `unavailable` (`closed`), and a count
 * that cannot be made is dropped; the outage and the recovery are logged once each.
 */
export function createRedisTokenLimiter(options: RedisTokenLimiterOptions): TokenLimiter {
  const limit = options.tokensPerMinute;
  const outage = createRedisOutage({ logger: options.logger, failure: options.failure, what: 'token limits' });
  const buckets = redisBuckets(options.redis);
  // Not `svc:tpm`, where the fixed-window limiter svc used before kept strings (WRONGTYPE for a hash).
  const prefix = options.keyPrefix ?? 'svc:tpmb';
  const now = options.now ?? Date.now;

  return {
    async state(key) {
      if (limit <= 0) return { limit: 0, remaining: 0, resetMs: 0 };
      let tokens: number;
      try {
        tokens = await buckets.peek(`${prefix}:${key}`, limit, now());
      } catch (error) {
        return outage.failed(error);
      }
      outage.answered();
      return tokenState(limit, tokens);
    },
    async spend(key, tokens) {
      if (limit <= 0 || !(tokens > 0)) return;
      try {
        await buckets.spend(`${prefix}:${key}`, limit, now(), tokens);
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
