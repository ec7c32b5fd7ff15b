import type { SvcError } from '../../../errors';
import {
  garbageError,
  streamFrame,
  statusError,
  streamErrorFrame,
  transportError,
  type UpstreamIdentity,
} from '../openai/errors';
import type { OpenAiProviderOptions } from '../openai/provider';
import { parseSse, parseSseBatches } from '../openai/sse';
import { chunkText, completionText, estimateUsage } from '../tokens';
import type {
  ChatProvider,
  JsonObject,
  PassThroughBatch,
  WireChatRequest,
  WireChunk,
  WireCompletion,
  WireUsage,
} from '../types';
import { postUpstream, readJsonBody, readJsonText, type UpstreamEndpoint } from '../upstream-http';
import { toResponsesRequest } from './request';
import { createResponsesStreamReader, readResponse, readResponsesUsage } from './response';

export interface OpenAiResponsesProviderOptions extends OpenAiProviderOptions {
  /** Extra request headers (e.g. `OpenAI-Organization`); they cannot replace the key. */
  readonly headers?: Readonly<Record<string, string>>;
  /** Clock for answers that carry no `created_at` (ms); defaults to Date.now. */
  readonly now?: () => number;
  /** The upstream compacts itself (`compaction: native`): native calls offer `compact`. */
  readonly compaction?: boolean;
}

/**
 * A Responses failure (`response.failed`'s `error`, or an `error` event's `{code, message,
 * param}`) by the chat rules: an `invalid_*` code refuses the client's request (its 400), a rate
 * limit is a 429, anything else the upstream's failure.
 */
function responsesError(error: Record<string, unknown>, who: UpstreamIdentity): SvcError {
  const code = typeof error['code'] === 'string' ? error['code'] : undefined;
  const type =
    code !== undefined && code.startsWith('invalid_')
      ? 'invalid_request_error'
      : typeof error['type'] === 'string' && error['type'] !== 'error'
        ? error['type']
        : 'server_error';
  const body = { error: { message: error['message'], type, code, param: error['param'] } };
  return streamErrorFrame(body, JSON.stringify(error), who);
}

