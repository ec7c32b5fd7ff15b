import type { GatewayName } from '../config/types';
import type { PaymentState } from '../store/schema';

export type { GatewayName } from '../config/types';
export type { PaymentState } from '../store/schema';

/** A payment as the services and pages see it; `amount` in toman (= credits). */
export interface PaymentView {
  readonly id: string;
  readonly accountId: string;
  readonly gateway: GatewayName;
  readonly amount: bigint;
  readonly state: PaymentState;
  /** The gateway's session (authority / trackId); '' until the gateway gave one. */
  readonly reference: string;
  /** The gateway's receipt number (ref_id / refNumber); '' until paid. */
  readonly receipt: string;
  /** The payer's card as the gateway masked it (`628023******8998`); '' when not reported. */
  readonly cardPan: string;
  /** Why it failed or expired, in plain words; '' otherwise. */
  readonly failure: string;
  readonly createdAt: Date;
  readonly paidAt: Date | undefined;
}

/** What a gateway answered to "open a payment session". */
export type RequestOutcome =
  | { readonly kind: 'opened'; readonly reference: string; readonly redirectUrl: string }
  /** The gateway refused (bad merchant, amount, callback): `message` is for the payer, `detail` for the log. */
  | { readonly kind: 'refused'; readonly message: string; readonly detail: string };

/** What a gateway answered to "verify this session for this amount". */
export type VerifyOutcome =
  /** Paid and verified, now (`already` false) or before (ZarinPal 101, Zibal 201). */
  | {
      readonly kind: 'paid';
      readonly receipt: string;
      readonly cardPan: string;
      readonly already: boolean;
    }
  /** The session is not paid (cancelled, failed, still at the bank, or unknown to the gateway). */
  | { readonly kind: 'unpaid'; readonly message: string; readonly detail: string }
  /** Paid, but not the amount of this payment: never credited (the operator must look). */
  | { readonly kind: 'mismatch'; readonly message: string; readonly detail: string }
  /** No usable answer (timeout, 5xx, a dropped connection, an unreadable body): ask again later. */
  | { readonly kind: 'unknown'; readonly detail: string };

/**
 * One payment gateway's wire (`providers/<name>/`). Amounts are in rial on the wire (toman × 10),
 * the same number in the request and the verify. Never throws for an answer of the gateway: every
 * answer, and every failure to get one, is an outcome.
 */
export interface PaymentGateway {
  readonly name: GatewayName;
  /** Opens a session for `amountRial`; the payer is sent to `redirectUrl`. */
  request(
    input: {
      readonly paymentId: string;
      readonly amountRial: bigint;
      readonly callbackUrl: string;
      readonly description: string;
    },
    signal: AbortSignal,
  ): Promise<RequestOutcome | { readonly kind: 'unknown'; readonly detail: string }>;
  /** Verifies server to server that `reference` was paid `amountRial`; idempotent at the gateway. */
  verify(
    input: { readonly reference: string; readonly amountRial: bigint },
    signal: AbortSignal,
  ): Promise<VerifyOutcome>;
  /** The gateway's reference in the payer's return query (`Authority`, `trackId`); undefined when absent or malformed. */
  referenceOf(query: ReadonlyMap<string, string>): string | undefined;
  /** References of sessions paid but not verified yet (ZarinPal `unVerified.json`); absent when the gateway has no such list. */
  unverified?(signal: AbortSignal): Promise<readonly string[]>;
}
