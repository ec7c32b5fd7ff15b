import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { workerShare } from '../config/shares';
import { SvcError } from '../errors';
import { createRedisOutage, type RedisFailureMode } from './redis-outage';

/*
 * Calls in flight per API key and per account (`limits.concurrent_per_key`,
 * `limits.concurrent_per_account`; SPEC §4, DESIGN point 7): taken when a call is admitted, before
 * any hold, and given back exactly once when it ends, however it ends. The core's context
 * middleware (core/server/context.ts) is the one place that takes and gives back a slot; the
 * handlers only ask for one (`requireKey({ scope, inFlight: true })`).
 */

/** Who takes a slot, and the key's own limit when it has one (null or absent: the configured one). */
export interface SlotHolder {
  readonly keyId: string;
  readonly accountId: string;
  readonly keyLimit?: number | null | undefined;
}

/** One call's place in its key's and account's counts. `release` gives it back; a second call does nothing. */
export interface Slot {
  release(): void;
}

export interface ConcurrencyLimiter {
  /** Takes a slot, or throws (rejects with) SvcError `concurrency_limited` when the key or the account is full. */
  acquire(holder: SlotHolder): Slot | Promise<Slot>;
  /** Calls in flight in this limiter's view, for tests and metrics. */
  inFlight(holder: SlotHolder): { key: number; account: number } | Promise<{ key: number; account: number }>;
}

export interface ConcurrencyLimits {
  /** Calls in flight per key; 0 turns the limit off. */
  readonly perKey: number;
  /** Calls in flight per account, over all its keys; 0 turns the limit off. */
  readonly perAccount: number;
  /**
   * The processes that share these limits in their own memory (`svc serve --workers N` without
   * Redis): `perKey` and `perAccount` are this process's shares already; a key's own limit is
   * shared out here the same way (`workerShare`). Default 1.
   */
  readonly workers?: number;
}

/** The refusal of a call whose key (or account) has `limit` calls in flight already. */
export function concurrencyLimited(scope: 'key' | 'account', limit: number): SvcError {
  const whose = scope === 'key' ? 'this API key' : "this key's account";
  return new SvcError(
    'concurrency_limited',
    `Too many calls in flight: ${whose} may run ${limit} at once. Retry when one of them has finished.`,
    { details: { scope, limit, retry_after_s: 1 } },
  );
}

const NO_SLOT: Slot = { release: () => undefined };

function once(release: () => void): Slot {
  let done = false;
  return {
    release() {
      if (done) return;
      done = true;
      release();
    },
  };
}

/** The key's limit: its own when set (0: no limit; this process's share of it), else the configured one. */
function keyLimitOf(limits: ConcurrencyLimits, holder: SlotHolder): number {
  if (holder.keyLimit === null || holder.keyLimit === undefined) return limits.perKey;
  return workerShare(holder.keyLimit, limits.workers ?? 1);
}

/**
 * Counts in this process's memory. Under `svc serve --workers N` without Redis each worker holds
 * its share of the limits (core/config/shares.ts), as for the rate limits.
 */
export function createConcurrencyLimiter(limits: ConcurrencyLimits): ConcurrencyLimiter {
  const byKey = new Map<string, number>();
  const byAccount = new Map<string, number>();
  const add = (map: Map<string, number>, id: string, n: number): void => {
    const next = (map.get(id) ?? 0) + n;
    if (next <= 0) map.delete(id);
    else map.set(id, next);
  };
  return {
    acquire(holder) {
      const perKey = keyLimitOf(limits, holder);
      const perAccount = limits.perAccount;
      if (perKey <= 0 && perAccount <= 0) return NO_SLOT;
      if (perKey > 0 && (byKey.get(holder.keyId) ?? 0) >= perKey) throw concurrencyLimited('key', perKey);
      if (perAccount > 0 && (byAccount.get(holder.accountId) ?? 0) >= perAccount)
        throw concurrencyLimited('account', perAccount);
      add(byKey, holder.keyId, 1);
      add(byAccount, holder.accountId, 1);
      return once(() => {
        add(byKey, holder.keyId, -1);
        add(byAccount, holder.accountId, -1);
      });
    },
    inFlight(holder) {
      return { key: byKey.get(holder.keyId) ?? 0, account: byAccount.get(holder.accountId) ?? 0 };
    },
  };
}

