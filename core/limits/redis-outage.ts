import type { Logger } from 'pino';
import { SvcError } from '../errors';
import type { RateLimitState } from './rate-limiter';

/** What to do with a request when Redis cannot be asked: admit it, or refuse it (503). */
export type RedisFailureMode = 'open' | 'closed';

/** One Redis outage seen by a limiter: logged when it starts and when it ends, once each. */
export interface RedisOutage {
  /** Logs the start of an outage (once), then admits (`open`: no state) or throws `unavailable` (`closed`). */
  failed(error: unknown): RateLimitState;
  /** Logs the end of an outage, if one was under way. */
  answered(): void;
}

/** Tracks the outages of the Redis behind the limits named `what` (e.g. "rate limits"). */
export function createRedisOutage(options: { logger: Logger; failure: RedisFailureMode; what: string }): RedisOutage {
  const { logger, failure, what } = options;
  let down = false;
  return {
    failed(error) {
      if (!down) {
        down = true;
        logger.warn(
          { err: error, failure },
          failure === 'open'
            ? `Redis is unavailable: ${what} fail open (requests are admitted without a limit) until it is back`
            : `Redis is unavailable: ${what} fail closed (requests are refused) until it is back`,
        );
      }
      if (failure === 'closed') {
        throw new SvcError('unavailable', 'Rate limiting is temporarily unavailable; try again in a moment', {
          cause: error,
        });
      }
      // Unknown budget: no x-ratelimit-* headers rather than made-up ones.
      return { limit: 0, remaining: 0, resetMs: 0 };
    },
    answered() {
      if (!down) return;
      down = false;
      logger.info(`Redis is back: ${what} are shared again`);
    },
  };
}
