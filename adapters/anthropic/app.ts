import Router from '@koa/router';
import Koa, { type Context } from 'koa';
import type { StreamChatCompletionResponse } from '../../gen/svc/core/v1/chat';
import type { Billing } from '../../gen/svc/core/v1/common';
import { invalidArgument, SvcError } from '../../core/edge';
import { callCore, clientSessionId, streamCore, type CallMeta } from '../http/core-client';
import { FITTED_HEADER, outcomeOf, relayHeaders, setCostHeaders } from '../http/core-outcome';
import { exceedsJsonDepth, MAX_JSON_DEPTH } from '../http/json-depth';
import { clientGoneSignal, readBody, requestIdMiddleware, requestIds } from '../http/request';
import { named } from '../http/route';
import type { AdapterDeps, AdapterState } from '../http/types';
import { pumpSse } from '../openai/sse-pump';
import { clientBetas, type ClientBetas } from './beta';
import { anthropicError, sendError } from './errors';
import { parseMessagesRequest, type ParsedMessagesRequest } from './request';
import { MessageStream, messageJson, modelInfoJson } from './response';

async function readJson(ctx: Context, maxBytes: number): Promise<unknown> {
  const raw = await readBody(ctx, maxBytes);
  let value: unknown;
  try {
    value = JSON.parse(raw.toString('utf8')) as unknown;
  } catch {
    throw new SvcError('invalid_json', 'The request body is not valid JSON.');
  }
  if (exceedsJsonDepth(value)) throw invalidArgument('body', `JSON nested deeper than ${MAX_JSON_DEPTH} levels.`);
  return value;
}

/** The `limit` query parameter of a list: 1 to 1000, default 20 (as Anthropic's API). */
function queryLimit(ctx: Context): number {
  const raw = ctx.query['limit'];
  if (raw === undefined) return 20;
  const value = typeof raw === 'string' && /^\d{1,4}$/.test(raw) ? Number(raw) : NaN;
  if (!(value >= 1 && value <= 1000))
    throw invalidArgument('limit', 'limit: Input should be an integer between 1 and 1000');
  return value;
}

/** The key as the core takes it: Anthropic's clients send `x-api-key`, or a bearer token. */
function authorization(ctx: Context): string {
  const bearer = ctx.get('authorization');
  if (bearer !== '') return bearer;
  const key = ctx.get('x-api-key');
  if (key !== '') return `Bearer ${key}`;
  throw new SvcError('missing_api_key', 'x-api-key header is required');
}

function meta(ctx: Context): CallMeta {
  const idempotencyKey = ctx.get('idempotency-key');
  return {
    authorization: authorization(ctx),
    ids: requestIds(ctx),
    idempotencyKey: idempotencyKey === '' ? undefined : idempotencyKey,
    signal: clientGoneSignal(ctx),
    sessionId: clientSessionId((name) => ctx.get(name)),
    outcome: outcomeOf(ctx.req),
    onHeader: relayHeaders(ctx, [FITTED_HEADER]),
  };
}

/**
 * The Anthropic-compatible API, mounted at `/v1/anthropic` (SPEC §7b): Messages (non-stream and
 * streamed), count_tokens and models, translated onto the core's chat contract. The core decides
 * model, price, hold and usage, exactly as for the OpenAI API.
 */
