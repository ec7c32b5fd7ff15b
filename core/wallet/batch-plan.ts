import type { Selectable } from 'kysely';
import type { SvcError } from '../errors';
import { newTimeOrderedId } from '../ids';
import type { HoldStatusName, HoldsTable } from '../store/schema';
import type { UsageEntry, UsageRecord } from '../usage/rows';
import type { CapBook } from './caps';
import { chargeBound, insufficientCredit, toHoldView } from './service';
import type { HoldView } from './types';

/** One wallet operation waiting for a batch; inputs are validated before it is queued. */
export type BatchOp =
  | {
      readonly kind: 'hold';
      readonly requestId: string;
      readonly amount: bigint;
      readonly ttlSeconds: number;
      /** The caller's key lineage when the key is capped. */
      readonly lineageId?: string;
      readonly clientRequestId?: string | undefined;
    }
  | { readonly kind: 'settle'; readonly requestId: string; readonly amount: bigint; readonly usage?: UsageEntry }
  | { readonly kind: 'release'; readonly requestId: string; readonly usage?: UsageEntry };

export interface Balances {
  readonly balance: bigint;
  readonly held: bigint;
}

/** What one operation of a planned batch comes to; `wallet` is the wallet right after it. */
export type Outcome =
  | { readonly kind: 'hold'; readonly hold: HoldView; readonly wallet: Balances }
  /** `entry` indexes `BatchPlan.entries` (null: nothing charged). */
  | { readonly kind: 'settle'; readonly entry: number | null; readonly charged: bigint; readonly wallet: Balances }
  | { readonly kind: 'release'; readonly wallet: Balances }
  /** A hold refused for credit or its key's cap; the runner first checks that it is not a retry of a stored hold. */
  | { readonly kind: 'refused'; readonly error: SvcError }
  /** A settle of a hold settled by an earlier transaction: answered with its stored charge. */
  | { readonly kind: 'replay'; readonly wallet: Balances };

export interface PlannedEntry {
  readonly requestId: string;
  readonly amount: bigint;
  readonly balanceAfter: bigint;
}

export interface HoldChange {
  readonly id: string;
  readonly from: HoldStatusName;
  readonly to: HoldStatusName;
  readonly settledAmount: bigint | null;
}

/** The writes of one batch and each operation's outcome, in arrival order. */
export interface BatchPlan {
  readonly balances: Balances;
  readonly newHolds: Selectable<HoldsTable>[];
  readonly changedHolds: HoldChange[];
  readonly entries: PlannedEntry[];
  /**
   * The usage records the batch's settles and releases carry, each at the cost its operation
   * charged: one per request id (the first operation that carries one), none for a replayed
   * settle (the transaction that settled it carried its record).
   */
  readonly usage: UsageRecord[];
  readonly outcomes: Outcome[];
}

interface Tracked {
  row: Selectable<HoldsTable>;
  readonly stored: boolean;
  /** The status read from the database (stored holds only): the UPDATE's guard. */
  readonly readStatus: HoldStatusName;
}

/**
 * Decides a batch of one account's operations in arrival order against the locked wallet row,
 * exactly as the per-operation service would have decided them one after another: holds only
 * from `balance - held`, settles never above the hold (nor the free balance), never below zero, one
 * charge per request id. With `caps` (the counters of the capped key lineages involved), a hold
 * must also fit its lineage's caps, and settles and releases move its reservation. No I/O: the
 * caller writes the plan (and the book) and answers the callers.
 */
