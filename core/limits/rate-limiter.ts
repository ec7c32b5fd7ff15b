import { SvcError } from '../errors';
import { msUntil, refilled, type Bucket } from './bucket';

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

/** The `rate_limited` refusal of a bucket holding `tokens` (less than one). */
export function rateLimited(limit: number, tokens: number): SvcError {
  const waitMs = Math.max(1, msUntil(limit, tokens, 1));
  return new SvcError(
    'rate_limited',
    `Rate limit reached: ${limit} requests per minute for this API key. Try again in ${Math.ceil(waitMs / 1000)} s.`,
    { details: { limit, remaining: 0, reset_ms: waitMs, retry_after_s: Math.ceil(waitMs / 1000) } },
  );
}

/** The state after a request was admitted, leaving `tokens` in the bucket. */
export function admitted(limit: number, tokens: number): RateLimitState {
  return { limit, remaining: Math.floor(tokens), resetMs: msUntil(limit, tokens, limit) };
}

/**
 * Requests per minute per API key, as the bucket of `./bucket` held in this process: it refills
 * continuously (limit/60 per second) and bursts up to the limit. `limit` 0 turns it off.
 */
export function createRateLimiter(options: {
  requestsPerMinute: number;
  now: () => number;
  maxKeys?: number;
}): MemoryRateLimiter {
  const limit = options.requestsPerMinute;
  const maxKeys = options.maxKeys ?? 100_000;
  const buckets = new Map<string, Bucket>();

  return {
    take(key) {
      if (limit <= 0) return { limit: 0, remaining: 0, resetMs: 0 };
      const now = options.now();
      let bucket = buckets.get(key);
      const tokens = refilled(limit, bucket, now);
      if (tokens < 1) throw rateLimited(limit, tokens);
      if (bucket === undefined) {
        if (buckets.size >= maxKeys) buckets.delete(buckets.keys().next().value as string);
        bucket = { tokens, at: now };
        buckets.set(key, bucket);
      }
      bucket.tokens = tokens - 1;
      bucket.at = now;
      return admitted(limit, bucket.tokens);
    },
  };
}
