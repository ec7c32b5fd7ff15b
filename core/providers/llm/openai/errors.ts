import { SvcError } from '../../../errors';

const TIMEOUT_CODES = new Set([
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_CONNECT_TIMEOUT',
  'ETIMEDOUT',
]);
const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ECONNRESET',
  'EPIPE',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
  'UND_ERR_DESTROYED',
]);

function errorCode(error: unknown): string | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 4 && typeof current === 'object' && current !== null; depth += 1) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

/**
 * Turns a transport failure into the upstream error a client may see; the original goes in
 * `cause`. An abort caused by our own signal becomes `cancelled`.
 */
export function transportError(error: unknown, signal: AbortSignal, upstream: string): SvcError {
  if (error instanceof SvcError) return error;
  if (signal.aborted) return new SvcError('cancelled', 'The request was cancelled', { cause: error });
  const code = errorCode(error);
  if (code !== undefined && TIMEOUT_CODES.has(code)) {
    return new SvcError('upstream_timeout', 'The model provider did not answer in time', { cause: error });
  }
  if (code !== undefined && UNAVAILABLE_CODES.has(code)) {
    return new SvcError('upstream_unavailable', 'The model provider is unavailable', { cause: error });
  }
  return new SvcError('upstream_error', 'The model provider failed', {
    cause: new Error(`${upstream}: transport failure`, { cause: error }),
  });
}

/** Maps an upstream HTTP error status; the body snippet stays in `cause`. */
export function statusError(status: number, bodySnippet: string, upstream: string): SvcError {
  const cause = new Error(`${upstream} answered HTTP ${status}: ${bodySnippet.slice(0, 500)}`);
  if (status === 429 || status === 503 || status === 529) {
    return new SvcError('upstream_unavailable', 'The model provider is overloaded or unavailable', { cause });
  }
  if (status === 504 || status === 408)
    return new SvcError('upstream_timeout', 'The model provider did not answer in time', { cause });
  return new SvcError('upstream_error', 'The model provider failed', { cause });
}

/** An upstream that answered 200 with something that is not the chat-completions wire. */
export function garbageError(what: string, upstream: string, cause?: unknown): SvcError {
  return new SvcError('upstream_error', 'The model provider returned an invalid response', {
    cause: new Error(`${upstream}: ${what}`, cause === undefined ? undefined : { cause }),
  });
}
