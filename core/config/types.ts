import type { Decimal } from './decimal';
import type { ToolConfig } from '../tools/types';

/** Token tariff: credits per one million tokens. */
export interface TokenPrice {
  readonly inputPer1m: bigint;
  readonly outputPer1m: bigint;
  /** Cache reads (`cached_input_per_1m`); absent: `inputPer1m` (SPEC §6). */
  readonly cachedInputPer1m?: bigint;
  /** Five-minute cache writes, and OpenAI-family writes (`cache_write_per_1m`); absent: `inputPer1m` (SPEC §6). */
  readonly cacheWritePer1m?: bigint;
  /** One-hour cache writes (`cache_write_1h_per_1m`); absent: `cacheWritePer1m` (SPEC §13). */
  readonly cacheWrite1hPer1m?: bigint;
  /** A token-billed image model's input image tokens (`image_input_per_1m`); absent: `inputPer1m` (SPEC §14). */
  readonly imageInputPer1m?: bigint;
}

/** Dollars per one million units (`price_usd`, SPEC §15), exact decimals read from the file's text. */
export interface UsdPrice {
  readonly inputPer1m?: Decimal;
  readonly outputPer1m?: Decimal;
  readonly cachedInputPer1m?: Decimal;
  readonly cacheWritePer1m?: Decimal;
  readonly cacheWrite1hPer1m?: Decimal;
  readonly imageInputPer1m?: Decimal;
}

/**
 * A model priced from the dollar (SPEC §15): its dollar prices, its own margin if it has one, and
 * the keys its `price:` gives in credits (those win over the dollar ones).
 */
export interface DollarPricing {
  readonly usd: UsdPrice;
  readonly margin?: Decimal;
  readonly credits: Partial<TokenPrice>;
  /** A media model priced by its own unit (SPEC §14): per image, per 1M characters, per minute, per search. */
  readonly unit?: UnitDollars;
}

/**
 * A media model's unit prices from the dollar (`price_usd: { per_image: { "SIZE/QUALITY": USD } }`,
 * `{ per_minute: USD }`, …): each entry's credit price is ceil(usd × rate × (1 + margin)) per
 * image, per 1M characters, per minute or per search; an entry `price:` gives in credits wins.
 */
export interface UnitDollars {
  readonly form: 'per_image' | 'per_1m_characters' | 'per_minute' | 'per_search';
  /** Dollars by key: `SIZE/QUALITY` for per_image, else one entry under the form's own name. */
  readonly usd: ReadonlyMap<string, Decimal>;
  /** Credits `price:` gives under the same keys (they win over the dollar ones). */
  readonly credits: ReadonlyMap<string, bigint>;
}

/** `pricing:` (SPEC §15): the first rate (toman per US dollar) and the default margin. */
export interface PricingConfig {
  /** Absent: no rate in the file (a stored rate, if any, is used; `price_usd` then refused). */
  readonly rate?: bigint;
  /** Default 0. */
  readonly margin: Decimal;
}

// A tool's entry is declared beside the tools (core/tools/types.ts), which the loader reads.
export type { ToolConfig, ToolPrice } from '../tools/types';

/**
 * What a model serves: chat (chat completions, Responses, Anthropic, Gemini), embeddings, or one
 * of the media routes of SPEC §14 (images, speech, transcription, moderation, rerank).
 */
export type ModelKind = 'chat' | 'embedding' | MediaKind;

/** The model kinds of SPEC §14, each served by its own OpenAI routes. */
export type MediaKind = 'image' | 'speech' | 'transcription' | 'moderation' | 'rerank';

/**
 * How a media model (SPEC §14) is priced, beside or instead of its token tariff (`price`):
 * - `per_image`: credits per image by `"SIZE/QUALITY"` (e.g. `"1024x1024/high"`);
 * - `per_1m_characters`: credits per million input code points (speech);
 * - `per_minute`: credits per minute of audio, billed by the second rounded up (transcription);
 * - `per_search`: credits per search unit, a search being up to 100 documents (rerank);
 * - `free`: `price: 0` (a moderation model's default);
 * - `tokens`: the model's `price` token tariff.
 */
export type MediaPrice =
  | { readonly form: 'per_image'; readonly perImage: ReadonlyMap<string, bigint> }
  | { readonly form: 'per_1m_characters'; readonly credits: bigint }
  | { readonly form: 'per_minute'; readonly credits: bigint }
  | { readonly form: 'per_search'; readonly credits: bigint }
  | { readonly form: 'free' }
  | { readonly form: 'tokens' };

