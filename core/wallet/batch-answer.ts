import type { Selectable } from 'kysely';
import type { HoldsTable } from '../store/schema';
import type { Balances, BatchOp, BatchPlan } from './batch-plan';
import type { Waiter } from './batch-queue';
import { toHoldView } from './service';
import type { LedgerEntryView, WalletView } from './types';

/** The reads an answer may need after its batch committed. */
export interface AnswerSources {
  storedHolds(accountId: string, requestIds: string[]): Promise<Selectable<HoldsTable>[]>;
  storedCharges(accountId: string, requestIds: string[]): Promise<LedgerEntryView[]>;
  wallet(accountId: string): Promise<WalletView>;
}

/**
 * Answers the callers of one account's committed batch, each with the wallet as it was right
 * after its own operation, as the per-operation service would have answered them one by one.
 */
export async function answerBatch(
  sources: AnswerSources,
  accountId: string,
  batch: readonly Waiter<BatchOp>[],
  plan: BatchPlan,
  seqs: bigint[],
  at: number,
): Promise<void> {
  const view = (b: Balances): WalletView => ({ accountId, balance: b.balance, held: b.held, currency: 'toman' });
  const entry = (index: number | null): LedgerEntryView | null => {
    if (index === null) return null;
    const e = plan.entries[index];
    const seq = seqs[index];
    if (e === undefined || seq === undefined) throw new Error(`batch plan has no ledger entry ${index}`);
    return {
      id: `le_${seq.toString()}`,
      accountId,
      kind: 'charge',
      amount: e.amount,
      balanceAfter: e.balanceAfter,
      requestId: e.requestId,
      reference: '',
      createdAt: new Date(at),
    };
  };
  // A refused hold may be the retry of a hold stored after the read that preceded the lock:
  // like the per-operation service, answer such a retry with the stored hold.
  const refusedIds = batch.flatMap((w, i) => (plan.outcomes[i]?.kind === 'refused' ? [w.op.requestId] : []));
  let late = new Map<string, Selectable<HoldsTable>>();
  let current: WalletView | undefined;
  if (refusedIds.length > 0) {
    try {
      late = new Map((await sources.storedHolds(accountId, refusedIds)).map((row) => [row.request_id, row]));
      if (late.size > 0) current = await sources.wallet(accountId);
    } catch {
      // The batch is committed; without the check the refusals stand as decided.
      late.clear();
    }
  }
  const replayIds = batch.flatMap((w, i) => (plan.outcomes[i]?.kind === 'replay' ? [w.op.requestId] : []));
  let charges = new Map<string, LedgerEntryView>();
  if (replayIds.length > 0) {
    try {
      charges = new Map((await sources.storedCharges(accountId, replayIds)).map((e) => [e.requestId, e]));
    } catch (error) {
      for (const [i, w] of batch.entries()) if (plan.outcomes[i]?.kind === 'replay') w.reject(error);
    }
  }
  batch.forEach((w, i) => {
    const outcome = plan.outcomes[i];
    if (outcome === undefined) return w.reject(new Error('batch plan has no outcome for an operation'));
    switch (outcome.kind) {
      case 'hold':
        return w.resolve({ hold: outcome.hold, wallet: view(outcome.wallet) });
      case 'settle':
        return w.resolve({ entry: entry(outcome.entry), wallet: view(outcome.wallet), charged: outcome.charged });
      case 'release':
        return w.resolve({ wallet: view(outcome.wallet) });
      case 'refused': {
        const row = late.get(w.op.requestId);
        return row === undefined || current === undefined
          ? w.reject(outcome.error)
          : w.resolve({ hold: toHoldView(row), wallet: current });
      }
      case 'replay': {
        // The stored charge is the answer; none when the settle charged nothing.
        const stored = charges.get(w.op.requestId) ?? null;
        return w.resolve({
          entry: stored,
          wallet: view(outcome.wallet),
          charged: stored === null ? 0n : -stored.amount,
        });
      }
    }
  });
}
