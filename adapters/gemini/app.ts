import Koa, { type Context } from 'koa';
import type { StreamChatCompletionResponse } from '../../gen/svc/core/v1/chat';
import type { Billing } from '../../gen/svc/core/v1/common';
import { invalidArgument, SvcError } from '../../core/edge';
import { callCore, clientSessionId, streamCore, type CallMeta } from '../http/core-client';
import { FITTED_HEADER, outcomeOf, relayHeaders, setCostHeaders } from '../http/core-outcome';
import { exceedsJsonDepth, MAX_JSON_DEPTH } from '../http/json-depth';
import { clientGoneSignal, readBody, requestIdMiddleware, requestIds } from '../http/request';
import type { SseWriter } from '../http/sse';
import type { AdapterDeps, AdapterState } from '../http/types';
import { pumpSse } from '../openai/sse-pump';
import { NO_ALIASES, resolveModel, type GeminiAliases } from './aliases';
import { createGeminiEmbeddings } from './embeddings';
import { geminiError, sendError } from './errors';
import { geminiMediaAnswer, geminiMediaCall, type GeminiMediaKind } from './media';
import { groundedJson, responsesBody } from './grounding';
import { parseGenerateRequest, type ParsedGenerateRequest } from './request';
import { GenerateStream, generateContentJson, modelJson } from './response';

type Obj = Record<string, unknown>;

/** What the Gemini adapter takes beyond every adapter's dependencies. */
export interface GeminiAppOptions {
  /** Model aliases for Gemini's model names (default: none, see aliases.ts). */
  readonly aliases?: GeminiAliases;
}

async function readJson(ctx: Context, maxBytes: number): Promise<unknown> {
  const raw = await readBody(ctx, maxBytes);
  let value: unknown;
  try {
    value = JSON.parse(raw.toString('utf8')) as unknown;
  } catch {
    throw new SvcError('invalid_json', 'Invalid JSON payload received. The request body is not valid JSON.');
  }
  if (exceedsJsonDepth(value)) throw invalidArgument('body', `JSON nested deeper than ${MAX_JSON_DEPTH} levels.`);
  return value;
}

/**
 * The key as the core takes it: `x-goog-api-key` (what Google's SDKs and Gemini CLI send), a bearer
 * token, or `?key=`. The query's key never reaches a log line (the request log names routes, not
 * URLs), a span (the exporter scrubs `key=` parameters) or an error message (none quotes a URL).
 */
function authorization(ctx: Context): string {
  const header = ctx.get('x-goog-api-key');
  if (header !== '') return `Bearer ${header}`;
  const bearer = ctx.get('authorization');
  if (bearer !== '') return bearer;
  const query = ctx.query['key'];
  const key = Array.isArray(query) ? query[0] : query;
  if (typeof key === 'string' && key !== '') return `Bearer ${key}`;
  throw new SvcError('missing_api_key', 'The request is missing a valid API key.');
}

function meta(ctx: Context): CallMeta {
  return {
    authorization: authorization(ctx),
    ids: requestIds(ctx),
    idempotencyKey: undefined,
    signal: clientGoneSignal(ctx),
    sessionId: clientSessionId((name) => ctx.get(name)),
    outcome: outcomeOf(ctx.req),
    onHeader: relayHeaders(ctx, [FITTED_HEADER]),
  };
}

/** What kind of media `responseModalities` asks for (IMAGE before AUDIO), if any. */
function askedMedia(body: unknown): GeminiMediaKind | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
  const config = (body as Obj)['generationConfig'] ?? (body as Obj)['generation_config'];
  if (typeof config !== 'object' || config === null) return undefined;
  const modalities = (config as Obj)['responseModalities'] ?? (config as Obj)['response_modalities'];
  if (!Array.isArray(modalities)) return undefined;
  if (modalities.includes('IMAGE')) return 'image';
  if (modalities.includes('AUDIO')) return 'speech';
  return undefined;
}

/** The kind of the model a service refused as of another kind (`details.model_kind`), if that is the error. */
function modelKindOf(error: unknown): string | undefined {
  if (!(error instanceof SvcError) || error.param !== 'model') return undefined;
  const kind = error.details?.['model_kind'];
  return typeof kind === 'string' ? kind : undefined;
}

/**
 * Stream framing: `?alt=sse` is SSE `data:` frames ended by CRLF CRLF (as Google sends them);
 * without it, the frames are the elements of one JSON array written as they come.
 */
class Framing {
  private count = 0;
  constructor(readonly sse: boolean) {}

