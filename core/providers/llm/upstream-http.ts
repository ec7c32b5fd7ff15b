import type { Dispatcher } from 'undici';
import type { SvcError } from '../../errors';
import { requestUpstream } from '../../net/request-again';
import { garbageError, transportError } from './openai/errors';

/*
 * The HTTP exchange the native providers (anthropic, openai-responses) share: one JSON POST over
 * the origin's pooled dispatcher, with the same timeout and transport-error rules as the openai
 * provider, and the provider's own mapping of an HTTP error status.
 */

const MAX_ERROR_BODY = 4096;

/** Where and how a provider posts. */
export interface UpstreamEndpoint {
  readonly url: URL;
  readonly headers: Readonly<Record<string, string>>;
  readonly dispatcher: Dispatcher;
  /** Headers and body inactivity timeout, in milliseconds. */
  readonly timeoutMs: number;
  /** Maps a non-2xx answer (status, the first 4 KiB of its body, its headers) to the client's error. */
  readonly statusError: (
    status: number,
    snippet: string,
    headers: Readonly<Record<string, string | string[] | undefined>>,
  ) => SvcError;
}

/** The first 4 KiB of an error answer's body, for the error mapping and the log. */
export async function readSnippet(body: Dispatcher.ResponseData['body']): Promise<string> {
  let text = '';
  try {
    for await (const chunk of body as AsyncIterable<Buffer>) {
      if (text.length < MAX_ERROR_BODY) text += chunk.toString('utf8');
    }
  } catch {
    // The status already says it failed; a broken error body adds nothing.
  }
  return text.slice(0, MAX_ERROR_BODY);
}

/** POSTs `body`; resolves with a 2xx response, else throws the endpoint's mapped error. */
export async function postUpstream(
  endpoint: UpstreamEndpoint,
  body: string,
  stream: boolean,
  signal: AbortSignal,
): Promise<Dispatcher.ResponseData> {
  let response: Dispatcher.ResponseData;
  try {
    response = await requestUpstream(
      endpoint.dispatcher,
      {
        origin: endpoint.url.origin,
        path: endpoint.url.pathname + endpoint.url.search,
        method: 'POST',
        // Object.assign, not a spread and a key: a map of its own per object otherwise (core/chat/prepare.ts).
        headers: Object.assign({}, endpoint.headers, { accept: stream ? 'text/event-stream' : 'application/json' }),
        body,
        headersTimeout: endpoint.timeoutMs,
        bodyTimeout: endpoint.timeoutMs,
      },
      signal,
    );
  } catch (error) {
    throw transportError(error, signal, endpoint.url.host);
  }
  if (response.statusCode < 200 || response.statusCode >= 300) {
    throw endpoint.statusError(response.statusCode, await readSnippet(response.body), response.headers);
  }
  return response;
}

/** The JSON body of a non-streamed answer; a body that is not JSON is the upstream's failure. */
export async function readJsonBody(
  response: Dispatcher.ResponseData,
  signal: AbortSignal,
  upstream: string,
): Promise<unknown> {
  try {
    return await response.body.json();
  } catch (error) {
    throw signal.aborted || (error as { code?: string }).code !== undefined
      ? transportError(error, signal, upstream)
      : garbageError('body is not JSON', upstream, error);
  }
}

/**
 * `readJsonBody` with the body's text kept beside its JSON (a fast path forwards the text): a read
 * failure is the transport's, a parse failure garbage.
 */
export async function readJsonText(
  response: Dispatcher.ResponseData,
  signal: AbortSignal,
  upstream: string,
): Promise<{ text: string; json: unknown }> {
  let text: string;
  try {
    text = await response.body.text();
  } catch (error) {
    throw transportError(error, signal, upstream);
  }
  try {
    return { text, json: JSON.parse(text) as unknown };
  } catch (error) {
    throw signal.aborted ? transportError(error, signal, upstream) : garbageError('body is not JSON', upstream, error);
  }
}