/** The names a chat-completions upstream may know the output-token limit by. */
export type OutputLimitField = 'max_tokens' | 'max_completion_tokens';

/** The upstream wire kinds a model may be served by (SPEC §4). */
export type UpstreamProvider = 'openai' | 'openai-responses' | 'anthropic' | 'gemini' | 'sandbox' | 'cohere';

/**
 * Who answers remote compaction (SPEC §7d) over an upstream: `svc` synthesises it with the model
 * (the default), `native` passes it to the upstream (an `openai-responses` server that has it).
 */
export type CompactionMode = 'svc' | 'native';

/** One upstream of a model (`upstreams[i]`, or the model itself in the single-upstream form). */
export interface UpstreamConfig {
  /**
   * Stable name for logs, traces and metrics, e.g. `svc-pro#1:openai@api.example.com`
   * (model id, 1-based position, provider, host). Never shown to users.
   */
  readonly name: string;
  readonly provider: UpstreamProvider;
  /** Empty for `sandbox`. */
  readonly baseUrl: string;
  readonly apiKey: string | undefined;
  readonly upstreamModel: string;
  /** Lower is tried first (default 1). */
  readonly priority: number;
  /** Share of the calls within its priority (> 0, default 1). */
  readonly weight: number;
  /** The output-limit field this upstream takes; absent: the one the client used. */
  readonly maxTokensField?: OutputLimitField;
  /** Extra request headers (values may come from `${ENV}`); default none. */
  readonly headers: Readonly<Record<string, string>>;
  /** Headers and body-inactivity timeout in milliseconds (default 120000). */
  readonly timeoutMs: number;
  readonly extraParams: ReadonlySet<string>;
  /** Calls in flight at most; a full upstream is skipped like an open breaker. Absent: no limit. */
  readonly maxConcurrency?: number;
  /**
   * Whether the upstream takes `developer` messages as such (`developer_role`; default true for
   * api.openai.com only): otherwise they go as `system`, which every compatible server takes.
   */
  readonly developerRole?: boolean;
  /**
   * `compaction: native`: the upstream (openai-responses only) takes a final `compaction_trigger`,
   * `POST /responses/compact` and its own `compaction` items, and makes its own summaries; absent
   * (`svc`, the default): svc synthesises compaction with the model (core/chat/responses/compaction.ts).
   */
  readonly nativeCompaction?: boolean;
}

/** Circuit breaker of each upstream of a model (`breaker`; SPEC §4 defaults 5 and 30). */
export interface BreakerConfig {
  /** Consecutive failures that open it. */
  readonly failures: number;
  /** Seconds it stays open before one half-open probe. */
  readonly openS: number;
}

export interface ModelConfig {
  /** Public id, e.g. "svc-pro". */
  readonly id: string;
  /** Other public names of the model (`aliases`), unique across models and ids. */
  readonly aliases: readonly string[];
  /** Where calls go, in configuration order (at least one); routing is `core/upstreams/`. */
  readonly upstreams: readonly UpstreamConfig[];
  readonly breaker: BreakerConfig;
  /*
   * provider, baseUrl, apiKey, upstreamModel, maxTokensField and timeoutMs repeat the first
   * upstream's, for code that predates routing (start-up log, sandbox label); routing and the
   * providers read `upstreams`.
   */
  /** The first upstream's provider. */
  readonly provider: UpstreamProvider;
  /** What the model serves (`kind`); absent: `chat`. */
  readonly kind?: ModelKind;
  /**
   * Embedding models only: the vector lengths the model offers (`dimensions`, one integer or a
   * list), the first being what a request without `dimensions` gets.
   */
  readonly dimensions?: readonly number[];
  /** Media models only (SPEC §14): the price form; `tokens` reads `price`. */
  readonly mediaPrice?: MediaPrice;
  readonly baseUrl: string;
  readonly apiKey: string | undefined;
  readonly upstreamModel: string;
  /**
   * Credits per 1M tokens. For a model priced from the dollar, the price at the file's rate and
   * margin; what a call pays is resolved at its admission from the rate in force (`dollar`).
   */
  readonly price: TokenPrice;
  /** Present when the model has `price_usd` (SPEC §15). */
  readonly dollar?: DollarPricing;
  /** The rate and margin `price` was resolved at, for a dollar-priced model priced at admission. */
  readonly pricedAt?: { readonly rate: bigint; readonly margin: Decimal };
  readonly contextWindow: number;
  readonly maxOutputTokens: number;
  /** The first upstream's `max_tokens_field` (each upstream's provider applies its own). */
  readonly maxTokensField?: OutputLimitField;
  /** The first upstream's timeout in milliseconds (default 120000). */
  readonly timeoutMs: number;
  /**
   * Chat parameters beyond OpenAI's documented ones a client may send (`extra_params`; default
   * none): the union over the upstreams, each of which receives them.
   */
  readonly extraParams: ReadonlySet<string>;
  /** `cache:` how svc helps the upstream's prompt cache (SPEC §13); absent: the defaults. */
  readonly cache?: ModelCacheConfig;
}

