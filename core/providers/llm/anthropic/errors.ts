import { SvcError } from '../../../errors';
import { readErrorBody, scrubUpstreamMessage, statusError, type UpstreamIdentity } from '../openai/errors';

/*
 * Anthropic's errors (`{"type":"error","error":{"type","message"}}`, documented statuses 400,
 * 401, 402, 403, 404, 413, 429, 500, 504, 529) mapped by the openai provider's rules: the client's
 * own refusals keep the upstream's scrubbed message, svc's account trouble and the upstream's own
 * failures stay a 502/503/504 with no detail.
 */

/** The HTTP status Anthropic documents for each error type, for errors that arrive mid-stream. */
const STATUS_OF_TYPE: Readonly<Record<string, number>> = {
  invalid_request_error: 400,
  authentication_error: 401,
  billing_error: 402,
  permission_error: 403,
  not_found_error: 404,
  request_too_large: 413,
  rate_limit_error: 429,
  api_error: 500,
  timeout_error: 504,
  overloaded_error: 529,
};

/** Maps an Anthropic HTTP error answer. */
export function anthropicStatusError(
  status: number,
  snippet: string,
  who: UpstreamIdentity,
  headers: Readonly<Record<string, string | string[] | undefined>> = {},
): SvcError {
  if (status === 404) {
    let body: ReturnType<typeof readErrorBody>;
    try {
      body = readErrorBody(JSON.parse(snippet));
    } catch {
      body = undefined;
    }
    // Anthropic answers an unknown model with 404 not_found_error; any other 404 is svc's misconfiguration.
    if (body?.type === 'not_found_error' && /model/i.test(body.message ?? '')) {
      return new SvcError('upstream_not_found', scrubUpstreamMessage(body.message ?? '', who), {
        param: 'model',
        cause: new Error(`${who.host} answered HTTP 404: ${snippet.slice(0, 500)}`),
      });
    }
  }
  return statusError(status, snippet, who, headers);
}

/** Maps an `event: error` frame of an Anthropic stream by its error type's documented status. */
export function anthropicStreamError(error: Record<string, unknown>, who: UpstreamIdentity): SvcError {
  const type = typeof error['type'] === 'string' ? error['type'] : '';
  return anthropicStatusError(STATUS_OF_TYPE[type] ?? 500, JSON.stringify({ type: 'error', error }), who);
}
