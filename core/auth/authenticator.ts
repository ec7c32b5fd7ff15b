import type { Logger } from 'pino';
import type { Store } from '../store/db';
import { SvcError } from '../errors';
import { hashKey, isWellFormedKey } from './key-format';
import { ACCESS_TOKEN_PREFIX, isWellFormedToken } from './token-format';
import type { Principal } from './types';
import { decodeNames } from './scope';

export interface Authenticator {
  /**
   * Resolves a full API key, or an OAuth access token (`svc_oat_`, acting like a `tools`-scoped
   * key of its grant's account); throws `invalid_api_key` for a malformed, unknown, revoked or
   * expired one.
   */
  authenticate(key: string): Promise<Principal>;
  /** Drops a key (or an OAuth grant's tokens) from this process's cache at once (called on revoke and roll). */
  invalidate(keyId: string): void;
}

/** An OAuth access token's principal and when it stops working (Unix ms). */
export interface AccessTokenRecord {
  readonly principal: Principal;
  readonly expiresAt: number;
}

/**
 * The OAuth domain's access tokens, as the authenticator needs them. Handed in by the
 * composition root (`core/oauth/principal.ts` implements it), so auth never imports oauth.
 */
export interface AccessTokens {
  /** The token of this SHA-256 digest, or null when it does not work. */
  lookup(hash: string): Promise<AccessTokenRecord | null>;
  /** Records when the grant was last used. */
  touch(grantId: string, at: number): Promise<void>;
}

export interface AuthenticatorOptions {
  readonly store: Store;
  /** OAuth access tokens (`svc_oat_`). */
  readonly accessTokens: AccessTokens;
  readonly logger: Logger;
  readonly now: () => number;
  /**
   * How long a lookup is trusted (default 4 s). Bounds how late another replica sees a
   * revocation: SPEC §5 allows 5 s.
   */
  readonly cacheTtlMs?: number;
  /** Minimum interval between two `last_used_at` writes of one key (default 60 s). */
  readonly lastUsedIntervalMs?: number;
  readonly maxEntries?: number;
}

interface KeyRecord {
  readonly principal: Principal;
  /** Unix ms when the key stops working; null: never. */
  readonly keyExpiresAt: number | null;
}

interface CacheEntry {
  /** The credential's SHA-256 (hex): what the database and the in-flight reads know it by. */
  readonly hash: string;
  readonly record: KeyRecord | null;
  /** When this entry stops being trusted (the cache TTL, not the key's expiry). */
  readonly expiresAt: number;
}

const invalid = (): SvcError =>
  new SvcError(
    'invalid_api_key',
    'Incorrect API key provided. You can find your API key in the svc console or ask your operator for one.',
  );

/**
 * API-key authentication with a short-lived in-process cache keyed by the credential as presented,
 * so the hot path is one map lookup: the checksum and the SHA-256 are computed when a lookup is
 * due, not on every call (together they were the larger part of authenticating). The cache holds
 * only credentials seen within the last TTL (older entries are dropped as new ones come in), so
 * it keeps no key longer in memory than the calls that presented it, give or take the TTL.
 * Revocation and expiry act exactly as with a cache keyed by the hash: `invalidate` drops a key's
 * entries at once, and the key's expiry is checked on every call. Malformed keys (prefix, length,
 * checksum) are refused before any database read, and are never cached.
 */
