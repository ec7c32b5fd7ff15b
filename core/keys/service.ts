import type { Selectable } from 'kysely';
import type { Store } from '../store/db';
import type { ApiKeysTable } from '../store/schema';
import { SvcError, invalidArgument } from '../errors';
import { newId } from '../ids';
import { checkPlainText } from '../text/plain-text';
import { checkCap, lineageSpend, setLineageCaps, UNCAPPED, type CapChange, type LineageSpend } from './caps';
import { checkAllowedModels, checkAllowedTools, decodeNames, encodeNames, type KeyCatalog } from './limits';
import { displayParts, generateKey, hashKey } from '../auth/key-format';
import { checkGrace, DEFAULT_ROLL_GRACE_MS, parseKeyGrant, type KeyScope } from '../auth/scope';

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
  /** Whether the key has the `manage` scope (may list, revoke, roll and cap the account's keys). */
  readonly manage: boolean;
  /** Null: the key never expires. A rolled key's predecessor expires at the end of its grace. */
  readonly expiresAt: Date | null;
  /** Shared by a key and every key rolled from it; caps and spend belong to the lineage. */
  readonly lineageId: string;
  /** The key this one was rolled to; null unless rolled. */
  readonly replacedBy: string | null;
  /** Credits the lineage may spend per UTC day; null: no cap. */
  readonly capDaily: bigint | null;
  /** Credits the lineage may spend per UTC month; null: no cap. */
  readonly capMonthly: bigint | null;
  /** Credits the lineage spent in the current UTC day. */
  readonly spentToday: bigint;
  /** Credits the lineage spent in the current UTC month. */
  readonly spentThisMonth: bigint;
  /** Credits the lineage may ever spend; null: no total cap. */
  readonly capTotal: bigint | null;
  /** Credits the lineage ever spent. */
  readonly spentTotal: bigint;
  /** Model ids the key may use; null: every model. */
  readonly allowedModels: readonly string[] | null;
  /** Tool names the key may use; null: every tool. */
  readonly allowedTools: readonly string[] | null;
  /** The key's own limit of calls in flight (0: none); null: `limits.concurrent_per_key`. */
  readonly concurrentLimit: number | null;
}

export interface CreateKeyInput {
  readonly accountId: string;
  readonly name?: string;
  /**
   * Default `all`; `all`, `chat` or `tools`, optionally with `,manage` (see `parseKeyGrant`). An
   * unknown scope is `invalid_argument` naming `scope`.
   */
  readonly scope?: string;
  /** Unix ms; must lie in the future (`invalid_argument` naming `expires_at`). */
  readonly expiresAt?: number | null;
  /** Credits per UTC day, 0 or more (`invalid_argument` naming `cap_daily`); null or absent: no cap. */
  readonly capDaily?: bigint | null;
  /** Credits per UTC month, 0 or more (`invalid_argument` naming `cap_monthly`); null or absent: no cap. */
  readonly capMonthly?: bigint | null;
  /** Credits the lineage may ever spend, 0 or more (`invalid_argument` naming `cap_total`); null or absent: no cap. */
  readonly capTotal?: bigint | null;
  /**
   * Models (ids or aliases, stored as ids) the key may use; empty, null or absent: every model. An
   * unknown one is `invalid_argument` naming `allowed_models`.
   */
  readonly allowedModels?: readonly string[] | null;
  /** Tools the key may use; empty, null or absent: every tool (`invalid_argument` naming `allowed_tools`). */
  readonly allowedTools?: readonly string[] | null;
  /** The key's own limit of calls in flight, 0 (none) to 100000 (`invalid_argument` naming `concurrent_limit`); null or absent: the configured one. */
  readonly concurrentLimit?: number | null;
}

/** A change of a key's label, expiry and allowed lists: absent leaves each as it is. */
export interface KeyUpdate {
  readonly name?: string;
  /** A time in the future (Unix ms), or null: never. */
  readonly expiresAt?: number | null;
  /** An empty list or null: every model. */
  readonly allowedModels?: readonly string[] | null;
  /** An empty list or null: every tool. */
  readonly allowedTools?: readonly string[] | null;
  /** 0 (none) to 100000, or null: the configured `limits.concurrent_per_key`. */
  readonly concurrentLimit?: number | null;
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
  /**
   * Changes the caps of the key's lineage (every key rolled from or to it). Takes effect at the
   * next hold on this core and on any other core that already knew the lineage as capped; a
   * lineage's first cap reaches other cores' cached keys within the 5 s revocation window.
   * Spend to date is kept; the ledger is never touched.
   */
  setCaps(keyId: string, change: CapChange): Promise<ApiKeyView>;
  /**
   * Changes a key's label, expiry (a time in the future, or null: never) and allowed models and
   * tools. A revoked key cannot be changed. The auth cache forgets the key at once, so the change
   * applies here now (on other cores within the 5 s revocation window). Everything is checked
   * before anything is written.
   */
  update(
    keyId: string,
    change: KeyUpdate,
    /** Sees the checked lists (ids, null: all) before anything is written, and may refuse them. */
    approve?: (next: { allowedModels?: readonly string[] | null; allowedTools?: readonly string[] | null }) => void,
  ): Promise<ApiKeyView>;
}

