import type http from 'node:http';
import type { Metadata } from 'nice-grpc';
import { OUTCOME_TRAILERS } from '../../core/edge';
import type { Billing } from '../../gen/svc/core/v1/common';

/** What the core said about the calls made for one HTTP request (from its response metadata). */
export interface CoreOutcome {
  accountId?: string;
  keyId?: string;
  /** Credits, summed over the request's core calls that carried a cost. */
  cost?: bigint;
}

// The outcome record of each HTTP request being served, for the request log. Kept on the
// request object (weakly) and handed to core calls in their CallMeta: an AsyncLocalStorage
// would do the same without the passing, but turns on promise hooks for the whole process
// (about a tenth of the CPU of a chat request).
const outcomes = new WeakMap<http.IncomingMessage, CoreOutcome>();

/** Gives `req` the record its core calls fill in. */
export function attachOutcome(req: http.IncomingMessage, outcome: CoreOutcome): void {
  outcomes.set(req, outcome);
}

/** The record of `req`, when the request log is tracking it. */
export function outcomeOf(req: http.IncomingMessage): CoreOutcome | undefined {
  return outcomes.get(req);
}

/** Reads whose call it was from its headers or trailers. */
export function outcomeReader(outcome: CoreOutcome): (metadata: Metadata) => void {
  return (metadata) => {
    const account = metadata.get(OUTCOME_TRAILERS.accountId);
    const key = metadata.get(OUTCOME_TRAILERS.keyId);
    if (typeof account === 'string') outcome.accountId = account;
    if (typeof key === 'string') outcome.keyId = key;
  };
}

/** The `billing` a core response (or stream message) carries, if any: the one channel of a call's cost. */
export function billingOf(message: unknown): Billing | undefined {
  if (typeof message !== 'object' || message === null) return undefined;
  const billing = (message as { billing?: unknown }).billing;
  return typeof billing === 'object' && billing !== null ? (billing as Billing) : undefined;
}

/** Adds what one core call cost (its response's billing) to the request's record. */
export function addCost(outcome: CoreOutcome | undefined, billing: Billing | undefined): void {
  if (outcome === undefined || billing === undefined) return;
  outcome.cost = (outcome.cost ?? 0n) + billing.cost;
}

/**
 * What a unary call charged and the balance after it, as response headers (`x-svc-cost`,
 * `x-svc-balance`): read from the response's billing, like every other use of the cost.
 */
export function setCostHeaders(ctx: { set(name: string, value: string): void }, billing: Billing | undefined): void {
  if (billing === undefined) return;
  ctx.set('x-svc-cost', billing.cost.toString());
  ctx.set('x-svc-balance', billing.balanceAfter.toString());
}

/** The core's response header that says an output limit was fitted to the model's maximum (SPEC §7d). */
export const FITTED_HEADER = 'x-svc-fitted';

/**
 * An `onHeader` that copies the core's response headers `names` onto the HTTP response, while its
 * headers are not sent yet (a stream's arrive with its first message, before the first write).
 */
export function relayHeaders(
  ctx: { readonly headerSent: boolean; set(name: string, value: string): void },
  names: readonly string[],
): (header: Metadata) => void {
  return (header) => {
    if (ctx.headerSent) return;
    for (const name of names) {
      const value = header.get(name);
      if (typeof value === 'string') ctx.set(name, value);
    }
  };
}
