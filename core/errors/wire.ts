import { type Metadata } from 'nice-grpc-common';
import { codeForGrpcStatus, isErrorCode, type ErrorCode } from './codes';
import { SvcError, type ErrorDetails } from './svc-error';

/** Trailer names that carry a domain error across the gRPC hop. */
export const TRAILER_CODE = 'svc-error-code';
export const TRAILER_PARAM = 'svc-error-param';
export const TRAILER_DETAILS = 'svc-error-details';

/**
 * Most characters of an error message or param that cross the gRPC hop. Messages may quote the
 * client's input, and trailers past HTTP/2's header-list limit (16 KiB in grpc-js) are never
 * delivered: the call then hangs until the connection drops instead of failing.
 */
export const MAX_WIRE_TEXT = 1000;

/** `text` cut to `MAX_WIRE_TEXT` characters, marked as cut. */
export function clipWireText(text: string): string {
  return text.length <= MAX_WIRE_TEXT
    ? text
    : `${text.slice(0, MAX_WIRE_TEXT)}… (${text.length - MAX_WIRE_TEXT} more characters)`;
}

/** Writes the error's code, param and details into gRPC trailers. */
export function errorToTrailers(error: SvcError, trailer: Metadata): void {
  trailer.set(TRAILER_CODE, error.code);
  if (error.param !== undefined) trailer.set(TRAILER_PARAM, encodeURIComponent(clipWireText(error.param)));
  if (error.details !== undefined) {
    const details = JSON.stringify(error.details);
    // Details are small facts (balance, price); any that are not are dropped rather than cut into invalid JSON.
    if (details.length <= MAX_WIRE_TEXT) trailer.set(TRAILER_DETAILS, encodeURIComponent(details));
  }
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