// Each slot is a member of two sorted sets (the key's, the account's) scored by when its lease
// ends; a core that dies leaves its slots behind only until their leases run out.
const ACQUIRE = `
local now = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local perKey = tonumber(ARGV[4])
local perAccount = tonumber(ARGV[5])
if perKey > 0 and redis.call('ZCARD', KEYS[1]) >= perKey then return 1 end
if perAccount > 0 and redis.call('ZCARD', KEYS[2]) >= perAccount then return 2 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
redis.call('PEXPIRE', KEYS[2], ARGV[6])
return 0
`;

export interface RedisConcurrencyOptions {
  readonly redis: Redis;
  readonly limits: ConcurrencyLimits;
  readonly failure: RedisFailureMode;
  readonly logger: Logger;
  /** Namespaces the keys (default `svc:cc`). */
  readonly keyPrefix?: string;
  readonly now?: () => number;
  /** How long a slot lives without renewal (default 60 s); renewed every third of it while its call runs. */
  readonly leaseMs?: number;
}

/**
 * Counts in Redis, so that every core and worker sharing it keeps one count per key and per
 * account (exact across `svc serve --workers N` and replicas). Each slot is leased and renewed
 * while its call runs, so the slots of a core that died free themselves within a lease. When
 * Redis cannot be asked, the call is admitted (`open`, counted by this process's own limiter
 * meanwhile) or refused with `unavailable` (`closed`), as the rate limits do.
 */
export function createRedisConcurrencyLimiter(options: RedisConcurrencyOptions): ConcurrencyLimiter & {
  close(): void;
} {
  const { redis, limits } = options;
  const prefix = options.keyPrefix ?? 'svc:cc';
  const now = options.now ?? Date.now;
  const leaseMs = options.leaseMs ?? 60_000;
  const outage = createRedisOutage({ logger: options.logger, failure: options.failure, what: 'concurrency limits' });
  const local = createConcurrencyLimiter(limits);
  const live = new Map<string, { keySet: string; accountSet: string }>();
  const sets = (holder: SlotHolder) => ({
    keySet: `${prefix}:k:${holder.keyId}`,
    accountSet: `${prefix}:a:${holder.accountId}`,
  });

  const renew = setInterval(
    () => {
      if (live.size === 0) return;
      const until = now() + leaseMs;
      const pipeline = redis.pipeline();
      for (const [member, { keySet, accountSet }] of live) {
        pipeline.zadd(keySet, 'XX', until, member);
        pipeline.zadd(accountSet, 'XX', until, member);
        pipeline.pexpire(keySet, leaseMs);
        pipeline.pexpire(accountSet, leaseMs);
      }
      pipeline.exec().catch(() => undefined);
    },
    Math.max(1000, Math.floor(leaseMs / 3)),
  );
  renew.unref();

  return {
    async acquire(holder) {
      const perKey = keyLimitOf(limits, holder);
      if (perKey <= 0 && limits.perAccount <= 0) return NO_SLOT;
      const { keySet, accountSet } = sets(holder);
      const member = randomBytes(12).toString('base64url');
      let answer: unknown;
      try {
        answer = await redis.eval(
          ACQUIRE,
          2,
          keySet,
          accountSet,
          now(),
          now() + leaseMs,
          member,
          perKey,
          limits.perAccount,
          leaseMs,
        );
      } catch (error) {
        outage.failed(error);
        // Open: this process's own count bounds the call meanwhile.
        return local.acquire(holder);
      }
      outage.answered();
      if (answer === 1) throw concurrencyLimited('key', perKey);
      if (answer === 2) throw concurrencyLimited('account', limits.perAccount);
      live.set(member, { keySet, accountSet });
      return once(() => {
        live.delete(member);
        redis
          .multi()
          .zrem(keySet, member)
          .zrem(accountSet, member)
          .exec()
          // A release Redis did not hear of frees itself when its lease runs out.
          .catch(() => undefined);
      });
    },
    async inFlight(holder) {
      const { keySet, accountSet } = sets(holder);
      const floor = now();
      const [key, account] = await Promise.all([
        redis.zcount(keySet, `(${floor}`, '+inf'),
        redis.zcount(accountSet, `(${floor}`, '+inf'),
      ]);
      return { key, account };
    },
    close() {
      clearInterval(renew);
    },
  };
}