export function planBatch(
  accountId: string,
  locked: Balances,
  stored: readonly Selectable<HoldsTable>[],
  ops: readonly BatchOp[],
  now: number,
  caps?: CapBook,
): BatchPlan {
  let { balance, held } = locked;
  const holds = new Map<string, Tracked>(
    stored.map((row) => [row.request_id, { row, stored: true, readStatus: row.status }]),
  );
  // Request ids charged in this batch without a hold: a repeat answers with the same charge.
  const unheldCharges = new Map<string, { entry: number; charged: bigint }>();
  const newHolds: Selectable<HoldsTable>[] = [];
  const entries: PlannedEntry[] = [];
  const usage: UsageRecord[] = [];
  const recorded = new Set<string>();
  const outcomes: Outcome[] = [];
  const wallet = (): Balances => ({ balance, held });
  const record = (op: BatchOp, cost: bigint): void => {
    if (op.kind === 'hold' || op.usage === undefined || recorded.has(op.requestId)) return;
    recorded.add(op.requestId);
    // Object.assign, not `{ ...op.usage, cost }`: a map of its own per record otherwise (core/chat/prepare.ts).
    usage.push(Object.assign({}, op.usage, { cost }));
  };
  const close = (tracked: Tracked, to: HoldStatusName, settledAmount: bigint | null): void => {
    tracked.row = { ...tracked.row, status: to, settled_amount: settledAmount };
  };

  for (const op of ops) {
    const tracked = holds.get(op.requestId);
    if (op.kind === 'hold') {
      if (tracked !== undefined) {
        outcomes.push({ kind: 'hold', hold: toHoldView(tracked.row), wallet: wallet() });
      } else if (balance - held < op.amount) {
        outcomes.push({ kind: 'refused', error: insufficientCredit(wallet(), op.amount) });
      } else {
        const capped =
          op.lineageId === undefined || caps === undefined ? null : caps.hold(op.lineageId, op.amount, now);
        if (capped !== null && typeof capped !== 'string') {
          outcomes.push({ kind: 'refused', error: capped });
          continue;
        }
        held += op.amount;
        const row: Selectable<HoldsTable> = {
          id: newTimeOrderedId('hold', now),
          account_id: accountId,
          request_id: op.requestId,
          amount: op.amount,
          status: 'held',
          settled_amount: null,
          expires_at: BigInt(now + op.ttlSeconds * 1000),
          created_at: BigInt(now),
          lineage_id: capped,
          client_request_id: op.clientRequestId ?? null,
        };
        holds.set(op.requestId, { row, stored: false, readStatus: 'held' });
        outcomes.push({ kind: 'hold', hold: toHoldView(row), wallet: wallet() });
      }
      continue;
    }
    if (op.kind === 'release' || (op.kind === 'settle' && op.amount === 0n && tracked?.row.status !== 'settled')) {
      if (tracked?.row.status === 'held') {
        held -= tracked.row.amount;
        caps?.close(tracked.row, tracked.row.amount, 0n);
        close(tracked, 'released', null);
      }
      outcomes.push(
        op.kind === 'release'
          ? { kind: 'release', wallet: wallet() }
          : { kind: 'settle', entry: null, charged: 0n, wallet: wallet() },
      );
      record(op, 0n);
      continue;
    }
    if (tracked?.row.status === 'settled') {
      if (tracked.stored && tracked.readStatus === 'settled') {
        outcomes.push({ kind: 'replay', wallet: wallet() });
      } else {
        const entry = entries.findIndex((e) => e.requestId === op.requestId);
        const charged = tracked.row.settled_amount ?? 0n;
        outcomes.push({ kind: 'settle', entry: entry < 0 ? null : entry, charged, wallet: wallet() });
        record(op, charged);
      }
      continue;
    }
    const unheld = unheldCharges.get(op.requestId);
    if (tracked === undefined && unheld !== undefined) {
      outcomes.push({ kind: 'settle', entry: unheld.entry, charged: unheld.charged, wallet: wallet() });
      record(op, unheld.charged);
      continue;
    }
    // The hold is the most a call can cost (SPEC §6): a usage above it is charged at the hold.
    // A hold no longer open gave its caps' reservation back: its charge also fits what they have
    // left. Without an open hold, only the free credit pays, never other holds, never below 0.
    const reserved = tracked?.row.status === 'held' ? tracked.row.amount : 0n;
    let bound = tracked === undefined ? op.amount : chargeBound(op.amount, tracked.row.amount);
    if (tracked !== undefined && reserved === 0n && caps !== undefined)
      bound = chargeBound(bound, caps.room(tracked.row));
    const charged = chargeBound(bound, balance - held + reserved);
    balance -= charged;
    held -= reserved;
    let entry: number | null = null;
    if (charged > 0n) {
      entry = entries.length;
      entries.push({ requestId: op.requestId, amount: -charged, balanceAfter: balance });
    }
    if (tracked !== undefined) {
      caps?.close(tracked.row, reserved, charged);
      close(tracked, 'settled', charged);
    } else if (entry !== null) unheldCharges.set(op.requestId, { entry, charged });
    outcomes.push({ kind: 'settle', entry, charged, wallet: wallet() });
    record(op, charged);
  }

  const changedHolds: HoldChange[] = [];
  for (const tracked of holds.values()) {
    if (!tracked.stored) newHolds.push(tracked.row);
    else if (tracked.row.status !== tracked.readStatus) {
      changedHolds.push({
        id: tracked.row.id,
        from: tracked.readStatus,
        to: tracked.row.status,
        settledAmount: tracked.row.settled_amount,
      });
    }
  }
  return { balances: { balance, held }, newHolds, changedHolds, entries, usage, outcomes };
}
