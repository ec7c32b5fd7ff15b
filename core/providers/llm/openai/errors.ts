import { descriptorsExhausted, outOfDescriptors } from '../../../net/descriptors';
import { errorCodeOf } from '../../../net/request-again';
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

/**
 * Turns a transport failure into the upstream error a client may see; the original goes in
 * `cause`. An abort caused by our own signal becomes `cancelled`; running out of file
 * descriptors is svc's own `unavailable` (503), never the upstream's failure.
 */
export function transportError(error: unknown, signal: AbortSignal, upstream: string): SvcError {
  if (error instanceof SvcError) return error;
  if (signal.aborted) return new SvcError('cancelled', 'The request was cancelled', { cause: error });
  const code = errorCodeOf(error);
  if (outOfDescriptors(error)) return descriptorsExhausted(error);
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

/** What an upstream's message must not show a client: its host, key and model name. */
export interface UpstreamIdentity {
  /** host:port of the base URL. */
  readonly host: string;
  readonly apiKey: string | undefined;
  readonly upstreamModel: string;
  /** svc's public model id, which replaces the upstream's model name. */
  readonly modelId: string;
}

const MAX_MESSAGE = 1000;

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/**
 * An upstream's error message as a client may see it: keys, key-shaped and opaque tokens,
 * organisation ids, URLs and the upstream's host removed, its model name replaced by svc's.
 */
export function scrubUpstreamMessage(message: string, who: UpstreamIdentity): string {
  let text = message;
  if (who.apiKey !== undefined && who.apiKey.length >= 4) text = text.split(who.apiKey).join('[redacted]');
  // The model name is set aside first, so that no token rule below eats a long one.
  const MODEL = '\u0000model\u0000';
  if (who.upstreamModel !== '' && who.upstreamModel !== who.modelId) text = text.split(who.upstreamModel).join(MODEL);
  text = text
    .replace(/\bhttps?:\/\/\S+/gi, '[url]')
    .replace(/\bBearer\s+\S+/gi, 'Bearer [redacted]')
    .replace(/\b(?:sk|svc_sk|rk|pk|key|api[-_]?key)[-_][A-Za-z0-9_\-*.]{6,}/gi, '[redacted]')
    .replace(/\b(?:org|proj|user|acct)[-_][A-Za-z0-9]{8,}/gi, '[redacted]')
    // Opaque tokens: long runs of letters and digits that are not words.
    .replace(/\b(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{24,}\b/g, '[redacted]');
  const host = who.host.replace(/:\d+$/, '');
  for (const name of new Set([who.host, host])) {
    if (name !== '') text = text.replace(new RegExp(escapeRegExp(name), 'gi'), 'the model provider');
  }
  text = text.split(MODEL).join(who.modelId);
  return text.length > MAX_MESSAGE ? `${text.slice(0, MAX_MESSAGE)}…` : text;
}

/** OpenAI's error object as an upstream sent it, where it is one. */
interface UpstreamErrorBody {
  readonly message: string | undefined;
  readonly type: string | undefined;
  readonly code: string | undefined;
  readonly param: string | undefined;
}

/** Reads OpenAI's `{error: {message, type, param, code}}` (or a bare `{message}`) from a parsed body. */
export function readErrorBody(json: unknown): UpstreamErrorBody | undefined {
  if (typeof json !== 'object' || json === null) return undefined;
  const inner = (json as { error?: unknown }).error;
  const error = typeof inner === 'object' && inner !== null ? (inner as Record<string, unknown>) : undefined;
  const source = error ?? (json as Record<string, unknown>);
  const text = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
  const message = text(source['message']) ?? (typeof inner === 'string' ? inner : undefined);
  if (message === undefined && error === undefined) return undefined;
  return {
    message,
    type: text(source['type']),
    // Some servers put the HTTP status in `code`: only a string is an error code.
    code: text(source['code']),
    param: text(source['param']),
  };
}

function parseErrorBody(snippet: string): UpstreamErrorBody | undefined {
  try {
    return readErrorBody(JSON.parse(snippet));
  } catch {
    return undefined;
  }
}

/** Seconds from `retry-after` (seconds or an HTTP date) or `retry-after-ms`; at least 1. */
export function retryAfterSeconds(
  headers: Readonly<Record<string, string | string[] | undefined>>,
  now: number,
): number {
  const first = (name: string): string | undefined => {
    const v = headers[name];
    return Array.isArray(v) ? v[0] : v;
  };
  const ms = Number(first('retry-after-ms'));
  if (Number.isFinite(ms) && ms > 0) return Math.max(1, Math.ceil(ms / 1000));
  const raw = first('retry-after');
  if (raw === undefined) return 1;
  const seconds = Number(raw);
  if (Number.isFinite(seconds)) return Math.max(1, Math.ceil(seconds));
  const date = Date.parse(raw);
  return Number.isNaN(date) ? 1 : Math.max(1, Math.ceil((date - now) / 1000));
}

// Codes an upstream gives for a refusal of svc's own account, not of the client's request.
const PROVIDER_ACCOUNT_CODES = new Set(['insufficient_quota', 'invalid_api_key', 'billing_hard_limit_reached']);

/** The upstream refused the client's request: OpenAI's 400 with the upstream's (scrubbed) message and code. */
function refusal(body: UpstreamErrorBody | undefined, who: UpstreamIdentity, cause: Error): SvcError {
  const message =
    body?.message !== undefined
      ? scrubUpstreamMessage(body.message, who)
      : 'The model provider rejected the request as invalid.';
  return new SvcError('upstream_invalid_request', message, {
    ...(body?.param !== undefined ? { param: body.param } : {}),
    ...(body?.code !== undefined ? { details: { upstream_code: body.code } } : {}),
    cause,
  });
}

/**
 * Maps an upstream HTTP error. A refusal of the client's request (400, 413, 422; 404 for a model)
 * keeps the upstream's message and code, scrubbed, as the client's own error; a 429 is a 429
 * with the upstream's retry-after; the upstream's own trouble (401/403 for svc's key, 5xx, …)
 * stays a 502/503/504 with no detail. The body snippet stays in `cause`.
 */
export function statusError(
  status: number,
  bodySnippet: string,
  who: UpstreamIdentity,
  headers: Readonly<Record<string, string | string[] | undefined>> = {},
  now: number = Date.now(),
): SvcError {
  const cause = new Error(`${who.host} answered HTTP ${status}: ${bodySnippet.slice(0, 500)}`);
  const body = parseErrorBody(bodySnippet);
  const accountTrouble = body?.code !== undefined && PROVIDER_ACCOUNT_CODES.has(body.code);
  if ((status === 400 || status === 413 || status === 422) && !accountTrouble) return refusal(body, who, cause);
  if (status === 404 && body?.code === 'model_not_found') {
    return new SvcError(
      'upstream_not_found',
      `The provider of '${who.modelId}' does not know the model it was configured with (upstream_model). This is a configuration error at this service, not in your request; nothing was charged.`,
      { cause },
    );
  }
  if (status === 429 && !accountTrouble) {
    const retryAfter = retryAfterSeconds(headers, now);
    return new SvcError(
      'upstream_rate_limited',
      `The model provider is rate limiting requests to '${who.modelId}'; retry after ${retryAfter} s.`,
      { details: { retry_after_s: retryAfter }, cause },
    );
  }
  if (status === 429 || status === 503 || status === 529) {
    return new SvcError('upstream_unavailable', 'The model provider is overloaded or unavailable', { cause });
  }
  if (status === 504 || status === 408)
    return new SvcError('upstream_timeout', 'The model provider did not answer in time', { cause });
  return new SvcError('upstream_error', 'The model provider failed', { cause });
}

/**
 * An error frame inside an upstream stream (`data: {"error": …}`): a refusal of the request
 * (invalid_request_error) is the client's 400, a rate limit a 429, anything else a failure.
 */
export function streamErrorFrame(json: unknown, frame: string, who: UpstreamIdentity): SvcError {
  const cause = new Error(`${who.host} sent an error frame: ${frame.slice(0, 500)}`);
  const body = readErrorBody(json);
  const accountTrouble = body?.code !== undefined && PROVIDER_ACCOUNT_CODES.has(body.code);
  if (body?.type === 'invalid_request_error' && !accountTrouble) return refusal(body, who, cause);
  if ((body?.type === 'requests' || body?.type === 'tokens' || body?.code === 'rate_limit_exceeded') && !accountTrouble)
    return new SvcError(
      'upstream_rate_limited',
      `The model provider is rate limiting requests to '${who.modelId}'; retry after 1 s.`,
      { details: { retry_after_s: 1 }, cause },
    );
  return new SvcError('upstream_error', 'The model provider failed', { cause });
}

/** One stream frame's JSON; a frame that is not JSON is the upstream's garbage (`garbageError`). */
export function streamFrame(data: string, upstream: string): unknown {
  try {
    return JSON.parse(data) as unknown;
  } catch (error) {
    throw garbageError('stream frame is not JSON', upstream, error);
  }
}

/** An upstream that answered 200 with something that is not the chat-completions wire. */
export function garbageError(what: string, upstream: string, cause?: unknown): SvcError {
  return new SvcError('upstream_error', 'The model provider returned an invalid response', {
    cause: new Error(`${upstream}: ${what}`, cause === undefined ? undefined : { cause }),
  });
}
