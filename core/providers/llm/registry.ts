import type { ModelConfig } from '../../config/types';
import { createAnthropicProvider } from './anthropic/provider';
import { createGeminiProvider } from './gemini/provider';
import { createOpenAiResponsesProvider } from './openai-responses/provider';
import { createOpenAiProvider } from './openai/provider';
import type { UpstreamPools } from './pools';
import { createSandboxProvider } from './sandbox/provider';
import type { ChatProvider } from './types';

/** The provider of each configured model, built once at start. */
export function createChatProviders(
  models: ReadonlyMap<string, ModelConfig>,
  pools: UpstreamPools,
): ReadonlyMap<string, ChatProvider> {
  const providers = new Map<string, ChatProvider>();
  const sandbox = createSandboxProvider();
  for (const model of models.values()) {
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
      model.provider === 'anthropic'
        ? createAnthropicProvider({ ...options, maxOutputTokens: model.maxOutputTokens })
        : model.provider === 'openai-responses'
          ? createOpenAiResponsesProvider(options)
          : model.provider === 'gemini'
            ? createGeminiProvider(options)
            : createOpenAiProvider(options),
    );
  }
  return providers;
}
