import { trace } from '@opentelemetry/api';
import { requireModel } from '../auth/scope';
import {
  CreateChatCompletionRequest,
  CreateChatCompletionResponse,
  CreateResponseResponse,
  StreamChatCompletionRequest,
  StreamChatCompletionResponse,
  StreamResponseResponse,
  type ChatCompletionChunk,
  type ChatCompletionParams,
  type ChatServiceImplementation,
} from '../../gen/svc/core/v1/chat';
import type { CoreCallExt, CoreContext as Context } from '../auth/context';
import type { Principal } from '../auth/types';
import type { CoreDeps } from '../deps';
import { invalidArgument, isSvcError, SvcError } from '../errors';
import { findChatModel } from '../models/catalog';
import { createUpstreamProvider } from '../providers/llm/registry';
import { createUpstreamMetrics, type UpstreamMetrics } from '../upstreams/metrics';
import { createRoutedProvider } from '../upstreams/router';
import type { ChatProvider, JsonObject } from '../providers/llm/types';
import {
  createIdempotency,
  fingerprintOf,
  idempotencyDeps,
  type Codec,
  type Idempotency,
  type Replay,
} from './idempotency';
import { chatParamsToWire, customToolNames } from './params';
import { withNativeBody } from './native';
import { cacheReady, cacheReadyNative, type CacheCaller } from './cache';
import { fastPathEnabled, usesFastPath, usesResponsesFastPath } from './fast-path';
import { fittedHeader, prepareChat, type PreparedChat } from './prepare';
import { estimatePromptTokens } from '../providers/llm/tokens';
import { createCreditCheck } from '../billing/admission';
import { DEFAULT_COUNT_REQUESTS_PER_MINUTE } from '../config/defaults';
import { createRateLimiter } from '../limits/rate-limiter';
import { chunkToProto, chunkTranslator, completionToProto, usageToProto } from './proto';
import { replayedChunk, replayedCompletion, replayedEvent, replayedResponse } from './replay';
import { createResponsesService } from './responses/service';
import type { ImageGenerator } from './responses/hosted-image';
import { createCompaction } from './responses/compaction';
import { createCompactionSeal } from './responses/seal';
import { createResponseStore } from './responses/store';
import { createToolService, type ToolService } from '../tools/service';
import { batches, wantsBatches } from './stream-batch';
import { createChatRunner, type RunContext } from './runner';

export interface ChatGrpcOptions {
  /** Where upstream routing records attempts, fallbacks and open breakers (`/metrics`); none otherwise. */
  readonly upstreamMetrics?: UpstreamMetrics;
  /** The core's one tool service (the Responses API's hosted web_search); its own otherwise. */
  readonly tools?: ToolService;
  /** The core's one Idempotency-Key store; its own otherwise. */
  readonly idempotency?: Idempotency;
  /** Where each call's answer path (fast or translated) is counted (`/metrics`); nowhere otherwise. */
  readonly onAnswerPath?: (method: string, fast: boolean) => void;
  /**
   * The Responses API's hosted image_generation tool, on `responses.image_generation_model`
   * (core/media/image-tool.ts); absent: the tool is refused.
   */
  readonly images?: ImageGenerator | undefined;
}

/** ChatService (its upstream connections belong to the core's dispatcher, `deps.http`). */
export type ChatGrpcService = ChatServiceImplementation<CoreCallExt>;

/**
 * ChatService: chat completions and the Responses API over the configured upstreams, billed
 * through the meter (hold, then settle or release), with Idempotency-Key support.
 */
