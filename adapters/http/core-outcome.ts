import { AsyncLocalStorage } from 'node:async_hooks';
import type { CallOptions, ClientMiddlewareCall, Metadata } from 'nice-grpc';
import { OUTCOME_TRAILERS } from '../../core/telemetry/outcome-middleware';

/** What the core said about the calls made for one HTTP request (from its response metadata). */
export interface CoreOutcome {
  accountId?: string;
  keyId?: string;
  /** Credits, summed over the request's core calls that carried a cost. */
  cost?: bigint;
}

/**
 * Collects the core's outcome trailers for the HTTP request being served, without the adapters
 * passing anything around: `track` runs a request's handler with an outcome record as its async
 * context, and the client middleware fills the record from the trailers of every core call made
 * inside it. One per connection (no module state).
 */
export interface CoreOutcomes {
  track<T>(outcome: CoreOutcome, handler: () => T): T;
  /** nice-grpc client middleware (installed by `connectCore`). */
  middleware<Req, Res>(
    call: ClientMiddlewareCall<Req, Res>,
    options: CallOptions,
  ): AsyncGenerator<Res, Res | void, undefined>;
}

/** Reads one call's outcome from its headers or trailers (a unary call may carry it in both: read once). */
function reader(outcome: CoreOutcome): (metadata: Metadata) => void {
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

export function createCoreOutcomes(): CoreOutcomes {
  const storage = new AsyncLocalStorage<CoreOutcome>();
  return {
    track: (outcome, handler) => storage.run(outcome, handler),
    async *middleware<Req, Res>(
      call: ClientMiddlewareCall<Req, Res>,
      options: CallOptions,
    ): AsyncGenerator<Res, Res | void, undefined> {
      const outcome = storage.getStore();
      if (outcome === undefined) return yield* call.next(call.request, options);
      const { onHeader, onTrailer } = options;
      const read = reader(outcome);
      return yield* call.next(call.request, {
        ...options,
        onHeader(header: Metadata) {
          read(header);
          onHeader?.(header);
        },
        onTrailer(trailer: Metadata) {
          read(trailer);
          onTrailer?.(trailer);
        },
      });
    },
  };
}