  frame(w: SseWriter, body: Obj | string): boolean {
    // A string is a frame's JSON as the upstream wrote it (the fast path).
    const json = typeof body === 'string' ? body : JSON.stringify(body);
    if (this.sse) return w.raw(`data: ${json}\r\n\r\n`);
    const prefix = this.count === 0 ? '[' : ',\r\n';
    this.count += 1;
    return w.raw(prefix + json);
  }

  /*
   * No `: svc-cost` comment closes a Gemini stream, unlike the other APIs: the SDK inside Gemini
   * CLI (@google/genai 1.30) reads only `data:` lines and fails on any other text left at the end.
   * A stream's cost and balance go out as HTTP trailers instead (`x-svc-cost`, `x-svc-balance`).
   */
  close(w: SseWriter): void {
    if (!this.sse) w.raw(this.count === 0 ? '[]' : ']');
  }
}

/**
 * The Gemini-compatible API, mounted at `/v1/gemini` (SPEC §7c): generateContent (whole and
 * streamed), countTokens and models under `v1beta/` and `v1/`, translated onto the core's chat
 * contract; a `googleSearch` tool is served by the core's hosted web_search. The core decides
 * model, price, hold and usage, exactly as for the OpenAI API.
 */
export function createApp(deps: AdapterDeps, options: GeminiAppOptions = {}): Koa<AdapterState> {
  const app = new Koa<AdapterState>();
  const { core, logger } = deps;
  const aliases = options.aliases ?? NO_ALIASES;

  async function model(m: CallMeta, requested: string): Promise<string> {
    return resolveModel(requested, aliases, {
      exists: async (id) => {
        try {
          return (await callCore(m, (o) => core.models.getModel({ modelId: id }, o))).model !== undefined;
        } catch (error) {
          if (error instanceof SvcError && (error.code === 'model_not_found' || error.code === 'not_found'))
            return false;
          throw error;
        }
      },
      first: async () => (await callCore(m, (o) => core.models.listModels({}, o))).models[0],
    });
  }

  // A bad key is reported before a bad body: only a refused body costs this separate check.
  async function parse(
    ctx: Context,
    m: CallMeta,
    requested: string,
    forCount: boolean,
    given?: { readonly body: unknown; readonly id: string },
  ): Promise<ParsedGenerateRequest> {
    try {
      let body = given === undefined ? await readJson(ctx, deps.maxBodyBytes) : given.body;
      if (forCount && typeof body === 'object' && body !== null && !Array.isArray(body)) {
        const wrapped = (body as Obj)['generateContentRequest'] ?? (body as Obj)['generate_content_request'];
        if (wrapped !== undefined) body = wrapped;
      }
      const id = given?.id ?? (await model(m, requested));
      let parsed = parseGenerateRequest(body, id, !forCount);
      // svc's own web_search serves googleSearch, never the upstream: refused as translated.
      if (parsed.googleSearch && parsed.params.nativeOnly.length > 0) parsed = parseGenerateRequest(body, id, false);
      // The original body rides along for a model whose upstream is Google's (native pass-through).
      return forCount
        ? parsed
        : { ...parsed, params: { ...parsed.params, nativeBody: body as Obj, nativeWire: 'gemini' } };
    } catch (error) {
      await callCore(m, (o) => core.auth.authenticate({ scope: 'chat' }, o));
      throw error;
    }
  }

  /**
   * generateContent on an image or speech model (SPEC §14): one media call of the core, held and
   * settled as on the OpenAI routes; the client's body rides along for a Gemini upstream to answer
   * as it is. A stream is the whole answer in one frame (the media call is not streamed).
   */
  async function generateMedia(
    ctx: Context,
    m: CallMeta,
    id: string,
    kind: GeminiMediaKind,
    body: unknown,
    stream: boolean,
  ): Promise<void> {
    const call = geminiMediaCall(body, kind);
    const result = await callCore(m, (o) =>
      core.media.createMedia(
        {
          operation: call.operation,
          paramsJson: JSON.stringify({ model: id, ...call.params }),
          files: call.files,
          nativeWire: 'gemini',
          nativeBodyJson: JSON.stringify(body),
        },
        o,
      ),
    );
    setCostHeaders(ctx, result.billing);
    if (result.sandbox) ctx.set('x-svc-sandbox', 'true');
    if (result.estimated) ctx.set('x-svc-estimated', 'true');
    const answer = geminiMediaAnswer(result, kind);
    if (!stream) {
      ctx.body = answer;
      return;
    }
    const sse = ctx.query['alt'] === 'sse';
    ctx.set('content-type', sse ? 'text/event-stream' : 'application/json; charset=UTF-8');
    ctx.body = sse ? `data: ${JSON.stringify(answer)}\r\n\r\n` : `[${JSON.stringify(answer)}]`;
  }

  /**
   * generateContent: a chat model's through the chat service; an image or speech model's through
   * the media service (SPEC §14). Which one the adapter cannot know without asking the core (one
   * more call, counted by the key's rate limit), so it goes by the request: one whose
   * `responseModalities` ask for IMAGE or AUDIO goes to the media service first, any other to the
   * chat service first, and a service that answers "this model is of another kind" hands over to
   * the other (a chat model whose Gemini upstream draws images is served by the chat path's
   * pass-through, as before).
   */
  async function generate(ctx: Context, requested: string, stream: boolean): Promise<void> {
    const m = meta(ctx);
    let body: unknown;
    let id: string;
    try {
      body = await readJson(ctx, deps.maxBodyBytes);
      id = await model(m, requested);
    } catch (error) {
      // A bad key is reported before a bad body.
      await callCore(m, (o) => core.auth.authenticate({ scope: 'chat' }, o));
      throw error;
    }
    const asked = askedMedia(body);
    if (asked !== undefined) {
      try {
        return await generateMedia(ctx, m, id, asked, body, stream);
      } catch (error) {
        const kind = modelKindOf(error);
        if (kind === 'image' || kind === 'speech') return await generateMedia(ctx, m, id, kind, body, stream);
        if (kind !== 'chat') throw error;
      }
    }
    try {
      await generateChat(ctx, m, requested, id, body, stream);
    } catch (error) {
      const kind = modelKindOf(error);
      if ((kind !== 'image' && kind !== 'speech') || ctx.headerSent) throw error;
      ctx.remove('trailer');
      ctx.remove('x-svc-ignored-fields');
      await generateMedia(ctx, m, id, kind, body, stream);
    }
  }

  async function generateChat(
    ctx: Context,
    m: CallMeta,
    requested: string,
    id: string,
    body: unknown,
    stream: boolean,
  ): Promise<void> {
    const parsed = await parse(ctx, m, requested, false, { body, id });
    const { params, includeThoughts } = parsed;
    if (parsed.ignored.length > 0) ctx.set('x-svc-ignored-fields', parsed.ignored.join(', '));
    const framing = new Framing(ctx.query['alt'] === 'sse');
    const streamOptions = {
      stallMs: deps.streamStallMs,
      contentType: framing.sse ? 'text/event-stream' : 'application/json; charset=UTF-8',
    };

    if (parsed.googleSearch) {
      const result = await callCore(m, (o) => core.chat.createResponse({ body: responsesBody(params) }, o));
      const answer = groundedJson(result.response ?? {}, includeThoughts);
      setCostHeaders(ctx, result.billing);
      if (!stream) {
        ctx.body = answer;
        return;
      }
      // The hosted search runs between model turns: the answer is whole before the first byte.
      ctx.set('content-type', streamOptions.contentType);
      ctx.body = framing.sse ? `data: ${JSON.stringify(answer)}\r\n\r\n` : `[${JSON.stringify(answer)}]`;
      return;
    }

    if (!stream) {
      const result = await callCore(m, (o) => core.chat.createChatCompletion({ params }, o));
      if (result.completion === undefined) throw new SvcError('internal', 'core returned no completion');
      setCostHeaders(ctx, result.billing);
      // Passed through, every field reached the upstream: none was ignored.
      if (result.completion.nativeBody !== undefined) ctx.remove('x-svc-ignored-fields');
      ctx.body = result.completion.nativeBody ?? generateContentJson(result.completion, includeThoughts);
      return;
    }
    // A stream offers to write Google's own frames (the fast path; the core decides).
    params.passThrough = true;
    const frames = new GenerateStream(params.model, includeThoughts);
    let billing: Billing | undefined;
    // Set by the first chunk that carries the upstream's own frames: the stream is passed through.
    let native = false;
    const source = streamCore(m, (o) => core.chat.streamChatCompletion({ params }, o));
    async function* headed(): AsyncGenerator<StreamChatCompletionResponse> {
      for await (const item of source) {
        if (!ctx.headerSent && (item.data.length > 0 || (item.chunk?.nativeEvents.length ?? 0) > 0))
          ctx.remove('x-svc-ignored-fields');
        yield item;
      }
    }
    ctx.set('trailer', 'x-svc-cost, x-svc-balance');
    try {
      await pumpSse(
        ctx,
        headed(),
        {
          write: (w, message) => {
            if (message.billing !== undefined) billing = message.billing;
            let ok = true;
            // The fast path: Google's frames as it wrote them.
            if (message.data.length > 0) {
              native = true;
              for (const data of message.data) ok = framing.frame(w, data) && ok;
            }
            if (message.chunk === undefined) return ok;
            if (message.chunk.nativeEvents.length > 0) native = true;
            // Natively, Google's frames go out as they came (their usageMetadata is what was charged).
            const out = native ? message.chunk.nativeEvents : frames.chunk(message.chunk);
            for (const f of out) ok = framing.frame(w, f) && ok;
            return ok;
          },
          end: (w) => {
            if (!native) framing.frame(w, frames.end());
            framing.close(w);
            if (billing !== undefined && !ctx.res.writableEnded)
              ctx.res.addTrailers({
                'x-svc-cost': String(billing.cost),
                'x-svc-balance': String(billing.balanceAfter),
              });
          },
          error: (w, error) => {
            framing.frame(w, geminiError(error));
            framing.close(w);
          },
        },
        logger,
        streamOptions,
      );
    } catch (error) {
      // Refused before the stream began: the error is a plain JSON body, and Node refuses a
      // `trailer` header on a body with a content-length (the error then became a bare 500).
      if (!ctx.headerSent) ctx.remove('trailer');
      throw error;
    }
  }

  async function countTokens(ctx: Context, requested: string): Promise<void> {
    const m = meta(ctx);
    const { params } = await parse(ctx, m, requested, true);
    const result = await callCore(m, (o) => core.chat.countChatTokens({ params }, o));
    const total = Number(result.inputTokens);
    ctx.body = { totalTokens: total, promptTokensDetails: [{ modality: 'TEXT', tokenCount: total }] };
  }

  async function listModels(ctx: Context): Promise<void> {
    const result = await callCore(meta(ctx), (o) => core.models.listModels({}, o));
    ctx.body = { models: result.models.map(modelJson) };
  }

  async function getModel(ctx: Context, requested: string): Promise<void> {
    const m = meta(ctx);
    const id = await model(m, requested);
    const result = await callCore(m, (o) => core.models.getModel({ modelId: id }, o));
    if (result.model === undefined) throw new SvcError('model_not_found', `models/${requested} is not found.`);
    ctx.body = modelJson(result.model);
  }

  // The embedding routes (`:embedContent`, `:batchEmbedContents`) over the core's EmbeddingService.
  const embeddings = createGeminiEmbeddings({ core, maxBodyBytes: deps.maxBodyBytes, logger });

  app.on('error', (error: unknown) => {
    if ((error as { code?: unknown }).code === 'ERR_STREAM_PREMATURE_CLOSE') return;
    logger.warn({ err: error }, 'gemini adapter error');
  });
  app.use(requestIdMiddleware);
  app.use(async (ctx) => {
    try {
      const path = ctx.path.replace(/\/+$/, '') || '/';
      const method = ctx.method;
      const match = /^\/(v1beta|v1|v1alpha)\/models(?:\/(.+))?$/.exec(path);
      if (match === null) throw new SvcError('not_found', `Method not found: ${method} ${ctx.path}`);
      const rest = match[2] === undefined ? undefined : decodeURIComponent(match[2]);
      if (rest === undefined) {
        if (method === 'GET') return await listModels(ctx);
        throw new SvcError('not_found', `Method not found: ${method} ${ctx.path}`);
      }
      const colon = rest.lastIndexOf(':');
      if (colon < 0) {
        if (method === 'GET') return await getModel(ctx, rest);
        throw new SvcError('not_found', `Method not found: ${method} ${ctx.path}`);
      }
      const name = rest.slice(0, colon);
      const action = rest.slice(colon + 1);
      if (method !== 'POST') throw new SvcError('not_found', `Method not found: ${method} ${ctx.path}`);
      switch (action) {
        case 'generateContent':
          return await generate(ctx, name, false);
        case 'streamGenerateContent':
          return await generate(ctx, name, true);
        case 'countTokens':
          return await countTokens(ctx, name);
        case 'embedContent':
        case 'batchEmbedContents':
          return await embeddings.handle(ctx, name, action);
        default:
          throw new SvcError('not_found', `Method not found: ${method} ${ctx.path}`);
      }
    } catch (error) {
      sendError(ctx, error, logger);
    }
  });
  return app;
}