export function createChatGrpcService(
  deps: Pick<CoreDeps, 'config' | 'meter' | 'store' | 'wallet' | 'logger' | 'now' | 'http' | 'prices'>,
  options: ChatGrpcOptions = {},
): ChatGrpcService {
  const upstreamMetrics = options.upstreamMetrics ?? createUpstreamMetrics(undefined);
  // One routed provider per model over its upstreams; the runner holds and settles once around it.
  const providers = new Map<string, ChatProvider>();
  for (const model of deps.config.models.values()) {
    // Media models (SPEC §14) have their own service (core/media/); chat refuses them by kind.
    if (model.kind !== undefined && model.kind !== 'chat' && model.kind !== 'embedding') continue;
    const members = model.upstreams.map((config) => ({
      config,
      provider: createUpstreamProvider(model, config, deps.http),
    }));
    providers.set(
      model.id,
      createRoutedProvider(model, members, {
        logger: deps.logger,
        metrics: upstreamMetrics,
        now: deps.now,
        queues: deps.http.queues,
      }),
    );
  }
  const credit = createCreditCheck(deps.wallet);
  const runner = createChatRunner({ ...deps, credit });
  // The free counting calls (count_tokens, countTokens, input_tokens) cost the caller nothing, so
  // they have a rate limit of their own per key, apart from the paid calls' (issue 31).
  const countLimit = deps.config.limits.countRequestsPerMinute ?? DEFAULT_COUNT_REQUESTS_PER_MINUTE;
  const counting = createRateLimiter({ requestsPerMinute: countLimit, now: deps.now });
  const takeCount = (principal: Principal): void => {
    try {
      counting.take(principal.keyId);
    } catch (error) {
      if (!isSvcError(error) || error.code !== 'rate_limited') throw error;
      const retry = Number(error.details?.['retry_after_s'] ?? 1);
      throw new SvcError(
        'rate_limited',
        `Rate limit reached for token counting (count_tokens, countTokens, input_tokens): ${countLimit} requests per minute for this API key. Try again in ${retry} s.`,
        { ...(error.details === undefined ? {} : { details: error.details }) },
      );
    }
  };

  const idempotency = options.idempotency ?? createIdempotency(idempotencyDeps(deps));
  // The hosted web_search of the Responses API: the same providers, tariff and wallet as MCP's.
  const tools = options.tools ?? createToolService(deps);
  const responseStore = createResponseStore(deps);
  const seal = createCompactionSeal(deps);
  const responses = createResponsesService({
    config: deps.config,
    providers,
    runner,
    responses: responseStore,
    tools,
    meter: deps.meter,
    credit,
    logger: deps.logger,
    now: deps.now,
    prices: deps.prices,
    seal,
    ...(options.images === undefined ? {} : { images: options.images }),
  });
  // Remote compaction: compaction items are opened before anything reads the input, and a final
  // compaction_trigger is served here rather than as a turn (responses/compaction.ts).
  const compaction = createCompaction({
    config: deps.config,
    providers,
    runner,
    responses: responseStore,
    seal,
    now: deps.now,
    prices: deps.prices,
  });

  function providerFor(modelId: string): ChatProvider {
    const provider = providers.get(modelId);
    if (provider === undefined) throw new SvcError('internal', `no provider for model ${modelId}`);
    return provider;
  }

  const fastPath = fastPathEnabled(deps.config.chat?.fastPath);
  /** The path a call's answer takes, on its trace (`svc.fast_path`) and in `/metrics`. */
  const answerPath = (method: string, pass: boolean): boolean => {
    trace.getActiveSpan()?.setAttribute('svc.fast_path', pass);
    options.onAnswerPath?.(method, pass);
    return pass;
  };

  /** `caller`: whom the call is for (the cache key svc derives, SPEC §13; the account's margin, §15); absent for counting. */
  async function prepare(params: ChatCompletionParams | undefined, caller?: CacheCaller): Promise<PreparedChat> {
    if (params === undefined || params.model === '')
      throw invalidArgument('model', `Missing required parameter: 'model'.`);
    // Priced now, once: the prepared call carries this price to its settle (SPEC §15).
    const model = await deps.prices.price(findChatModel(deps.config, params.model), caller?.accountId);
    const field = params.maxTokensParam === 'max_completion_tokens' ? 'max_completion_tokens' : 'max_tokens';
    const prepared = prepareChat(
      model,
      providerFor(model.id),
      // No per-request noise upstream, and the account's cache key (cache.ts).
      cacheReady(chatParamsToWire(params, model.extraParams), deps.config, model, caller),
      params.maxTokens,
      field,
      field,
      params.maxTokensParam === '' ? field : params.maxTokensParam,
    );
    const body =
      params.nativeBody === undefined
        ? undefined
        : cacheReadyNative(params.nativeBody, params.nativeWire, deps.config, model, caller);
    return withNativeBody(prepared, body, params.nativeWire, params.nativeOnly, params.nativeHeaders);
  }

  const cacheCaller = (principal: Principal, context: Context): CacheCaller => ({
    accountId: principal.accountId,
    sessionId: context.svc.sessionId,
  });

  // An output limit fitted to the model's maximum (SPEC §7d), told to the adapters in a response
  // header: the header goes out with the first message, so a stream's adapter has it at its start.
  const sayFitted = (context: Context, prepared: PreparedChat | undefined): void => {
    if (prepared?.fitted !== undefined) context.header.set('x-svc-fitted', fittedHeader(prepared.fitted));
  };

  const run = (principal: Principal, context: Context, kind: string): RunContext => ({
    principal,
    requestId: context.svc.requestId,
    clientRequestId: context.svc.clientRequestId,
    kind,
    signal: context.signal,
    tokenBudget: context.svc.tokenBudget,
  });

  const codec = <T>(
    fns: { toJSON(v: T): unknown; fromJSON(j: unknown): T },
    replayed: (v: T, replay: Replay) => T,
  ): Codec<T> => ({
    encode: (v: T) => fns.toJSON(v),
    decode: (j: unknown) => fns.fromJSON(j),
    replayed,
  });

  return {
    async createChatCompletion(request, context: Context) {
      const principal = await context.svc.requireKey({ scope: 'chat', inFlight: true });
      const prepared = await prepare(request.params, cacheCaller(principal, context));
      sayFitted(context, prepared);
      // Here as well as in the meter, so the refusal names the alias the client asked for.
      requireModel(principal, prepared.model.id, request.params?.model);
      const custom = customToolNames(request.params);
      // Only the OpenAI wire's pass-through answers non-stream calls (`PassThroughCalls.complete`).
      const pass = answerPath(
        'CreateChatCompletion',
        request.params !== undefined &&
          prepared.provider.passThrough?.complete !== undefined &&
          usesFastPath(fastPath, request.params, prepared, custom.size > 0),
      );
      return idempotency.unary(
        principal,
        context.svc.requestId,
        context.svc.idempotencyKey,
        // How the caller writes the answer is not part of the request: a replay is written alike.
        fingerprintOf('CreateChatCompletion', () =>
          CreateChatCompletionRequest.toJSON(
            request.params === undefined
              ? request
              : { ...request, params: { ...request.params, passThrough: false, includeUsage: false } },
          ),
        ),
        codec(CreateChatCompletionResponse, replayedCompletion),
        async (): Promise<CreateChatCompletionResponse> => {
          const result = pass
            ? await runner.passThroughComplete(prepared, run(principal, context, 'chat'))
            : await runner.complete(prepared, run(principal, context, 'chat'));
          // The fast path's answer as it came, svc's usage to go into it.
          if ('data' in result)
            return { data: [...result.data], usage: usageToProto(result.usage, result.cost), billing: result.billing };
          const completion = completionToProto(result.completion, result.cost, custom);
          return { completion, billing: result.billing, data: [] };
        },
      );
    },

    async *streamChatCompletion(request, context: Context) {
      const principal = await context.svc.requireKey({ scope: 'chat', inFlight: true });
      const prepared = await prepare(request.params, cacheCaller(principal, context));
      sayFitted(context, prepared);
      // Here as well as in the meter, so the refusal names the alias the client asked for.
      requireModel(principal, prepared.model.id, request.params?.model);
      const custom = customToolNames(request.params);
      const pass = answerPath(
        'StreamChatCompletion',
        request.params !== undefined && usesFastPath(fastPath, request.params, prepared, custom.size > 0),
      );
      async function* messages(): AsyncGenerator<StreamChatCompletionResponse> {
        if (pass) {
          const includeUsage = request.params?.includeUsage === true;
          const items = runner.passThrough(prepared, run(principal, context, 'chat'), includeUsage);
          for await (const item of items) {
            if (item.kind === 'final') {
              yield {
                chunk: chunkToProto(item.chunk, usageToProto(item.usage, item.cost)),
                billing: item.billing,
                chunks: [],
                // The upstream's closing event (Anthropic's message_stop), after the charge.
                data: item.closing === undefined ? [] : [item.closing.data],
                dataEvents: item.closing === undefined ? [] : [item.closing.event],
              };
              continue;
            }
            // A named wire's events (Anthropic's) are all as they came: one message per read.
            if (item.events !== undefined) {
              yield { chunks: [], data: item.chunks as string[], dataEvents: item.events as string[] };
              continue;
            }
            // The upstream's chunks as they came, one message per read; a normalised one on its own.
            let data: string[] = [];
            for (const chunk of item.chunks) {
              if (typeof chunk === 'string') data.push(chunk);
              else {
                yield { chunk: chunkToProto(chunk), chunks: [], data, dataEvents: [] };
                data = [];
              }
            }
            if (data.length > 0) yield { chunks: [], data, dataEvents: [] };
          }
          return;
        }
        // The final usage chunk is the runner's own; it answers in the upstream's tier all the same.
        let tier: string | undefined;
        // Custom tools' calls come back as such (proto.ts).
        const translator = chunkTranslator(custom);
        for await (const item of runner.stream(prepared, run(principal, context, 'chat'))) {
          tier = item.chunk.service_tier ?? tier;
          if (item.kind === 'chunk')
            for (const chunk of translator.chunks(item.chunk)) yield { chunk, chunks: [], data: [], dataEvents: [] };
          else {
            const chunk = tier !== undefined ? { ...item.chunk, service_tier: tier } : item.chunk;
            const chunks = translator.chunks(chunk, usageToProto(item.usage, item.cost));
            const last = chunks.pop();
            for (const c of chunks) yield { chunk: c, chunks: [], data: [], dataEvents: [] };
            if (last !== undefined) yield { chunk: last, billing: item.billing, chunks: [], data: [], dataEvents: [] };
          }
        }
      }
      const stream = idempotency.stream(
        principal,
        context.svc.requestId,
        context.svc.idempotencyKey,
        // How the caller writes the answer is not part of the request: a replay is written alike.
        fingerprintOf('StreamChatCompletion', () =>
          StreamChatCompletionRequest.toJSON(
            request.params === undefined
              ? request
              : { ...request, params: { ...request.params, passThrough: false, includeUsage: false } },
          ),
        ),
        codec(StreamChatCompletionResponse, replayedChunk),
        messages,
      );
      // The fast path already sends one message per upstream read; reading ahead of it as well
      // would only hold more of the upstream in svc for a client that stopped reading.
      if (!wantsBatches(context) || pass) return yield* stream;
      // The chunks ready at once leave in one message (stored and replayed one by one all the same).
      for await (const batch of batches(stream)) {
        if (batch.length === 1) yield batch[0] as StreamChatCompletionResponse;
        else yield* mergedChunks(batch);
      }
    },

    async createResponse(request, context: Context) {
      const principal = await context.svc.requireKey({ scope: 'chat', inFlight: true });
      const original = (request.body ?? {}) as JsonObject;
      const input = await compaction.expand(original, principal);
      const plan = compaction.triggered(input.body)
        ? { compacting: await compaction.prepare(input, principal, request.compact) }
        : {
            prepared: await responses.prepare(
              input.body,
              principal,
              context.svc.requestId,
              input.upstream,
              context.svc.sessionId,
            ),
          };
      sayFitted(
        context,
        'prepared' in plan ? plan.prepared.chat : plan.compacting.by === 'upstream' ? plan.compacting.chat : undefined,
      );
      const pass = answerPath(
        'CreateResponse',
        'prepared' in plan && usesResponsesFastPath(fastPath, request.passThrough, plan.prepared),
      );
      return idempotency.unary(
        principal,
        context.svc.requestId,
        context.svc.idempotencyKey,
        // POST /responses/compact answers another shape: one idempotency key never replays the other.
        fingerprintOf('CreateResponse', () => (request.compact ? { compact: true, body: original } : original)),
        codec(CreateResponseResponse, replayedResponse),
        async (): Promise<CreateResponseResponse> => {
          if ('compacting' in plan) {
            const compacted = await compaction.create(plan.compacting, run(principal, context, 'responses'));
            return { ...compacted, data: '' };
          }
          const created = await responses.create(plan.prepared, run(principal, context, 'responses'), pass);
          // The fast path's answer is its text alone: no Struct of the Response.
          return created.data === undefined
            ? { response: created.response, billing: created.billing, data: '' }
            : { billing: created.billing, data: created.data };
        },
      );
    },

    async *streamResponse(request, context: Context) {
      const principal = await context.svc.requireKey({ scope: 'chat', inFlight: true });
      const original = (request.body ?? {}) as JsonObject;
      const input = await compaction.expand(original, principal);
      const plan = compaction.triggered(input.body)
        ? { compacting: await compaction.prepare(input, principal, false) }
        : {
            prepared: await responses.prepare(
              input.body,
              principal,
              context.svc.requestId,
              input.upstream,
              context.svc.sessionId,
            ),
          };
      sayFitted(
        context,
        'prepared' in plan ? plan.prepared.chat : plan.compacting.by === 'upstream' ? plan.compacting.chat : undefined,
      );
      const pass = answerPath(
        'StreamResponse',
        'prepared' in plan && usesResponsesFastPath(fastPath, request.passThrough, plan.prepared),
      );
      async function* messages(): AsyncGenerator<StreamResponseResponse> {
        if (pass && 'prepared' in plan) {
          // The upstream's events as they came, one message per read; the terminal one after the charge.
          for await (const out of responses.passThrough(plan.prepared, run(principal, context, 'responses')))
            yield out.billing === undefined
              ? { events: [], data: [...out.data], dataEvents: [...out.names] }
              : { events: [], data: [...out.data], dataEvents: [...out.names], billing: out.billing };
          return;
        }
        const events =
          'compacting' in plan
            ? compaction.stream(plan.compacting, run(principal, context, 'responses'))
            : responses.stream(plan.prepared, run(principal, context, 'responses'));
        for await (const out of events) {
          yield out.billing !== undefined
            ? { event: out.event, billing: out.billing, events: [], data: [], dataEvents: [] }
            : { event: out.event, events: [], data: [], dataEvents: [] };
        }
      }
      const stream = idempotency.stream(
        principal,
        context.svc.requestId,
        context.svc.idempotencyKey,
        // How the caller writes the answer is not part of the request: a replay is written alike.
        fingerprintOf('StreamResponse', () => original),
        codec(StreamResponseResponse, replayedEvent),
        messages,
      );
      // The fast path already sends one message per upstream read (as the chat stream's).
      if (!wantsBatches(context) || pass) return yield* stream;
      for await (const batch of batches(stream)) {
        if (batch.length === 1) yield batch[0] as StreamResponseResponse;
        else {
          const billing = batch.findLast((m) => m.billing !== undefined)?.billing;
          const events = batch.flatMap((m) => (m.event === undefined ? m.events : [m.event, ...m.events]));
          yield billing === undefined
            ? { events, data: [], dataEvents: [] }
            : { events, billing, data: [], dataEvents: [] };
        }
      }
    },

    async getResponse(request, context: Context) {
      const principal = await context.svc.requireKey({ scope: 'chat' });
      if (request.responseId === '') throw invalidArgument('response_id', `Missing required parameter: 'response_id'.`);
      return { response: await responses.get(request.responseId, principal) };
    },

    async listResponseInputItems(request, context: Context) {
      const principal = await context.svc.requireKey({ scope: 'chat' });
      if (request.responseId === '') throw invalidArgument('response_id', `Missing required parameter: 'response_id'.`);
      const page = { limit: request.limit, order: request.order, after: request.after };
      return { list: await responses.inputItems(request.responseId, principal, page) };
    },

    async deleteResponse(request, context: Context) {
      const principal = await context.svc.requireKey({ scope: 'chat' });
      if (request.responseId === '') throw invalidArgument('response_id', `Missing required parameter: 'response_id'.`);
      await responses.delete(request.responseId, principal);
      return { responseId: request.responseId, deleted: true };
    },

    async cancelResponse(request, context: Context) {
      const principal = await context.svc.requireKey({ scope: 'chat' });
      if (request.responseId === '') throw invalidArgument('response_id', `Missing required parameter: 'response_id'.`);
      return { response: await responses.cancel(request.responseId, principal) };
    },

    async countResponseInputTokens(request, context: Context) {
      const principal = await context.svc.requireKey({ scope: 'chat' });
      takeCount(principal);
      const { body } = await compaction.expand((request.body ?? {}) as JsonObject, principal);
      if (compaction.triggered(body)) (body['input'] as unknown[]).pop();
      const tokens = await responses.countInputTokens(body, principal);
      return { inputTokens: BigInt(tokens) };
    },

    async countChatTokens(request, context: Context) {
      takeCount(await context.svc.requireKey({ scope: 'chat' }));
      const { request: body } = await prepare(request.params);
      return { inputTokens: BigInt(estimatePromptTokens(body.messages, body.tools ?? [])) };
    },
  };
}

/**
 * A batch of stream messages as few as keep their meaning: consecutive chunks join one message's
 * `chunks` (the billing, which only the last message carries, on the message that ends the
 * batch); a fast-path message (`data`, the client's own bytes before its `chunk`) leaves as it is,
 * in its place.
 */
export function* mergedChunks(batch: readonly StreamChatCompletionResponse[]): Generator<StreamChatCompletionResponse> {
  let chunks: ChatCompletionChunk[] = [];
  for (const m of batch) {
    if (m.data.length > 0) {
      if (chunks.length > 0) yield { chunks, data: [], dataEvents: [] };
      chunks = [];
      yield m;
      continue;
    }
    chunks.push(...(m.chunk === undefined ? m.chunks : [m.chunk, ...m.chunks]));
    if (m.billing !== undefined) {
      yield { chunks, billing: m.billing, data: [], dataEvents: [] };
      chunks = [];
    }
  }
  if (chunks.length > 0) yield { chunks, data: [], dataEvents: [] };
}