export function createApp(deps: AdapterDeps): Koa<AdapterState> {
  const app = new Koa<AdapterState>();
  const { core, logger } = deps;

  // A bad key is reported before a bad body: only a refused body costs this separate check.
  async function parse(
    ctx: Context,
    m: CallMeta,
    forCount: boolean,
  ): Promise<ParsedMessagesRequest & { betas: ClientBetas }> {
    try {
      const body = await readJson(ctx, deps.maxBodyBytes);
      const parsed = parseMessagesRequest(body, forCount);
      const betas = clientBetas(ctx.get('anthropic-beta'));
      // The original body rides along for a model whose upstream speaks Messages (native pass-through),
      // with the client's betas; those that change the answer's shape are refused on a translated model.
      return forCount
        ? { ...parsed, betas }
        : {
            ...parsed,
            betas,
            params: {
              ...parsed.params,
              nativeBody: body as Record<string, unknown>,
              nativeWire: 'anthropic',
              nativeHeaders: betas.headers,
              nativeOnly: [...parsed.params.nativeOnly, ...betas.nativeOnly],
            },
          };
    } catch (error) {
      await callCore(m, (o) => core.auth.authenticate({ scope: 'chat' }, o));
      throw error;
    }
  }

  async function messages(ctx: Context): Promise<void> {
    const m = meta(ctx);
    const { params, stream, ignored, betas } = await parse(ctx, m, false);
    // A stream offers to write the upstream's own events (the fast path; the core decides).
    if (stream) params.passThrough = true;
    // Translated, the fields and betas no chat upstream takes are named; passed through, every field
    // reached the upstream, and only the betas svc withholds from it are named.
    const sayIgnored = (names: readonly string[]): void => {
      if (names.length > 0) ctx.set('x-svc-ignored-fields', names.join(', '));
      else ctx.remove('x-svc-ignored-fields');
    };
    sayIgnored([...ignored, ...betas.ignored]);
    if (!stream) {
      const result = await callCore(m, (o) => core.chat.createChatCompletion({ params }, o));
      if (result.completion === undefined) throw new SvcError('internal', 'core returned no completion');
      // What the core charged and the balance after it (a stream reports them in a closing comment).
      setCostHeaders(ctx, result.billing);
      ctx.set('request-id', requestIds(ctx).current);
      if (result.completion.nativeBody !== undefined) sayIgnored(betas.withheld);
      ctx.body = result.completion.nativeBody ?? messageJson(result.completion);
      return;
    }
    const events = new MessageStream(params.model);
    let billing: Billing | undefined;
    // Set by the first message that carries the upstream's own events (as chunks' native events, or
    // as the fast path's data): the stream is passed through.
    let native = false;
    // Whether the upstream's own message_stop was written (the fast path's final message).
    let stopped = false;
    const source = streamCore(m, (o) => core.chat.streamChatCompletion({ params }, o));
    // The first message is awaited before the headers go out; by then the core's id is adopted.
    async function* withRequestId(): AsyncGenerator<StreamChatCompletionResponse> {
      for await (const item of source) {
        if (!ctx.headerSent) {
          ctx.set('request-id', requestIds(ctx).current);
          if (item.data.length > 0 || (item.chunk?.nativeEvents.length ?? 0) > 0) sayIgnored(betas.withheld);
        }
        yield item;
      }
    }
    await pumpSse(
      ctx,
      withRequestId(),
      {
        write: (sse, message) => {
          if (message.billing !== undefined) billing = message.billing;
          let ok = true;
          // The fast path: the upstream's events as it wrote them, each under its own name.
          if (message.data.length > 0) {
            native = true;
            for (const [i, data] of message.data.entries()) {
              const event = message.dataEvents[i];
              if (event === 'message_stop') stopped = true;
              ok = sse.data(data, event) && ok;
            }
          }
          if (message.chunk === undefined) return ok;
          if (message.chunk.nativeEvents.length > 0) native = true;
          if (native) {
            for (const e of message.chunk.nativeEvents) ok = sse.data(e, String(e['type'])) && ok;
            return ok;
          }
          for (const e of events.chunk(message.chunk)) ok = sse.data(e.data, e.event) && ok;
          return ok;
        },
        end: (sse) => {
          // A passed-through stream is closed here, once the charge is settled, as a translated one is.
          // (On the fast path the upstream's own message_stop came with the final message.)
          if (native) {
            if (!stopped) sse.data({ type: 'message_stop' }, 'message_stop');
          } else for (const e of events.end()) sse.data(e.data, e.event);
          if (billing !== undefined) sse.comment(`svc-cost ${billing.cost} balance ${billing.balanceAfter}`);
        },
        error: (sse, error) => sse.data(anthropicError(error, requestIds(ctx).current), 'error'),
      },
      logger,
      { stallMs: deps.streamStallMs },
    );
  }

  async function countTokens(ctx: Context): Promise<void> {
    const m = meta(ctx);
    const { params } = await parse(ctx, m, true);
    const result = await callCore(m, (o) => core.chat.countChatTokens({ params }, o));
    ctx.body = { input_tokens: Number(result.inputTokens) };
  }

  /**
   * GET /v1/models in Anthropic's list shape, paged as Anthropic pages it (`limit` 1–1000, default
   * 20; `after_id` / `before_id` name the model the page starts after or ends before): what Claude
   * Code's gateway model discovery reads (SPEC §13). The order is the core's (the configuration's).
   */
  async function listModels(ctx: Context): Promise<void> {
    const limit = queryLimit(ctx);
    const m = meta(ctx);
    const result = await callCore(m, (o) => core.models.listModels({}, o));
    const all = result.models.map(modelInfoJson);
    const cursor = (name: 'after_id' | 'before_id'): number | undefined => {
      const raw = ctx.query[name];
      if (raw === undefined) return undefined;
      const at = typeof raw === 'string' ? all.findIndex((model) => model['id'] === raw) : -1;
      if (at < 0) throw invalidArgument(name, `${name}: no model '${String(raw)}' in this list`);
      return at;
    };
    const after = cursor('after_id');
    const before = cursor('before_id');
    let data: typeof all;
    let hasMore: boolean;
    if (before !== undefined && after === undefined) {
      const start = Math.max(0, before - limit);
      data = all.slice(start, before);
      hasMore = start > 0;
    } else {
      const start = after === undefined ? 0 : after + 1;
      const end = Math.min(before ?? all.length, start + limit);
      data = all.slice(start, Math.max(start, end));
      hasMore = end < (before ?? all.length);
    }
    ctx.body = {
      data,
      has_more: hasMore,
      first_id: data[0]?.['id'] ?? null,
      last_id: data.at(-1)?.['id'] ?? null,
    };
  }

  async function getModel(ctx: Context, id: string): Promise<void> {
    const result = await callCore(meta(ctx), (o) => core.models.getModel({ modelId: id }, o));
    if (result.model === undefined) throw new SvcError('model_not_found', `model: ${id}`);
    ctx.body = modelInfoJson(result.model);
  }

  app.on('error', (error: unknown) => {
    if ((error as { code?: unknown }).code === 'ERR_STREAM_PREMATURE_CLOSE') return;
    logger.warn({ err: error }, 'anthropic adapter error');
  });
  // The route table: each route is named (`http.route`, the log's and metrics' route) before it runs.
  // Claude Code appends `?beta=true`; betas change nothing here.
  const router = new Router<AdapterState>();
  router.post('/v1/messages', named, messages);
  router.post('/v1/messages/count_tokens', named, countTokens);
  router.get('/v1/models', named, listModels);
  // Model ids may contain slashes (e.g. "org/model").
  router.get('/v1/models/{*id}', named, (ctx) =>
    getModel(ctx, (ctx.params as Record<string, string | undefined>)['id'] ?? ''),
  );

  app.use(requestIdMiddleware);
  app.use(async (ctx, next) => {
    try {
      await next();
    } catch (error) {
      sendError(ctx, error, logger);
    } finally {
      if (!ctx.headerSent) ctx.set('request-id', requestIds(ctx).current);
    }
  });
  app.use(router.routes());
  app.use((ctx) => {
    throw new SvcError('not_found', `Not found: ${ctx.method} ${ctx.path}`);
  });
  return app;
}