/**
 * `cache:` of a model (SPEC §13). `key`: the `prompt_cache_key` svc sends an OpenAI-family
 * upstream when the client sends none (`account`, the default: derived from the account;
 * `session`: the account's plus the client's session id; `off`: none). `breakpoints`: whether a
 * request translated onto an `anthropic` upstream from a wire without `cache_control` gets svc's
 * breakpoints (`auto`, the default) or none (`off`).
 */
export interface ModelCacheConfig {
  readonly key: 'account' | 'session' | 'off';
  readonly breakpoints: 'auto' | 'off';
}

/** `anthropic:`, settings of the Anthropic wire (SPEC §13). */
export interface AnthropicConfig {
  /**
   * `strip_billing_header` (default true): a system text block that begins with
   * `x-anthropic-billing-header:` (Claude Code's, which changes per session or per request) is
   * removed before every upstream, so that the prompt's prefix stays cacheable.
   */
  readonly stripBillingHeader: boolean;
}

export interface LimitsConfig {
  readonly requestsPerMinute: number;
  /** Model tokens (input + output) per minute per API key; absent: no token limit. */
  readonly tokensPerMinute?: number;
  readonly maxBodyBytes: number;
  /** Largest multipart upload (images/edits, audio), in bytes (`max_upload_bytes`, default 25 MiB). */
  readonly maxUploadBytes?: number;
  /** Longest audio a transcription takes, in seconds (`max_audio_seconds`, default 1800). */
  readonly maxAudioSeconds?: number;
  /**
   * The free token-counting calls (count_tokens, countTokens, input_tokens) per API key and
   * minute, apart from requestsPerMinute; absent: DEFAULT_COUNT_REQUESTS_PER_MINUTE (120).
   */
  readonly countRequestsPerMinute?: number;
  /** How long an unsettled hold lives before the reaper releases it (default 600). */
  readonly holdTtlSeconds: number;
  /** How long a streaming client may leave its buffer full before the stream is cut (default 60). */
  readonly streamStallSeconds: number;
  /** Connections to one model upstream origin at most: its pool and its fair queue's slots (default 128). */
  readonly upstreamConnections: number;
  /** How long a call may wait for a connection of its upstream's origin, in ms (default 5000). */
  readonly upstreamQueueMs: number;
  /** Open client connections at most, per process (default 4096). */
  readonly maxConnections: number;
  /** Open client connections at most from one address, per process (default 256). */
  readonly maxConnectionsPerAddress: number;
  /** Seconds a client has to send a request's head (default 10). */
  readonly headersTimeoutSeconds: number;
  /** Seconds a request (head and body) may take to arrive before it is cut (default 30). */
  readonly requestTimeoutSeconds: number;
  /** Seconds a request body may pause between bytes before the request is cut (default 10). */
  readonly bodyIdleSeconds: number;
  /** Searches one response's hosted loop may run when the request sets no `max_tool_calls` (default 8). */
  readonly maxHostedToolCalls?: number;
  /** Model turns one response's hosted loop may run (default 4). */
  readonly maxHostedTurns?: number;
  /** Calls in flight per API key (a key's own limit overrides it); absent: DEFAULT_CONCURRENT_PER_KEY (32); 0: none. */
  readonly concurrentPerKey?: number;
  /** Calls in flight per account, over all its keys; absent: DEFAULT_CONCURRENT_PER_ACCOUNT (64); 0: none. */
  readonly concurrentPerAccount?: number;
  /** Set by `svc serve --workers N` without Redis: the workers that share the in-memory limits (a key's own concurrency limit is shared out by it). */
  readonly sharedByWorkers?: number;
  /** With SVC_REDIS_URL: admit (`open`, the default) or refuse (`closed`) requests while Redis is down. */
  readonly redisFailure?: 'open' | 'closed';
}

