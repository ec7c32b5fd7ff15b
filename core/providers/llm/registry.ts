import type { ModelConfig, UpstreamConfig } from '../../config/types';
import { createAnthropicProvider } from './anthropic/provider';
import { createOpenAiResponsesProvider } from './openai-responses/provider';
import { createOpenAiProvider } from './openai/provider';
import type { UpstreamPools } from './pools';
import { createSandboxProvider } from './sandbox/provider';
import type { ChatProvider } from './types';

/**
 * The provider of one upstream, by its wire kind. Providers know nothing of fallback: routing
 * over a model's upstreams is `core/upstreams/`.
 */
export function createUpstreamProvider(
  model: Pick<ModelConfig, 'id' | 'maxOutputTokens'>,
  upstream: UpstreamConfig,
  pools: UpstreamPools,
): ChatProvider {
  if (upstream.provider === 'sandbox') return createSandboxProvider();
  const options = {
    baseUrl: upstream.baseUrl,
    apiKey: upstream.apiKey,
    timeoutMs: upstream.timeoutMs,
    dispatcher: pools.forOrigin(new URL(upstream.baseUrl).origin),
    modelId: model.id,
    upstreamModel: upstream.upstreamModel,
    headers: upstream.headers,
  };
  switch (upstream.provider) {
    case 'openai':
      return createOpenAiProvider({
        ...options,
        ...(upstream.maxTokensField === undefined ? {} : { maxTokensField: upstream.maxTokensField }),
      });
    case 'anthropic':
      return createAnthropicProvider({ ...options, maxOutputTokens: model.maxOutputTokens });
    case 'openai-responses':
      return createOpenAiResponsesProvider(options);
    // Written alongside this registry (issue 24); wired here once it is merged.
    case 'gemini':
      throw new Error(
        `config models.${model.id}: provider ${upstream.provider} (upstream ${upstream.name}) is not available in this build`,
      );
  }
}
