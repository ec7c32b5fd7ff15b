import type { Dispatcher } from 'undici';
import { postUpstream, type UpstreamEndpoint } from '../upstream-http';
import { decode } from '../cl100k';
import { countInputsOffThread, type EmbeddingProvider } from '../embeddings';
import { garbageError, streamFrame, transportError, type UpstreamIdentity } from '../openai/errors';
import type { OpenAiProviderOptions } from '../openai/provider';
import { parseSse, parseSseBatches } from '../openai/sse';
import { withStringField } from '../pass-through-text';
import { estimateUsage } from '../tokens';
import type {
  ChatProvider,
  JsonObject,
  PassThroughBatch,
  WireChatRequest,
  WireChunk,
  WireChunkChoice,
  WireUsage,
} from '../types';
import { geminiStatusError, geminiStreamError } from './errors';
import { toGenerateContent } from './request';
import { choiceOf, finishReasonOf, readAnswer, toolCallOf, type GeminiAnswer } from './response';

export interface GeminiProviderOptions extends OpenAiProviderOptions {
  /** e.g. https://generativelanguage.googleapis.com/v1beta (the provider appends /models/NAME:METHOD). */
  readonly baseUrl: string;
  /** More headers for every upstream request (a proxy's own, say); `x-goog-api-key` carries the key. */
  readonly headers?: Readonly<Record<string, string>>;
}

/** Google's limit on the requests of one batchEmbedContents call. */
const EMBED_BATCH = 100;

function outputText(answer: GeminiAnswer): string {
  let text = '';
  for (const candidate of answer.candidates)
    for (const part of candidate.parts)
      text +=
        part.functionCall !== undefined
          ? part.functionCall.name + JSON.stringify(part.functionCall.args)
          : (part.text ?? '');
  return text;
}

function obj(value: unknown): JsonObject | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as JsonObject) : undefined;
}

function vectorOf(value: unknown): number[] | undefined {
  const values = (value as { values?: unknown } | null)?.values;
  return Array.isArray(values) && values.length > 0 && values.every((v) => typeof v === 'number' && Number.isFinite(v))
    ? (values as number[])
    : undefined;
}

/**
 * A provider for Google's Gemini API (generativelanguage-style `base_url`, key in
 * `x-goog-api-key`): chat over `generateContent` and `streamGenerateContent?alt=sse`,
 * translated both ways, and embeddings over `embedContent` / `batchEmbedContents`.
 */
