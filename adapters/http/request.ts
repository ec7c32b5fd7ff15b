import { trace } from '@opentelemetry/api';
import type { Context, Next } from 'koa';
import { randomBytes } from 'node:crypto';
import { SvcError } from '../../core/errors';

const REQUEST_ID_RE = /^[A-Za-z0-9._:-]{1,100}$/;

/** A fresh request id, `req_` + 24 hex characters. */
export function newRequestId(): string {
  return `req_${randomBytes(12).toString('hex')}`;
}

/**
 * Sets `ctx.state.requestId` (a well-formed incoming `x-request-id` is kept, otherwise a new one)
 * and echoes it on every response.
 */
export async function requestIdMiddleware(ctx: Context, next: Next): Promise<void> {
  const incoming = ctx.get('x-request-id');
  const requestId = REQUEST_ID_RE.test(incoming) ? incoming : newRequestId();
  ctx.state['requestId'] = requestId;
  ctx.set('x-request-id', requestId);
  // On the HTTP server span too (the core puts it on its own), so the root of the trace is found by it.
  trace.getActiveSpan()?.setAttribute('svc.request.id', requestId);
  await next();
}

/**
 * Reads the raw body up to `maxBytes`. Throws `request_too_large` past the limit (checked on
 * Content-Length first, then while reading, so a lying client cannot push more).
 */
export async function readBody(ctx: Context, maxBytes: number): Promise<Buffer> {
  const declared = Number(ctx.get('content-length') || '0');
  if (declared > maxBytes) throw tooLarge(maxBytes);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of ctx.req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) {
      ctx.req.unpipe();
      ctx.req.resume();
      throw tooLarge(maxBytes);
    }
    chunks.push(chunk);
  }
  return chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size);
}

function tooLarge(maxBytes: number): SvcError {
  return new SvcError('request_too_large', `Request body is larger than the limit of ${maxBytes} bytes`);
}

/** An AbortSignal that fires when the HTTP client disconnects before the response is finished. */
export function clientGoneSignal(ctx: Context): AbortSignal {
  const controller = new AbortController();
  const onClose = (): void => {
    if (!ctx.res.writableFinished) controller.abort();
  };
  ctx.res.once('close', onClose);
  return controller.signal;
}
