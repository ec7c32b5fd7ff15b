import type { Context } from 'koa';
import type { Logger } from 'pino';
import { mappingFor, SvcError, processRedactor } from '../../core/edge';
import { asSvcError } from '../openai/errors';

/*
 * Google's error shape: `{"error":{"code","message","status","details":[…]}}`, status from the
 * one error table. The details are what Google's clients read: ErrorInfo `API_KEY_INVALID` for a
 * bad key, BadRequest field violations for a bad field, and for a 429 what tells Gemini CLI
 * whether to retry (its googleQuotaErrors.ts): a rate limit carries a short RetryInfo and a
 * per-minute QuotaFailure (retried), an empty wallet an ErrorInfo whose reason it treats as final.
 */

type Obj = Record<string, unknown>;

const TYPE = 'type.googleapis.com/google.rpc.';
const DOMAIN = 'svc';

/** The ErrorInfo reason of an empty wallet or a spent key cap: one Gemini CLI does not retry. */
export const INSUFFICIENT_CREDIT_REASON = 'INSUFFICIENT_G1_CREDITS_BALANCE';

function messageOf(error: SvcError): string {
  switch (error.code) {
    case 'invalid_api_key':
      return 'API key not valid. Please pass a valid API key.';
    case 'missing_api_key':
      return "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.";
    case 'internal':
      return 'An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting';
    default:
      return error.message;
  }
}

function details(error: SvcError): Obj[] {
  const d = error.details ?? {};
  switch (error.code) {
    case 'invalid_api_key':
    case 'missing_api_key':
      return [
        {
          '@type': `${TYPE}ErrorInfo`,
          reason: error.code === 'invalid_api_key' ? 'API_KEY_INVALID' : 'API_KEY_MISSING',
          domain: 'googleapis.com',
          metadata: { service: 'generativelanguage.googleapis.com' },
        },
        { '@type': `${TYPE}LocalizedMessage`, locale: 'en-US', message: messageOf(error) },
      ];
    case 'insufficient_credit':
    case 'key_cap_exceeded':
      return [
        {
          '@type': `${TYPE}ErrorInfo`,
          reason: INSUFFICIENT_CREDIT_REASON,
          domain: DOMAIN,
          metadata: { svc_code: error.code },
        },
      ];
    case 'unavailable':
      return [
        {
          '@type': `${TYPE}RetryInfo`,
          retryDelay: `${typeof d['retry_after_s'] === 'number' ? Math.max(1, Math.ceil(d['retry_after_s'])) : 1}s`,
        },
      ];
    case 'rate_limited':
    case 'tokens_rate_limited':
    case 'concurrency_limited':
    case 'upstream_rate_limited': {
      const retry = typeof d['retry_after_s'] === 'number' ? Math.max(1, Math.ceil(d['retry_after_s'])) : 1;
      return [
        {
          '@type': `${TYPE}QuotaFailure`,
          violations: [
            {
              quotaMetric:
                error.code === 'tokens_rate_limited'
                  ? 'svc/tokens'
                  : error.code === 'concurrency_limited'
                    ? 'svc/concurrent_calls'
                    : 'svc/requests',
              quotaId:
                error.code === 'upstream_rate_limited'
                  ? 'UpstreamRequestsPerMinute'
                  : error.code === 'concurrency_limited'
                    ? d['scope'] === 'account'
                      ? 'ConcurrentCallsPerAccount'
                      : 'ConcurrentCallsPerKey'
                    : 'RequestsPerMinutePerKey',
              ...(typeof d['limit'] === 'number' ? { quotaValue: String(d['limit']) } : {}),
            },
          ],
        },
        { '@type': `${TYPE}RetryInfo`, retryDelay: `${retry}s` },
      ];
    }
    default:
      if (error.param !== undefined && mappingFor(error.code).gemini.http === 400)
        return [
          {
            '@type': `${TYPE}BadRequest`,
            fieldViolations: [{ field: error.param, description: messageOf(error) }],
          },
        ];
      return [];
  }
}

/**
 * The error as it may be shown: the request is parsed here, in the adapter, so a message naming a
 * field of the client's body (which could be a key pasted where it does not belong) is scrubbed
 * here as the core scrubs its own (core/server/errors.ts).
 */
function scrubbed(error: SvcError): SvcError {
  const message = processRedactor.scrub(error.message);
  const param = error.param === undefined ? undefined : processRedactor.scrub(error.param);
  if (message === error.message && param === error.param) return error;
  return new SvcError(error.code, message, {
    ...(param === undefined ? {} : { param }),
    ...(error.details === undefined ? {} : { details: error.details }),
  });
}

/** Google's error body for `error`. */
export function geminiError(raw: SvcError): Obj {
  const error = scrubbed(raw);
  const { http, status } = mappingFor(error.code).gemini;
  let message = messageOf(error);
  if (error.param !== undefined && !message.includes(error.param)) message = `${error.param}: ${message}`;
  const list = details(error);
  return { error: { code: http, message, status, ...(list.length > 0 ? { details: list } : {}) } };
}

/** Writes `error` as Google's JSON error response. */
export function sendError(ctx: Context, error: unknown, logger: Logger): void {
  const svc = asSvcError(error);
  if (svc.code === 'internal' || svc.code.startsWith('upstream_')) {
    logger.warn({ err: error, requestId: ctx.state['requestId'] as unknown }, 'gemini request failed');
  }
  const body = geminiError(svc);
  ctx.status = mappingFor(svc.code).gemini.http;
  if (
    (ctx.status === 429 && svc.code !== 'insufficient_credit' && svc.code !== 'key_cap_exceeded') ||
    ctx.status === 503
  ) {
    const retry = svc.details?.['retry_after_s'];
    ctx.set('retry-after', String(typeof retry === 'number' ? Math.max(1, Math.ceil(retry)) : 1));
  }
  ctx.type = 'application/json';
  ctx.body = body;
}
