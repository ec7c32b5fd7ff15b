import type { Dispatcher } from 'undici';
import { postUpstream, readJsonText, type UpstreamEndpoint } from '../upstream-http';
import type { OutputLimitField } from '../../../config/types';
import type {
  ChatProvider,
  JsonObject,
  PassThroughBatch,
  PassThroughCompletion,
  WireChatRequest,
  WireChunk,
  WireCompletion,
  WireUsage,
} from '../types';
import {
  garbageError,
  streamFrame,
  statusError,
  streamErrorFrame,
  transportError,
  type UpstreamIdentity,
} from './errors';
import { forwardable, forwardableCompletion } from './pass-through';
import { parseSse, parseSseBatches } from './sse';
import { readChunk, readCompletion, readUsage } from './wire-parse';
import { chunkText, completionText, estimateUsage } from '../tokens';

export interface OpenAiProviderOptions {
  /** e.g. https://api.example.com/v1 (the provider appends /chat/completions). */
  readonly baseUrl: string;
  readonly apiKey: string | undefined;
  /** Headers and body inactivity timeout, in milliseconds. */
  readonly timeoutMs: number;
  /** The core's upstream dispatcher, stating this upstream's name (`UpstreamHttp.forUpstream`). */
  readonly dispatcher: Dispatcher;
  /** svc's public model id, which replaces the upstream's model name in messages a client sees. */
  readonly modelId: string;
  /** The upstream's model name (sent as `model`), kept out of messages a client sees. */
  readonly upstreamModel: string;
  /** Extra headers for every request (`headers` of the upstream); default none. */
  readonly headers?: Readonly<Record<string, string>>;
  /** The field the output limit goes in (`max_tokens_field`); default: the one the request has. */
  readonly maxTokensField?: OutputLimitField;
  /** The upstream takes the `developer` role (`developer_role`); default false. */
  readonly developerRole?: boolean;
}

// Many OpenAI-compatible servers reject the `developer` role; `system` means the same to all of
// them. Upstreams that have it (OpenAI's own) get it as sent.
function upstreamBody(request: WireChatRequest, stream: boolean, options: OpenAiProviderOptions): string {
  const messages =
    options.developerRole === true
      ? request.messages
      : request.messages.map((m) => (m.role === 'developer' ? { ...m, role: 'system' as const } : m));
  const body: Record<string, unknown> = { ...request, messages, model: options.upstreamModel };
  const field = options.maxTokensField;
  if (field !== undefined) {
    const limit = request.max_tokens ?? request.max_completion_tokens;
    delete body['max_tokens'];
    delete body['max_completion_tokens'];
    if (limit !== undefined) body[field] = limit;
  }
  if (stream) {
    body['stream'] = true;
    body['stream_options'] = { include_usage: true };
  } else {
    delete body['stream'];
    delete body['stream_options'];
  }
  return JSON.stringify(body);
}

