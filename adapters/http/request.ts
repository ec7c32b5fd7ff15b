import { trace } from '@opentelemetry/api';
import type { Context, Next } from 'koa';
import { newRequestId } from '../../core/edge';
import { decodeBody, decodersFor, tooLarge } from './body-encoding';

const REQUEST_ID_RE = /^[A-Za-z0-9._:-]{1,100}$/;

/**
 * The ids of one HTTP request. svc answers with the id the core minted for the call (the one on
 * the ledger entry, the usage record and the trace); until a core call answers, or when none is
 * made, with a provisional one minted here. The client's own `x-client-request-id` (or
 * `x-request-id`) is kept only for correlation: it is forwarded to the core, logged and traced,
 * and never identifies a charge.
 */
export interface RequestIds {
  /** The id the client gave, when well-formed. */
  readonly client: string | undefined;
  /** The id svc answers with. */
  readonly current: string;
  /** Takes the id the core minted for a call made for this request. */
  adopt(id: string): void;
}

/** Sets `ctx.state.requestId` / `ctx.state.ids` and answers every response with `x-request-id`. */
export async function requestIdMiddleware(ctx: Context, next: Next): Promise<void> {
  const stated = ctx.get('x-client-request-id') || ctx.get('x-request-id');
  // A key pasted as an id would be kept in the usage records: such an id is dropped.
  const client = REQUEST_ID_RE.test(stated) && !/svc_[a-z]{2,3}_/.test(stated) ? stated : undefined;
  const span = trace.getActiveSpan();
  const ids: RequestIds = {
    client,
    current: newRequestId(),
    adopt(id) {
      if (!REQUEST_ID_RE.test(id) || id === this.current) return;
      (this as { current: string }).current = id;
      ctx.state['requestId'] = id;
      if (!ctx.headerSent) ctx.set('x-request-id', id);
      span?.setAttribute('svc.request.id', id);
    },
  };
  ctx.state['ids'] = ids;
  ctx.state['requestId'] = ids.current;
  ctx.set('x-request-id', ids.current);
  if (client !== undefined) ctx.set('x-client-request-id', client);
  // On the HTTP server span too (the core puts it on its own), so the root of the trace is found by it.
  span?.setAttribute('svc.request.id', ids.current);
  if (client !== undefined) span?.setAttribute('svc.client_request_id', client);
  await next();
}

/** Request ids for a core call made outside an HTTP request (tests, internal callers). */
export function callerIds(client?: string): RequestIds {
  return {
    client,
    current: newRequestId(),
    adopt(id) {
      (this as { current: string }).current = id;
    },
  };
}

/** The request's ids (set by `requestIdMiddleware`). */
export function requestIds(ctx: Context): RequestIds {
  return ctx.state['ids'] as RequestIds;
}

/**
 * Reads the raw body up to `maxBytes`, decoded by its `Content-Encoding` (gzip, deflate, br, zstd:
 * see body-encoding.ts). Throws `request_too_large` past the limit (checked on Content-Length
 * first, then while reading, so a lying client cannot push more; for an encoded body, on what
 * comes out of the decoder as it comes out), `unsupported_encoding` for a coding svc does not
 * decode and `invalid_encoding` for a body that does not decode.
 */
export async function readBody(ctx: Context, maxBytes: number): Promise<Buffer> {
  const declared = Number(ctx.get('content-length') || '0');
  const codings = decodersFor(ctx.get('content-encoding'));
  if (declared > maxBytes) throw tooLarge(maxBytes);
  if (codings.length > 0) {
    try {
      return await decodeBody(ctx.req, codings, maxBytes);
    } catch (error) {
      // The client may still be sending: what it sends is read and dropped.
      ctx.req.resume();
      throw error;
    }
  }
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

/** An AbortSignal that fires when the HTTP client disconnects before the response is finished. */
export function clientGoneSignal(ctx: Context): AbortSignal {
  const controller = new AbortController();
  const onClose = (): void => {
    if (!ctx.res.writableFinished) controller.abort();
  };
  ctx.res.once('close', onClose);
  return controller.signal;
}

// The controller of each connection's calls (connectionGoneSignal), until one of them is left.
const connectionControllers = new WeakMap<object, AbortController>();

/**
 * `clientGoneSignal` for a call whose signal only ever gets listeners that are removed when the
 * call ends (the chat completions path: the core client, the in-process channel, the fair queue,
 * undici's request), at the cost of one AbortController per connection instead of one per
 * request: an AbortSignal is ~0.8 KiB (an EventTarget and its maps), and a call's signal lives as
 * long as the call, so under load it is promoted to the old generation with it (issue 46). It
 * fires on the same event as `clientGoneSignal` (this response closed before it finished, which
 * on HTTP/1.1 is its connection closing); an aborted controller is never handed out again, so the
 * next call on the connection, if any, gets a fresh one. Not for a signal that may keep listeners
 * after its call (undici's fetch and AbortSignal.any() keep theirs until a GC): the MCP and
 * Responses paths use `clientGoneSignal`. Two calls pipelined on one connection share it, and its
 * tenant tag (core/net/fair-queue.ts) is the last one's.
 */
/** The signal `connectionGoneSignal` hands the calls of `socket` now, if any (tests read its listeners). */
export function connectionSignalOf(socket: object): AbortSignal | undefined {
  return connectionControllers.get(socket)?.signal;
}

export function connectionGoneSignal(ctx: Context): AbortSignal {
  const socket: object | null = ctx.req.socket;
  if (socket === null) return clientGoneSignal(ctx);
  let controller = connectionControllers.get(socket);
  if (controller === undefined || controller.signal.aborted) {
    controller = new AbortController();
    connectionControllers.set(socket, controller);
  }
  const mine = controller;
  const onClose = (): void => {
    if (!ctx.res.writableFinished) mine.abort();
  };
  ctx.res.once('close', onClose);
  return mine.signal;
}
