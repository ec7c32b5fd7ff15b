import type { Duration } from '../../gen/google/protobuf/duration';
import type { KeyServiceImplementation } from '../../gen/svc/core/v1/keys';
import type { Caller, Principal } from '../auth/types';
import { isOperator, type CoreContext } from '../auth/context';
import { SvcError, invalidArgument } from '../errors';
import { checkCap, type CapChange } from './caps';
import { capsDetail, createdDetail, editDetail, rolledDetail, type KeyEventKind, type KeyEvents } from './events';
import { cleanLabel } from '../text/plain-text';
import type { ApiKeyView, KeyService } from './service';

/** An ApiKeyView as the `ApiKey` message (also used by the console service). */
/**
 * A key editing its own lineage may narrow its allowed models and tools, never widen them: the
 * check `keys.update` runs on the stored key under its lock; undefined when another caller edits.
 */
interface StoredLists {
  readonly allowedModels: readonly string[] | null;
  readonly allowedTools: readonly string[] | null;
}
type NextLists = { readonly [K in keyof StoredLists]?: StoredLists[K] };

function noSelfWidening(key: StoredLists, own: boolean): ((next: NextLists) => void) | undefined {
  if (!own) return undefined;
  return (next) => {
    if (widens(key.allowedModels, next.allowedModels) || widens(key.allowedTools, next.allowedTools))
      throw new SvcError(
        'permission_denied',
        "An API key cannot widen its own allowed models or tools; the operator, the console or another key with the 'manage' scope can",
      );
  };
}

export function keyToProto(key: ApiKeyView) {
  return {
    ...key,
    lastUsedAt: key.lastUsedAt ?? undefined,
    revokedAt: key.revokedAt ?? undefined,
    expiresAt: key.expiresAt ?? undefined,
    replacedBy: key.replacedBy ?? '',
    capDaily: key.capDaily ?? undefined,
    capMonthly: key.capMonthly ?? undefined,
    capTotal: key.capTotal ?? undefined,
    allowedModels: [...(key.allowedModels ?? [])],
    allowedTools: [...(key.allowedTools ?? [])],
    concurrentLimit: key.concurrentLimit ?? undefined,
  };
}

/**
 * A key's own limit of calls in flight is the operator's to set: a key or a user's console
 * session could otherwise lift its own tenant above what the operator allows everyone.
 */
function operatorOnly(caller: Caller, asked: boolean): void {
  if (asked && !isOperator(caller))
    throw new SvcError(
      'permission_denied',
      "Only the operator can set a key's own limit of calls in flight (concurrent_limit)",
    );
}

/** One cap of an UpdateKeyCaps request: a value, a removal (null), or unchanged (undefined). */
function capChange(value: bigint | undefined, remove: boolean, param: string): bigint | null | undefined {
  if (remove && value !== undefined)
    throw invalidArgument(param, `${param} cannot be set and removed (remove_${param}) at once`);
  if (remove) return null;
  checkCap(value, param);
  return value;
}

function graceMs(grace: Duration | undefined): number | undefined {
  if (grace === undefined) return undefined;
  if (grace.seconds < 0n || grace.nanos < 0) throw invalidArgument('grace', 'grace must not be negative');
  // Whole seconds beyond 30 days are refused by the service; bound here so Number() stays exact.
  if (grace.seconds > 10n ** 12n) throw invalidArgument('grace', 'grace must be at most 30 days');
  return Number(grace.seconds) * 1000 + Math.floor(grace.nanos / 1e6);
}

/**
 * Whose keys a caller may act on: the admin and an operator session any account's (`accountId`
 * null); an API key and a user session only their own account's. `principal` is the calling key.
 */
interface KeyAuthority {
  readonly accountId: string | null;
  readonly principal: Principal | null;
}

function authorityOf(caller: Caller): KeyAuthority {
  if (caller.kind === 'key') return { accountId: caller.principal.accountId, principal: caller.principal };
  if (isOperator(caller)) return { accountId: null, principal: null };
  if (caller.kind === 'session' && caller.accountId !== null) return { accountId: caller.accountId, principal: null };
  throw new SvcError('permission_denied', 'This caller cannot manage API keys');
}

/** A key without the `manage` scope acts on no key, not even itself. */
function requireManage(principal: Principal | null): void {
  if (principal === null || principal.manage) return;
  throw new SvcError(
    'permission_denied',
    "This API key cannot manage keys: that needs a key with the 'manage' scope (svc key create --scope all,manage), the console, or the operator",
  );
}

