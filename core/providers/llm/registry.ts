import type { ModelConfig, UpstreamConfig } from '../../config/types';
import { createOpenAiProvider } from './openai/provider';
import type { UpstreamPools } from './pools';
import { createSandboxProvider } from './sandbox/provider';
import type { ChatProvider } from './types';

/**
 * The provider of one upstream, by its wire kind. Providers know nothing of fallback: routing
 * over a model's upstreams is `core/upstreams/`.
 */
export function createUpstreamProvider(
  model: Pick<ModelConfig, 'id'>,
  upstream: UpstreamConfig,
  pools: UpstreamPools,
): ChatProvider {
  switch (upstream.provider) {
    case 'sandbox':
      return createSandboxProvider();
    case 'openai':
      return createOpenAiProvider({
        baseUrl: upstream.baseUrl,
        apiKey: upstream.apiKey,
        timeoutMs: upstream.timeoutMs,
        dispatcher: pools.forOrigin(new URL(upstream.baseUrl).origin),
        modelId: model.id,
        upstreamModel: upstream.upstreamModel,
        headers: upstream.headers,
        ...(upstream.maxTokensField === undefined ? {} : { maxTokensField: upstream.maxTokensField }),
      });
    // Written alongside this registry (issue 15 and 24); wired here once they are merged.
    case 'openai-responses':
    case 'anthropic':
    case 'gemini':
      throw new Error(
        `config models.${model.id}: provider ${upstream.provider} (upstream ${upstream.name}) is not available in this build`,
      );
  }
}
