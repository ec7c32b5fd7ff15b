import type { Selectable } from 'kysely';
import type { Store } from '../store/db';
import type { ApiKeysTable } from '../store/schema';
import { SvcError, invalidArgument } from '../errors';
import { newId } from '../ids';
import { displayParts, generateKey, hashKey } from './format';

export interface ApiKeyView {
  readonly id: string;
  readonly accountId: string;
  readonly name: string;
  readonly prefix: string;
  readonly lastFour: string;
  readonly createdAt: Date;
  readonly lastUsedAt: Date | null;
  readonly revokedAt: Date | null;
}

export interface KeyService {
  /** Creates a key; `secret` is the full key, returned here and nowhere else. */
  create(input: { accountId: string; name?: string }): Promise<{ key: ApiKeyView; secret: string }>;
  list(accountId: string): Promise<ApiKeyView[]>;
  get(keyId: string): Promise<ApiKeyView>;
  /** Revokes at once; revoking a revoked key is a no-op returning it. */
  revoke(keyId: string): Promise<ApiKeyView>;
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
  };
}

export function createKeyService(deps: { store: Store; now: () => number; onRevoke?: (keyId: string) => void }): KeyService {
  const { db } = deps.store;
  const columns = ['id', 'account_id', 'name', 'key_hash', 'prefix', 'last_four', 'created_at', 'last_used_at', 'revoked_at'] as const;

  async function get(keyId: string): Promise<ApiKeyView> {
    const row = await db.selectFrom('api_keys').select(columns).where('id', '=', keyId).executeTakeFirst();
    if (row === undefined) throw new SvcError('not_found', `No API key ${JSON.stringify(keyId)}`, { param: 'key_id' });
    return toKeyView(row);
  }

  return {
    async create({ accountId, name = '' }) {
      const label = name.trim();
      if (label.length > 200) throw invalidArgument('name', 'name must be at most 200 characters');
      const account = await db.selectFrom('accounts').select('id').where('id', '=', accountId).executeTakeFirst();
      if (account === undefined) throw new SvcError('not_found', `No account ${JSON.stringify(accountId)}`, { param: 'account_id' });
      const secret = generateKey();
      const { prefix, lastFour } = displayParts(secret);
      const row = {
        id: newId('key'),
        account_id: accountId,
        name: label,
        key_hash: hashKey(secret),
        prefix,
        last_four: lastFour,
        created_at: BigInt(deps.now()),
        last_used_at: null,
        revoked_at: null,
      };
      await db.insertInto('api_keys').values(row).execute();
      return { key: toKeyView(row), secret };
    },
    async list(accountId) {
      const rows = await db.selectFrom('api_keys').select(columns).where('account_id', '=', accountId).orderBy('created_at', 'desc').execute();
      return rows.map(toKeyView);
    },
    get,
    async revoke(keyId) {
      await db.updateTable('api_keys').set({ revoked_at: BigInt(deps.now()) }).where('id', '=', keyId).where('revoked_at', 'is', null).execute();
      const view = await get(keyId);
      deps.onRevoke?.(keyId);
      return view;
    },
  };
}
