import Router from '@koa/router';
import Koa, { type Context } from 'koa';
import type { Billing } from '../../gen/svc/core/v1/common';
import type { UploadMediaResponse } from '../../gen/svc/core/v1/media';
import { invalidArgument, SvcError } from '../../core/edge';
import { callCore, clientSessionId, streamCore, type CallMeta } from '../http/core-client';
import { FITTED_HEADER, outcomeOf, relayHeaders, setCostHeaders } from '../http/core-outcome';
import { exceedsJsonDepth, MAX_JSON_DEPTH } from '../http/json-depth';
import { clientGoneSignal, connectionGoneSignal, readBody, requestIdMiddleware, requestIds } from '../http/request';
import { named } from '../http/route';
import type { SseWriter } from '../http/sse';
import type { AdapterDeps, AdapterState } from '../http/types';
import { parseChatRequest } from './chat-request';
import { chunkJson, completionJson, modelJson, usageJson } from './chat-response';
import { embeddingResponseJson, parseEmbeddingRequest } from './embeddings';
import { DEFAULT_UPLOAD_BYTES, readMultipart, speechEvents, writeMediaAnswer } from './media';
import { codexCatalog, matchesEtag } from './models';
import { openAiError, sendError } from './errors';
import { pumpSse } from './sse-pump';

type Obj = Record<string, unknown>;

// The key's rate-limit state and a fitted output limit, which the core returns in its response headers.
const RELAYED_HEADERS = [
  ...['requests', 'tokens'].flatMap((kind) => [
    `x-ratelimit-limit-${kind}`,
    `x-ratelimit-remaining-${kind}`,
    `x-ratelimit-reset-${kind}`,
  ]),
  FITTED_HEADER,
];

/**
 * What a stream cost and the balance after it, as an SSE comment (clients skip it): a unary
 * call reports them in headers, which a stream has already sent, and `usage.cost` only reaches
 * clients that asked for usage.
 */
function writeCost(sse: SseWriter, billing: Billing | undefined): void {
  if (billing !== undefined) sse.comment(`svc-cost ${billing.cost} balance ${billing.balanceAfter}`);
}

async function readJson(ctx: Context, maxBytes: number): Promise<unknown> {
  const raw = await readBody(ctx, maxBytes);
  let value: unknown;
  try {
    value = JSON.parse(raw.toString('utf8')) as unknown;
  } catch {
    throw new SvcError(
      'invalid_json',
      'We could not parse the JSON body of your request. The OpenAI API expects a JSON payload.',
    );
  }
  if (exceedsJsonDepth(value))
    throw invalidArgument('body', `Invalid body: JSON nested deeper than ${MAX_JSON_DEPTH} levels.`);
  return value;
}

/** An upload's events with the answer's billing on the message itself, where `streamCore` counts it. */
async function* withBilling(
  events: AsyncIterable<UploadMediaResponse>,
): AsyncGenerator<UploadMediaResponse & { billing?: Billing }> {
  for await (const event of events)
    yield event.done?.billing === undefined ? event : { ...event, billing: event.done.billing };
}

