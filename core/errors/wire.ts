import { type Metadata } from 'nice-grpc-common';
import { codeForGrpcStatus, isErrorCode, type ErrorCode } from './codes';
import { SvcError, type ErrorDetails } from './svc-error';

/** Trailer names that carry a domain error across the gRPC hop. */
export const TRAILER_CODE = 'svc-error-code';
export const TRAILER_PARAM = 'svc-error-param';
export const TRAILER_DETAILS = 'svc-error-details';

/** Writes the error's code, param and details into gRPC trailers. */
export function errorToTrailers(error: SvcError, trailer: Metadata): void {
  trailer.set(TRAILER_CODE, error.code);
  if (error.param !== undefined) trailer.set(TRAILER_PARAM, encodeURIComponent(error.param));
  if (error.details !== undefined) trailer.set(TRAILER_DETAILS, encodeURIComponent(JSON.stringify(error.details)));
}

/** Rebuilds a domain error on the client side from a gRPC status, message and trailers. */
export function errorFromTrailers(status: number, message: string, trailer: Metadata | undefined): SvcError {
  const raw = trailer?.get(TRAILER_CODE);
  const code: ErrorCode = typeof raw === 'string' && isErrorCode(raw) ? raw : codeForGrpcStatus(status);
  const param = trailer?.get(TRAILER_PARAM);
  const detailsRaw = trailer?.get(TRAILER_DETAILS);
  let details: ErrorDetails | undefined;
  if (typeof detailsRaw === 'string') {
    try {
      details = JSON.parse(decodeURIComponent(detailsRaw)) as ErrorDetails;
    } catch {
      details = undefined;
    }
  }
  const safeMessage = code === 'internal' ? 'Internal server error' : message;
  return new SvcError(code, safeMessage, {
    ...(typeof param === 'string' ? { param: decodeURIComponent(param) } : {}),
    ...(details !== undefined ? { details } : {}),
  });
}
