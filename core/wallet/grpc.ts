import { HoldStatus, LedgerEntryKind, type WalletServiceImplementation } from '../../gen/svc/core/v1/wallet';
import type { CoreCallContext } from '../auth/types';
import type { CoreContext } from '../server/context';
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

/** API keys act on their own wallet; the admin token names any account. */
async function accountFor(svc: CoreCallContext, requested: string): Promise<string> {
  const principal = await svc.requireKeyOrAdmin();
  if (principal !== null) return principal.accountId;
  if (requested === '') throw invalidArgument('account_id', 'account_id is required');
  return requested;
}

function requestIdFor(svc: CoreCallContext, requested: string): string {
  return requested === '' ? svc.requestId : requested;
}

export function createWalletGrpcService(deps: {
  wallet: WalletService;
}): WalletServiceImplementation<{ svc: CoreContext['svc'] }> {
  const { wallet } = deps;
  return {
    async getWallet(request, { svc }) {
      return { wallet: await wallet.get(await accountFor(svc, request.accountId)) };
    },
    async listLedger(request, { svc }) {
      const accountId = await accountFor(svc, request.accountId);
      const entries = await wallet.ledger(accountId, request.limit === 0 ? 50 : request.limit);
      return { entries: entries.map(ledgerEntryToProto) };
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
      return { entry: ledgerEntryToProto(result.entry), wallet: result.wallet };
    },
    async hold(request, { svc }) {
      const accountId = await accountFor(svc, request.accountId);
      // A capped key's own holds count against its caps, whichever way they are placed.
      const principal = await svc.requireKeyOrAdmin();
      const result = await wallet.hold({
        accountId,
        requestId: requestIdFor(svc, request.requestId),
        amount: request.amount,
        ttlSeconds: request.ttlSeconds,
        ...(principal?.capped === true ? { lineageId: principal.lineageId } : {}),
      });
      return { hold: holdToProto(result.hold), wallet: result.wallet };
    },
    async settle(request, { svc }) {
      const accountId = await accountFor(svc, request.accountId);
      const result = await wallet.settle({
        accountId,
        requestId: requestIdFor(svc, request.requestId),
        amount: request.amount,
      });
      return {
        ...(result.entry === null ? {} : { entry: ledgerEntryToProto(result.entry) }),
        wallet: result.wallet,
        charged: result.charged,
      };
    },
    async release(request, { svc }) {
      const accountId = await accountFor(svc, request.accountId);
      return wallet.release({ accountId, requestId: requestIdFor(svc, request.requestId) });
    },
  };
}