export function createAuthenticator(options: AuthenticatorOptions): Authenticator {
  const { store, logger, now } = options;
  const ttl = options.cacheTtlMs ?? 4000;
  const lastUsedInterval = options.lastUsedIntervalMs ?? 60_000;
  const maxEntries = options.maxEntries ?? 50_000;
  const cache = new Map<string, CacheEntry>();
  // A grant has had several access tokens: all of them go when it is revoked.
  const credentialsByKeyId = new Map<string, Set<string>>();
  const lastUsedWritten = new Map<string, number>();
  const inflight = new Map<string, Promise<KeyRecord | null>>();

  async function lookup(hash: string): Promise<KeyRecord | null> {
    // The caps themselves are read by each hold, in its transaction; here only whether there are
    // any, so that an uncapped key's holds do no extra work.
    const row = await store.db
      .selectFrom('api_keys')
      .leftJoin('key_lineages', 'key_lineages.lineage_id', 'api_keys.lineage_id')
      .select([
        'api_keys.id',
        'api_keys.account_id',
        'api_keys.revoked_at',
        'api_keys.scope',
        'api_keys.expires_at',
        'api_keys.lineage_id',
        'api_keys.can_manage',
        'api_keys.allowed_models',
        'api_keys.allowed_tools',
        'api_keys.concurrent_limit',
        'key_lineages.lineage_id as capped_lineage',
      ])
      .where('api_keys.key_hash', '=', hash)
      .executeTakeFirst();
    if (row === undefined || row.revoked_at !== null) return null;
    const scope = row.scope;
    // An unknown scope (a damaged row) must not widen what the key may do: no access at all.
    if (scope !== 'all' && scope !== 'chat' && scope !== 'tools') {
      logger.error({ keyId: row.id }, 'API key has an unknown scope; refusing it');
      return null;
    }
    return {
      principal: {
        accountId: row.account_id,
        keyId: row.id,
        scope,
        manage: Number(row.can_manage) === 1,
        lineageId: row.lineage_id ?? row.id,
        capped: row.capped_lineage !== null,
        allowedModels: decodeNames(row.allowed_models),
        allowedTools: decodeNames(row.allowed_tools),
        concurrentLimit: row.concurrent_limit === null ? null : Number(row.concurrent_limit),
      },
      keyExpiresAt: row.expires_at === null ? null : Number(row.expires_at),
    };
  }

  async function lookupToken(hash: string): Promise<KeyRecord | null> {
    const record = await options.accessTokens.lookup(hash);
    return record === null ? null : { principal: record.principal, keyExpiresAt: record.expiresAt };
  }

  function touch(keyId: string, oauth: boolean, at: number): void {
    const last = lastUsedWritten.get(keyId) ?? 0;
    if (at - last < lastUsedInterval) return;
    lastUsedWritten.set(keyId, at);
    if (oauth) {
      options.accessTokens
        .touch(keyId, at)
        .catch((error: unknown) => logger.warn({ err: error, grantId: keyId }, 'could not record last_used_at'));
      return;
    }
    store.db
      .updateTable('api_keys')
      .set({ last_used_at: BigInt(at) })
      .where('id', '=', keyId)
      .execute()
      .catch((error: unknown) => logger.warn({ err: error, keyId }, 'could not record last_used_at'));
  }

  function forget(credential: string, entry: CacheEntry): void {
    cache.delete(credential);
    if (entry.record === null) return;
    const keyId = entry.record.principal.keyId;
    const credentials = credentialsByKeyId.get(keyId);
    credentials?.delete(credential);
    if (credentials?.size === 0) credentialsByKeyId.delete(keyId);
  }

  function remember(credential: string, entry: CacheEntry, at: number): void {
    // Newest last, so the map is in the order entries stop being trusted: expired ones are at its
    // front, and are dropped here (a few per call) rather than kept until the map is full.
    const previous = cache.get(credential);
    if (previous !== undefined) forget(credential, previous);
    for (let i = 0; i < 2; i++) {
      const oldest = cache.entries().next().value;
      if (oldest === undefined || (oldest[1].expiresAt > at && cache.size < maxEntries)) break;
      forget(oldest[0], oldest[1]);
    }
    cache.set(credential, entry);
    if (entry.record !== null) {
      const keyId = entry.record.principal.keyId;
      const credentials = credentialsByKeyId.get(keyId) ?? new Set<string>();
      credentials.add(credential);
      credentialsByKeyId.set(keyId, credentials);
    }
  }

  return {
    async authenticate(key) {
      // The prefix tells an OAuth access token from a key before any database read.
      const oauth = key.startsWith(ACCESS_TOKEN_PREFIX);
      const at = now();
      const cached = cache.get(key);
      let record: KeyRecord | null;
      if (cached !== undefined && cached.expiresAt > at) {
        record = cached.record;
      } else {
        // Only a well-formed credential is ever cached: a cached one passed this check already.
        if (oauth ? !isWellFormedToken(ACCESS_TOKEN_PREFIX, key) : !isWellFormedKey(key)) throw invalid();
        const hash = cached?.hash ?? hashKey(key);
        // Concurrent first requests with one key share a single database read.
        let pending = inflight.get(hash);
        if (pending === undefined) {
          pending = (oauth ? lookupToken(hash) : lookup(hash)).finally(() => inflight.delete(hash));
          inflight.set(hash, pending);
        }
        record = await pending;
        remember(key, { hash, record, expiresAt: at + ttl }, at);
      }
      // The key's own expiry is checked against the clock on every call, cached or not, so a key
      // stops at its expiry to the millisecond, not up to a cache TTL later. Refused exactly like
      // a revoked key.
      if (record === null || (record.keyExpiresAt !== null && record.keyExpiresAt <= at)) throw invalid();
      touch(record.principal.keyId, oauth, at);
      return record.principal;
    },
    invalidate(keyId) {
      for (const credential of credentialsByKeyId.get(keyId) ?? []) cache.delete(credential);
      credentialsByKeyId.delete(keyId);
    },
  };
}
