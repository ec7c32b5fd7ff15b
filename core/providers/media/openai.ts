import type * as Undici from 'undici';
import type { Dispatcher, FormData } from 'undici';
import { requestUpstream } from '../../net/request-again';
import { readSnippet } from '../llm/upstream-http';
import { parseSse } from '../llm/openai/sse';
import { isSvcError } from '../../errors';
import { garbageError, statusError, transportError, type UpstreamIdentity } from '../llm/openai/errors';
import type { OpenAiProviderOptions } from '../llm/openai/provider';
import type { MediaProvider, MediaTokens, RerankResult } from './types';
import { uploadBlob } from './upload';

/*
 * An OpenAI-compatible media upstream (SPEC §14): `/images/generations`, `/images/edits`,
 * `/audio/speech`, `/audio/transcriptions`, `/audio/translations`, `/moderations` and `/rerank`
 * at `base_url`, as api.openai.com serves them (and the compatible hosts: LiteLLM, vLLM, Jina).
 * An error status maps as for chat: a refusal (400, including a content-policy refusal) keeps the
 * upstream's message and code.
 */

type Obj = Record<string, unknown>;
type Body = string | FormData;

/**
 * A multipart body. undici's FormData comes with the package's index (fetch, WebSocket, the cache:
 * core/net/undici.ts keeps those out of a plain start), so it is required on the first upload only.
 */
function newForm(): FormData {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { FormData: Form } = require('undici') as typeof Undici;
  return new Form();
}

