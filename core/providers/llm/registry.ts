import type { ModelConfig, UpstreamConfig } from '../../config/types';
import type { UpstreamHttp } from '../http';
import { createAnthropicProvider } from './anthropic/provider';
import { createGeminiProvider } from './gemini/provider';
import { createOpenAiResponsesProvider } from './openai-responses/provider';
import { createOpenAiProvider } from './openai/provider';
import { createSandboxProvider } from './sandbox/provider';
import type { ChatProvider } from './types';

/** What every remote provider of one upstream is built from (chat and embeddings alike). */
export function upstreamOptions(model: Pick<ModelConfig, 'id'>, upstream: UpstreamConfig, http: UpstreamHttp) {
  return {
    baseUrl: upstream.baseUrl,
    apiKey: upstream.apiKey,
    timeoutMs: upstream.timeoutMs,
    dispatcher: http.forUpstream({ name: upstream.name, provider: upstream.provider }),
    modelId: model.id,
    upstreamModel: upstream.upstreamModel,
    headers: upstream.headers,
  };
}

/**
 * The provider of one upstream, by its wire kind. Providers know nothing of fallback: routing
 * over a model's upstreams is `core/upstreams/`.
 */
export function createUpstreamProvider(
  model: Pick<ModelConfig, 'id' | 'maxOutputTokens' | 'cache'>,
  upstream: UpstreamConfig,
  http: UpstreamHttp,
): ChatProvider {
  if (upstream.provider === 'sandbox') return createSandboxProvider();
  const options = upstreamOptions(model, upstream, http);
  switch (upstream.provider) {
    case 'openai':
      return createOpenAiProvider({
        ...options,
        ...(upstream.maxTokensField === undefined ? {} : { maxTokensField: upstream.maxTokensField }),
        developerRole: upstream.developerRole === true,
      });
    case 'anthropic':
      return createAnthropicProvider({
        ...options,
        maxOutputTokens: model.maxOutputTokens,
        // svc's cache breakpoints on translated requests (SPEC §13; `cache.breakpoints`, default auto).
        breakpoints: (model.cache?.breakpoints ?? 'auto') === 'auto',
      });
    case 'openai-responses':
      return createOpenAiResponsesProvider({ ...options, compaction: upstream.nativeCompaction === true });
    case 'gemini':
      return createGeminiProvider(options);
    case 'cohere':
      // The loader admits cohere for rerank models only, which never reach the chat providers.
      throw new Error(`cohere serves rerank only (model ${model.id})`);
  }
}
