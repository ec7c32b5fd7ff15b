import type { Context } from 'koa';
import type { Logger } from 'pino';
import { isSvcError, mappingFor, SvcError } from '../../core/edge';

/** OpenAI's error object: `{message, type, param, code}`. */
export interface OpenAiErrorBody {
  readonly message: string;
  readonly type: string;
  readonly param: string | null;
  readonly code: string | null;
}

/** Any failure as a domain error; unknown ones become `internal` with no detail. */
export function asSvcError(error: unknown): SvcError {
  return isSvcError(error)
    ? error
    : new SvcError('internal', 'The server had an error while processing your request.', { cause: error });
}

export function openAiError(error: SvcError): OpenAiErrorBody {
  const mapping = mappingFor(error.code);
  const message = error.code === 'internal' ? 'The server had an error while processing your request.' : error.message;
  // An upstream's refusal keeps the upstream's own code (context_length_exceeded, …), as the core passed it.
  const upstreamCode = error.details?.['upstream_code'];
  const code = typeof upstreamCode === 'string' ? upstreamCode : mapping.openaiCode;
  return { message, type: mapping.openaiType, param: error.param ?? null, code };
}

/** Headers OpenAI's clients read to decide on retries. */
function errorHeaders(ctx: Context, error: SvcError): void {
  if (error.code === 'insufficient_credit' || error.code === 'key_cap_exceeded') ctx.set('x-should-retry', 'false');
  // OpenAI's clients retry a 409; the same key with another body can never succeed.
  if (error.code === 'idempotency_conflict' && error.details?.['reason'] === 'different_body')
    ctx.set('x-should-retry', 'false');
  // An upstream's refusal is answered once: a 4xx from the model's provider comes back the same on
  // an immediate retry. Its 429 says when to come back in `retry-after`, for the client to decide.
  if (
    error.code === 'upstream_invalid_request' ||
    error.code === 'upstream_not_found' ||
    error.code === 'upstream_rate_limited'
  )
    ctx.set('x-should-retry', 'false');
  // svc is busy (an origin's fair queue waited out, …): a retry in a moment may succeed.
  if (
    error.code === 'upstream_rate_limited' ||
    error.code === 'concurrency_limited' ||
    mappingFor(error.code).http === 503
  ) {
    const retry = error.details?.['retry_after_s'];
    ctx.set('retry-after', String(typeof retry === 'number' ? retry : 1));
  }
  if (error.code === 'rate_limited' || error.code === 'tokens_rate_limited') {
    const kind = error.code === 'rate_limited' ? 'requests' : 'tokens';
    const d = error.details ?? {};
    const retry = typeof d['retry_after_s'] === 'number' ? d['retry_after_s'] : 1;
    ctx.set('retry-after', String(retry));
    if (typeof d['limit'] === 'number') ctx.set(`x-ratelimit-limit-${kind}`, String(d['limit']));
    ctx.set(`x-ratelimit-remaining-${kind}`, String(typeof d['remaining'] === 'number' ? d['remaining'] : 0));
    if (typeof d['reset_ms'] === 'number') ctx.set(`x-ratelimit-reset-${kind}`, `${Math.ceil(d['reset_ms'] / 1000)}s`);
  }
}

/** Writes `error` as OpenAI's JSON error response, status from the one error table. */
export function sendError(ctx: Context, error: unknown, logger: Logger): void {
  const svc = asSvcError(error);
  if (svc.code === 'internal' || svc.code.startsWith('upstream_')) {
    logger.warn({ err: error, requestId: ctx.state['requestId'] as unknown }, 'openai request failed');
  }
  ctx.status = mappingFor(svc.code).http;
  errorHeaders(ctx, svc);
  ctx.type = 'application/json';
  ctx.body = { error: openAiError(svc) };
}