/** The `sequence_number` of a Responses event's JSON text, if it has one. */
function sequenceOf(data: string): number | undefined {
  try {
    const value = (JSON.parse(data) as Obj)['sequence_number'];
    return typeof value === 'number' ? value : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The headers OpenAI puts on every response: `openai-version` (the API version, 2020-10-01) and
 * `openai-processing-ms` (the milliseconds from the request's arrival to its response headers; for
 * a stream, to its first byte).
 */
async function openAiHeaders(ctx: Context, next: () => Promise<unknown>): Promise<void> {
  const startedAt = performance.now();
  ctx.set('openai-version', '2020-10-01');
  const res = ctx.res;
  const writeHead = res.writeHead.bind(res) as (...args: unknown[]) => typeof res;
  res.writeHead = ((...args: unknown[]) => {
    if (!res.headersSent) res.setHeader('openai-processing-ms', String(Math.round(performance.now() - startedAt)));
    return writeHead(...args);
  }) as typeof res.writeHead;
  await next();
}

function queryInteger(ctx: Context, name: string): number | undefined {
  const raw = ctx.query[name];
  if (raw === undefined) return undefined;
  const value = typeof raw === 'string' && /^-?\d{1,9}$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isInteger(value))
    throw new SvcError('invalid_type', `Invalid type for '${name}': expected an integer.`, { param: name });
  return value;
}

function meta(ctx: Context, signal?: AbortSignal): CallMeta {
  const authorization = ctx.get('authorization');
  if (authorization === '') {
    throw new SvcError(
      'missing_api_key',
      "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer svc_sk_...).",
    );
  }
  const idempotencyKey = ctx.get('idempotency-key');
  return {
    authorization,
    ids: requestIds(ctx),
    idempotencyKey: idempotencyKey === '' ? undefined : idempotencyKey,
    signal: signal ?? clientGoneSignal(ctx),
    sessionId: clientSessionId((name) => ctx.get(name)),
    outcome: outcomeOf(ctx.req),
    onHeader: relayHeaders(ctx, RELAYED_HEADERS),
  };
}

/**
 * The OpenAI-compatible API, mounted at `/v1/openai`: chat completions, Responses, embeddings and models.
 * It parses, calls the core and maps the result or the error; the core decides everything else.
 */
export function createApp(deps: AdapterDeps): Koa<AdapterState> {
  const app = new Koa<AdapterState>();
  const { core, logger } = deps;

  // OpenAI reports a bad key before a bad body. The core checks the key with the call itself, so
  // only a refused body costs a separate check (the error path, never the hot one).
  async function keyFirst<T>(m: CallMeta, parse: () => Promise<T>): Promise<T> {
    try {
      return await parse();
    } catch (error) {
      await callCore(m, (o) => core.auth.authenticate({ scope: 'chat' }, o));
      throw error;
    }
  }

  async function readObject(ctx: Context, m: CallMeta): Promise<Obj> {
    return keyFirst(m, async () => {
      const body = await readJson(ctx, deps.maxBodyBytes);
      if (typeof body !== 'object' || body === null || Array.isArray(body))
        throw new SvcError('invalid_type', 'Invalid body: expected a JSON object.', { param: 'body' });
      return body as Obj;
    });
  }

  async function chatCompletions(ctx: Context): Promise<void> {
    const m = meta(ctx, connectionGoneSignal(ctx));
    const { params, stream, includeUsage } = await keyFirst(m, async () =>
      parseChatRequest(await readJson(ctx, deps.maxBodyBytes)),
    );
    // This handler writes the fast path's answers as they come: the core decides whether it uses it.
    params.passThrough = true;
    params.includeUsage = includeUsage;
    if (!stream) {
      const result = await callCore(m, (o) => core.chat.createChatCompletion({ params }, o));
      // What the core charged and the balance after it (a stream reports them in a closing comment).
      setCostHeaders(ctx, result.billing);
      // The fast path's answer: the upstream's JSON as it came (svc's model id in it), svc's usage in it.
      const [before, after] = result.data;
      if (before !== undefined && after !== undefined && result.usage !== undefined) {
        ctx.type = 'application/json';
        ctx.body = before + JSON.stringify(usageJson(result.usage)) + after;
        return;
      }
      if (result.completion === undefined) throw new SvcError('internal', 'core returned no completion');
      ctx.body = completionJson(result.completion);
      return;
    }
    let billing: Billing | undefined;
    await pumpSse(
      ctx,
      streamCore(m, (o) => core.chat.streamChatCompletion({ params }, o)),
      {
        write: (sse, message) => {
          if (message.billing !== undefined) billing = message.billing;
          // The fast path's chunks, already in this wire.
          for (const data of message.data) if (!sse.data(data)) return false;
          const chunk = message.chunk;
          if (chunk === undefined || (chunk.choices.length === 0 && !includeUsage)) return true;
          return sse.data(chunkJson(chunk, includeUsage));
        },
        end: (sse) => {
          writeCost(sse, billing);
          sse.data('[DONE]');
        },
        error: (sse, error) => sse.data({ error: openAiError(error) }),
      },
      logger,
      { stallMs: deps.streamStallMs },
    );
  }

  async function embeddings(ctx: Context): Promise<void> {
    const m = meta(ctx);
    const { request, encoding } = await keyFirst(m, async () =>
      parseEmbeddingRequest(await readJson(ctx, deps.maxBodyBytes)),
    );
    const result = await callCore(m, (o) => core.embeddings.embed(request, o));
    // Vectors of the offline sandbox are not a real model's: say so where every client can see it.
    if (result.sandbox) ctx.set('x-svc-sandbox', 'true');
    setCostHeaders(ctx, result.billing);
    ctx.body = embeddingResponseJson(result, encoding);
  }

  /**
   * A media route (SPEC §14): a JSON body or a multipart form to the core's MediaService, whose
   * answer (JSON, text or audio) goes back as it made it, with its cost in the headers.
   */
  function media(operation: string, form: 'json' | 'multipart') {
    return async (ctx: Context): Promise<void> => {
      const m = meta(ctx);
      if (form === 'multipart') return upload(ctx, m, operation);
      const params = await keyFirst(m, () => readObjectBody(ctx));
      const result = await callCore(m, (o) =>
        core.media.createMedia({ operation, paramsJson: JSON.stringify(params), files: [] }, o),
      );
      setCostHeaders(ctx, result.billing);
      if (operation === 'audio.speech' && params['stream_format'] === 'sse') {
        if (result.sandbox) ctx.set('x-svc-sandbox', 'true');
        ctx.type = 'text/event-stream; charset=utf-8';
        ctx.set('cache-control', 'no-cache');
        const frames = speechEvents(result).map((data) => `data: ${data}\n\n`);
        const cost =
          result.billing === undefined
            ? ''
            : `: svc-cost ${result.billing.cost} balance ${result.billing.balanceAfter}\n\n`;
        ctx.body = frames.join('') + cost;
        return;
      }
      writeMediaAnswer(ctx, result);
    };
  }

  /**
   * A multipart route: the form streamed to the core's UploadMedia as it arrives (the core spools
   * its files to disk), the answer its last message; a streamed transcription as SSE, its events
   * as the core sends them.
   */
  async function upload(ctx: Context, m: CallMeta, operation: string): Promise<void> {
    const reader = readMultipart(ctx, operation, deps.maxUploadBytes ?? DEFAULT_UPLOAD_BYTES);
    const early = reader.failure();
    if (early !== undefined) await keyFirst(m, () => Promise.reject(early));
    const events = streamCore(m, (o) => withBilling(core.media.uploadMedia(reader.parts, o)))[Symbol.asyncIterator]();
    let first: IteratorResult<UploadMediaResponse & { billing?: Billing }>;
    try {
      first = await events.next();
    } catch (error) {
      // The client's own upload ended the call (413, a malformed body): that is its answer.
      const failure = reader.failure();
      if (failure !== undefined) await keyFirst(m, () => Promise.reject(failure));
      throw error;
    }
    if (first.done === true) throw new SvcError('internal', 'the core answered an upload with nothing');
    const done = first.value.done;
    if (done !== undefined && first.value.eventJson === '') {
      // The answer is the last message: read the stream to its end, so the call ends as it should.
      for (let rest = await events.next(); rest.done !== true; rest = await events.next());
      setCostHeaders(ctx, done.billing);
      writeMediaAnswer(ctx, done);
      return;
    }
    ctx.set('cache-control', 'no-cache');
    async function* all(): AsyncGenerator<UploadMediaResponse> {
      yield first.value;
      for (let next = await events.next(); next.done !== true; next = await events.next()) yield next.value;
    }
    await pumpSse(
      ctx,
      all(),
      {
        write: (sse, event) => {
          if (event.done?.sandbox === true) sse.comment('svc-sandbox');
          if (event.eventJson !== '') sse.data(event.eventJson);
          if (event.done !== undefined) writeCost(sse, event.done.billing);
          return true;
        },
        end: () => undefined,
        error: (sse, error) => sse.data({ error: openAiError(error) }),
      },
      logger,
      { stallMs: deps.streamStallMs },
    );
  }

  async function readObjectBody(ctx: Context): Promise<Obj> {
    const body = await readJson(ctx, deps.maxBodyBytes);
    if (typeof body !== 'object' || body === null || Array.isArray(body))
      throw new SvcError('invalid_type', 'Invalid body: expected a JSON object.', { param: 'body' });
    return body as Obj;
  }

  async function responses(ctx: Context): Promise<void> {
    const m = meta(ctx);
    const body = await readObject(ctx, m);
    const stream = body['stream'];
    if (stream !== undefined && stream !== null && typeof stream !== 'boolean') {
      await keyFirst(m, () => {
        throw new SvcError('invalid_type', `Invalid type for 'stream': expected a boolean.`, { param: 'stream' });
      });
    }
    if (stream !== true) {
      // This handler writes the fast path's answer as it comes: the core decides whether it uses it.
      const result = await callCore(m, (o) => core.chat.createResponse({ body, passThrough: true }, o));
      setCostHeaders(ctx, result.billing);
      if (result.data !== '') {
        ctx.type = 'application/json';
        ctx.body = result.data;
        return;
      }
      ctx.body = result.response;
      return;
    }
    let sequence = -1;
    // The last fast-path event written: its sequence number is read only if an error frame follows.
    let passed: string | undefined;
    let billing: Billing | undefined;
    await pumpSse(
      ctx,
      // This handler writes the fast path's events as they come: the core decides whether it uses it.
      streamCore(m, (o) => core.chat.streamResponse({ body, passThrough: true }, o)),
      {
        write: (sse, message) => {
          if (message.billing !== undefined) billing = message.billing;
          if (message.data.length > 0) {
            let ok = true;
            for (const [i, data] of message.data.entries()) ok = sse.data(data, message.dataEvents[i]) && ok;
            passed = message.data[message.data.length - 1];
            return ok;
          }
          const event = message.event;
          if (event === undefined) return true;
          if (typeof event['sequence_number'] === 'number') sequence = event['sequence_number'];
          return sse.data(event, typeof event['type'] === 'string' ? event['type'] : undefined);
        },
        end: (sse) => writeCost(sse, billing),
        error: (sse, error) => {
          if (passed !== undefined) sequence = sequenceOf(passed) ?? sequence;
          const body = openAiError(error);
          sse.data(
            {
              type: 'error',
              code: body.code,
              message: body.message,
              param: body.param,
              sequence_number: sequence + 1,
              error: body,
            },
            'error',
          );
        },
      },
      logger,
      { stallMs: deps.streamStallMs },
    );
  }

  // POST /responses/compact (Codex's first protocol, openai-node's responses.compact()): the same
  // core call as an input ending in a compaction_trigger, in the compaction object's shape
  // (`compact` lets an upstream that compacts natively get it at its own /responses/compact).
  async function compactResponse(ctx: Context): Promise<void> {
    const m = meta(ctx);
    const body = await readObject(ctx, m);
    const raw = body['input'];
    const input: unknown[] = typeof raw === 'string' ? [{ role: 'user', content: raw }] : Array.isArray(raw) ? raw : [];
    if (raw !== undefined && raw !== null && typeof raw !== 'string' && !Array.isArray(raw)) {
      await keyFirst(m, () => {
        throw invalidArgument('input', `Invalid 'input': expected a string or an array of input items.`);
      });
    }
    const request = { ...body, input: [...input, { type: 'compaction_trigger' }], store: false };
    const result = await callCore(m, (o) => core.chat.createResponse({ body: request, compact: true }, o));
    setCostHeaders(ctx, result.billing);
    const response = result.response ?? {};
    ctx.body = {
      id: response['id'],
      object: 'response.compaction',
      created_at: response['created_at'],
      output: response['output'],
      usage: response['usage'],
    };
  }

  async function getResponse(ctx: Context, id: string): Promise<void> {
    const result = await callCore(meta(ctx), (o) => core.chat.getResponse({ responseId: id }, o));
    ctx.body = result.response;
  }

  async function listInputItems(ctx: Context, id: string): Promise<void> {
    const m = meta(ctx);
    const limit = await keyFirst(m, () => Promise.resolve(queryInteger(ctx, 'limit')));
    const order = ctx.query['order'];
    const after = ctx.query['after'];
    const request = {
      responseId: id,
      limit: limit ?? 0,
      order: typeof order === 'string' ? order : '',
      after: typeof after === 'string' ? after : '',
    };
    const result = await callCore(m, (o) => core.chat.listResponseInputItems(request, o));
    ctx.body = result.list;
  }

  async function deleteResponse(ctx: Context, id: string): Promise<void> {
    const result = await callCore(meta(ctx), (o) => core.chat.deleteResponse({ responseId: id }, o));
    ctx.body = { id: result.responseId, object: 'response', deleted: result.deleted };
  }

  async function cancelResponse(ctx: Context, id: string): Promise<void> {
    const result = await callCore(meta(ctx), (o) => core.chat.cancelResponse({ responseId: id }, o));
    ctx.body = result.response;
  }

  async function countInputTokens(ctx: Context): Promise<void> {
    const m = meta(ctx);
    const body = await readObject(ctx, m);
    const result = await callCore(m, (o) => core.chat.countResponseInputTokens({ body }, o));
    ctx.body = { object: 'response.input_tokens', input_tokens: Number(result.inputTokens) };
  }

  // The key's own wallet, for tools that show what is left; credits are integers.
  async function balance(ctx: Context): Promise<void> {
    const result = await callCore(meta(ctx), (o) => core.wallet.getWallet({ accountId: '' }, o));
    const wallet = result.wallet;
    if (wallet === undefined) throw new SvcError('internal', 'core returned no wallet');
    ctx.body = {
      object: 'balance',
      account_id: wallet.accountId,
      balance: Number(wallet.balance),
      held: Number(wallet.held),
      available: Number(wallet.balance - wallet.held),
      currency: wallet.currency,
    };
  }

  async function listModels(ctx: Context): Promise<void> {
    const result = await callCore(meta(ctx), (o) => core.models.listModels({}, o));
    // Codex names its version and reads its own catalog shape (models.ts).
    if (ctx.query['client_version'] !== undefined) {
      const { body, etag } = codexCatalog(result.models);
      ctx.set('etag', etag);
      ctx.set('x-models-etag', etag);
      ctx.set('cache-control', 'private, no-cache');
      if (matchesEtag(ctx.get('if-none-match'), etag)) {
        ctx.status = 304;
        return;
      }
      ctx.body = body;
      return;
    }
    ctx.body = { object: 'list', data: result.models.map(modelJson) };
  }

  async function getModel(ctx: Context, id: string): Promise<void> {
    const result = await callCore(meta(ctx), (o) => core.models.getModel({ modelId: id }, o));
    if (result.model === undefined) throw new SvcError('model_not_found', `The model '${id}' does not exist.`);
    ctx.body = modelJson(result.model);
  }

  // A client that leaves mid-stream closes the response early: expected, not an error.
  app.on('error', (error: unknown) => {
    if ((error as { code?: unknown }).code === 'ERR_STREAM_PREMATURE_CLOSE') return;
    logger.warn({ err: error }, 'openai adapter error');
  });
  // The route table: each route is named (`http.route`, the log's and metrics' route) before it runs.
  const id = (ctx: Context): string => (ctx.params as Record<string, string | undefined>)['id'] ?? '';
  const router = new Router<AdapterState>();
  router.post('/chat/completions', named, chatCompletions);
  router.post('/responses', named, responses);
  router.post('/embeddings', named, embeddings);
  router.post('/images/generations', named, media('images.generations', 'json'));
  router.post('/images/edits', named, media('images.edits', 'multipart'));
  router.post('/audio/speech', named, media('audio.speech', 'json'));
  router.post('/audio/transcriptions', named, media('audio.transcriptions', 'multipart'));
  router.post('/audio/translations', named, media('audio.translations', 'multipart'));
  router.post('/moderations', named, media('moderations', 'json'));
  router.post('/rerank', named, media('rerank', 'json'));
  router.post('/responses/input_tokens', named, countInputTokens);
  router.post('/responses/compact', named, compactResponse);
  router.get('/responses/:id', named, (ctx) => getResponse(ctx, id(ctx)));
  router.delete('/responses/:id', named, (ctx) => deleteResponse(ctx, id(ctx)));
  router.get('/responses/:id/input_items', named, (ctx) => listInputItems(ctx, id(ctx)));
  router.post('/responses/:id/cancel', named, (ctx) => cancelResponse(ctx, id(ctx)));
  router.get('/balance', named, balance);
  router.get('/models', named, listModels);
  // Model ids may contain slashes (e.g. "org/model").
  router.get('/models/{*id}', named, (ctx) => getModel(ctx, id(ctx)));

  app.use(openAiHeaders);
  app.use(requestIdMiddleware);
  // Codex's sticky-routing token: echoed on every response of the turn that sent it.
  app.use(async (ctx, next) => {
    const turnState = ctx.get('x-codex-turn-state');
    if (turnState !== '' && turnState.length <= 1024 && !/[\r\n]/.test(turnState))
      ctx.set('x-codex-turn-state', turnState);
    await next();
  });
  app.use(async (ctx, next) => {
    try {
      await next();
    } catch (error) {
      sendError(ctx, error, logger);
    }
  });
  app.use(router.routes());
  app.use((ctx) => {
    throw new SvcError('not_found', `Unknown request URL: ${ctx.method} ${ctx.path}. Please check the URL and method.`);
  });
  return app;
}
