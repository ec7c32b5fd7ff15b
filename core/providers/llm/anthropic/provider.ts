import { garbageError, streamFrame, transportError, type UpstreamIdentity } from '../openai/errors';
import type { OpenAiProviderOptions } from '../openai/provider';
import { parseSse, parseSseBatches } from '../openai/sse';
import { chunkText, completionText, estimateUsage } from '../tokens';
import type { ChatProvider, JsonObject, PassThroughBatch, WireChatRequest, WireChunk, WireUsage } from '../types';
import { postUpstream, readJsonBody, type UpstreamEndpoint } from '../upstream-http';
import { anthropicStatusError, anthropicStreamError } from './errors';
import { forwardedEvent, withModel } from './pass-through';
import { toAnthropicRequest, withBreakpoints } from './request';
import { createAnthropicStreamReader, readAnthropicMessage } from './response';

/** The Messages API version svc speaks (the only one Anthropic has published). */
export const ANTHROPIC_VERSION = '2023-06-01';

export interface AnthropicProviderOptions extends Omit<OpenAiProviderOptions, 'baseUrl'> {
  /**
   * The API root as Anthropic's SDKs take it (`ANTHROPIC_BASE_URL`), e.g. https://api.anthropic.com;
   * the provider posts to `{base_url}/v1/messages`. A base URL that already ends in `/v1` is
   * accepted too (it then gets `/messages`), since OpenAI-style configurations write it so.
   */
  readonly baseUrl: string;
  /**
   * The output limit sent when the client named none (the Messages API requires `max_tokens`):
   * the model's `max_output_tokens`, which bounds the hold as well.
   */
  readonly maxOutputTokens: number;
  /** Extra request headers (e.g. `anthropic-beta`); they cannot replace the key or the version. */
  readonly headers?: Readonly<Record<string, string>>;
  /** Clock for the `created` field of answers (ms); defaults to Date.now. */
  readonly now?: () => number;
  /**
   * Whether a translated request (from a wire without `cache_control`) gets svc's cache
   * breakpoints (`withBreakpoints`; the model's `cache.breakpoints`, default true). The native
   * path keeps the client's own.
   */
  readonly breakpoints?: boolean;
}

/** The messages endpoint of a base URL (see `AnthropicProviderOptions.baseUrl`). */
export function messagesUrl(baseUrl: string): URL {
  const root = baseUrl.replace(/\/+$/, '');
  return new URL(/\/v1$/.test(root) ? `${root}/messages` : `${root}/v1/messages`);
}

