import type { HoldStatusName, LedgerKind } from '../store/schema';
import type { UsageEntry } from '../usage/rows';

export interface WalletView {
  readonly accountId: string;
  readonly balance: bigint;
  readonly held: bigint;
  readonly currency: 'toman';
}

export interface LedgerEntryView {
  readonly id: string;
  readonly accountId: string;
  readonly kind: LedgerKind;
  /** Signed: positive in, negative out. */
  readonly amount: bigint;
  readonly balanceAfter: bigint;
  readonly requestId: string;
  readonly reference: string;
  readonly createdAt: Date;
}

export interface HoldView {
  readonly id: string;
  readonly accountId: string;
  readonly requestId: string;
  readonly amount: bigint;
  readonly status: HoldStatusName;
  readonly expiresAt: Date;
}

export interface SettleResult {
  /** Null when nothing was charged (amount 0, or a retried settle that already charged: then the first entry). */
  readonly entry: LedgerEntryView | null;
  readonly wallet: WalletView;
  /** Credits actually charged by this request: never more than its hold, nor than the balance allowed. */
  readonly charged: bigint;
}

/**
 * The prepaid wallet. Every method is safe under any interleaving of concurrent calls on any
 * number of core processes sharing the database, and idempotent per request id.
 */
export interface WalletService {
  get(accountId: string): Promise<WalletView>;
  /** Newest first; with `beforeSeq`, only entries older than that sequence number (paging by the last id shown). */
  ledger(accountId: string, limit: number, beforeSeq?: bigint): Promise<LedgerEntryView[]>;
  topUp(input: {
    accountId: string;
    amount: bigint;
    reference?: string;
    requestId?: string;
  }): Promise<{
    entry: LedgerEntryView;
    wallet: WalletView;
    /** The request id was applied before: `entry` is that top-up, and nothing more was credited. */
    alreadyApplied?: boolean;
  }>;
  /**
   * Reserves `amount`. Throws SvcError `insufficient_credit` (details: balance, held, available,
   * required) when balance - held cannot cover it. With `lineageId` (a capped key's lineage), the
   * hold must also fit under the lineage's daily and monthly caps, read in the same transaction:
   * else SvcError `key_cap_exceeded` (details: limit, cap, spent, held, required, resets_at). A
   * retry with the same request id returns the existing hold.
   */
  hold(input: {
    accountId: string;
    requestId: string;
    amount: bigint;
    ttlSeconds?: number;
    lineageId?: string;
    /** The id the client gave the call, kept on the hold for correlation only. */
    clientRequestId?: string | undefined;
  }): Promise<{ hold: HoldView; wallet: WalletView }>;
  /**
   * Charges the actual cost (>= 0) once per request id and closes the hold. The hold is the most
   * a call can cost: a cost above the hold's amount is charged at the hold, to the wallet and to
   * the key's caps; a hold that expired or was released before the settle is charged from the free
   * credit and within what its caps have left; with no hold at all (a service's direct charge over
   * the wallet API), from the free credit. Never below zero, never into other holds. With `usage`, the
   * call's usage record is written in the same transaction as the charge, its cost what was
   * charged: both are stored or neither is. A settle that repeats one stored by an earlier
   * transaction writes no record (that one carried it, if any); a record whose (account,
   * request id) is stored already is ignored.
   */
  settle(input: { accountId: string; requestId: string; amount: bigint; usage?: UsageEntry }): Promise<SettleResult>;
  /**
   * Frees the hold without charging. Idempotent. With `usage`, the call's usage record (cost 0)
   * is written in the same transaction, as for `settle`.
   */
  release(input: { accountId: string; requestId: string; usage?: UsageEntry }): Promise<{ wallet: WalletView }>;
  /**
   * Moves an open hold's expiry to `ttlSeconds` (default: the configured TTL) from now: the
   * heartbeat of a call still running, so the reaper never frees the credit it may yet charge.
   * False when the hold is no longer open.
   */
  extend(input: { accountId: string; requestId: string; ttlSeconds?: number }): Promise<boolean>;
  /** Releases holds past their expiry (unless extended meanwhile); returns how many. */
  reapExpired(now?: number): Promise<number>;
}
