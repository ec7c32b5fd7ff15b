import { trace, TraceFlags } from '@opentelemetry/api';
import Koa, { type Context } from 'koa';
import { createHash } from 'node:crypto';
import { mappingFor, SvcError } from '../../core/edge';
import type { CallMeta } from '../http/core-client';
import { outcomeOf } from '../http/core-outcome';
import { clientGoneSignal, readBody, requestIdMiddleware } from '../http/request';
import { publicBaseUrl, resourceMetadataUrl } from '../http/public-url';
import type { AdapterDeps, AdapterState } from '../http/types';
import { eraOf, headerMismatch, META_PROTOCOL_VERSION, metaOf, unsupportedVersion } from './era';
import {
  classify,
  errorMessage,
  errorObject,
  INVALID_REQUEST,
  parseJson,
  parseMessage,
  RpcFailure,
  toRpcFailure,
  type RequestId,
} from './jsonrpc';
import { createDispatcher } from './methods';
import {
  isJsonContentType,
  isOriginAllowed,
  MODERN_PROTOCOL_VERSION,
  pickFormat,
  SUPPORTED_PROTOCOL_VERSIONS,
  type ResponseFormat,
} from './negotiation';

/** One message's answer: HTTP 202 with no body (a notification), or a JSON-RPC response. */
type Reply =
  | { readonly kind: 'accepted' }
  | { readonly kind: 'result'; readonly message: object }
  | { readonly kind: 'error'; readonly failure: RpcFailure };