/** A cap change that lifts a limit: a removed cap, a new cap above the old one (none is no limit). */
function raises(key: ApiKeyView, change: CapChange): boolean {
  const lifts = (before: bigint | null, after: bigint | null | undefined): boolean =>
    after !== undefined && before !== null && (after === null || after > before);
  return (
    lifts(key.capDaily, change.daily) || lifts(key.capMonthly, change.monthly) || lifts(key.capTotal, change.total)
  );
}

/** A new allowed list that lets the key use something the old one did not (null: everything). */
function widens(before: readonly string[] | null, after: readonly string[] | null | undefined): boolean {
  if (after === undefined || before === null) return false;
  if (after === null || after.length === 0) return true;
  return after.some((name) => !before.includes(name));
}

/** A new expiry that lets the key work longer than the old one did (null: never expires). */
function extends_(before: Date | null, after: Date | null | undefined): boolean {
  if (after === undefined || before === null) return false;
  return after === null || after.getTime() > before.getTime();
}

export function createKeyGrpcService(deps: {
  keys: KeyService;
  /** The lineages' activity list: what a console session changes is written to it. */
  events: KeyEvents;
  now: () => number;
}): KeyServiceImplementation<{ svc: CoreContext['svc'] }> {
  /** Writes the change to the lineage's activity list when a console session made it. */
  async function note(caller: Caller, key: ApiKeyView, kind: KeyEventKind, detail: string): Promise<void> {
    if (caller.kind !== 'session' || detail === '') return;
    await deps.events.record(key, kind, detail);
  }

  /**
   * The key, if the caller may act on it: the admin or an operator session, a user session of the
   * key's account, or a key of the same account with the `manage` scope.
   */
  async function ownedKey(keyId: string, authority: KeyAuthority): Promise<ApiKeyView> {
    requireManage(authority.principal);
    if (keyId === '') throw invalidArgument('key_id', 'key_id is required');
    const notFound = (): SvcError =>
      new SvcError('not_found', `No API key ${JSON.stringify(keyId)}`, { param: 'key_id' });
    const key = await deps.keys.get(keyId);
    // Another account's key looks exactly like a key that does not exist.
    if (authority.accountId !== null && key.accountId !== authority.accountId) throw notFound();
    return key;
  }

  async function authority(svc: CoreContext['svc']): Promise<KeyAuthority & { caller: Caller }> {
    const caller = await svc.requireCaller();
    return { ...authorityOf(caller), caller };
  }

  return {
    async createKey(request, context) {
      // The admin or an operator session for any account; a user session for its own only. An
      // API key never creates keys (admin_required, as before sessions existed).
      const caller = await context.svc.requireCaller();
      if (caller.kind === 'key') context.svc.requireAdmin();
      const { accountId: own } = authorityOf(caller);
      if (own !== null && request.accountId !== '' && request.accountId !== own)
        throw new SvcError('permission_denied', 'A console session can only create keys in its own account');
      const accountId = own ?? request.accountId;
      if (accountId === '') throw invalidArgument('account_id', 'account_id is required');
      operatorOnly(caller, request.concurrentLimit !== undefined);
      const { key, secret } = await deps.keys.create({
        accountId,
        name: request.name,
        scope: request.scope,
        expiresAt: request.expiresAt === undefined ? null : request.expiresAt.getTime(),
        capDaily: request.capDaily ?? null,
        capMonthly: request.capMonthly ?? null,
        capTotal: request.capTotal ?? null,
        allowedModels: request.allowedModels,
        allowedTools: request.allowedTools,
        ...(request.concurrentLimit === undefined ? {} : { concurrentLimit: request.concurrentLimit }),
      });
      await note(caller, key, 'created', createdDetail(key));
      return { key: keyToProto(key), secret };
    },
    async listKeys(request, context) {
      const { accountId: own, principal } = await authority(context.svc);
      const accountId = own ?? request.accountId;
      if (accountId === '') throw invalidArgument('account_id', 'account_id is required');
      const keys = await deps.keys.list(accountId);
      // A key without `manage` sees itself (and the keys it was rolled from), not its siblings.
      const visible =
        principal === null || principal.manage ? keys : keys.filter((k) => k.lineageId === principal.lineageId);
      return { keys: visible.map(keyToProto) };
    },
    async revokeKey(request, context) {
      const who = await authority(context.svc);
      const key = await ownedKey(request.keyId, who);
      const revoked = await deps.keys.revoke(key.id);
      if (key.revokedAt === null) await note(who.caller, key, 'revoked', `${key.prefix}…${key.lastFour} revoked`);
      return { key: keyToProto(revoked) };
    },
    async rollKey(request, context) {
      const who = await authority(context.svc);
      const grace = graceMs(request.grace);
      await ownedKey(request.keyId, who);
      const rolled = await deps.keys.roll(request.keyId, grace === undefined ? {} : { graceMs: grace });
      await note(who.caller, rolled.key, 'rolled', rolledDetail(rolled.key, rolled.previous));
      return { key: keyToProto(rolled.key), secret: rolled.secret, previous: keyToProto(rolled.previous) };
    },
    async updateKeyCaps(request, context) {
      const who = await authority(context.svc);
      const { principal } = who;
      const daily = capChange(request.capDaily, request.removeCapDaily, 'cap_daily');
      const monthly = capChange(request.capMonthly, request.removeCapMonthly, 'cap_monthly');
      const total = capChange(request.capTotal, request.removeCapTotal, 'cap_total');
      const key = await ownedKey(request.keyId, who);
      const change: CapChange = {
        ...(daily === undefined ? {} : { daily }),
        ...(monthly === undefined ? {} : { monthly }),
        ...(total === undefined ? {} : { total }),
      };
      // Caps bound what a key may spend; the key itself may only tighten them.
      if (principal !== null && key.lineageId === principal.lineageId && raises(key, change))
        throw new SvcError(
          'permission_denied',
          "An API key cannot raise or remove its own spend caps; the operator, the console or another key with the 'manage' scope can",
        );
      const updated = await deps.keys.setCaps(request.keyId, change);
      await note(who.caller, key, 'caps', capsDetail(key, updated));
      return { key: keyToProto(updated) };
    },
    async updateKeyLimits(request, context) {
      const who = await authority(context.svc);
      const { principal } = who;
      const key = await ownedKey(request.keyId, who);
      const models = request.allowedModels?.names;
      const tools = request.allowedTools?.names;
      // Like the caps: a key may narrow what it may use, never widen it. Aliases are compared
      // after the service resolves them, so the check runs on what would be stored.
      const updated = await deps.keys.update(
        request.keyId,
        {
          ...(models === undefined ? {} : { allowedModels: models }),
          ...(tools === undefined ? {} : { allowedTools: tools }),
        },
        noSelfWidening(key, principal !== null && key.lineageId === principal.lineageId),
      );
      await note(who.caller, key, 'edited', editDetail(key, updated));
      return { key: keyToProto(updated) };
    },
    async updateKey(request, context) {
      const who = await authority(context.svc);
      const { principal } = who;
      if (request.removeExpiry && request.expiresAt !== undefined)
        throw invalidArgument('expires_at', 'Set expires_at or remove_expiry, not both.');
      const name = request.name === undefined ? undefined : cleanLabel(request.name);
      const expiresAt = request.removeExpiry ? null : request.expiresAt;
      if (expiresAt !== undefined && expiresAt !== null && expiresAt.getTime() <= deps.now())
        throw invalidArgument('expires_at', 'The expiry must be a time in the future.');
      const key = await ownedKey(request.keyId, who);
      const own = principal !== null && key.lineageId === principal.lineageId;
      // Like the caps and lists: a key may shorten its own life, never lengthen it.
      if (own && extends_(key.expiresAt, expiresAt))
        throw new SvcError(
          'permission_denied',
          "An API key cannot extend or remove its own expiry; the operator, the console or another key with the 'manage' scope can",
        );
      const models = request.allowedModels?.names;
      const tools = request.allowedTools?.names;
      if (request.removeConcurrentLimit && request.concurrentLimit !== undefined)
        throw invalidArgument('concurrent_limit', 'Set concurrent_limit or remove_concurrent_limit, not both.');
      const concurrentLimit = request.removeConcurrentLimit ? null : request.concurrentLimit;
      operatorOnly(who.caller, concurrentLimit !== undefined);
      const updated = await deps.keys.update(
        key.id,
        {
          ...(concurrentLimit === undefined ? {} : { concurrentLimit }),
          ...(name === undefined ? {} : { name }),
          ...(expiresAt === undefined ? {} : { expiresAt: expiresAt === null ? null : expiresAt.getTime() }),
          ...(models === undefined ? {} : { allowedModels: models }),
          ...(tools === undefined ? {} : { allowedTools: tools }),
        },
        noSelfWidening(key, own),
      );
      await note(who.caller, key, 'edited', editDetail(key, updated));
      return { key: keyToProto(updated) };
    },
    async getKey(request, context) {
      const who = await authority(context.svc);
      const key = await ownedKey(request.keyId, who);
      const [all, events] = await Promise.all([
        deps.keys.list(key.accountId),
        deps.events.list(key.accountId, key.lineageId),
      ]);
      return {
        key: keyToProto(key),
        lineage: all.filter((k) => k.lineageId === key.lineageId).map(keyToProto),
        events,
      };
    },
  };
}
