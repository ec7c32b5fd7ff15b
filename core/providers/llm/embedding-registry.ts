import type { ModelConfig, UpstreamConfig } from '../../config/types';
import type { UpstreamHttp } from '../http';
import type { EmbeddingProvider } from './embeddings';
import { createGeminiProvider } from './gemini/provider';
import { createOpenAiEmbeddingProvider } from './openai/embeddings';
import { createSandboxEmbeddingProvider } from './sandbox/embeddings';
import { upstreamOptions } from './registry';

/**
 * The provider of one upstream of an embedding model (`kind: embedding`), by its wire kind; it
 * asks for that upstream's own `upstream_model` whatever the call names. Providers know nothing
 * of fallback: routing over a model's upstreams is `core/upstreams/`, as for chat.
 */
export function createEmbeddingUpstream(
  model: Pick<ModelConfig, 'id'>,
  upstream: UpstreamConfig,
  http: UpstreamHttp,
): EmbeddingProvider {
  if (upstream.provider === 'sandbox') return createSandboxEmbeddingProvider();
  const options = upstreamOptions(model, upstream, http);
  // The loader admits only openai, gemini and sandbox upstreams for an embedding model.
  const inner = upstream.provider === 'gemini' ? createGeminiProvider(options) : createOpenAiEmbeddingProvider(options);
  return { name: inner.name, embed: (call, signal) => inner.embed({ ...call, model: upstream.upstreamModel }, signal) };
}
