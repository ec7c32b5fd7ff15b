import type { Context } from 'koa';
import type { Logger } from 'pino';
import { mappingFor, type SvcError } from '../../core/edge';
import { asSvcError } from '../openai/errors';
import { requestIds } from '../http/request';

/** Anthropic's error response: `{type: 'error', error: {type, message}, request_id}`. */
export function anthropicError(error: SvcError, requestId: string | null): Record<string, unknown> {
  const { type } = mappingFor(error.code).anthropic;
  let message = error.code === 'internal' ? 'Internal server error' : error.message;
  // Anthropic names the field at fault at the start of the message ("max_tokens: Field required").
  if (error.param !== undefined && !message.includes(error.param)) message = `${error.param}: ${message}`;
  return { type: 'error', error: { type, message }, request_id: requestId };
}

/** Headers Anthropic's clients read to decide on retries. */
function errorHeaders(ctx: Context, error: SvcError): void {
  const { http } = mappingFor(error.code).anthropic;
  // An empty wallet or a spent key cap cannot succeed on retry (Claude Code shows the message).
  if (http === 402 || http === 400 || http === 404) ctx.set('x-should-retry', 'false');
  if (http === 429 || http === 529) {
    const retry = error.details?.['retry_after_s'];
    ctx.set('retry-after', String(typeof retry === 'number' ? retry : 1));
  }
}

/** Writes `error` as Anthropic's JSON error response, status from the one error table. */
export function sendError(ctx: Context, error: unknown, logger: Logger): void {
  const svc = asSvcError(error);
  if (svc.code === 'internal' || svc.code.startsWith('upstream_')) {
    logger.warn({ err: error, requestId: ctx.state['requestId'] as unknown }, 'anthropic request failed');
  }
  const id = requestIds(ctx).current;
  ctx.status = mappingFor(svc.code).anthropic.http;
  errorHeaders(ctx, svc);
  ctx.set('request-id', id);
  ctx.type = 'application/json';
  ctx.body = anthropicError(svc, id);
}
