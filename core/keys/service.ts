import type { Selectable } from 'kysely';
import type { Store } from '../store/db';
import type { ApiKeysTable } from '../store/schema';
import { SvcError, invalidArgument } from '../errors';
import { newId } from '../ids';
import { displayParts, generateKey, hashKey } from './format';
import { checkGrace, DEFAULT_ROLL_GRACE_MS, parseScope, type KeyScope } from './scope';

export interface ApiKeyView {
  readonly id: string;
  readonly accountId: string;
  readonly name: string;
  readonly prefix: string;
  readonly lastFour: string;
  readonly createdAt: Date;
  readonly lastUsedAt: Date | null;
  readonly revokedAt: Date | null;
  readonly scope: KeyScope;
  /** Null: the key never expires. A rolled key's predecessor expires at the end of its grace. */
  readonly expiresAt: Date | null;
  /** Shared by a key and every key rolled from it (spend caps will count per lineage). */
  readonly lineageId: string;
  /** The key this one was rolled to; null unless rolled. */
  readonly replacedBy: string | null;
}

export interface CreateKeyInput {
  readonly accountId: string;
  readonly name?: string;
  /** Default `all`; validated (an unknown scope is `invalid_argument` naming `scope`). */
  readonly scope?: string;
  /** Unix ms; must lie in the future (`invalid_argument` naming `expires_at`). */
  readonly expiresAt?: number | null;
}

export interface KeyService {
  /** Creates a key; `secret` is the full key, returned here and nowhere else. */
  create(input: CreateKeyInput): Promise<{ key: ApiKeyView; secret: string }>;
  list(accountId: string): Promise<ApiKeyView[]>;
  get(keyId: string): Promise<ApiKeyView>;
  /** Revokes at once; revoking a revoked key is a no-op returning it. */
  revoke(keyId: string): Promise<ApiKeyView>;
  /**
   * Issues a new key with the same account, label, scope, expiry and lineage; the old key keeps
   * working until `now + graceMs` (default 24 h, at most 30 days, 0 = at once). A revoked,
   * expired or already rolled key cannot be rolled.
   */
  roll(
    keyId: string,
    options?: { graceMs?: number },
  ): Promise<{ key: ApiKeyView; secret: string; previous: ApiKeyView }>;
}

function toDate(ms: bigint | null): Date | null {
  return ms === null ? null : new Date(Number(ms));
}

export function toKeyView(row: Selectable<ApiKeysTable>): ApiKeyView {
  return {
    id: row.id,
    accountId: row.account_id,
    name: row.name,
    prefix: row.prefix,
    lastFour: row.last_four,
    createdAt: new Date(Number(row.created_at)),
    lastUsedAt: toDate(row.last_used_at),
    revokedAt: toDate(row.revoked_at),
    scope: storedScope(row),
    expiresAt: toDate(row.expires_at),
    lineageId: row.lineage_id ?? row.id,
    replacedBy: row.replaced_by,
  };
}

// Rows are written only through parseScope. Reading an unknown value as `all` would widen what a
// key may do, so a damaged row fails loudly instead.
function storedScope(row: { id: string; scope: string }): KeyScope {
  if (row.scope === 'all' || row.scope === 'chat' || row.scope === 'tools') return row.scope;
  throw new SvcError('internal', `API key ${row.id} has an unknown scope in the database`);
}

const COLUMNS = [
  'id',
  'account_id',
  'name',
  'key_hash',
  'prefix',
  'last_four',
  'created_at',
  'last_used_at',
  'revoked_at',
  'scope',
  'expires_at',
  'lineage_id',
  'replaced_by',
] as const;

