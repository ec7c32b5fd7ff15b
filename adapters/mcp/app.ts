import Koa, { type Context } from 'koa';
import { mappingFor, SvcError } from '../../core/errors';
import type { CallMeta } from '../http/core-client';
import { outcomeOf } from '../http/core-outcome';
import { clientGoneSignal, readBody, requestIdMiddleware } from '../http/request';
import { publicBaseUrl, resourceMetadataUrl } from '../http/public-url';
import type { AdapterDeps, AdapterState } from '../http/types';
import {
  errorMessage,
  INVALID_REQUEST,
  parseMessage,
  resultMessage,
  RpcFailure,
  toRpcFailure,
  type RequestId,
} from './jsonrpc';
import { createDispatcher } from './methods';
import {
  isJsonContentType,
  isOriginAllowed,
  pickFormat,
  SUPPORTED_PROTOCOL_VERSIONS,
  type ResponseFormat,
} from './negotiation';

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
  const dispatch = createDispatcher(deps.core);

  function fail(ctx: Context, failure: RpcFailure, format: ResponseFormat = 'json'): void {
    // The metadata URL lets a client without a static key find the console's OAuth server (RFC 9728).
    if (failure.httpStatus === 401) {
      const metadata = resourceMetadataUrl(publicBaseUrl(ctx, deps.publicUrl));
      ctx.set('www-authenticate', `Bearer realm="svc", resource_metadata="${metadata}"`);
    }
    const retryAfter = failure.data?.['retry_after_s'];
    if (failure.httpStatus === 429 && typeof retryAfter === 'number') ctx.set('retry-after', String(retryAfter));
    // HTTP-level refusals always go out as plain JSON: there is no stream to speak of.
    send(ctx, failure.httpStatus, errorMessage(failure), failure.httpStatus === 200 ? format : 'json');
  }

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
      return fail(
        ctx,
        new RpcFailure(
          INVALID_REQUEST,
          `Bad Request: unsupported MCP-Protocol-Version "${version}" (supported: ${SUPPORTED_PROTOCOL_VERSIONS.join(', ')})`,
          400,
        ),
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

    let id: RequestId | null = null;
    try {
      const message = parseMessage(await readBody(ctx, deps.maxBodyBytes));
      if (message.kind === 'accepted') {
        ctx.status = 202;
        // An empty string, not null: Koa turns a null body into 204.
        ctx.body = '';
        ctx.remove('content-type');
        return;
      }
      id = message.id;
      const meta: CallMeta = {
        authorization,
        ids: ctx.state.ids,
        signal: clientGoneSignal(ctx),
        outcome: outcomeOf(ctx.req),
      };
      const result = await dispatch(meta, message.method, message.params);
      send(ctx, 200, resultMessage(message.id, result), format);
    } catch (error) {
      const failure = toRpcFailure(error, id);
      if (failure.code === mappingFor('internal').jsonRpc)
        deps.logger.warn({ err: error, requestId: ctx.state.requestId }, 'mcp request failed');
      fail(ctx, failure, format);
    }
  });
  return app;
}