/** The OAuth authorization server's switches (`oauth:`). */
export interface OAuthConfig {
  /** Anonymous client registrations accepted from one address per hour (default 20). */
  readonly registrationsPerAddressPerHour: number;
  /** Anonymous client registrations accepted from everyone together per minute (default 30). */
  readonly registrationsPerMinute: number;
  /**
   * Test setups only: fetch Client ID Metadata Documents over http and from loopback or private
   * addresses (default false: https to public addresses only).
   */
  readonly insecureMetadataDocuments: boolean;
}

/** `responses:`, the Responses API's own settings (SPEC §7d). */
export interface ResponsesConfig {
  /** WebSocket mode of `/responses` (`websockets`, default true); off, the upgrade is answered 426. */
  readonly websockets: boolean;
  /**
   * Keys that seal compaction summaries (`compaction_keys`: id → 32 bytes in base64, usually
   * `${ENV}`); empty: a key svc generates into the database on first use. Every key opens.
   */
  readonly compactionKeys: ReadonlyMap<string, Buffer>;
  /** The key that seals (`compaction_key`); default: the first of `compactionKeys`. */
  readonly compactionKey?: string;
  /**
   * `mcp_insecure_servers` (default false), test setups only: the hosted `mcp` tool may reach
   * its servers over http and on loopback or private addresses (an SSRF hole otherwise).
   */
  readonly mcpInsecureServers?: boolean;
  /**
   * `image_generation_model`: the image model (kind `image`) that serves the hosted
   * `image_generation` tool (SPEC §14); absent, the tool is refused as OpenAI's other hosted tools.
   */
  readonly imageGenerationModel?: string;
}

/** `chat:`, settings of the chat path. */
export interface ChatConfig {
  /**
   * `fast_path` (default true): an OpenAI chat stream to a model whose upstreams all speak that
   * wire passes through (core/chat/fast-path.ts); `SVC_FAST_PATH=0|1` overrides it.
   */
  readonly fastPath: boolean;
}

/** The payment gateways svc speaks (SPEC §12). */
export type GatewayName = 'zarinpal' | 'zibal';

/** One configured gateway (`payments.gateways.<name>`). */
export interface GatewayConfig {
  readonly name: GatewayName;
  /** ZarinPal's `merchant_id` (a UUID), Zibal's `merchant` ("zibal" is Zibal's sandbox). */
  readonly merchant: string;
  /** ZarinPal: API at {baseUrl}/pg/v4/payment/*.json, payer to {baseUrl}/pg/StartPay/{authority}; Zibal: {baseUrl}/v1/*, payer to {baseUrl}/start/{trackId}. */
  readonly baseUrl: string;
  /** Whole-request deadline of one call to the gateway, in milliseconds (default 10000). */
  readonly timeoutMs: number;
}

/** `payments:` wallet top-ups through a payment gateway (SPEC §12). */
export interface PaymentsConfig {
  /** The origin the payer's browser comes back to: {publicUrl}/console/payments/{gateway}/return. */
  readonly publicUrl: string;
  /** Bounds of one top-up, in toman (defaults 10,000 and 50,000,000). */
  readonly minToman: bigint;
  readonly maxToman: bigint;
  /** A payment still unpaid this long after it began becomes `expired` (default 60). */
  readonly expireMinutes: number;
  /** The configured gateways, in the order the file lists them (at least one). */
  readonly gateways: ReadonlyMap<GatewayName, GatewayConfig>;
}

/** `console:` the web console's own settings. */
export interface ConsoleConfig {
  /** `open`: anyone may create an account from the sign-in page (default `closed`). */
  readonly signup: 'open' | 'closed';
}

/** The validated configuration file (or the built-in default when there is none). */
export interface SvcConfig {
  readonly models: ReadonlyMap<string, ModelConfig>;
  readonly tools: ReadonlyMap<string, ToolConfig>;
  readonly limits: LimitsConfig;
  /** Absent: the defaults (DEFAULT_OAUTH). */
  readonly oauth?: OAuthConfig;
  /** `responses:`; absent: WebSockets on, compaction keys generated into the database. */
  readonly responses?: ResponsesConfig;
  /** `chat:`; absent: the fast path on. */
  readonly chat?: ChatConfig;
  /** `anthropic:`; absent: the billing header stripped. */
  readonly anthropic?: AnthropicConfig;
  /** `pricing:` (SPEC §15); absent: no rate in the file and a margin of 0. */
  readonly pricing?: PricingConfig;
  /** Absent: no payment gateway, no self-serve top-up. */
  readonly payments?: PaymentsConfig;
  /** Absent: the defaults (sign-up closed). */
  readonly console?: ConsoleConfig;
  /** Where it came from: a file path or "built-in". */
  readonly source: string;
}
