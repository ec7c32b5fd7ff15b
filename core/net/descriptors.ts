import { SvcError } from '../errors';
import { errorCodeOf } from './request-again';

// svc's own process is out of file descriptors: no fault of the upstream's (issue 48 point 5).
const OWN_CODES = new Set(['EMFILE', 'ENFILE']);

/** Whether a request failed because svc could not open a socket (EMFILE, ENFILE along its causes). */
export function outOfDescriptors(error: unknown): boolean {
  const code = errorCodeOf(error);
  return code !== undefined && OWN_CODES.has(code);
}

/**
 * svc could not open a connection for want of file descriptors: its own `unavailable` (each
 * wire's 503/529 with a retry hint), never the upstream's `upstream_error`.
 */
export function descriptorsExhausted(cause: unknown): SvcError {
  return new SvcError('unavailable', 'svc is out of connections for the moment; retry shortly', {
    details: { retry_after_s: 1, reason: 'descriptors' },
    cause,
  });
}
