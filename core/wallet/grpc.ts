import { HoldStatus, LedgerEntryKind, type WalletServiceImplementation } from '../../gen/svc/core/v1/wallet';
import type { CoreCallContext } from '../auth/types';
import { accountOfCaller, type CoreContext } from '../auth/context';
import type { Audit } from '../accounts/audit';
import { invalidArgument } from '../errors';
import type { HoldView, LedgerEntryView, WalletService } from './types';

const KIND = {
  topup: LedgerEntryKind.LEDGER_ENTRY_KIND_TOPUP,
  charge: LedgerEntryKind.LEDGER_ENTRY_KIND_CHARGE,
  refund: LedgerEntryKind.LEDGER_ENTRY_KIND_REFUND,
  adjustment: LedgerEntryKind.LEDGER_ENTRY_KIND_ADJUSTMENT,
} as const;

const STATUS = {
  held: HoldStatus.HOLD_STATUS_HELD,
  settled: HoldStatus.HOLD_STATUS_SETTLED,
  released: HoldStatus.HOLD_STATUS_RELEASED,
  expired: HoldStatus.HOLD_STATUS_EXPIRED,
} as const;

export function ledgerEntryToProto(e: LedgerEntryView) {
  return { ...e, kind: KIND[e.kind] };
}

function holdToProto(h: HoldView) {
  return { ...h, status: STATUS[h.status] };
}

/** API keys and user sessions act on their own wallet; the admin token and operator sessions name any account. */
async function accountFor(svc: CoreCallContext, requested: string): Promise<string> {
  return accountOfCaller(await svc.requireCaller(), requested);
}

/**
 * Holds placed over this API live under `ext/` + the caller's request id: the core's own request
 * ids never contain '/', so a service can neither settle nor release a hold the core placed for a
 * chat or tool call, nor pre-empt one by settling its request id first.
 */
export const EXTERNAL_PREFIX = 'ext/';
const MAX_EXTERNAL_ID = 100 - EXTERNAL_PREFIX.length;

function externalId(svc: CoreCallContext, requested: string): string {
  const id = requested === '' ? svc.requestId : requested;
  if (id.length > MAX_EXTERNAL_ID)
    throw invalidArgument('request_id', `request_id must be 1-${MAX_EXTERNAL_ID} characters`);
  return EXTERNAL_PREFIX + id;
}

/** The caller's own request id, as it sent it. */
function callerId(stored: string): string {
  return stored.startsWith(EXTERNAL_PREFIX) ? stored.slice(EXTERNAL_PREFIX.length) : stored;
}

/**
 * Hold, Settle and Release bill on an account's behalf: only a service holding the admin token
 * may call them, never a customer's key (which could otherwise settle its own calls for less).
 */
function serviceAccount(svc: CoreCallContext, requested: string): string {
  svc.requireAdmin();
  if (requested === '') throw invalidArgument('account_id', 'account_id is required');
  return requested;
}

export function createWalletGrpcService(deps: {
  wallet: WalletService;
  /** Where top-ups (operator actions) are recorded. */
  audit: Audit;
}): WalletServiceImplementation<{ svc: CoreContext['svc'] }> {
  const { wallet } = deps;
  return {
    async getWallet(request, { svc }) {
      return { wallet: await wallet.get(await accountFor(svc, request.accountId)) };
    },
    async listLedger(request, { svc }) {
      const accountId = await accountFor(svc, request.accountId);
      const limit = request.limit === 0 ? 50 : request.limit;
      if (limit < 1 || limit > 1000) throw invalidArgument('limit', 'limit must be an integer from 1 to 1000');
      const cursor = /^le_(\d{1,18})$/.exec(request.before);
      if (request.before !== '' && cursor === null)
        throw invalidArgument('before', 'before is not a ledger entry id this service returned; start again without it');
      // One more than asked shows whether there is an older page (at the largest page, a full
      // page is taken to have one, which may then be empty).
      const ask = Math.min(limit + 1, 1000);
      const rows = await wallet.ledger(accountId, ask, cursor === null ? undefined : BigInt(cursor[1] ?? '0'));
      const entries = rows.slice(0, limit);
      const more = rows.length > limit || (ask === limit && rows.length === limit);
      return { entries: entries.map(ledgerEntryToProto), nextBefore: more ? (entries.at(-1)?.id ?? '') : '' };
    },
    async topUp(request, { svc }) {
      svc.requireAdmin();
      if (request.accountId === '') throw invalidArgument('account_id', 'account_id is required');
      const result = await wallet.topUp({
        accountId: request.accountId,
        amount: request.amount,
        reference: request.reference,
        ...(request.requestId === '' ? {} : { requestId: request.requestId }),
      });
      // An operator action: on the account's audit list once, however often it is retried.
      const { entry } = result;
      await deps.audit.recordOnce(
        request.accountId,
        'top_up',
        `${entry.amount.toLocaleString('en-US')} toman, reference “${entry.reference}”, balance after ${entry.balanceAfter.toLocaleString('en-US')}`,
        ` (request ${entry.requestId})`,
      );
      return { entry: ledgerEntryToProto(entry), wallet: result.wallet, alreadyApplied: result.alreadyApplied === true };
    },
    async hold(request, { svc }) {
      const result = await wallet.hold({
        accountId: serviceAccount(svc, request.accountId),
        requestId: externalId(svc, request.requestId),
        amount: request.amount,
        ttlSeconds: request.ttlSeconds,
      });
      return {
        hold: holdToProto({ ...result.hold, requestId: callerId(result.hold.requestId) }),
        wallet: result.wallet,
      };
    },
    async settle(request, { svc }) {
      const result = await wallet.settle({
        accountId: serviceAccount(svc, request.accountId),
        requestId: externalId(svc, request.requestId),
        amount: request.amount,
      });
      return {
        ...(result.entry === null
          ? {}
          : { entry: ledgerEntryToProto({ ...result.entry, requestId: callerId(result.entry.requestId) }) }),
        wallet: result.wallet,
        charged: result.charged,
      };
    },
    async release(request, { svc }) {
      return wallet.release({
        accountId: serviceAccount(svc, request.accountId),
        requestId: externalId(svc, request.requestId),
      });
    },
  };
}
