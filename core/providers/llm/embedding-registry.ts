import type { ModelConfig } from '../../config/types';
import type { UpstreamHttp } from '../http';
import type { EmbeddingProvider } from './embeddings';
import { createGeminiProvider } from './gemini/provider';
import { createOpenAiEmbeddingProvider } from './openai/embeddings';
import { createSandboxEmbeddingProvider } from './sandbox/embeddings';

/** The provider of each configured embedding model (`kind: embedding`), built once at start. */
export function createEmbeddingProviders(
  models: ReadonlyMap<string, ModelConfig>,
  http: UpstreamHttp,
): ReadonlyMap<string, EmbeddingProvider> {
  const providers = new Map<string, EmbeddingProvider>();
  const sandbox = createSandboxEmbeddingProvider();
  for (const model of models.values()) {
    if (model.kind !== 'embedding') continue;
    if (model.provider === 'sandbox') {
      providers.set(model.id, sandbox);
      continue;
    }
    // The provider serves the model's first upstream (the model-level fields repeat it).
    const upstream = model.upstreams[0];
    const options = {
      baseUrl: model.baseUrl,
      apiKey: model.apiKey,
      timeoutMs: model.timeoutMs,
      dispatcher: http.forUpstream({ name: upstream?.name ?? model.id, provider: model.provider }),
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
