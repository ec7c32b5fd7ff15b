import type { Selectable } from 'kysely';
import type { HoldsTable } from '../store/schema';
import type { Balances } from './batch-plan';

/**
 * What this process last wrote, to spare a batch its reads: an account's balances after its
 * last planned batch, and the holds it placed that are still open. Only guesses: every write
 * planned on them is conditional on the database still holding exactly that (the wallet UPDATE
 * on the old balances, the hold UPDATE on status 'held'), and a miss falls back to reading.
 * Bounded: the oldest entries are forgotten first.
 */
export interface BatchHints {
  balances(accountId: string): Balances | undefined;
  setBalances(accountId: string, balances: Balances): void;
  forgetBalances(accountId: string): void;
  /** The open hold this process placed for the request, if it remembers one. */
  hold(accountId: string, requestId: string): Selectable<HoldsTable> | undefined;
  rememberHold(row: Selectable<HoldsTable>): void;
  forgetHold(accountId: string, requestId: string): void;
}

function bounded<K, V>(max: number): { get(k: K): V | undefined; set(k: K, v: V): void; delete(k: K): void } {
  const map = new Map<K, V>();
  return {
    get: (k) => map.get(k),
    set(k, v) {
      map.delete(k);
      map.set(k, v);
      if (map.size > max) {
        const oldest = map.keys().next();
        if (oldest.done !== true) map.delete(oldest.value);
      }
    },
    delete: (k) => void map.delete(k),
  };
}

/** Hints for up to `maxAccounts` wallets and `maxHolds` open holds. */
export function createBatchHints(maxAccounts = 10_000, maxHolds = 100_000): BatchHints {
  const balances = bounded<string, Balances>(maxAccounts);
  const holds = bounded<string, Selectable<HoldsTable>>(maxHolds);
  // Account ids never contain NUL, so the first NUL separates the two ids.
  const key = (accountId: string, requestId: string): string => `${accountId}\u0000${requestId}`;
  return {
    balances: (accountId) => balances.get(accountId),
    setBalances: (accountId, b) => balances.set(accountId, b),
    forgetBalances: (accountId) => balances.delete(accountId),
    hold: (accountId, requestId) => holds.get(key(accountId, requestId)),
    rememberHold: (row) => holds.set(key(row.account_id, row.request_id), row),
    forgetHold: (accountId, requestId) => holds.delete(key(accountId, requestId)),
  };
}
