import { createHash } from 'node:crypto';
import type { Principal } from '../auth/types';
import { SvcError } from '../errors';
import { isUniqueViolation, type Store } from '../store/db';

const TTL_MS = 24 * 60 * 60 * 1000;

/** What a replay reports instead of the first call's charge: the replay's own request id and the balance now. */
export interface Replay {
  readonly requestId: string;
  readonly balance: bigint;
}

/** How a result is stored: JSON text both ways (proto messages use their toJSON/fromJSON). */
export interface Codec<T> {
  encode(value: T): unknown;
  decode(json: unknown): T;
  /** A stored result (one message of a stream) as its replay reports it: cost 0, the balance now. */
  replayed(value: T, replay: Replay): T;
}

export interface Idempotency {
  /**
   * Runs `work` once per account and key; a repeat with the same body gets the stored result,
   * reporting that it charged nothing (`codec.replayed`).
   */
  unary<T>(
    principal: Principal,
    requestId: string,
    key: string | undefined,
    fingerprint: Fingerprint,
    codec: Codec<T>,
    work: () => Promise<T>,
  ): Promise<T>;
  /**
   * The streaming form: a repeat replays the stored messages of a stream that completed. The
   * fingerprint may be given as a function, computed only when there is a key to check it against.
   */
  stream<T>(
    principal: Principal,
    requestId: string,
    key: string | undefined,
    fingerprint: Fingerprint,
    codec: Codec<T>,
    work: () => AsyncIterable<T>,
  ): AsyncGenerator<T>;
}

/** What was asked, hashed only when a call has an Idempotency-Key (most have none). */
export type Fingerprint = () => string;

/** A stable hash of what was asked: the method and its request (`request()` is read only when needed). */
export function fingerprintOf(method: string, request: () => unknown): Fingerprint {
  return () => createHash('sha256').update(method).update('\0').update(JSON.stringify(request())).digest('hex');
}

/** The idempotency store's dependencies from the core's: a claim's lease is the hold TTL. */
export function idempotencyDeps(deps: {
  readonly store: Store;
  readonly now: () => number;
  readonly config: { readonly limits: { readonly holdTtlSeconds: number } };
  readonly wallet: { get(accountId: string): Promise<{ readonly balance: bigint }> };
}): Parameters<typeof createIdempotency>[0] {
  return {
    store: deps.store,
    now: deps.now,
    leaseMs: deps.config.limits.holdTtlSeconds * 1000,
    balance: async (accountId) => (await deps.wallet.get(accountId)).balance,
  };
}

/**
 * Idempotency-Key handling over `idempotency_records`. The first request claims the key
 * ('pending'); success stores its result ('done'); failure frees the key so the client can
 * retry. The same key with another body is `idempotency_conflict` (details.reason
 * `different_body`: a retry cannot help), as is a repeat while the first is still running
 * (`in_progress`). Records older than 24 hours no longer count. A replay charges nothing and
 * says so: cost 0 and the balance now, never the first call's stale figures.
 *
 * A pending claim carries a lease (`leaseMs`, the hold TTL) that its core extends while the
 * first request runs: a core that died mid-request (kill -9, a lost machine) stops extending it,
 * and once it has run out, like that request's hold, the next request with the key claims it.
 */