function isObj(value: unknown): value is Obj {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function count(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : undefined;
}

/** `usage.input_tokens` / `output_tokens` of an images, speech or transcription answer. */
export function tokensOf(usage: unknown): MediaTokens | undefined {
  if (!isObj(usage)) return undefined;
  const input = count(usage['input_tokens']);
  const output = count(usage['output_tokens']);
  if (input === undefined && output === undefined) return undefined;
  return { inputTokens: input ?? 0, outputTokens: output ?? 0 };
}

/**
 * An images answer's usage (OpenAI's `ImagesUsage`): its tokens, and the input images' tokens
 * among the input (`input_tokens_details.image_tokens`), priced at `image_input_per_1m`.
 */
export function imageTokensOf(usage: unknown): MediaTokens | undefined {
  const tokens = tokensOf(usage);
  if (tokens === undefined || !isObj(usage)) return tokens;
  const details = usage['input_tokens_details'];
  const images = isObj(details) ? count(details['image_tokens']) : undefined;
  return images === undefined || images === 0
    ? tokens
    : { ...tokens, imageInputTokens: Math.min(images, tokens.inputTokens) };
}


/** A form's text fields: strings as they are, other values as JSON (OpenAI's SDKs do the same). */
function appendFields(form: FormData, params: Obj): void {
  for (const [name, value] of Object.entries(params)) {
    if (value === undefined || value === null) continue;
    if (Array.isArray(value)) for (const item of value) form.append(`${name}[]`, String(item));
    else form.append(name, typeof value === 'string' ? value : JSON.stringify(value));
  }
}

export interface MediaEndpointOptions extends OpenAiProviderOptions {
  /** The provider's name on usage records ("openai", "cohere"). */
  readonly name?: string;
}

/** POSTs to `path` under the upstream's base URL; a 2xx response, else the mapped error. */
export function createMediaPoster(options: MediaEndpointOptions) {
  const base = options.baseUrl.replace(/\/+$/, '');
  const host = new URL(base).host;
  const who: UpstreamIdentity = {
    host,
    apiKey: options.apiKey,
    upstreamModel: options.upstreamModel,
    modelId: options.modelId,
  };
  const auth: Record<string, string> =
    options.apiKey !== undefined && options.apiKey !== '' ? { authorization: `Bearer ${options.apiKey}` } : {};

  async function post(path: string, body: Body, signal: AbortSignal, accept = 'application/json') {
    const url = new URL(base + path);
    const headers: Record<string, string> = { ...options.headers, ...auth, accept };
    if (typeof body === 'string') headers['content-type'] = 'application/json';
    let response: Dispatcher.ResponseData;
    try {
      response = await requestUpstream(
        options.dispatcher,
        {
          origin: url.origin,
          path: url.pathname + url.search,
          method: 'POST',
          headers,
          body,
          headersTimeout: options.timeoutMs,
          bodyTimeout: options.timeoutMs,
        },
        signal,
      );
    } catch (error) {
      throw transportError(error, signal, host);
    }
    if (response.statusCode < 200 || response.statusCode >= 300)
      throw statusError(response.statusCode, await readSnippet(response.body), who, response.headers);
    return response;
  }

  async function json(path: string, body: Body, signal: AbortSignal): Promise<Obj> {
    const response = await post(path, body, signal);
    let value: unknown;
    try {
      value = await response.body.json();
    } catch (error) {
      throw signal.aborted || (error as { code?: string }).code !== undefined
        ? transportError(error, signal, host)
        : garbageError('body is not JSON', host, error);
    }
    if (!isObj(value)) throw garbageError('body is not a JSON object', host);
    return value;
  }

  async function bytes(path: string, body: Body, signal: AbortSignal) {
    const response = await post(path, body, signal, '*/*');
    try {
      const data = new Uint8Array(await response.body.arrayBuffer());
      const type = response.headers['content-type'];
      return { data, contentType: typeof type === 'string' ? type : 'application/octet-stream' };
    } catch (error) {
      throw transportError(error, signal, host);
    }
  }

  return { post, json, bytes, host };
}

/** Cohere v2's rerank answer (`results`, `meta.billed_units.search_units`), shared by the hosts. */
export function readRerank(value: Obj, documents: number, host: string): RerankResult {
  const results = value['results'];
  if (!Array.isArray(results)) throw garbageError('rerank answer has no results', host);
  const read = results.map((item: unknown) => {
    const entry = isObj(item) ? item : {};
    const index = entry['index'];
    const score = entry['relevance_score'];
    if (typeof index !== 'number' || !Number.isInteger(index) || index < 0 || index >= documents)
      throw garbageError('rerank result index out of range', host);
    if (typeof score !== 'number') throw garbageError('rerank result without relevance_score', host);
    return { index, relevance_score: score };
  });
  const meta = value['meta'];
  const billed = isObj(meta) ? meta['billed_units'] : undefined;
  const units = isObj(billed) ? count(billed['search_units']) : undefined;
  const id = value['id'];
  return {
    results: read,
    ...(units === undefined ? {} : { searchUnits: units }),
    ...(typeof id === 'string' ? { id } : {}),
  };
}

/** The media routes of an OpenAI-compatible upstream. */
export function createOpenAiMediaProvider(options: MediaEndpointOptions): MediaProvider {
  const http = createMediaPoster(options);
  return {
    name: options.name ?? 'openai',
    async image(call, signal) {
      let answer: Obj;
      if (call.images === undefined) {
        answer = await http.json(
          '/images/generations',
          JSON.stringify({ ...call.params, model: call.model, prompt: call.prompt, n: call.n }),
          signal,
        );
      } else {
        const form = newForm();
        appendFields(form, { ...call.params, model: call.model, prompt: call.prompt, n: call.n });
        for (const image of call.images) form.append('image[]', await uploadBlob(image), image.filename || 'image.png');
        if (call.mask !== undefined) form.append('mask', await uploadBlob(call.mask), call.mask.filename || 'mask.png');
        answer = await http.json('/images/edits', form, signal);
      }
      const data = answer['data'];
      const { size, quality, usage, ...rest } = answer;
      const tokens = imageTokensOf(usage);
      return {
        data: Array.isArray(data) ? data.filter(isObj) : [],
        ...(typeof size === 'string' ? { size } : {}),
        ...(typeof quality === 'string' ? { quality } : {}),
        extra: {
          ...rest,
          ...(usage === undefined ? {} : { usage }),
          ...(size === undefined ? {} : { size }),
          ...(quality === undefined ? {} : { quality }),
        },
        ...(tokens === undefined ? {} : { tokens }),
      };
    },
    async speech(call, signal) {
      const { data, contentType } = await http.bytes(
        '/audio/speech',
        JSON.stringify({ ...call.params, model: call.model, input: call.input }),
        signal,
      );
      return { audio: data, contentType };
    },
    async transcribe(call, signal) {
      const form = newForm();
      appendFields(form, { ...call.params, model: call.model, response_format: call.responseFormat });
      form.append('file', await uploadBlob(call.file), call.file.filename || 'audio');
      const json = await http.json(call.translate ? '/audio/translations' : '/audio/transcriptions', form, signal);
      if (typeof json['text'] !== 'string') throw garbageError('transcription answer has no text', http.host);
      const usage = json['usage'];
      const duration = json['duration'];
      // `usage: { type: "duration", seconds }` (json), or the verbose answer's `duration`.
      const seconds =
        isObj(usage) && usage['type'] === 'duration' && typeof usage['seconds'] === 'number'
          ? usage['seconds']
          : typeof duration === 'number' && Number.isFinite(duration) && duration >= 0
            ? duration
            : undefined;
      const tokens = isObj(usage) && usage['type'] === 'tokens' ? tokensOf(usage) : undefined;
      return { json, ...(seconds === undefined ? {} : { seconds }), ...(tokens === undefined ? {} : { tokens }) };
    },
    async transcribeStream(call, signal, onDelta) {
      const form = newForm();
      appendFields(form, { ...call.params, model: call.model, response_format: 'json', stream: 'true' });
      form.append('file', await uploadBlob(call.file), call.file.filename || 'audio');
      const response = await http.post('/audio/transcriptions', form, signal, 'text/event-stream');
      let done: Obj | undefined;
      try {
        for await (const data of parseSse(response.body)) {
          let event: unknown;
          try {
            event = JSON.parse(data);
          } catch (error) {
            throw garbageError('transcription stream event is not JSON', http.host, error);
          }
          if (!isObj(event)) continue;
          if (event['type'] === 'transcript.text.delta' && typeof event['delta'] === 'string') onDelta(event);
          else if (event['type'] === 'transcript.text.done' && typeof event['text'] === 'string') done = event;
          else if (event['type'] === 'error' || event['error'] !== undefined)
            throw garbageError(`transcription stream failed: ${JSON.stringify(event).slice(0, 200)}`, http.host);
        }
      } catch (error) {
        if (isSvcError(error)) throw error;
        throw transportError(error, signal, http.host);
      }
      if (done === undefined) throw garbageError('transcription stream ended without transcript.text.done', http.host);
      const { type: _type, ...json } = done;
      const usage = json['usage'];
      const tokens = isObj(usage) && usage['type'] === 'tokens' ? tokensOf(usage) : undefined;
      const seconds =
        isObj(usage) && usage['type'] === 'duration' && typeof usage['seconds'] === 'number' ? usage['seconds'] : undefined;
      return { json, ...(seconds === undefined ? {} : { seconds }), ...(tokens === undefined ? {} : { tokens }) };
    },
    async moderate(call, signal) {
      const json = await http.json('/moderations', JSON.stringify({ model: call.model, input: call.input }), signal);
      if (!Array.isArray(json['results'])) throw garbageError('moderation answer has no results', http.host);
      return { json };
    },
    async rerank(call, signal) {
      const body = {
        ...call.params,
        model: call.model,
        query: call.query,
        documents: call.documents,
        ...(call.topN === undefined ? {} : { top_n: call.topN }),
      };
      const json = await http.json('/rerank', JSON.stringify(body), signal);
      return readRerank(json, call.documents.length, http.host);
    },
  };
}

/** Cohere's v2 rerank (`POST {base_url}/v2/rerank`), the wire the rerank hosts share. */
export function createCohereMediaProvider(options: MediaEndpointOptions): MediaProvider {
  const http = createMediaPoster(options);
  return {
    name: 'cohere',
    async rerank(call, signal) {
      const body = {
        ...call.params,
        model: call.model,
        query: call.query,
        documents: call.documents,
        ...(call.topN === undefined ? {} : { top_n: call.topN }),
      };
      const json = await http.json('/v2/rerank', JSON.stringify(body), signal);
      return readRerank(json, call.documents.length, http.host);
    },
  };
}
