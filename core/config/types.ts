/** Token tariff: credits per one million tokens. */
export interface TokenPrice {
  readonly inputPer1m: bigint;
  readonly outputPer1m: bigint;
}

/** A tool price: flat credits per successful call, or a token tariff with a cap for the hold. */
export type ToolPrice =
  | { readonly kind: 'flat'; readonly credits: bigint }
  | { readonly kind: 'tokens'; readonly tariff: TokenPrice; readonly cap: bigint };

/** A chat model (chat completions, Responses, Anthropic, Gemini) or an embedding model. */
export type ModelKind = 'chat' | 'embedding';

/** The names a chat-completions upstream may know the output-token limit by. */
export type OutputLimitField = 'max_tokens' | 'max_completion_tokens';

export interface ModelConfig {
  /** Public id, e.g. "svc-pro". */
  readonly id: string;
  /**
   * "openai" (any OpenAI-compatible upstream: chat completions, or `/embeddings` for an embedding
   * model), "openai-responses" (the Responses API), "anthropic" (the Messages API), "gemini"
   * (Google's generateContent / embedContent) or "sandbox".
   */
  readonly provider: 'openai' | 'openai-responses' | 'anthropic' | 'gemini' | 'sandbox';
  /** What the model serves (`kind`); absent: `chat`. */
  readonly kind?: ModelKind;
  /**
   * Embedding models only: the vector lengths the model offers (`dimensions`, one integer or a
   * list), the first being what a request without `dimensions` gets.
   */
  readonly dimensions?: readonly number[];
  readonly baseUrl: string;
  readonly apiKey: string | undefined;
  readonly upstreamModel: string;
  readonly price: TokenPrice;
  readonly contextWindow: number;
  readonly maxOutputTokens: number;
  /**
   * The field the output limit goes upstream in (`max_tokens_field`); absent: the field the
   * client used (`max_tokens` for a Responses request's `max_output_tokens`).
   */
  readonly maxTokensField?: OutputLimitField;
  /** Upstream timeout in milliseconds (default 120000). */
  readonly timeoutMs: number;
  /** Chat parameters beyond OpenAI's documented ones passed to this upstream (`extra_params`; default none). */
  readonly extraParams: ReadonlySet<string>;
}

export interface ToolConfig {
  readonly name: 'web_search' | 'maps_search_places' | 'shopping_search';
  readonly provider: string;
  readonly baseUrl: string;
  readonly apiKey: string | undefined;
  /** Provider model (perplexity). */
  readonly model: string | undefined;
  readonly price: ToolPrice;
  /** Provider timeout in milliseconds (default 15000). */
  readonly timeoutMs: number;
}

export interface LimitsConfig {
  readonly requestsPerMinute: number;
  /** Model tokens (input + output) per minute per API key; absent: no token limit. */
  readonly tokensPerMinute?: number;
  readonly maxBodyBytes: number;
  /** How long an unsettled hold lives before the reaper releases it (default 600). */
  readonly holdTtlSeconds: number;
  /** How long a streaming client may leave its buffer full before the stream is cut (default 60). */
  readonly streamStallSeconds: number;
  /** With SVC_REDIS_URL: admit (`open`, the default) or refuse (`closed`) requests while Redis is down. */
  readonly redisFailure?: 'open' | 'closed';
}

/** The validated configuration file (or the built-in default when there is none). */
export interface SvcConfig {
  readonly models: ReadonlyMap<string, ModelConfig>;
  readonly tools: ReadonlyMap<string, ToolConfig>;
  readonly limits: LimitsConfig;
  /** Where it came from: a file path or "built-in". */
  readonly source: string;
}
