import { SvcError } from '../errors';
import { msUntil, refilled, type Bucket } from './bucket';
import type { RateLimitState } from './rate-limiter';

/**
 * Tokens per minute per API key, for models. A call is admitted while the key's budget is not
 * spent, and what it used is counted after it ends (the tokens a call will use are not known
 * before it runs): a large call may overdraw the minute, and the key then waits until the budget
 * is positive again.
 */
export interface TokenLimiter {
  /** The key's budget now (`limit` 0: no limit, or unknown). Shared limiters answer asynchronously. */
  state(key: string): RateLimitState | Promise<RateLimitState>;
  /** Counts `tokens` a call of `key` used. Never throws: a count that cannot be made is logged. */
  spend(key: string, tokens: number): void | Promise<void>;
}

/** The in-process limiter answers at once. */
export interface MemoryTokenLimiter extends TokenLimiter {
  state(key: string): RateLimitState;
  spend(key: string, tokens: number): void;
}

/** The `tokens_rate_limited` error for a key whose budget `state` is spent. */
export function tokensExhausted(state: RateLimitState): SvcError {
  const waitMs = Math.max(1, state.resetMs);
  const retryAfterS = Math.ceil(waitMs / 1000);
  return new SvcError(
    'tokens_rate_limited',
    `Rate limit reached: ${state.limit} tokens per minute for this API key. Try again in ${retryAfterS} s.`,
    { details: { limit: state.limit, remaining: 0, reset_ms: waitMs, retry_after_s: retryAfterS } },
  );
}

/** Throws `tokens_rate_limited` when `state` has nothing left; a limit of 0 is no limit. */
export function assertTokensLeft(state: RateLimitState): void {
  if (state.limit > 0 && state.remaining <= 0) throw tokensExhausted(state);
}

/** The budget of a key whose bucket holds `tokens`. */
export function tokenState(limit: number, tokens: number): RateLimitState {
  if (tokens <= 0) return { limit, remaining: 0, resetMs: msUntil(limit, tokens, 1) };
  return { limit, remaining: Math.floor(tokens), resetMs: msUntil(limit, tokens, limit) };
}

/**
 * Tokens per minute per API key, as the bucket of `./bucket` held in this process: it refills
 * continuously (limit/60 per second) up to the limit, and a call's usage may take it below zero.
 * While it is at or below zero `state` reports `resetMs` as the wait until it is positive again.
 * `tokensPerMinute` 0 turns it off.
 */
export function createTokenLimiter(options: {
  tokensPerMinute: number;
  now: () => number;
  maxKeys?: number;
}): MemoryTokenLimiter {
  const limit = options.tokensPerMinute;
  const maxKeys = options.maxKeys ?? 100_000;
  const buckets = new Map<string, Bucket>();

  return {
    state(key) {
      if (limit <= 0) return { limit: 0, remaining: 0, resetMs: 0 };
      return tokenState(limit, refilled(limit, buckets.get(key), options.now()));
    },
    spend(key, tokens) {
      if (limit <= 0 || !(tokens > 0)) return;
      const now = options.now();
      let bucket = buckets.get(key);
      const left = refilled(limit, bucket, now) - tokens;
      if (bucket === undefined) {
        if (buckets.size >= maxKeys) buckets.delete(buckets.keys().next().value as string);
        bucket = { tokens: left, at: now };
        buckets.set(key, bucket);
      }
      bucket.tokens = left;
      bucket.at = now;
    },
  };
}
