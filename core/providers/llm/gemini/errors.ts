import { SvcError } from '../../../errors';
import { retryAfterSeconds, scrubUpstreamMessage, statusError, type UpstreamIdentity } from '../openai/errors';

/** Google's `{"error": {code, message, status, details}}`, as far as svc reads it. */
interface GoogleError {
  readonly message: string | undefined;
  readonly status: string | undefined;
  readonly details: readonly Record<string, unknown>[];
}

/** Reads Google's error object from a parsed body (a bare one, or the first of a streamed array). */
export function readGoogleError(json: unknown): GoogleError | undefined {
  const root = Array.isArray(json) ? (json[0] as unknown) : json;
  const error = (root as { error?: unknown } | null)?.error;
  if (typeof error !== 'object' || error === null) return undefined;
  const e = error as Record<string, unknown>;
  const details = Array.isArray(e['details'])
    ? e['details'].filter((d): d is Record<string, unknown> => typeof d === 'object' && d !== null)
    : [];
  return {
    message: typeof e['message'] === 'string' ? e['message'] : undefined,
    status: typeof e['status'] === 'string' ? e['status'] : undefined,
    details,
  };
}

function parse(snippet: string): GoogleError | undefined {
  try {
    return readGoogleError(JSON.parse(snippet));
  } catch {
    return undefined;
  }
}

const ACCOUNT_REASONS = new Set([
  'API_KEY_INVALID',
  'API_KEY_SERVICE_BLOCKED',
  'CONSUMER_SUSPENDED',
  'BILLING_DISABLED',
]);

function reasonOf(error: GoogleError | undefined): string | undefined {
  const info = error?.details.find((d) => String(d['@type']).endsWith('google.rpc.ErrorInfo'));
  return typeof info?.['reason'] === 'string' ? info['reason'] : undefined;
}

/** `RetryInfo.retryDelay` ("56s", "0.5s") in whole seconds, at least 1. */
function retryDelaySeconds(error: GoogleError | undefined): number | undefined {
  const info = error?.details.find((d) => String(d['@type']).endsWith('google.rpc.RetryInfo'));
  const delay = info?.['retryDelay'];
  const match = typeof delay === 'string' ? /^(\d+(?:\.\d+)?)s$/.exec(delay) : null;
  return match?.[1] === undefined ? undefined : Math.max(1, Math.ceil(Number(match[1])));
}

/**
 * Maps an HTTP error of Google's API like the OpenAI provider's `statusError`: the client's own
 * refusal (400) keeps Google's scrubbed message, a missing model is a 404 naming `model`, a 429
 * keeps Google's retry delay; a refused svc key (400 `API_KEY_INVALID`) or a quota of svc's own
 * account is the provider's trouble, a 502/503 with no detail. The body stays in `cause`.
 */
export function geminiStatusError(
  status: number,
  snippet: string,
  who: UpstreamIdentity,
  headers: Readonly<Record<string, string | string[] | undefined>> = {},
): SvcError {
  const cause = new Error(`${who.host} answered HTTP ${status}: ${snippet.slice(0, 500)}`);
  const body = parse(snippet);
  const reason = reasonOf(body);
  if (reason !== undefined && ACCOUNT_REASONS.has(reason))
    return new SvcError('upstream_error', 'The model provider failed', { cause });
  if (status === 400 && body?.message !== undefined)
    return new SvcError('upstream_invalid_request', scrubUpstreamMessage(body.message, who), { cause });
  if (status === 404)
    return new SvcError('upstream_not_found', `The model '${who.modelId}' is not available at its provider.`, {
      param: 'model',
      cause,
    });
  if (status === 429) {
    const retryAfter =
      headers['retry-after'] !== undefined ? retryAfterSeconds(headers, Date.now()) : (retryDelaySeconds(body) ?? 1);
    return new SvcError(
      'upstream_rate_limited',
      `The model provider is rate limiting requests to '${who.modelId}'; retry after ${retryAfter} s.`,
      { details: { retry_after_s: retryAfter }, cause },
    );
  }
  return statusError(status, snippet, who, headers);
}

/** An error object inside a stream (`data: {"error": …}`), mapped by its HTTP code like an answer. */
export function geminiStreamError(json: unknown, frame: string, who: UpstreamIdentity): SvcError {
  const code = (json as { error?: { code?: unknown } }).error?.code;
  return geminiStatusError(typeof code === 'number' ? code : 500, frame, who);
}
