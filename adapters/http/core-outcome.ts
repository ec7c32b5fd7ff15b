import type http from 'node:http';
import type { Metadata } from 'nice-grpc';
import { OUTCOME_TRAILERS } from '../../core';

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

/** Reads one call's outcome from its headers or trailers (a unary call may carry it in both: read once). */
export function outcomeReader(outcome: CoreOutcome): (metadata: Metadata) => void {
  let costSeen = false;
  return (metadata) => {
    const account = metadata.get(OUTCOME_TRAILERS.accountId);
    const key = metadata.get(OUTCOME_TRAILERS.keyId);
    const cost = metadata.get(OUTCOME_TRAILERS.cost);
    if (typeof account === 'string') outcome.accountId = account;
    if (typeof key === 'string') outcome.keyId = key;
    if (!costSeen && typeof cost === 'string' && /^\d+$/.test(cost)) {
      costSeen = true;
      outcome.cost = (outcome.cost ?? 0n) + BigInt(cost);
    }
  };
}
