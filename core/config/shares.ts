import {
  DEFAULT_CONCURRENT_PER_ACCOUNT,
  DEFAULT_CONCURRENT_PER_KEY,
  DEFAULT_COUNT_REQUESTS_PER_MINUTE,
  DEFAULT_OAUTH,
} from './defaults';
import type { SvcConfig } from './types';

/**
 * One worker's share of a limit held in its own memory: `limit / workers`, rounded down so that
 * all together never admit more than the limit, and at least 1 (0 would turn a limit off).
 * A limit below the worker count therefore admits up to `workers`, not `limit`: the start-up
 * log says so (see `limitsBelowWorkers`).
 */
export function workerShare(limit: number, workers: number): number {
  if (limit <= 0 || workers <= 1) return limit;
  return Math.max(1, Math.floor(limit / workers));
}

/**
 * The config one of `svc serve --workers N`'s processes runs with: every limit counted in the
 * process's memory becomes its share (`workerShare`), so the workers together keep the
 * configured limit. With Redis (`sharedLimits`), requests and tokens per minute are counted
 * there, exactly, and stay whole, and so do the calls in flight per key and per account (a key's
 * own limit is shared out by the limiter, `concurrencyShare`); the token-counting calls and the OAuth registration limits
 * are always in memory.
 */
export function workerConfig(config: SvcConfig, workers: number, sharedLimits: boolean): SvcConfig {
  if (workers <= 1) return config;
  const { limits } = config;
  const oauth = config.oauth ?? DEFAULT_OAUTH;
  const tokens = limits.tokensPerMinute;
  return {
    ...config,
    limits: {
      ...limits,
      requestsPerMinute: sharedLimits ? limits.requestsPerMinute : workerShare(limits.requestsPerMinute, workers),
      ...(tokens === undefined ? {} : { tokensPerMinute: sharedLimits ? tokens : workerShare(tokens, workers) }),
      concurrentPerKey: sharedLimits ? concurrentPerKey(config) : workerShare(concurrentPerKey(config), workers),
      concurrentPerAccount: sharedLimits
        ? concurrentPerAccount(config)
        : workerShare(concurrentPerAccount(config), workers),
      ...(sharedLimits ? {} : { sharedByWorkers: workers }),
      countRequestsPerMinute: workerShare(limits.countRequestsPerMinute ?? DEFAULT_COUNT_REQUESTS_PER_MINUTE, workers),
    },
    oauth: {
      ...oauth,
      registrationsPerMinute: workerShare(oauth.registrationsPerMinute, workers),
      registrationsPerAddressPerHour: workerShare(oauth.registrationsPerAddressPerHour, workers),
    },
  };
}

/** The configured limits that `workers` shares cannot keep exactly (each below the worker count). */
export function limitsBelowWorkers(config: SvcConfig, workers: number, sharedLimits: boolean): string[] {
  const oauth = config.oauth ?? DEFAULT_OAUTH;
  const limits: [string, number | undefined][] = [
    ['limits.requests_per_minute', sharedLimits ? undefined : config.limits.requestsPerMinute],
    ['limits.tokens_per_minute', sharedLimits ? undefined : config.limits.tokensPerMinute],
    ['limits.concurrent_per_key', sharedLimits ? undefined : concurrentPerKey(config)],
    ['limits.concurrent_per_account', sharedLimits ? undefined : concurrentPerAccount(config)],
    ['limits.count_requests_per_minute', config.limits.countRequestsPerMinute ?? DEFAULT_COUNT_REQUESTS_PER_MINUTE],
    ['oauth.registrations_per_minute', oauth.registrationsPerMinute],
    ['oauth.registrations_per_address_per_hour', oauth.registrationsPerAddressPerHour],
  ];
  return limits.filter(([, limit]) => limit !== undefined && limit > 0 && limit < workers).map(([name]) => name);
}

/** `limits.concurrent_per_key` as configured, or its default. */
export function concurrentPerKey(config: Pick<SvcConfig, 'limits'>): number {
  return config.limits.concurrentPerKey ?? DEFAULT_CONCURRENT_PER_KEY;
}

/** `limits.concurrent_per_account` as configured, or its default. */
export function concurrentPerAccount(config: Pick<SvcConfig, 'limits'>): number {
  return config.limits.concurrentPerAccount ?? DEFAULT_CONCURRENT_PER_ACCOUNT;
}
