import type { Dispatcher } from 'undici';

/*
 * One more try for a request whose connection was closed under it: the LLM providers' calls
 * (core/providers/llm) and the search tools' (core/tools/upstream.ts).
 */

// The connection was closed under a request that had no answer yet.
const CLOSED_CODES = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET']);

/** The first `code` string along an error's `cause` chain (undici wraps the socket's error). */
export function errorCodeOf(error: unknown): string | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 4 && typeof current === 'object' && current !== null; depth += 1) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

/** Whether a request failed because its connection was closed under it (reset, broken pipe, "other side closed"). */
export function closedUnderRequest(error: unknown): boolean {
  const code = errorCodeOf(error);
  return code !== undefined && CLOSED_CODES.has(code);
}

/**
 * `dispatcher.request(options)`, sent once more when its connection was closed under it before any
 * answer came (ECONNRESET, EPIPE, undici's "other side closed"): most often a kept-alive connection
 * the upstream closed just as svc reused it, which undici does not retry for a POST. undici drops
 * the failed connection, so the second try goes out on another. Once only: an upstream that keeps
 * closing connections fails the call as before. Refused connections and timeouts are not sent
 * again, nor a request whose caller has gone (`signal`). The client is charged once either way:
 * the meter holds and settles around the whole call.
 */
export async function requestUpstream(
  dispatcher: Dispatcher,
  options: Dispatcher.RequestOptions,
  signal: AbortSignal,
): Promise<Dispatcher.ResponseData> {
  // Object.assign, not `{ ...options, signal }`: a map of its own per object otherwise (core/chat/prepare.ts).
  try {
    return await dispatcher.request(Object.assign({}, options, { signal }));
  } catch (error) {
    if (signal.aborted || !closedUnderRequest(error)) throw error;
    return await dispatcher.request(Object.assign({}, options, { signal }));
  }
}
