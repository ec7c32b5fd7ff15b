import type { LimitsConfig, ModelConfig, ToolConfig } from './types';

export const DEFAULT_LIMITS: LimitsConfig = {
  requestsPerMinute: 600,
  maxBodyBytes: 1_048_576,
  holdTtlSeconds: 600,
  streamStallSeconds: 60,
};

export const DEFAULT_MODEL_TIMEOUT_MS = 120_000;
export const DEFAULT_TOOL_TIMEOUT_MS = 15_000;
export const DEFAULT_CONTEXT_WINDOW = 128_000;
export const DEFAULT_MAX_OUTPUT_TOKENS = 8_192;
/** An embedding model's tokens per input when `context_window` is not set (OpenAI's limit). */
export const DEFAULT_EMBEDDING_INPUT_TOKENS = 8_192;

/**
 * The hold of a token-billed tool without a configured `cap`: the price of 20,000 input plus
 * 4,000 output tokens, far above what one search uses, so the hold never refuses a call that
 * could have been paid.
 */
export function defaultToolCap(inputPer1m: bigint, outputPer1m: bigint): bigint {
  const micro = 20_000n * inputPer1m + 4_000n * outputPer1m;
  const cap = (micro + 999_999n) / 1_000_000n;
  return cap < 1n ? 1n : cap;
}

/**
 * The built-in models on the offline sandbox provider: `svc-pro` (chat, at the SPEC's example
 * tariff) and `svc-embed` (embeddings: deterministic vectors of 768 or 256 values, at 20,000
 * credits per 1M input tokens).
 */
export function builtInModels(): Map<string, ModelConfig> {
  const model: ModelConfig = {
    id: 'svc-pro',
    provider: 'sandbox',
    baseUrl: '',
    apiKey: undefined,
    upstreamModel: 'sandbox',
    price: { inputPer1m: 150_000n, outputPer1m: 600_000n },
    contextWindow: DEFAULT_CONTEXT_WINDOW,
    maxOutputTokens: DEFAULT_MAX_OUTPUT_TOKENS,
    timeoutMs: DEFAULT_MODEL_TIMEOUT_MS,
    extraParams: new Set(),
  };
  const embed: ModelConfig = {
    id: 'svc-embed',
    provider: 'sandbox',
    kind: 'embedding',
    dimensions: [768, 256],
    baseUrl: '',
    apiKey: undefined,
    upstreamModel: 'sandbox-embed',
    price: { inputPer1m: 20_000n, outputPer1m: 0n },
    contextWindow: DEFAULT_EMBEDDING_INPUT_TOKENS,
    maxOutputTokens: 1,
    timeoutMs: DEFAULT_MODEL_TIMEOUT_MS,
    extraParams: new Set(),
  };
  return new Map([
    [model.id, model],
    [embed.id, embed],
  ]);
}

function sandboxTool(name: ToolConfig['name'], credits: bigint): ToolConfig {
  return {
    name,
    provider: 'sandbox',
    baseUrl: '',
    apiKey: undefined,
    model: undefined,
    price: { kind: 'flat', credits },
    timeoutMs: DEFAULT_TOOL_TIMEOUT_MS,
  };
}

/**
 * The three tools on the sandbox providers. The sandbox web search runs no model, so it has no
 * tokens to bill: SPEC §6 then asks for a flat price, set at 200 credits (between a shopping
 * search and a maps search).
 */
export function builtInTools(): Map<string, ToolConfig> {
  return new Map(
    [
      sandboxTool('web_search', 200n),
      sandboxTool('maps_search_places', 460n),
      sandboxTool('shopping_search', 230n),
    ].map((tool) => [tool.name, tool] as const),
  );
}
