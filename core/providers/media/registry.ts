import type { ModelConfig, UpstreamConfig } from '../../config/types';
import type { UpstreamHttp } from '../http';
import { upstreamOptions } from '../llm/registry';
import { createGeminiMediaProvider } from './gemini';
import { createCohereMediaProvider, createOpenAiMediaProvider } from './openai';
import { createSandboxMediaProvider } from './sandbox';
import type { MediaProvider } from './types';

/**
 * The provider of one upstream of a media model (SPEC §14), by its wire kind, asking for that
 * upstream's own `upstream_model`. The loader admits only the providers that serve the model's
 * kind (core/config/providers.ts `MEDIA_PROVIDERS`). Routing over upstreams is `core/upstreams/`.
 */
export function createMediaUpstream(
  model: Pick<ModelConfig, 'id'>,
  upstream: UpstreamConfig,
  http: UpstreamHttp,
): MediaProvider {
  if (upstream.provider === 'sandbox') return createSandboxMediaProvider();
  const options = upstreamOptions(model, upstream, http);
  if (upstream.provider === 'gemini') return createGeminiMediaProvider(options);
  return upstream.provider === 'cohere' ? createCohereMediaProvider(options) : createOpenAiMediaProvider(options);
}
