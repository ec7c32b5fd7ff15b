import type { Dispatcher } from 'undici';
import { requestUpstream } from '../../../net/request-again';
import { readSnippet } from '../upstream-http';
import { countInputsOffThread, type EmbeddingProvider } from '../embeddings';
import { garbageError, statusError, transportError, type UpstreamIdentity } from './errors';
import type { OpenAiProviderOptions } from './provider';

function isVector(value: unknown): value is number[] {
  return Array.isArray(value) && value.length > 0 && value.every((v) => typeof v === 'number' && Number.isFinite(v));
}

/** The vectors of an OpenAI `CreateEmbeddingResponse`, by `index`; undefined when it is not one. */
function readVectors(json: unknown, count: number): number[][] | undefined {
  const data = (json as { data?: unknown } | null)?.data;
  if (!Array.isArray(data) || data.length !== count) return undefined;
  const vectors = new Array<number[] | undefined>(count);
  for (const [position, item] of data.entries()) {
    const entry = item as { index?: unknown; embedding?: unknown } | null;
    const index = typeof entry?.index === 'number' ? entry.index : position;
    if (!Number.isInteger(index) || index < 0 || index >= count || vectors[index] !== undefined) return undefined;
    if (!isVector(entry?.embedding)) return undefined;
    vectors[index] = entry.embedding;
  }
  return vectors as number[][];
}

function promptTokensOf(json: unknown): number | undefined {
  const usage = (json as { usage?: { prompt_tokens?: unknown } } | null)?.usage;
  const tokens = usage?.prompt_tokens;
  return typeof tokens === 'number' && Number.isInteger(tokens) && tokens >= 0 ? tokens : undefined;
}

/**
 * An OpenAI-compatible `/embeddings` upstream. Vectors are always asked for as floats (svc
 * encodes base64 itself for a client that wants it), so every upstream answers the same way.
 */
export function createOpenAiEmbeddingProvider(options: OpenAiProviderOptions): EmbeddingProvider {
  const url = new URL(options.baseUrl.replace(/\/+$/, '') + '/embeddings');
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

  return {
    name: 'openai',
    async embed(call, signal) {
      const body: Record<string, unknown> = { model: call.model, input: call.inputs, encoding_format: 'float' };
      if (call.dimensions !== undefined) body['dimensions'] = call.dimensions;
      if (call.user !== undefined && call.user !== '') body['user'] = call.user;
      let response: Dispatcher.ResponseData;
      try {
        response = await requestUpstream(
          options.dispatcher,
          {
            origin: url.origin,
            path: url.pathname + url.search,
            method: 'POST',
            headers,
            body: JSON.stringify(body),
            headersTimeout: options.timeoutMs,
            bodyTimeout: options.timeoutMs,
          },
          signal,
        );
      } catch (error) {
        throw transportError(error, signal, url.host);
      }
      if (response.statusCode < 200 || response.statusCode >= 300)
        throw statusError(response.statusCode, await readSnippet(response.body), who, response.headers);
      let json: unknown;
      try {
        json = await response.body.json();
      } catch (error) {
        throw signal.aborted || (error as { code?: string }).code !== undefined
          ? transportError(error, signal, url.host)
          : garbageError('body is not JSON', url.host, error);
      }
      const vectors = readVectors(json, call.inputs.length);
      if (vectors === undefined) throw garbageError('body is not an embedding list of one vector per input', url.host);
      const reported = promptTokensOf(json);
      if (reported !== undefined) return { vectors, promptTokens: reported };
      return { vectors, promptTokens: await countInputsOffThread(call.inputs), estimated: true };
    },
  };
}
