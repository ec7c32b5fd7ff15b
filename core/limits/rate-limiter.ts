import { SvcError } from '../errors';

/** What the caller's bucket looked like after a request was admitted. */
export interface RateLimitState {
  readonly limit: number;
  readonly remaining: number;
  /** Milliseconds until the bucket is full again. */
  readonly resetMs: number;
}

export interface RateLimiter {
  /**
   * Takes one request from `key`'s bucket; throws (or rejects with) SvcError `rate_limited` when
   * it is empty. In-process limiters answer at once; shared ones (Redis) asynchronously.
   */
  take(key: string): RateLimitState | Promise<RateLimitState>;
}

/** The in-process limiter answers at once. */
export interface MemoryRateLimiter extends RateLimiter {
  take(key: string): RateLimitState;
}

/**
 * Requests per minute per API key, as a token bucket held in this process: it refills
 * continuously (limit/60 per second) and bursts up to the limit. `limit` 0 turns it off.
 */
export function createRateLimiter(options: {
  requestsPerMinute: number;
  now: () => number;
  maxKeys?: number;
}): MemoryRateLimiter {
  const limit = options.requestsPerMinute;
  const perMs = limit / 60_000;
  const maxKeys = options.maxKeys ?? 100_000;
  const buckets = new Map<string, { tokens: number; at: number }>();

  return {
    take(key) {
      if (limit <= 0) return { limit: 0, remaining: 0, resetMs: 0 };
      const now = options.now();
      let bucket = buckets.get(key);
      if (bucket === undefined) {
        if (buckets.size >= maxKeys) buckets.delete(buckets.keys().next().value as string);
        bucket = { tokens: limit, at: now };
        buckets.set(key, bucket);
      } else {
        bucket.tokens = Math.min(limit, bucket.tokens + (now - bucket.at) * perMs);
        bucket.at = now;
      }
      if (bucket.tokens < 1) {
        const waitMs = Math.ceil((1 - bucket.tokens) / perMs);
        throw new SvcError(
          'rate_limited',
          `Rate limit reached: ${limit} requests per minute for this API key. Try again in ${Math.ceil(waitMs / 1000)} s.`,
          {
            details: { limit, remaining: 0, reset_ms: waitMs, retry_after_s: Math.ceil(waitMs / 1000) },
          },
        );
      }
      bucket.tokens -= 1;
      return { limit, remaining: Math.floor(bucket.tokens), resetMs: Math.ceil((limit - bucket.tokens) / perMs) };
    },
  };
}