/** A provider for OpenAI's Responses API: chat requests translated both ways. */
export function createOpenAiResponsesProvider(options: OpenAiResponsesProviderOptions): ChatProvider {
  const url = new URL(options.baseUrl.replace(/\/+$/, '') + '/responses');
  const compactUrl = new URL(options.baseUrl.replace(/\/+$/, '') + '/responses/compact');
  const upstream = url.host;
  const now = options.now ?? Date.now;
  const who: UpstreamIdentity = {
    host: url.host,
    apiKey: options.apiKey,
    upstreamModel: options.upstreamModel,
    modelId: options.modelId,
  };
  const headers: Record<string, string> = { ...options.headers, 'content-type': 'application/json' };
  if (options.apiKey !== undefined && options.apiKey !== '') headers['authorization'] = `Bearer ${options.apiKey}`;
  const endpoint: UpstreamEndpoint = {
    url,
    headers,
    dispatcher: options.dispatcher,
    timeoutMs: options.timeoutMs,
    statusError: (status, snippet, responseHeaders) => statusError(status, snippet, who, responseHeaders),
  };

  /*
   * The native body with svc's decisions: the upstream model and the output limit it held for
   * (none when the client set none, as translated calls); `store: false`, since svc keeps the
   * caller's responses itself and the upstream is shared by every account.
   */
  function forwarded(body: JsonObject, request: WireChatRequest, stream: boolean): string {
    const { stream: _stream, max_output_tokens: _limit, ...rest } = body;
    const limit = request.max_completion_tokens ?? request.max_tokens;
    return JSON.stringify({
      ...rest,
      model: request.model,
      store: false,
      ...(typeof limit === 'number' ? { max_output_tokens: limit } : {}),
      ...(stream ? { stream: true } : {}),
    });
  }

  /**
   * POST /responses/compact (native compaction): the client's body with svc's model. The endpoint
   * takes no output limit, no `store` and no `stream`; its `service_tier` has no `ultrafast`
   * (sent as `fast`, as Codex's gateways do). The answer is a `response.compaction` object; one
   * without usage is charged from svc's own count, marked estimated, as any Response.
   */
  async function compact(body: JsonObject, request: WireChatRequest, signal: AbortSignal): Promise<WireCompletion> {
    const { stream: _stream, store: _store, max_output_tokens: _limit, ...rest } = body;
    const sent = {
      ...rest,
      model: request.model,
      ...(rest['service_tier'] === 'ultrafast' ? { service_tier: 'fast' } : {}),
    };
    const response = await postUpstream({ ...endpoint, url: compactUrl }, JSON.stringify(sent), false, signal);
    const json = await readJsonBody(response, signal, upstream);
    if (
      typeof json !== 'object' ||
      json === null ||
      (json as JsonObject)['object'] !== 'response.compaction' ||
      !Array.isArray((json as JsonObject)['output'])
    )
      throw garbageError('body is not a response.compaction', upstream);
    const answer = json as JsonObject;
    const reported = readResponsesUsage(answer['usage']);
    const usage = reported ?? estimateUsage(request.messages, request.tools, JSON.stringify(answer['output']));
    return {
      id: typeof answer['id'] === 'string' ? answer['id'] : '',
      created: typeof answer['created_at'] === 'number' ? answer['created_at'] : Math.floor(now() / 1000),
      model: request.model,
      choices: [{ index: 0, message: { role: 'assistant', content: null }, finish_reason: 'stop' }],
      usage,
      native:
        reported === undefined
          ? {
              ...answer,
              usage: {
                input_tokens: usage.prompt_tokens,
                output_tokens: usage.completion_tokens,
                total_tokens: usage.total_tokens,
                estimated: true,
              },
            }
          : answer,
    };
  }

  async function complete(request: WireChatRequest, body: string, native: boolean, signal: AbortSignal) {
    const response = await postUpstream(endpoint, body, false, signal);
    const answered = native ? await readJsonText(response, signal, upstream) : undefined;
    const json = answered === undefined ? await readJsonBody(response, signal, upstream) : answered.json;
    const completion = readResponse(json);
    if (completion === undefined) throw garbageError('body is not a Response', upstream);
    // A Response can be answered with HTTP 200 and status "failed".
    const status = (json as { status?: unknown }).status;
    if (status === 'failed' || status === 'cancelled') {
      const error = (json as { error?: unknown }).error;
      throw responsesError(typeof error === 'object' && error !== null ? (error as Record<string, unknown>) : {}, who);
    }
    // A Response without usage is served and charged from svc's own count, marked estimated (SPEC
    // §6); natively, the count goes into the body's `usage` (with `estimated: true`) as well.
    const usage: WireUsage =
      completion.usage ?? estimateUsage(request.messages, request.tools, completionText(completion));
    if (!native) return { ...completion, usage };
    const answer: JsonObject =
      completion.usage === undefined
        ? {
            ...(json as JsonObject),
            usage: {
              input_tokens: usage.prompt_tokens,
              output_tokens: usage.completion_tokens,
              total_tokens: usage.prompt_tokens + usage.completion_tokens,
              estimated: true,
            },
          }
        : (json as JsonObject);
    return {
      ...completion,
      usage,
      native: answer,
      ...(completion.usage === undefined || answered === undefined ? {} : { nativeText: answered.text }),
    };
  }

  // Natively, each chunk also carries the upstream events it came from, and those before it that made none.
  // `body` is built inside the iteration: a request the translation refuses fails the stream's
  // first step, where the runner releases its hold, never the call that creates the stream.
  async function* stream(
    request: WireChatRequest,
    body: () => string,
    native: boolean,
    signal: AbortSignal,
  ): AsyncGenerator<WireChunk> {
    const response = await postUpstream(endpoint, body(), true, signal);
    const reader = createResponsesStreamReader(request.model, now());
    let finished = false;
    let usage: WireUsage | undefined;
    let last: WireChunk | undefined;
    let pending: JsonObject[] = [];
    let produced = '';
    try {
      for await (const data of parseSse(response.body as AsyncIterable<Uint8Array>)) {
        if (data.trim() === '[DONE]') break;
        const json = streamFrame(data, upstream);
        const step = reader.read(json);
        if (step.kind === 'garbage') throw garbageError(`stream event: ${step.what}`, upstream);
        if (step.kind === 'error') throw responsesError(step.error, who);
        if (native) pending.push(json as JsonObject);
        for (const [i, chunk] of step.chunks.entries()) {
          produced += chunkText(chunk);
          const out = native && i === 0 ? { ...chunk, native: pending } : chunk;
          if (native && i === 0) pending = [];
          last = out;
          yield out;
        }
        if (step.kind === 'done') {
          finished = true;
          usage = step.usage;
          break;
        }
      }
    } catch (error) {
      throw transportError(error, signal, upstream);
    } finally {
      if (!finished) response.body.destroy();
    }
    // A stream that ends before response.completed (or .incomplete) was cut, not completed.
    if (!finished) throw garbageError('stream ended before it finished', upstream);
    // A stream without usage is charged from svc's own count, marked estimated (SPEC §6).
    usage ??= estimateUsage(request.messages, request.tools, produced);
    yield {
      id: last?.id ?? '',
      created: last?.created ?? Math.floor(now() / 1000),
      model: last?.model ?? request.model,
      choices: [],
      usage,
    };
  }

  /*
   * The fast path's stream (core/chat/fast-path.ts): the native body goes upstream as `stream`
   * sends it, and each event is read exactly as `stream` reads it (the same reader, so the same
   * errors, cut detection, usage and produced text), but goes back as the upstream's own JSON text,
   * named by its `type`, one batch per read of the upstream, instead of riding a chunk. The
   * terminal `response.completed` / `.incomplete` is not among them: it comes as `closing` on the
   * last batch, which the Responses layer (core/chat/responses/native.ts) sends only once the
   * charge is settled, with svc's id, model and usage. An event the upstream split over several
   * data lines is written again from its JSON (one SSE data line carries it).
   */
  async function* passThroughStream(
    request: WireChatRequest,
    body: () => string,
    signal: AbortSignal,
  ): AsyncGenerator<PassThroughBatch> {
    const response = await postUpstream(endpoint, body(), true, signal);
    const reader = createResponsesStreamReader(request.model, now());
    let finished = false;
    let usage: WireUsage | undefined;
    let closing: PassThroughBatch['closing'];
    let produced = '';
    let last: PassThroughBatch['last'];
    try {
      reading: for await (const events of parseSseBatches(response.body as AsyncIterable<Uint8Array>)) {
        const chunks: string[] = [];
        const names: string[] = [];
        let text = '';
        try {
          for (const data of events) {
            if (data.trim() === '[DONE]') {
              if (chunks.length > 0) yield { chunks, events: names, text, last };
              break reading;
            }
            const json = streamFrame(data, upstream);
            const step = reader.read(json);
            if (step.kind === 'garbage') throw garbageError(`stream event: ${step.what}`, upstream);
            if (step.kind === 'error') throw responsesError(step.error, who);
            for (const chunk of step.chunks) {
              text += chunkText(chunk);
              last = { id: chunk.id, created: chunk.created };
            }
            const type = (json as JsonObject)['type'] as string;
            const own = data.includes('\n') || data.includes('\r') ? JSON.stringify(json) : data;
            if (step.kind === 'done') {
              finished = true;
              usage = step.usage;
              closing = { event: type, data: own };
              break;
            }
            chunks.push(own);
            names.push(type);
          }
        } catch (error) {
          // What came before the failure reaches the client first, as on the native path.
          if (chunks.length > 0) yield { chunks, events: names, text, last };
          throw error;
        }
        produced += text;
        if (chunks.length > 0) yield { chunks, events: names, text, last };
        if (finished) break;
      }
    } catch (error) {
      throw transportError(error, signal, upstream);
    } finally {
      if (!finished) response.body.destroy();
    }
    // A stream that ends before response.completed (or .incomplete) was cut, not completed.
    if (!finished || closing === undefined) throw garbageError('stream ended before it finished', upstream);
    // A stream without usage is charged from svc's own count, marked estimated (SPEC §6).
    usage ??= estimateUsage(request.messages, request.tools, produced);
    yield { chunks: [], text: '', usage, last, closing };
  }

  const toBody = (request: WireChatRequest, streamed: boolean): string =>
    JSON.stringify({ ...toResponsesRequest(request), ...(streamed ? { stream: true } : {}) });

  return {
    name: 'openai-responses',
    complete: (request, signal) => complete(request, toBody(request, false), false, signal),
    stream: (request, signal) => stream(request, () => toBody(request, true), false, signal),
    native: {
      wire: 'openai-responses',
      complete: (body, request, signal) => complete(request, forwarded(body, request, false), true, signal),
      stream: (body, request, signal) => stream(request, () => forwarded(body, request, true), true, signal),
      passThrough: (body, request, signal) => passThroughStream(request, () => forwarded(body, request, true), signal),
      ...(options.compaction === true ? { compact } : {}),
    },
  };
}