export function createIdempotency(deps: {
  store: Store;
  now: () => number;
  leaseMs: number;
  /** The account's balance now, for what a replay reports. */
  balance: (accountId: string) => Promise<bigint>;
}): Idempotency {
  const { db } = deps.store;
  const { leaseMs } = deps;

  type Claim = { kind: 'claimed'; createdAt: bigint } | { kind: 'done'; response: unknown };

  async function claim(principal: Principal, key: string, fingerprint: string): Promise<Claim> {
    if (key.length > 255)
      throw new SvcError('invalid_argument', 'The Idempotency-Key header is longer than 255 characters.', {
        param: 'Idempotency-Key',
      });
    for (let attempt = 0; attempt < 3; attempt += 1) {
      try {
        const at = deps.now();
        await db
          .insertInto('idempotency_records')
          .values({
            account_id: principal.accountId,
            idem_key: key,
            body_hash: fingerprint,
            state: 'pending',
            status_code: 0n,
            response: null,
            created_at: BigInt(at),
            lease_until: BigInt(at + leaseMs),
          })
          .execute();
        return { kind: 'claimed', createdAt: BigInt(at) };
      } catch (error) {
        if (!isUniqueViolation(error)) throw error;
      }
      const row = await db
        .selectFrom('idempotency_records')
        .selectAll()
        .where('account_id', '=', principal.accountId)
        .where('idem_key', '=', key)
        .executeTakeFirst();
      if (row === undefined) continue;
      if (Number(row.created_at) + TTL_MS < deps.now()) {
        await db
          .deleteFrom('idempotency_records')
          .where('account_id', '=', principal.accountId)
          .where('idem_key', '=', key)
          .where('created_at', '=', row.created_at)
          .execute();
        continue;
      }
      // The first request's core stopped extending its lease: it is gone, and so is (or soon
      // will be, by the reaper) its hold. Taken over only if still the same abandoned claim.
      if (row.state === 'pending' && row.lease_until !== null && Number(row.lease_until) < deps.now()) {
        await db
          .deleteFrom('idempotency_records')
          .where('account_id', '=', principal.accountId)
          .where('idem_key', '=', key)
          .where('state', '=', 'pending')
          .where('lease_until', '=', row.lease_until)
          .execute();
        continue;
      }
      if (row.body_hash !== fingerprint) {
        throw new SvcError(
          'idempotency_conflict',
          'This Idempotency-Key was already used with a different request body.',
          { param: 'Idempotency-Key', details: { reason: 'different_body' } },
        );
      }
      if (row.state !== 'done' || row.response === null) {
        throw new SvcError(
          'idempotency_conflict',
          'A request with this Idempotency-Key is still being processed; retry later.',
          { param: 'Idempotency-Key', details: { reason: 'in_progress' } },
        );
      }
      return { kind: 'done', response: JSON.parse(row.response) as unknown };
    }
    throw new SvcError('unavailable', 'Could not claim the Idempotency-Key; retry.');
  }

  // complete and release touch only this request's own claim (its created_at): a request that
  // outlived its lease and was taken over must neither free nor overwrite its successor's claim,
  // or a third request with the key would run (and be charged) again.
  async function complete(principal: Principal, key: string, createdAt: bigint, response: unknown): Promise<void> {
    await db
      .updateTable('idempotency_records')
      .set({ state: 'done', status_code: 200n, response: JSON.stringify(response) })
      .where('account_id', '=', principal.accountId)
      .where('idem_key', '=', key)
      .where('state', '=', 'pending')
      .where('created_at', '=', createdAt)
      .execute();
  }

  /** Extends the lease of this request's claim every third of it until the returned stop is called. */
  function keepClaim(principal: Principal, key: string, createdAt: bigint): () => void {
    const timer = setInterval(
      () => {
        db.updateTable('idempotency_records')
          .set({ lease_until: BigInt(deps.now() + leaseMs) })
          .where('account_id', '=', principal.accountId)
          .where('idem_key', '=', key)
          .where('state', '=', 'pending')
          .where('created_at', '=', createdAt)
          .execute()
          // A missed extension is made up at the next tick: only misses for a whole lease (the
          // database gone that long) let another request claim the key, as for a dead core.
          .catch(() => undefined);
      },
      Math.max(100, leaseMs / 3),
    );
    timer.unref();
    return () => clearInterval(timer);
  }

  async function release(principal: Principal, key: string, createdAt: bigint): Promise<void> {
    await db
      .deleteFrom('idempotency_records')
      .where('account_id', '=', principal.accountId)
      .where('idem_key', '=', key)
      .where('state', '=', 'pending')
      .where('created_at', '=', createdAt)
      .execute();
  }

  return {
    async unary<T>(
      principal: Principal,
      requestId: string,
      key: string | undefined,
      fingerprint: Fingerprint,
      codec: Codec<T>,
      work: () => Promise<T>,
    ): Promise<T> {
      if (key === undefined) return work();
      const claimed = await claim(principal, key, fingerprint());
      if (claimed.kind === 'done') {
        const replay = { requestId, balance: await deps.balance(principal.accountId) };
        return codec.replayed(codec.decode(claimed.response), replay);
      }
      const stop = keepClaim(principal, key, claimed.createdAt);
      let result: T;
      try {
        result = await work();
      } catch (error) {
        stop();
        await release(principal, key, claimed.createdAt);
        throw error;
      }
      stop();
      await complete(principal, key, claimed.createdAt, codec.encode(result));
      return result;
    },

    async *stream<T>(
      principal: Principal,
      requestId: string,
      key: string | undefined,
      fingerprint: Fingerprint,
      codec: Codec<T>,
      work: () => AsyncIterable<T>,
    ): AsyncGenerator<T> {
      if (key === undefined) {
        yield* work();
        return;
      }
      const claimed = await claim(principal, key, fingerprint());
      if (claimed.kind === 'done') {
        const replay = { requestId, balance: await deps.balance(principal.accountId) };
        for (const item of claimed.response as unknown[]) yield codec.replayed(codec.decode(item), replay);
        return;
      }
      const seen: unknown[] = [];
      let completed = false;
      const stop = keepClaim(principal, key, claimed.createdAt);
      try {
        for await (const item of work()) {
          seen.push(codec.encode(item));
          yield item;
        }
        completed = true;
        stop();
        await complete(principal, key, claimed.createdAt, seen);
      } finally {
        stop();
        if (!completed) await release(principal, key, claimed.createdAt);
      }
    },
  };
}