/** A provider for any OpenAI-compatible chat-completions upstream. */
export function createOpenAiProvider(options: OpenAiProviderOptions): ChatProvider {
  const url = new URL(options.baseUrl.replace(/\/+$/, '') + '/chat/completions');
  const upstream = url.host;
  const who: UpstreamIdentity = {
    host: url.host,
    apiKey: options.apiKey,
    upstreamModel: options.upstreamModel,
    modelId: options.modelId,
  };
  const headers: Record<string, string> = {
    ...options.headers,
    'content-type': 'application/json',
    accept: 'application/json',
  };
  if (options.apiKey !== undefined && options.apiKey !== '') headers['authorization'] = `Bearer ${options.apiKey}`;

  const endpoint: UpstreamEndpoint = {
    url,
    headers,
    dispatcher: options.dispatcher,
    timeoutMs: options.timeoutMs,
    statusError: (status, snippet, answered) => statusError(status, snippet, who, answered),
  };

  function send(request: WireChatRequest, stream: boolean, signal: AbortSignal): Promise<Dispatcher.ResponseData> {
    return postUpstream(endpoint, upstreamBody(request, stream, options), stream, signal);
  }

  // svc's model id as JSON, which replaces the upstream's in every forwarded chunk.
  const modelJson = JSON.stringify(options.modelId);

  /**
   * The fast path's stream: `request` goes upstream as `stream` sends it; the answer is read event
   * by event exactly as `stream` reads it (the same errors, the same cut detection, the same
   * usage), but each chunk goes back as the upstream's own JSON text, only its model replaced,
   * unless it needs the translation's normalising (`forwardable`).
   */
  async function* passThroughStream(
    request: WireChatRequest,
    includeUsage: boolean,
    signal: AbortSignal,
  ): AsyncGenerator<PassThroughBatch> {
    const response = await send(request, true, signal);
    let usage: WireUsage | undefined;
    let finished = false;
    let done = false;
    // The last chunk with choices (read, or as it came), whose header the final usage chunk repeats.
    let last: WireChunk | JsonObject | undefined;
    let produced = '';
    try {
      for await (const events of parseSseBatches(response.body as AsyncIterable<Uint8Array>)) {
        const chunks: (string | WireChunk)[] = [];
        let text = '';
        // Where in this batch the answer's end began (its first finish reason), and the text before it.
        let endAt = -1;
        let textBefore = '';
        const mark = (): void => {
          if (endAt >= 0) return;
          endAt = chunks.length;
          textBefore = text;
        };
        try {
          for (const data of events) {
            if (data.trim() === '[DONE]') {
              done = true;
              break;
            }
            const json = streamFrame(data, upstream);
            if (typeof json === 'object' && json !== null && 'error' in json) {
              throw streamErrorFrame(json, data, who);
            }
            // The common chunk: forwarded as it came, read without building a chunk of it.
            const forwarded = forwardable(data, json as JsonObject, includeUsage, options.modelId, modelJson);
            if (forwarded !== undefined) {
              last = json as JsonObject;
              if (forwarded.finished) {
                finished = true;
                mark();
              }
              text += forwarded.text;
              chunks.push(forwarded.out);
              continue;
            }
            const chunk = readChunk(json);
            if (chunk === undefined) throw garbageError('stream frame is not a chat completion chunk', upstream);
            if (chunk.usage) usage = chunk.usage;
            if (chunk.choices.length === 0) continue;
            last = chunk;
            if (chunk.choices.some((choice) => choice.finish_reason !== null)) {
              finished = true;
              mark();
            }
            text += chunkText(chunk);
            if (chunk.usage === undefined) chunks.push(chunk);
            else {
              const { usage: _dropped, ...withoutUsage } = chunk;
              chunks.push(withoutUsage);
            }
          }
        } catch (error) {
          // What came before the failure reaches the client first, as on the translated path.
          if (chunks.length > 0) yield { chunks, text, last: headerOf(last) };
          throw error;
        }
        produced += text;
        if (endAt >= 0 && usage === undefined) {
          // The answer's end waits for its usage in the runner (`PassThroughBatch.ends`); what came
          // before it in this read goes on at once.
          if (endAt > 0) yield { chunks: chunks.slice(0, endAt), text: textBefore, last: headerOf(last) };
          yield { chunks: chunks.slice(endAt), text: text.slice(textBefore.length), last: headerOf(last), ends: true };
        } else if (chunks.length > 0) yield { chunks, text, last: headerOf(last) };
        if (done) break;
      }
    } catch (error) {
      throw transportError(error, signal, upstream);
    } finally {
      if (!done) response.body.destroy();
    }
    if (!done && !finished) throw garbageError('stream ended before it finished', upstream);
    usage ??= estimateUsage(request.messages, request.tools, produced);
    yield { chunks: [], text: '', usage, last: headerOf(last) };
  }

  /** `complete`'s answer from the body: the upstream's completion, its usage svc's own count when it sent none. */
  function completionOf(json: unknown, request: WireChatRequest): WireCompletion {
    const completion = readCompletion(json);
    if (completion === undefined) throw garbageError('body is not a chat completion', upstream);
    // An upstream that reports no usage (several self-hosted servers): the answer is served and
    // charged from svc's own count, marked estimated (SPEC §6).
    const usage = completion.usage ?? estimateUsage(request.messages, request.tools, completionText(completion));
    return { ...completion, usage };
  }

  /**
   * The fast path's answer: `request` goes upstream as `complete` sends it, and the answer is
   * read exactly as `complete` reads it (the same errors, the same usage), but it goes back as the
   * upstream's own JSON text, svc's model id in it, cut where svc's usage goes, unless it needs
   * the translation's normalising (`forwardableCompletion`): then the completion, as `complete`'s.
   */
  async function passThroughComplete(
    request: WireChatRequest,
    signal: AbortSignal,
  ): Promise<PassThroughCompletion | WireCompletion> {
    const response = await send(request, false, signal);
    const { text, json } = await readJsonText(response, signal, upstream);
    const body = isObject(json) ? json : undefined;
    const data = body === undefined ? undefined : forwardableCompletion(text, body, modelJson);
    if (body === undefined || data === undefined) return completionOf(json, request);
    // Accepted by `forwardableCompletion`, so by `readCompletion`: its usage is the one `complete` bills.
    const usage = readUsage(body['usage']) ?? completionOf(json, request).usage;
    return { data, usage };
  }

  return {
    name: 'openai',
    passThrough: { wire: 'openai', stream: passThroughStream, complete: passThroughComplete },

    async complete(request, signal) {
      const response = await send(request, false, signal);
      const { json } = await readJsonText(response, signal, upstream);
      return completionOf(json, request);
    },

    async *stream(request, signal) {
      const response = await send(request, true, signal);
      let usage: WireUsage | undefined;
      let finished = false;
      let done = false;
      let last: WireChunk | undefined;
      // The output so far, for svc's own count when the stream brings no usage.
      let produced = '';
      try {
        for await (const data of parseSse(response.body as AsyncIterable<Uint8Array>)) {
          if (data.trim() === '[DONE]') {
            done = true;
            break;
          }
          const json = streamFrame(data, upstream);
          if (typeof json === 'object' && json !== null && 'error' in json) {
            throw streamErrorFrame(json, data, who);
          }
          const chunk = readChunk(json);
          if (chunk === undefined) throw garbageError('stream frame is not a chat completion chunk', upstream);
          if (chunk.usage) usage = chunk.usage;
          last = chunk;
          if (chunk.choices.length === 0) continue;
          produced += chunkText(chunk);
          for (const choice of chunk.choices) if (choice.finish_reason !== null) finished = true;
          // The usage goes into the final chunk only (most chunks have none: no copy for them).
          if (chunk.usage === undefined) yield chunk;
          else {
            const { usage: _dropped, ...withoutUsage } = chunk;
            yield withoutUsage;
          }
        }
      } catch (error) {
        throw transportError(error, signal, upstream);
      } finally {
        if (!done) response.body.destroy();
      }
      // A stream that stops before a finish reason or [DONE] was cut, not completed.
      if (!done && !finished) throw garbageError('stream ended before it finished', upstream);
      // svc always asks for include_usage; an upstream that ignores it is charged from svc's own
      // count, marked estimated (SPEC §6).
      usage ??= estimateUsage(request.messages, request.tools, produced);
      yield {
        id: last?.id ?? '',
        created: last?.created ?? Math.floor(Date.now() / 1000),
        model: last?.model ?? request.model,
        choices: [],
        usage,
      };
    },
  };
}

const isObject = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);

function headerOf(chunk: WireChunk | JsonObject | undefined): PassThroughBatch['last'] {
  if (chunk === undefined) return undefined;
  // A forwarded chunk's id and created were checked (`forwardable`); the rest as `readChunk` reads them.
  const fingerprint = chunk['system_fingerprint'];
  const tier = chunk['service_tier'];
  return {
    id: chunk['id'] as string,
    created: chunk['created'] as number,
    ...(typeof fingerprint === 'string' ? { system_fingerprint: fingerprint } : {}),
    ...(typeof tier === 'string' ? { service_tier: tier } : {}),
  };
}