function toDate(ms: bigint | null): Date | null {
  return ms === null ? null : new Date(Number(ms));
}

export function toKeyView(row: Selectable<ApiKeysTable>, spend: LineageSpend = UNCAPPED): ApiKeyView {
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
    manage: Number(row.can_manage) === 1,
    expiresAt: toDate(row.expires_at),
    lineageId: row.lineage_id ?? row.id,
    replacedBy: row.replaced_by,
    allowedModels: decodeNames(row.allowed_models),
    allowedTools: decodeNames(row.allowed_tools),
    concurrentLimit:
      row.concurrent_limit === null || row.concurrent_limit === undefined ? null : Number(row.concurrent_limit),
    ...spend,
  };
}

// Rows are written only through parseKeyGrant. Reading an unknown value as `all` would widen what a
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
  'can_manage',
  'allowed_models',
  'allowed_tools',
  'concurrent_limit',
] as const;

export function createKeyService(deps: {
  store: Store;
  now: () => number;
  onRevoke?: (keyId: string) => void;
  /**
   * The configured models and tools, against which allowed lists are checked (aliases resolved
   * to ids). Without it names are only checked for form.
   */
  catalog?: KeyCatalog;
}): KeyService {
  const { db } = deps.store;

  /** The rows as views with their lineages' caps and spend (one account's rows). */
  async function withSpend(rows: Selectable<ApiKeysTable>[]): Promise<ApiKeyView[]> {
    const first = rows[0];
    if (first === undefined) return [];
    const spend = await lineageSpend(
      db,
      first.account_id,
      rows.map((r) => r.lineage_id ?? r.id),
      deps.now(),
    );
    return rows.map((r) => toKeyView(r, spend.get(r.lineage_id ?? r.id)));
  }

  async function get(keyId: string): Promise<ApiKeyView> {
    const row = await db.selectFrom('api_keys').select(COLUMNS).where('id', '=', keyId).executeTakeFirst();
    if (row === undefined) throw new SvcError('not_found', `No API key ${JSON.stringify(keyId)}`, { param: 'key_id' });
    const [view] = await withSpend([row]);
    return view ?? toKeyView(row);
  }

  /** Drops every key of the lineage from the auth cache, so that they are seen as capped at once. */
  async function forgetLineage(lineageId: string): Promise<void> {
    if (deps.onRevoke === undefined) return;
    const ids = await db.selectFrom('api_keys').select('id').where('lineage_id', '=', lineageId).execute();
    for (const { id } of ids) deps.onRevoke(id);
  }

  function newRow(input: {
    accountId: string;
    name: string;
    scope: KeyScope;
    manage: boolean;
    expiresAt: number | null;
    lineageId?: string;
    allowedModels: readonly string[] | null;
    allowedTools: readonly string[] | null;
    concurrentLimit: number | null;
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
      can_manage: input.manage ? 1 : 0,
      allowed_models: encodeNames(input.allowedModels),
      allowed_tools: encodeNames(input.allowedTools),
      concurrent_limit: input.concurrentLimit,
    };
    return { row, secret };
  }

  return {
    async create(input) {
      const { accountId, name = '', scope, expiresAt = null, capDaily = null, capMonthly = null } = input;
      const capTotal = input.capTotal ?? null;
      const label = name.trim();
      if (label.length > 200) throw invalidArgument('name', 'name must be at most 200 characters');
      checkPlainText('name', label);
      const grant = parseKeyGrant(scope);
      if (expiresAt !== null && !(Number.isSafeInteger(expiresAt) && expiresAt > deps.now())) {
        throw invalidArgument('expires_at', 'expires_at must be a time in the future');
      }
      checkCap(capDaily, 'cap_daily');
      checkCap(capMonthly, 'cap_monthly');
      checkCap(capTotal, 'cap_total');
      const allowedModels = checkAllowedModels(input.allowedModels, deps.catalog);
      const allowedTools = checkAllowedTools(input.allowedTools, deps.catalog);
      const account = await db.selectFrom('accounts').select('id').where('id', '=', accountId).executeTakeFirst();
      if (account === undefined)
        throw new SvcError('not_found', `No account ${JSON.stringify(accountId)}`, { param: 'account_id' });
      const concurrentLimit = checkConcurrentLimit(input.concurrentLimit ?? null);
      const { row, secret } = newRow({
        accountId,
        name: label,
        ...grant,
        expiresAt,
        allowedModels,
        allowedTools,
        concurrentLimit,
      });
      const capped = capDaily !== null || capMonthly !== null || capTotal !== null;
      await db.transaction().execute(async (trx) => {
        await trx.insertInto('api_keys').values(row).execute();
        if (capped) {
          await trx
            .insertInto('key_lineages')
            .values({
              lineage_id: row.id,
              account_id: accountId,
              cap_daily: capDaily,
              cap_monthly: capMonthly,
              cap_total: capTotal,
              updated_at: row.created_at,
            })
            .execute();
        }
      });
      const spend = { capDaily, capMonthly, capTotal, spentToday: 0n, spentThisMonth: 0n, spentTotal: 0n };
      return { key: toKeyView(row, spend), secret };
    },
    async list(accountId) {
      const rows = await db
        .selectFrom('api_keys')
        .select(COLUMNS)
        .where('account_id', '=', accountId)
        .orderBy('created_at', 'desc')
        .execute();
      return withSpend(rows);
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
        manage: old.manage,
        expiresAt: old.expiresAt === null ? null : old.expiresAt.getTime(),
        lineageId: old.lineageId,
        allowedModels: old.allowedModels,
        allowedTools: old.allowedTools,
        concurrentLimit: old.concurrentLimit,
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
      return { key: await get(row.id), secret, previous: await get(keyId) };
    },
    async setCaps(keyId, change) {
      const key = await get(keyId);
      await setLineageCaps(db, { accountId: key.accountId, lineageId: key.lineageId, change, at: deps.now() });
      await forgetLineage(key.lineageId);
      return get(keyId);
    },
    async update(keyId, change, approve) {
      const key = await get(keyId);
      if (key.revokedAt !== null) throw invalidArgument('key_id', `API key ${keyId} is revoked and cannot be changed`);
      const set: {
        name?: string;
        expires_at?: bigint | null;
        allowed_models?: string | null;
        allowed_tools?: string | null;
        concurrent_limit?: number | null;
      } = {};
      if (change.name !== undefined) {
        const label = change.name.trim();
        if (label.length > 200) throw invalidArgument('name', 'name must be at most 200 characters');
        set.name = checkPlainText('name', label);
      }
      if (change.expiresAt !== undefined) {
        const at = change.expiresAt;
        if (at !== null && !(Number.isSafeInteger(at) && at > deps.now()))
          throw invalidArgument('expires_at', 'expires_at must be a time in the future');
        set.expires_at = at === null ? null : BigInt(at);
      }
      const models =
        change.allowedModels === undefined ? undefined : checkAllowedModels(change.allowedModels ?? [], deps.catalog);
      const tools =
        change.allowedTools === undefined ? undefined : checkAllowedTools(change.allowedTools ?? [], deps.catalog);
      approve?.({
        ...(models === undefined ? {} : { allowedModels: models }),
        ...(tools === undefined ? {} : { allowedTools: tools }),
      });
      if (models !== undefined) set.allowed_models = encodeNames(models);
      if (tools !== undefined) set.allowed_tools = encodeNames(tools);
      if (change.concurrentLimit !== undefined) set.concurrent_limit = checkConcurrentLimit(change.concurrentLimit);
      if (Object.keys(set).length === 0) return key;
      await db.updateTable('api_keys').set(set).where('id', '=', keyId).where('revoked_at', 'is', null).execute();
      deps.onRevoke?.(keyId);
      return get(keyId);
    },
  };
}

/** The most calls in flight a key's own limit may name. */
export const MAX_CONCURRENT_LIMIT = 100_000;

/** A key's own limit of calls in flight: null (the configured one), or 0 (none) to MAX_CONCURRENT_LIMIT. */
export function checkConcurrentLimit(limit: number | null): number | null {
  if (limit === null) return null;
  if (!Number.isSafeInteger(limit) || limit < 0 || limit > MAX_CONCURRENT_LIMIT)
    throw invalidArgument(
      'concurrent_limit',
      `concurrent_limit must be a whole number from 0 (no limit) to ${MAX_CONCURRENT_LIMIT}`,
    );
  return limit;
}