// 2025-03-26 required servers to accept batches; a client of that version (or of 2024-11-05)
// sends no MCP-Protocol-Version header, which the spec lets a server read as 2025-03-26.
function acceptsBatches(version: string): boolean {
  return version === '' || version === '2025-03-26';
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/**
 * Joins the client's trace (`_meta.traceparent`, SEP-414) to svc's: the HTTP server span gets a
 * link to the client's span, so either trace leads to the other.
 */
function linkClientTrace(params: Record<string, unknown>): void {
  const meta = params['_meta'];
  if (meta === null || typeof meta !== 'object') return;
  const traceparent = (meta as Record<string, unknown>)['traceparent'];
  const match = typeof traceparent === 'string' ? TRACEPARENT.exec(traceparent) : null;
  if (match === null || /^0+$/.test(match[1] ?? '') || /^0+$/.test(match[2] ?? '')) return;
  trace.getActiveSpan()?.addLink({
    context: {
      traceId: match[1] ?? '',
      spanId: match[2] ?? '',
      traceFlags: Number.parseInt(match[3] ?? '0', 16) & TraceFlags.SAMPLED,
      isRemote: true,
    },
    attributes: { 'mcp.client.trace': true },
  });
}

function send(ctx: Context, status: number, text: string, format: ResponseFormat): void {
  ctx.status = status;
  if (format === 'sse') {
    ctx.set('cache-control', 'no-cache');
    ctx.type = 'text/event-stream';
    ctx.body = `event: message\ndata: ${text}\n\n`;
  } else {
    ctx.type = 'application/json';
    ctx.body = text;
  }
}

/**
 * The remote MCP server (stateless Streamable HTTP, JSON-RPC 2.0), mounted at `/v1/mcp`. Each
 * POST carries one message and the bearer key; the core does the work, this only translates.
 * No sessions (no `Mcp-Session-Id`), no server-initiated stream (GET and DELETE are 405).
 */
export function createApp(deps: AdapterDeps): Koa<AdapterState> {
  const app = new Koa<AdapterState>();
  const dispatch = createDispatcher(deps.core, { websiteUrl: deps.publicUrl });

  function fail(ctx: Context, failure: RpcFailure, format: ResponseFormat = 'json'): void {
    // RFC 6750 §3.1: a key that was sent but refused is "invalid_token"; a missing one gets no
    // code. The metadata URL lets a client without a static key find the console's OAuth server
    // (RFC 9728).
    if (failure.httpStatus === 401) {
      const metadata = resourceMetadataUrl(publicBaseUrl(ctx, deps.publicUrl));
      const refused = failure.data?.['code'] === 'missing_api_key' ? '' : ', error="invalid_token"';
      ctx.set('www-authenticate', `Bearer realm="svc"${refused}, resource_metadata="${metadata}"`);
    }
    const retryAfter = failure.data?.['retry_after_s'];
    if (failure.httpStatus === 429 && typeof retryAfter === 'number') ctx.set('retry-after', String(retryAfter));
    const modern = ctx.get('mcp-protocol-version') === MODERN_PROTOCOL_VERSION;
    // HTTP-level refusals always go out as plain JSON: there is no stream to speak of.
    send(ctx, failure.httpStatus, errorMessage(failure, modern), failure.httpStatus === 200 ? format : 'json');
  }

  // Calls in progress on this process, by key and JSON-RPC id, for notifications/cancelled. Only
  // the same credential can cancel (the key is hashed, never kept); a cancellation that reaches
  // another replica finds nothing here and is ignored, as the spec allows.
  const inFlight = new Map<string, AbortController>();
  const inFlightKey = (authorization: string, id: RequestId): string =>
    `${createHash('sha256').update(authorization).digest('hex')} ${typeof id} ${String(id)}`;
  app.use(requestIdMiddleware);
  app.use(async (ctx) => {
    if (ctx.path !== '/') {
      return fail(
        ctx,
        new RpcFailure(INVALID_REQUEST, `Not found: the MCP endpoint is the mount point itself (POST /v1/mcp)`, 404),
      );
    }
    if (ctx.method !== 'POST') {
      ctx.set('allow', 'POST');
      return fail(
        ctx,
        new RpcFailure(
          INVALID_REQUEST,
          `Method not allowed: ${ctx.method}. This stateless MCP server takes POST only (no SSE stream, no sessions)`,
          405,
        ),
      );
    }
    if (!isOriginAllowed(ctx.get('origin'), deps.allowedOrigins)) {
      return fail(
        ctx,
        toRpcFailure(
          new SvcError('permission_denied', `Origin ${ctx.get('origin')} is not allowed to call this MCP server`),
          null,
        ),
      );
    }
    if (!isJsonContentType(ctx.get('content-type'))) {
      return fail(
        ctx,
        new RpcFailure(
          INVALID_REQUEST,
          `Unsupported Media Type: Content-Type must be application/json, got "${ctx.get('content-type')}"`,
          415,
        ),
      );
    }
    const format = pickFormat(ctx.get('accept'));
    if (format === undefined) {
      return fail(
        ctx,
        new RpcFailure(
          INVALID_REQUEST,
          `Not Acceptable: Accept must allow application/json or text/event-stream, got "${ctx.get('accept')}"`,
          406,
        ),
      );
    }
    const version = ctx.get('mcp-protocol-version');
    if (version !== '' && !SUPPORTED_PROTOCOL_VERSIONS.includes(version)) {
      // Answered before the key is checked (nothing else could be), under the request's own id;
      // a header that contradicts the version in `_meta` is a mismatch before it is a version.
      let requestId: RequestId | null = null;
      let metaVersion: unknown;
      try {
        const message = parseMessage(await readBody(ctx, deps.maxBodyBytes));
        if (message.kind === 'request') {
          requestId = message.id;
          metaVersion = metaOf(message.params)[META_PROTOCOL_VERSION];
        }
      } catch {
        requestId = null;
      }
      return fail(
        ctx,
        typeof metaVersion === 'string' && metaVersion !== version
          ? headerMismatch(
              `MCP-Protocol-Version header value '${version}' does not match body value '${metaVersion}'`,
              requestId,
            )
          : unsupportedVersion(version, requestId),
      );
    }
    const authorization = ctx.get('authorization');
    if (authorization === '') {
      // Still a 401, but answering the request's own id when the body has one, as JSON-RPC asks.
      let requestId: RequestId | null = null;
      try {
        const message = parseMessage(await readBody(ctx, deps.maxBodyBytes));
        if (message.kind === 'request') requestId = message.id;
      } catch {
        requestId = null;
      }
      return fail(
        ctx,
        toRpcFailure(
          new SvcError('missing_api_key', "Missing API key: send it as 'Authorization: Bearer svc_sk_...'"),
          requestId,
        ),
      );
    }

    const goneSignal = clientGoneSignal(ctx);

    async function answer(value: unknown): Promise<Reply> {
      let id: RequestId | null = null;
      try {
        const message = classify(value);
        if (message.kind === 'accepted') {
          if (message.method === 'notifications/cancelled') {
            const requestId = message.params?.['requestId'];
            if (typeof requestId === 'string' || typeof requestId === 'number')
              inFlight.get(inFlightKey(authorization, requestId))?.abort();
          }
          return { kind: 'accepted' };
        }
        id = message.id;
        const era = eraOf((name) => ctx.get(name), message);
        linkClientTrace(message.params);
        const controller = new AbortController();
        const key = inFlightKey(authorization, message.id);
        inFlight.set(key, controller);
        try {
          const meta: CallMeta = {
            authorization,
            ids: ctx.state.ids,
            signal: AbortSignal.any([goneSignal, controller.signal]),
            outcome: outcomeOf(ctx.req),
          };
          const result = await dispatch(meta, message.method, message.params, era);
          return { kind: 'result', message: { jsonrpc: '2.0', id: message.id, result } };
        } finally {
          if (inFlight.get(key) === controller) inFlight.delete(key);
        }
      } catch (error) {
        const failure = toRpcFailure(error, id);
        if (failure.code === mappingFor('internal').jsonRpc)
          deps.logger.warn({ err: error, requestId: ctx.state.requestId }, 'mcp request failed');
        return { kind: 'error', failure };
      }
    }

    let body: unknown;
    try {
      body = parseJson(await readBody(ctx, deps.maxBodyBytes));
      if (Array.isArray(body)) {
        if (!acceptsBatches(version))
          throw new RpcFailure(
            INVALID_REQUEST,
            `Invalid Request: batches are not supported in protocol ${version}; send one JSON-RPC message per POST`,
            400,
          );
        if (body.length === 0) throw new RpcFailure(INVALID_REQUEST, 'Invalid Request: an empty batch', 400);
      }
    } catch (error) {
      return fail(ctx, toRpcFailure(error, null), format);
    }

    if (!Array.isArray(body)) {
      const reply = await answer(body);
      if (reply.kind === 'error') return fail(ctx, reply.failure, format);
      if (reply.kind === 'result') return send(ctx, 200, JSON.stringify(reply.message), format);
      ctx.status = 202;
      // An empty string, not null: Koa turns a null body into 204.
      ctx.body = '';
      ctx.remove('content-type');
      return;
    }
    const replies = await Promise.all(body.map((item) => answer(item)));
    // A refusal of the whole POST (a bad key, a rate limit) answers the POST itself.
    const refusal = replies.find(
      (r): r is Extract<Reply, { kind: 'error' }> =>
        r.kind === 'error' && [401, 403, 413, 429].includes(r.failure.httpStatus),
    );
    if (refusal !== undefined) return fail(ctx, refusal.failure, format);
    const messages = replies.flatMap((r) =>
      r.kind === 'result' ? [r.message] : r.kind === 'error' ? [errorObject(r.failure)] : [],
    );
    if (messages.length === 0) {
      ctx.status = 202;
      ctx.body = '';
      ctx.remove('content-type');
      return;
    }
    send(ctx, 200, JSON.stringify(messages), format);
  });
  return app;
}
