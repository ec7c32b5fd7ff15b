import { trace } from '@opentelemetry/api';
import { isAbortError } from 'abort-controller-x';
import { ServerError, Status, type CallContext, type ServerMiddlewareCall } from 'nice-grpc-common';
import type { CoreCallContext, Principal } from '../auth/types';
import { isSvcError } from '../errors';

/**
 * Response metadata that tells a caller whose call it was, for its log: in the trailers, and for
 * unary calls in the headers too (OpenTelemetry's gRPC server instrumentation drops a unary call's
 * trailers; the headers of a unary call go out with the response, after the handler). What a call
 * cost travels once, in the response's `billing` (the last message of a stream), never here.
 */
export const OUTCOME_TRAILERS = {
  accountId: 'svc-account-id',
  keyId: 'svc-key-id',
} as const;

interface BillingLike {
  readonly cost?: unknown;
  readonly balanceAfter?: unknown;
}

export interface OutcomeRecorder {
  /** One finished call: `code` is "ok", the svc error code, "cancelled" or a gRPC status name. */
  onCall(method: string, code: string, seconds: number): void;
}

function codeOf(error: unknown): string {
  if (isSvcError(error)) return error.code;
  if (isAbortError(error)) return 'cancelled';
  if (error instanceof ServerError) return Status[error.code]?.toLowerCase() ?? 'error';
  return 'internal';
}

function billingOf(message: unknown): BillingLike | undefined {
  if (typeof message !== 'object' || message === null) return undefined;
  const billing = (message as { billing?: unknown }).billing;
  return typeof billing === 'object' && billing !== null ? (billing as BillingLike) : undefined;
}

/**
 * Runs inside the context middleware and makes every call's outcome visible to its caller and
 * its trace, whatever the handler: the authenticated account and key go to the response trailers
 * (`svc-account-id`, `svc-key-id`) and the gRPC server span; when a response (or the last message
 * of a stream) carries `billing`, its cost and the balance after it go to the span. The span is
 * the one active when the call started: in a server-streaming call the code that settles may run
 * under another context, but the cost belongs on this span. The gateway logs the trailers; it
 * decides nothing from them.
 */
export function createOutcomeMiddleware(recorder: OutcomeRecorder) {
  return async function* outcomeMiddleware<Req, Res>(
    call: ServerMiddlewareCall<Req, Res, { svc: CoreCallContext }>,
    context: CallContext & { svc: CoreCallContext },
  ): AsyncGenerator<Res, Res | void, undefined> {
    const startedAt = performance.now();
    const span = trace.getActiveSpan();
    const { svc } = context;
    let principal: Principal | null = null;
    let code = 'ok';
    const observed: CoreCallContext = {
      requestId: svc.requestId,
      clientRequestId: svc.clientRequestId,
      idempotencyKey: svc.idempotencyKey,
      sessionId: svc.sessionId,
      requireAdmin: () => svc.requireAdmin(),
      requireKey: (options) =>
        svc.requireKey(options).then((p) => {
          principal = p;
          return p;
        }),
      requireKeyOrAdmin: () =>
        svc.requireKeyOrAdmin().then((p) => {
          if (p !== null) principal = p;
          return p;
        }),
      requireCaller: () =>
        svc.requireCaller().then((c) => {
          if (c.kind === 'key') principal = c.principal;
          return c;
        }),
      requireSession: () => svc.requireSession(),
      isSession: () => svc.isSession(),
      ...(svc.tokenBudget !== undefined ? { tokenBudget: svc.tokenBudget } : {}),
    };
    const next = { ...context, svc: observed };
    const note = (message: unknown): void => {
      const b = billingOf(message);
      if (b === undefined) return;
      // Set now, not in `finally`: a streaming call's span may end as soon as the last message is out.
      span?.setAttributes({
        'svc.cost.credits': Number(b.cost ?? 0),
        'svc.wallet.balance_after': Number(b.balanceAfter ?? 0),
      });
    };
    try {
      if (!call.responseStream) {
        const response = yield* call.next(call.request, next);
        note(response);
        return response;
      }
      for await (const message of call.next(call.request, next)) {
        note(message);
        yield message;
      }
      return;
    } catch (error) {
      code = codeOf(error);
      throw error;
    } finally {
      const sinks = call.responseStream ? [context.trailer] : [context.trailer, context.header];
      const who = principal as Principal | null;
      if (who !== null) {
        for (const m of sinks) {
          m.set(OUTCOME_TRAILERS.accountId, who.accountId);
          m.set(OUTCOME_TRAILERS.keyId, who.keyId);
        }
        span?.setAttributes({ 'svc.account.id': who.accountId, 'svc.key.id': who.keyId });
      }
      recorder.onCall(call.method.path, code, (performance.now() - startedAt) / 1000);
    }
  };
}
