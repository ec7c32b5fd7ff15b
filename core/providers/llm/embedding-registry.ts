import type { ModelConfig } from '../../config/types';
import type { EmbeddingProvider } from './embeddings';
import { createGeminiProvider } from './gemini/provider';
import { createOpenAiEmbeddingProvider } from './openai/embeddings';
import type { UpstreamPools } from './pools';
import { createSandboxEmbeddingProvider } from './sandbox/embeddings';

/** The provider of each configured embedding model (`kind: embedding`), built once at start. */
export function createEmbeddingProviders(
  models: ReadonlyMap<string, ModelConfig>,
  pools: UpstreamPools,
): ReadonlyMap<string, EmbeddingProvider> {
  const providers = new Map<string, EmbeddingProvider>();
  const sandbox = createSandboxEmbeddingProvider();
  for (const model of models.values()) {
    if (model.kind !== 'embedding') continue;
    if (model.provider === 'sandbox') {
      providers.set(model.id, sandbox);
      continue;
    }
    const options = {
      baseUrl: model.baseUrl,
      apiKey: model.apiKey,
      timeoutMs: model.timeoutMs,
      dispatcher: pools.forOrigin(new URL(model.baseUrl).origin),
      modelId: model.id,
      upstreamModel: model.upstreamModel,
    };
    providers.set(
      model.id,
      model.provider === 'gemini' ? createGeminiProvider(options) : createOpenAiEmbeddingProvider(options),
    );
  }
  return providers;
}