export function createKeyService(deps: {
  store: Store;
  now: () => number;
  onRevoke?: (keyId: string) => void;
}): KeyService {
  const { db } = deps.store;

  async function get(keyId: string): Promise<ApiKeyView> {
    const row = await db.selectFrom('api_keys').select(COLUMNS).where('id', '=', keyId).executeTakeFirst();
    if (row === undefined) throw new SvcError('not_found', `No API key ${JSON.stringify(keyId)}`, { param: 'key_id' });
    return toKeyView(row);
  }

  function newRow(input: {
    accountId: string;
    name: string;
    scope: KeyScope;
    expiresAt: number | null;
    lineageId?: string;
  }) {
    const secret = generateKey();
    const { prefix, lastFour } = displayParts(secret);
    const id = newId('key');
    const row: Selectable<ApiKeysTable> = {
      id,
      account_id: input.accountId,
      name: input.name,
      key_hash: hashKey(secret),
      prefix,
      last_four: lastFour,
      created_at: BigInt(deps.now()),
      last_used_at: null,
      revoked_at: null,
      scope: input.scope,
      expires_at: input.expiresAt === null ? null : BigInt(input.expiresAt),
      lineage_id: input.lineageId ?? id,
      replaced_by: null,
    };
    return { row, secret };
  }

  return {
    async create({ accountId, name = '', scope, expiresAt = null }) {
      const label = name.trim();
      if (label.length > 200) throw invalidArgument('name', 'name must be at most 200 characters');
      const keyScope = parseScope(scope);
      if (expiresAt !== null && !(Number.isSafeInteger(expiresAt) && expiresAt > deps.now())) {
        throw invalidArgument('expires_at', 'expires_at must be a time in the future');
      }
      const account = await db.selectFrom('accounts').select('id').where('id', '=', accountId).executeTakeFirst();
      if (account === undefined)
        throw new SvcError('not_found', `No account ${JSON.stringify(accountId)}`, { param: 'account_id' });
      const { row, secret } = newRow({ accountId, name: label, scope: keyScope, expiresAt });
      await db.insertInto('api_keys').values(row).execute();
      return { key: toKeyView(row), secret };
    },
    async list(accountId) {
      const rows = await db
        .selectFrom('api_keys')
        .select(COLUMNS)
        .where('account_id', '=', accountId)
        .orderBy('created_at', 'desc')
        .execute();
      return rows.map(toKeyView);
    },
    get,
    async revoke(keyId) {
      await db
        .updateTable('api_keys')
        .set({ revoked_at: BigInt(deps.now()) })
        .where('id', '=', keyId)
        .where('revoked_at', 'is', null)
        .execute();
      const view = await get(keyId);
      deps.onRevoke?.(keyId);
      return view;
    },
    async roll(keyId, options = {}) {
      const graceMs = checkGrace(options.graceMs ?? DEFAULT_ROLL_GRACE_MS);
      const old = await get(keyId);
      const at = deps.now();
      if (old.revokedAt !== null) throw invalidArgument('key_id', `API key ${keyId} is revoked and cannot be rolled`);
      if (old.replacedBy !== null) {
        throw invalidArgument(
          'key_id',
          `API key ${keyId} was already rolled to ${old.replacedBy}; roll that key instead`,
        );
      }
      if (old.expiresAt !== null && old.expiresAt.getTime() <= at)
        throw invalidArgument('key_id', `API key ${keyId} has expired and cannot be rolled`);
      const graceEnd = at + graceMs;
      const oldExpiry = old.expiresAt === null ? graceEnd : Math.min(old.expiresAt.getTime(), graceEnd);
      // The successor keeps the lineage's expiry, not the grace: rolling replaces the secret, it
      // does not extend or shorten what the key was issued for.
      const { row, secret } = newRow({
        accountId: old.accountId,
        name: old.name,
        scope: old.scope,
        expiresAt: old.expiresAt === null ? null : old.expiresAt.getTime(),
        lineageId: old.lineageId,
      });
      await db.transaction().execute(async (trx) => {
        await trx.insertInto('api_keys').values(row).execute();
        // Conditional on the state read above, so two concurrent rolls cannot both succeed.
        const result = await trx
          .updateTable('api_keys')
          .set({ replaced_by: row.id, expires_at: BigInt(oldExpiry) })
          .where('id', '=', keyId)
          .where('replaced_by', 'is', null)
          .where('revoked_at', 'is', null)
          .executeTakeFirst();
        if (result.numUpdatedRows !== 1n) {
          throw invalidArgument(
            'key_id',
            `API key ${keyId} was rolled or revoked meanwhile; list the keys and roll the current one`,
          );
        }
      });
      // The cached entry carries the old expiry: drop it so the grace applies here at once.
      deps.onRevoke?.(keyId);
      return { key: toKeyView(row), secret, previous: await get(keyId) };
    },
  };
}
