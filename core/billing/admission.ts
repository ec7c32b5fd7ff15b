import type { Principal } from '../auth/types';
import { SvcError } from '../errors';
import { insufficientCredit } from '../wallet/service';
import type { WalletService } from '../wallet/types';

/*
 * Paying before counting (issue 31). The tokenizer is CPU the caller does not pay for when the
 * call is then refused, so a call whose prompt is large enough to count on the token worker first
 * checks that the wallet covers the least such a call can cost (every call costs at least 1
 * credit; a chat message or an embedding input is at least one token). A zero-credit key is
 * refused before any counting. The hold that follows is still the one authority on credit: this
 * is a read, not a reservation.
 */

/** Refuses with `insufficient_credit` when the account's available credit is below `leastCost`. */
export type CreditCheck = (principal: Principal, leastCost: bigint) => Promise<void>;

export function createCreditCheck(wallet: Pick<WalletService, 'get'>): CreditCheck {
  return async (principal, leastCost) => {
    const view = await wallet.get(principal.accountId);
    if (view.balance - view.held >= leastCost) return;
    const refusal = insufficientCredit(view, leastCost);
    throw new SvcError(
      'insufficient_credit',
      `Insufficient credit: a call like this costs at least ${leastCost.toString()} credits but the wallet has ${(view.balance - view.held).toString()} available (balance ${view.balance.toString()}, held ${view.held.toString()})`,
      { ...(refusal.details === undefined ? {} : { details: refusal.details }) },
    );
  };
}
