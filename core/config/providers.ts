import type { ModelConfig, ModelKind, OutputLimitField, ToolConfig } from './types';

export type ModelProvider = ModelConfig['provider'];
export type ToolName = ToolConfig['name'];

export const MODEL_PROVIDERS: readonly ModelProvider[] = ['openai', 'openai-responses', 'anthropic', 'gemini', 'sandbox'];
/** The values of a model's `kind`. */
export const MODEL_KINDS: readonly ModelKind[] = ['chat', 'embedding'];
/** The values of a model's `max_tokens_field`. */
export const OUTPUT_LIMIT_FIELDS: readonly OutputLimitField[] = ['max_tokens', 'max_completion_tokens'];
export const TOOL_NAMES: readonly ToolName[] = ['web_search', 'maps_search_places', 'shopping_search'];

/** What the loader needs to know about one tool provider to validate its entry. */
export interface ToolProviderSpec {
  /** Used when the entry has no `base_url`; absent means `base_url` is required (self-hosted). */
  readonly defaultBaseUrl?: string;
  readonly needsApiKey: boolean;
  /** Providers that run a model (perplexity) take `model`; for the others it is an error. */
  readonly defaultModel?: string;
}

const sandbox: ToolProviderSpec = { defaultBaseUrl: '', needsApiKey: false };

/**
 * The providers each tool accepts (SPEC §4). A provider implementation added under
 * core/providers/ is registered here too, so that the loader rejects a name no code serves.
 */
export const TOOL_PROVIDERS: Readonly<Record<ToolName, Readonly<Record<string, ToolProviderSpec>>>> = {
  web_search: {
    sandbox,
    perplexity: { defaultBaseUrl: 'https://api.perplexity.ai', needsApiKey: true, defaultModel: 'sonar' },
    searxng: { needsApiKey: false },
  },
  maps_search_places: {
    sandbox,
    neshan: { defaultBaseUrl: 'https://api.neshan.org', needsApiKey: true },
    nominatim: { defaultBaseUrl: 'https://nominatim.openstreetmap.org', needsApiKey: false },
  },
  shopping_search: {
    sandbox,
    torob: { defaultBaseUrl: 'https://api.torob.com', needsApiKey: false },
    digikala: { defaultBaseUrl: 'https://api.digikala.com', needsApiKey: false },
  },
};