export function createGeminiProvider(options: GeminiProviderOptions): ChatProvider & EmbeddingProvider {
  const base = new URL(options.baseUrl.replace(/\/+$/, '') + '/');
  const host = base.host;
  const who: UpstreamIdentity = {
    host,
    apiKey: options.apiKey,
    upstreamModel: options.upstreamModel,
    modelId: options.modelId,
  };
  const headers: Record<string, string> = {
    ...options.headers,
    'content-type': 'application/json',
    accept: 'application/json',
  };
  if (options.apiKey !== undefined && options.apiKey !== '') headers['x-goog-api-key'] = options.apiKey;

  const endpoint: Omit<UpstreamEndpoint, 'url'> = {
    headers,
    dispatcher: options.dispatcher,
    timeoutMs: options.timeoutMs,
    statusError: (status, snippet, answered) => geminiStatusError(status, snippet, who, answered),
  };

  function post(
    model: string,
    method: string,
    body: unknown,
    signal: AbortSignal,
    stream = false,
  ): Promise<Dispatcher.ResponseData> {
    const url = new URL(`models/${encodeURIComponent(model)}:${method}${stream ? '?alt=sse' : ''}`, base);
    return postUpstream({ ...endpoint, url }, JSON.stringify(body), stream, signal);
  }

  async function json(response: Dispatcher.ResponseData, signal: AbortSignal): Promise<unknown> {
    try {
      return await response.body.json();
    } catch (error) {
      throw signal.aborted || (error as { code?: string }).code !== undefined
        ? transportError(error, signal, host)
        : garbageError('body is not JSON', host, error);
    }
  }

  /** Gemini's `usageMetadata` for svc's own count of a call whose upstream reported none. */
  const estimatedMetadata = (usage: WireUsage): JsonObject => ({
    promptTokenCount: usage.prompt_tokens,
    candidatesTokenCount: usage.completion_tokens,
    totalTokenCount: usage.prompt_tokens + usage.completion_tokens,
    estimated: true,
  });

  const usageOr = (request: WireChatRequest, usage: WireUsage | undefined, produced: string): WireUsage =>
    usage ?? estimateUsage(request.messages, request.tools, produced);

  // The native body with svc's decisions: the output limit it held for (none when the client set
  // none, as translated), and no `model` field (the path names the upstream's model).
  function forwarded(body: JsonObject, request: WireChatRequest): JsonObject {
    const { model: _model, generationConfig, generation_config: snakeConfig, ...rest } = body;
    const config = { ...(obj(generationConfig) ?? obj(snakeConfig) ?? {}) };
    delete config['max_output_tokens'];
    const limit = request.max_completion_tokens ?? request.max_tokens;
    if (limit !== undefined) config['maxOutputTokens'] = limit;
    else delete config['maxOutputTokens'];
    return { ...rest, ...(Object.keys(config).length > 0 ? { generationConfig: config } : {}) };
  }

  // A client sees svc's model id where Google names its own.
  const withModel = (json: JsonObject): JsonObject =>
    typeof json['modelVersion'] === 'string' ? { ...json, modelVersion: options.modelId } : json;

  async function complete(request: WireChatRequest, body: JsonObject, native: boolean, signal: AbortSignal) {
    const raw = await json(await post(request.model, 'generateContent', body, signal), signal);
    const answer = readAnswer(raw);
    if (answer === undefined) throw garbageError('body is not a GenerateContentResponse', host);
    const choices =
      answer.blocked && answer.candidates.length === 0
        ? [{ index: 0, message: { role: 'assistant' as const, content: '' }, finish_reason: 'content_filter' }]
        : answer.candidates.map(choiceOf);
    if (choices.length === 0) throw garbageError('answer has no candidates', host);
    const usage = usageOr(request, answer.usage, outputText(answer));
    // Natively, an answer without usage gets svc's count in `usageMetadata`, with `estimated: true`.
    const nativeAnswer = (): JsonObject => {
      const body = withModel(raw as JsonObject);
      if (answer.usage !== undefined) return body;
      return { ...body, usageMetadata: estimatedMetadata(usage) };
    };
    return {
      id: answer.responseId ?? '',
      created: Math.floor(Date.now() / 1000),
      model: request.model,
      choices,
      usage,
      ...(native ? { native: nativeAnswer() } : {}),
    };
  }

  /*
   * Natively, each chunk also carries the upstream frames it came from (and those before it that
   * made no chunk); frames left over at the end (a usage-only frame) ride on an empty chunk, since
   * the runner passes on only chunks with choices.
   */
  // `body` is built inside the iteration: a request the translation refuses fails the stream's
  // first step, where the runner releases its hold, never the call that creates the stream.
  async function* stream(
    request: WireChatRequest,
    body: () => JsonObject,
    native: boolean,
    signal: AbortSignal,
  ): AsyncGenerator<WireChunk> {
    const response = await post(request.model, 'streamGenerateContent', body(), signal, true);
    let usage: WireUsage | undefined;
    let produced = '';
    let id = '';
    const created = Math.floor(Date.now() / 1000);
    const begun = new Set<number>();
    const toolIndex = new Map<number, number>();
    const open = new Set<number>();
    let finished = false;
    let ended = false;
    let pending: JsonObject[] = [];
    const chunk = (choices: WireChunkChoice[]): WireChunk => {
      // Google's running totals name the prompt's count and cache split from the first frame.
      const prompt = usage !== undefined ? { prompt: usage } : {};
      if (!native || pending.length === 0) return { id, created, model: request.model, choices, ...prompt };
      const out = { id, created, model: request.model, choices, native: pending, ...prompt };
      pending = [];
      return out;
    };
    try {
      for await (const data of parseSse(response.body as AsyncIterable<Uint8Array>)) {
        const frame = streamFrame(data, host);
        if (typeof frame === 'object' && frame !== null && 'error' in frame) throw geminiStreamError(frame, data, who);
        const answer = readAnswer(frame);
        if (answer === undefined) throw garbageError('stream frame is not a GenerateContentResponse', host);
        if (native) pending.push(withModel(frame as JsonObject));
        id = answer.responseId ?? id;
        // Google repeats the running totals in every frame: the last one is the usage.
        if (answer.usage !== undefined) usage = answer.usage;
        produced += outputText(answer);
        if (answer.blocked && answer.candidates.length === 0) {
          yield chunk([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: 'content_filter' }]);
          finished = true;
          continue;
        }
        for (const candidate of answer.candidates) {
          const index = candidate.index;
          const role = begun.has(index) ? {} : { role: 'assistant' };
          begun.add(index);
          open.add(index);
          const deltas: WireChunkChoice[] = [];
          for (const part of candidate.parts) {
            if (part.functionCall !== undefined) {
              const n = toolIndex.get(index) ?? 0;
              toolIndex.set(index, n + 1);
              const call = toolCallOf(part.functionCall);
              deltas.push({
                index,
                delta: { ...role, tool_calls: [{ index: n, ...call }] },
                finish_reason: null,
              });
            } else if (part.thought) {
              deltas.push({ index, delta: { ...role, reasoning_content: part.text ?? '' }, finish_reason: null });
            } else {
              deltas.push({ index, delta: { ...role, content: part.text ?? '' }, finish_reason: null });
            }
          }
          for (const delta of deltas) yield chunk([delta]);
          if (candidate.finishReason !== undefined) {
            open.delete(index);
            finished = true;
            const delta = deltas.length === 0 && role.role !== undefined ? { role: 'assistant' } : {};
            yield chunk([
              { index, delta, finish_reason: finishReasonOf(candidate.finishReason, toolIndex.has(index)) },
            ]);
          }
        }
      }
      ended = true;
    } catch (error) {
      throw transportError(error, signal, host);
    } finally {
      if (!ended) response.body.destroy();
    }
    // A stream that stops before every candidate finished was cut, not completed.
    if (!finished || open.size > 0) throw garbageError('stream ended before it finished', host);
    const final = usageOr(request, usage, produced);
    // Natively, a stream without usage ends with one more frame carrying svc's count (what is
    // charged), `estimated: true`, as a non-stream answer gets it in its own `usageMetadata`.
    if (native && usage === undefined)
      pending.push({
        usageMetadata: estimatedMetadata(final),
        modelVersion: options.modelId,
        ...(id !== '' ? { responseId: id } : {}),
      });
    if (native && pending.length > 0) yield chunk([{ index: 0, delta: {}, finish_reason: null }]);
    yield { id, created, model: request.model, choices: [], usage: final };
  }

  const modelJson = JSON.stringify(options.modelId);

  /** A frame as Google wrote it, svc's model id in its `modelVersion`; written again only when it must be. */
  function forwardedFrame(data: string, frame: JsonObject): string {
    if (data.includes('\n') || data.includes('\r')) return JSON.stringify(withModel(frame));
    const version = frame['modelVersion'];
    if (typeof version !== 'string' || version === options.modelId) return data;
    return withStringField(data, 'modelVersion', version, modelJson) ?? JSON.stringify(withModel(frame));
  }

  /*
   * The fast path's stream (core/chat/fast-path.ts): the native body goes upstream as `stream`
   * sends it, and each frame is read as `stream` reads it (the same errors, cut detection, usage
   * and produced text) but goes back as Google wrote it (`forwardedFrame`), one batch per read of
   * the upstream. As natively, a stream without usage ends with one more frame carrying svc's
   * count (what is charged), `estimated: true`.
   */
  async function* passThroughStream(
    request: WireChatRequest,
    body: () => JsonObject,
    signal: AbortSignal,
  ): AsyncGenerator<PassThroughBatch> {
    const response = await post(request.model, 'streamGenerateContent', body(), signal, true);
    let usage: WireUsage | undefined;
    let produced = '';
    let id = '';
    const created = Math.floor(Date.now() / 1000);
    const open = new Set<number>();
    let finished = false;
    let ended = false;
    try {
      for await (const frames of parseSseBatches(response.body as AsyncIterable<Uint8Array>)) {
        const chunks: string[] = [];
        let text = '';
        try {
          for (const data of frames) {
            const frame = streamFrame(data, host);
            if (typeof frame === 'object' && frame !== null && 'error' in frame)
              throw geminiStreamError(frame, data, who);
            const answer = readAnswer(frame);
            if (answer === undefined) throw garbageError('stream frame is not a GenerateContentResponse', host);
            chunks.push(forwardedFrame(data, frame as JsonObject));
            id = answer.responseId ?? id;
            // Google repeats the running totals in every frame: the last one is the usage.
            if (answer.usage !== undefined) usage = answer.usage;
            text += outputText(answer);
            if (answer.blocked && answer.candidates.length === 0) finished = true;
            for (const candidate of answer.candidates) {
              open.add(candidate.index);
              if (candidate.finishReason !== undefined) {
                open.delete(candidate.index);
                finished = true;
              }
            }
          }
        } catch (error) {
          if (chunks.length > 0) yield { chunks, text, last: { id, created }, ...(usage ? { prompt: usage } : {}) };
          throw error;
        }
        produced += text;
        if (chunks.length > 0) yield { chunks, text, last: { id, created }, ...(usage ? { prompt: usage } : {}) };
      }
      ended = true;
    } catch (error) {
      throw transportError(error, signal, host);
    } finally {
      if (!ended) response.body.destroy();
    }
    // A stream that stops before every candidate finished was cut, not completed.
    if (!finished || open.size > 0) throw garbageError('stream ended before it finished', host);
    const final = usageOr(request, usage, produced);
    if (usage === undefined)
      yield {
        chunks: [
          JSON.stringify({
            usageMetadata: estimatedMetadata(final),
            modelVersion: options.modelId,
            ...(id !== '' ? { responseId: id } : {}),
          }),
        ],
        text: '',
        last: { id, created },
      };
    yield { chunks: [], text: '', usage: final, last: { id, created } };
  }

  return {
    name: 'gemini',
    complete: (request, signal) => complete(request, toGenerateContent(request), false, signal),
    stream: (request, signal) => stream(request, () => toGenerateContent(request), false, signal),
    native: {
      wire: 'gemini',
      complete: (body, request, signal) => complete(request, forwarded(body, request), true, signal),
      stream: (body, request, signal) => stream(request, () => forwarded(body, request), true, signal),
      passThrough: (body, request, signal) => passThroughStream(request, () => forwarded(body, request), signal),
    },

    async embed(call, signal) {
      // Google takes texts only: token ids (OpenAI's clients send cl100k_base ids) are decoded back.
      const texts = call.inputs.map((input) => (typeof input === 'string' ? input : decode([...input])));
      const model = `models/${call.model}`;
      const request = (text: string): Record<string, unknown> => ({
        model,
        content: { parts: [{ text }] },
        ...(call.dimensions === undefined ? {} : { outputDimensionality: call.dimensions }),
      });
      const vectors: number[][] = [];
      let promptTokens = 0;
      let reported = true;
      for (let start = 0; start < texts.length; start += EMBED_BATCH) {
        const batch = texts.slice(start, start + EMBED_BATCH);
        const single = texts.length === 1;
        const answer = (await json(
          single
            ? await post(call.model, 'embedContent', request(batch[0] ?? ''), signal)
            : await post(call.model, 'batchEmbedContents', { requests: batch.map(request) }, signal),
          signal,
        )) as { embedding?: unknown; embeddings?: unknown; usageMetadata?: { promptTokenCount?: unknown } } | null;
        const got = single ? [answer?.embedding] : Array.isArray(answer?.embeddings) ? answer.embeddings : [];
        const batchVectors = got.map(vectorOf);
        if (batchVectors.length !== batch.length || batchVectors.some((v) => v === undefined))
          throw garbageError('body is not one embedding per input', host);
        vectors.push(...(batchVectors as number[][]));
        const tokens = answer?.usageMetadata?.promptTokenCount;
        if (typeof tokens === 'number') promptTokens += tokens;
        else reported = false;
      }
      // Google's embedding answers carry no token count: svc counts with cl100k_base.
      if (!reported) return { vectors, promptTokens: await countInputsOffThread(call.inputs), estimated: true };
      return { vectors, promptTokens };
    },
  };
}
