import { trace, SpanStatusCode } from '@opentelemetry/api';
import { isAbortError } from 'abort-controller-x';
import type { Logger } from 'pino';
import { ServerError, Status, type CallContext, type ServerMiddlewareCall } from 'nice-grpc-common';
import { clipWireText, errorToTrailers, isSvcError, mappingFor } from '../errors';
import { processRedactor } from '../telemetry/redact';
import { isStoreUnreachable, storeUnavailable } from '../store/outage';

/**
 * The one place where core errors become gRPC statuses: domain errors keep their code, message,
 * param and details (in trailers); anything else is logged and becomes a bare INTERNAL.
 */
export function createErrorMiddleware(logger: Logger) {
  return async function* errorMiddleware<Req, Res>(
    call: ServerMiddlewareCall<Req, Res>,
    context: CallContext,
  ): AsyncGenerator<Res, Res | void, undefined> {
    try {
      return yield* call.next(call.request, context);
    } catch (thrown) {
      if (thrown instanceof ServerError || isAbortError(thrown)) throw thrown;
      // A store that cannot be reached is "unavailable, retry" on every wire, never a 500.
      const error = isStoreUnreachable(thrown) ? storeUnavailable(thrown) : thrown;
      const span = trace.getActiveSpan();
      if (isSvcError(error)) {
        errorToTrailers(error, context.trailer);
        const mapping = mappingFor(error.code);
        // An upstream's refusal is the client's error but also the operator's to know about.
        if (mapping.http >= 500 || error.code.startsWith('upstream_')) {
          logger.warn({ err: error.cause ?? error, code: error.code, method: call.method.path }, 'core call failed');
          span?.setStatus({ code: SpanStatusCode.ERROR, message: error.code });
        }
        span?.setAttribute('svc.error.code', error.code);
        throw new ServerError(mapping.grpc, clipWireText(processRedactor.scrub(error.message)));
      }
      logger.error({ err: error, method: call.method.path }, 'unexpected error in core call');
      span?.recordException(error instanceof Error ? error : new Error(String(error)));
      span?.setStatus({ code: SpanStatusCode.ERROR });
      context.trailer.set('svc-error-code', 'internal');
      throw new ServerError(Status.INTERNAL, 'Internal server error');
    }
  };
}