/** A provider for Anthropic's Messages API: chat requests translated both ways. */
export function createAnthropicProvider(options: AnthropicProviderOptions): ChatProvider {
  const url = messagesUrl(options.baseUrl);
  const upstream = url.host;
  const now = options.now ?? Date.now;
  const who: UpstreamIdentity = {
    host: url.host,
    apiKey: options.apiKey,
    upstreamModel: options.upstreamModel,
    modelId: options.modelId,
  };
  const headers: Record<string, string> = { ...options.headers, 'content-type': 'application/json' };
  headers['anthropic-version'] = ANTHROPIC_VERSION;
  if (options.apiKey !== undefined && options.apiKey !== '') headers['x-api-key'] = options.apiKey;
  const endpoint: UpstreamEndpoint = {
    url,
    headers,
    dispatcher: options.dispatcher,
    timeoutMs: options.timeoutMs,
    statusError: (status, snippet, responseHeaders) => anthropicStatusError(status, snippet, who, responseHeaders),
  };

  /*
   * The client's `anthropic-beta` values (as it sent them, less those its adapter withholds) join
   * the configured ones; no other client header reaches the upstream, so neither the key nor the
   * version can be replaced.
   */
  function nativeEndpoint(client: Readonly<Record<string, string>> | undefined): UpstreamEndpoint {
    const beta = client?.['anthropic-beta'];
    if (beta === undefined || beta === '') return endpoint;
    // Without configured betas the client's header goes unchanged.
    if (headers['anthropic-beta'] === undefined)
      return { ...endpoint, headers: { ...headers, 'anthropic-beta': beta } };
    const values = new Set(
      [headers['anthropic-beta'] ?? '', beta]
        .flatMap((v) => v.split(','))
        .map((v) => v.trim())
        .filter((v) => v !== ''),
    );
    return { ...endpoint, headers: { ...headers, 'anthropic-beta': [...values].join(',') } };
  }

  // The native body with svc's decisions: the upstream model and the output limit it held for.
  function forwarded(body: JsonObject, request: WireChatRequest, stream: boolean): string {
    const { stream: _stream, ...rest } = body;
    const limit = request.max_completion_tokens ?? request.max_tokens ?? options.maxOutputTokens;
    return JSON.stringify({ ...rest, model: request.model, max_tokens: limit, ...(stream ? { stream: true } : {}) });
  }

  async function complete(
    request: WireChatRequest,
    body: string,
    native: boolean,
    signal: AbortSignal,
    target: UpstreamEndpoint = endpoint,
  ) {
    const response = await postUpstream(target, body, false, signal);
    const json = await readJsonBody(response, signal, upstream);
    const message = readAnthropicMessage(json, now());
    if (message === undefined) throw garbageError('body is not a Messages answer', upstream);
    // An answer without usage is served and charged from svc's own count, marked estimated (SPEC
    // §6); natively, the count goes into the body's `usage` (with `estimated: true`) as well.
    const usage: WireUsage = message.usage ?? estimateUsage(request.messages, request.tools, completionText(message));
    if (!native) return { ...message, usage };
    const answer: JsonObject = { ...(json as JsonObject), model: options.modelId };
    if (message.usage === undefined) answer['usage'] = anthropicUsage(usage);
    return { ...message, usage, native: answer };
  }

  /*
   * Natively, each chunk also carries the upstream events it came from (and those before it that
   * made no chunk: ping, block stops), with svc's model id; `message_stop` is left to the
   * client's adapter, which closes the stream after the charge is settled.
   */
  // `body` is built inside the iteration: a request the translation refuses fails the stream's
  // first step, where the runner releases its hold, never the call that creates the stream.
  async function* stream(
    request: WireChatRequest,
    body: () => string,
    native: boolean,
    signal: AbortSignal,
    target: UpstreamEndpoint = endpoint,
  ): AsyncGenerator<WireChunk> {
    const response = await postUpstream(target, body(), true, signal);
    const reader = createAnthropicStreamReader(request.model, now());
    let stopped = false;
    let last: WireChunk | undefined;
    let pending: JsonObject[] = [];
    let produced = '';
    try {
      for await (const data of parseSse(response.body as AsyncIterable<Uint8Array>)) {
        const json = streamFrame(data, upstream);
        const step = reader.read(json);
        if (step.kind === 'garbage') throw garbageError(`stream event: ${step.what}`, upstream);
        if (step.kind === 'error') throw anthropicStreamError(step.error, who);
        if (step.kind === 'stop') {
          stopped = true;
          break;
        }
        if (native) {
          let event = withModel(json as JsonObject, options.modelId);
          // An upstream that reports no usage: the client's closing message_delta gets svc's own
          // count (the whole answer has been produced by then), marked estimated, as billed below.
          if (event['type'] === 'message_delta' && event['usage'] === undefined && reader.usage() === undefined)
            event = { ...event, usage: anthropicUsage(estimateUsage(request.messages, request.tools, produced)) };
          pending.push(event);
        }
        for (const [i, chunk] of step.chunks.entries()) {
          produced += chunkText(chunk);
          const out = native && i === 0 ? { ...chunk, native: pending } : chunk;
          if (native && i === 0) pending = [];
          last = out;
          yield out;
        }
      }
    } catch (error) {
      throw transportError(error, signal, upstream);
    } finally {
      if (!stopped) response.body.destroy();
    }
    // A stream that stops before message_stop and a stop reason was cut, not completed.
    if (!stopped || !reader.finished()) throw garbageError('stream ended before it finished', upstream);
    // A stream without usage is charged from svc's own count, marked estimated (SPEC §6).
    const usage = reader.usage() ?? estimateUsage(request.messages, request.tools, produced);
    yield {
      id: last?.id ?? '',
      created: last?.created ?? Math.floor(now() / 1000),
      model: last?.model ?? request.model,
      choices: [],
      usage,
    };
  }

  const modelJson = JSON.stringify(options.modelId);

  /*
   * The fast path's stream (core/chat/fast-path.ts): the native body goes upstream as `stream`
   * sends it, and each event is read exactly as `stream` reads it (the same errors, cut detection,
   * usage and produced text, through the same reader), but goes back as the upstream's own JSON
   * text (`forwardedEvent`), one batch per read of the upstream, instead of riding a chunk. As
   * natively, `message_stop` reaches the client only after the charge is settled (`closing`, with
   * the final message), and a `message_delta` of an upstream that reported no usage gets svc's own
   * count, marked estimated, as billed.
   */
  async function* passThroughStream(
    request: WireChatRequest,
    body: () => string,
    signal: AbortSignal,
    target: UpstreamEndpoint,
  ): AsyncGenerator<PassThroughBatch> {
    const response = await postUpstream(target, body(), true, signal);
    const reader = createAnthropicStreamReader(request.model, now());
    let stopped = false;
    let closing = '';
    let produced = '';
    let last: PassThroughBatch['last'];
    let prompt: WireUsage | undefined;
    try {
      for await (const events of parseSseBatches(response.body as AsyncIterable<Uint8Array>)) {
        const chunks: string[] = [];
        const names: string[] = [];
        let text = '';
        try {
          for (const data of events) {
            const json = streamFrame(data, upstream);
            const step = reader.read(json);
            if (step.kind === 'garbage') throw garbageError(`stream event: ${step.what}`, upstream);
            if (step.kind === 'error') throw anthropicStreamError(step.error, who);
            if (step.kind === 'stop') {
              stopped = true;
              closing = forwardedEvent(data, json as JsonObject, options.modelId, modelJson);
              break;
            }
            const event = json as JsonObject;
            chunks.push(
              event['type'] === 'message_delta' && event['usage'] === undefined && reader.usage() === undefined
                ? JSON.stringify({
                    ...event,
                    usage: anthropicUsage(estimateUsage(request.messages, request.tools, produced + text)),
                  })
                : forwardedEvent(data, event, options.modelId, modelJson),
            );
            names.push(event['type'] as string);
            for (const chunk of step.chunks) {
              text += chunkText(chunk);
              last = { id: chunk.id, created: chunk.created };
              if (chunk.prompt !== undefined) prompt = chunk.prompt;
            }
          }
        } catch (error) {
          // What came before the failure reaches the client first, as on the native path.
          if (chunks.length > 0) yield { chunks, events: names, text, last, ...(prompt ? { prompt } : {}) };
          throw error;
        }
        produced += text;
        if (chunks.length > 0) yield { chunks, events: names, text, last, ...(prompt ? { prompt } : {}) };
        if (stopped) break;
      }
    } catch (error) {
      throw transportError(error, signal, upstream);
    } finally {
      if (!stopped) response.body.destroy();
    }
    // A stream that stops before message_stop and a stop reason was cut, not completed.
    if (!stopped || !reader.finished()) throw garbageError('stream ended before it finished', upstream);
    // A stream without usage is charged from svc's own count, marked estimated (SPEC §6).
    const usage = reader.usage() ?? estimateUsage(request.messages, request.tools, produced);
    yield { chunks: [], text: '', usage, last, closing: { event: 'message_stop', data: closing } };
  }

  const breakpoints = options.breakpoints ?? true;
  const toBody = (request: WireChatRequest, streamed: boolean): string => {
    const body = toAnthropicRequest(request, options.maxOutputTokens);
    return JSON.stringify({ ...(breakpoints ? withBreakpoints(body) : body), ...(streamed ? { stream: true } : {}) });
  };

  return {
    name: 'anthropic',
    complete: (request, signal) => complete(request, toBody(request, false), false, signal),
    stream: (request, signal) => stream(request, () => toBody(request, true), false, signal),
    native: {
      wire: 'anthropic',
      complete: (body, request, signal, client) =>
        complete(request, forwarded(body, request, false), true, signal, nativeEndpoint(client)),
      stream: (body, request, signal, client) =>
        stream(request, () => forwarded(body, request, true), true, signal, nativeEndpoint(client)),
      passThrough: (body, request, signal, client) =>
        passThroughStream(request, () => forwarded(body, request, true), signal, nativeEndpoint(client)),
    },
  };
}

/** svc's own count in Anthropic's usage shape, marked `estimated` (a field the SDKs carry through). */
function anthropicUsage(usage: WireUsage): JsonObject {
  return { input_tokens: usage.prompt_tokens, output_tokens: usage.completion_tokens, estimated: true };
}
