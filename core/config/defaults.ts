import { DEFAULT_TOOL_TIMEOUT_MS, sandboxConfig, TOOL_SPECS } from '../tools/catalog';
import type { BreakerConfig, LimitsConfig, MediaKind, MediaPrice, ModelConfig, OAuthConfig, ToolConfig } from './types';

export { DEFAULT_TOOL_TIMEOUT_MS };

export const DEFAULT_LIMITS: LimitsConfig = {
  requestsPerMinute: 600,
  maxBodyBytes: 1_048_576,
  holdTtlSeconds: 600,
  streamStallSeconds: 60,
  upstreamConnections: 128,
  upstreamQueueMs: 5000,
  maxConnections: 4096,
  maxConnectionsPerAddress: 256,
  headersTimeoutSeconds: 10,
  requestTimeoutSeconds: 30,
  bodyIdleSeconds: 10,
};

/** `limits.max_upload_bytes`: the largest multipart upload (OpenAI's own limit, 25 MiB). */
export const DEFAULT_MAX_UPLOAD_BYTES = 25 * 1024 * 1024;
/** `limits.max_audio_seconds`: the longest audio a transcription takes (30 minutes). */
export const DEFAULT_MAX_AUDIO_SECONDS = 1800;
/** `limits.concurrent_per_key`: calls in flight per API key (0: no limit). */
export const DEFAULT_CONCURRENT_PER_KEY = 32;
/** `limits.concurrent_per_account`: calls in flight per account, over all its keys (0: no limit). */
export const DEFAULT_CONCURRENT_PER_ACCOUNT = 64;

/** `limits.count_requests_per_minute`: the free token-counting calls per key and minute. */
export const DEFAULT_COUNT_REQUESTS_PER_MINUTE = 120;

export const DEFAULT_OAUTH: OAuthConfig = {
  registrationsPerAddressPerHour: 20,
  registrationsPerMinute: 30,
  insecureMetadataDocuments: false,
};

export const DEFAULT_MODEL_TIMEOUT_MS = 120_000;
export const DEFAULT_CONTEXT_WINDOW = 128_000;
export const DEFAULT_MAX_OUTPUT_TOKENS = 8_192;
/** SPEC §4: five consecutive failures open an upstream's breaker for 30 s. */
export const DEFAULT_BREAKER: BreakerConfig = { failures: 5, openS: 30 };
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
    aliases: [],
    upstreams: [
      {
        name: 'svc-pro#1:sandbox',
        provider: 'sandbox',
        baseUrl: '',
        apiKey: undefined,
        upstreamModel: 'sandbox',
        priority: 1,
        weight: 1,
        headers: {},
        timeoutMs: DEFAULT_MODEL_TIMEOUT_MS,
        extraParams: new Set(),
      },
    ],
    breaker: DEFAULT_BREAKER,
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
    aliases: [],
    upstreams: [
      {
        name: 'svc-embed#1:sandbox',
        provider: 'sandbox',
        baseUrl: '',
        apiKey: undefined,
        upstreamModel: 'sandbox-embed',
        priority: 1,
        weight: 1,
        headers: {},
        timeoutMs: DEFAULT_MODEL_TIMEOUT_MS,
        extraParams: new Set(),
      },
    ],
    breaker: DEFAULT_BREAKER,
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
  return new Map([[model.id, model], [embed.id, embed], ...builtInMediaModels().map((m) => [m.id, m] as const)]);
}

/** One built-in media model on the sandbox (SPEC §14). */
function sandboxMedia(id: string, kind: MediaKind, mediaPrice: MediaPrice): ModelConfig {
  return {
    id,
    aliases: [],
    upstreams: [
      {
        name: `${id}#1:sandbox`,
        provider: 'sandbox',
        baseUrl: '',
        apiKey: undefined,
        upstreamModel: `sandbox-${kind}`,
        priority: 1,
        weight: 1,
        headers: {},
        timeoutMs: DEFAULT_MODEL_TIMEOUT_MS,
        extraParams: new Set(),
      },
    ],
    breaker: DEFAULT_BREAKER,
    provider: 'sandbox',
    kind,
    mediaPrice,
    baseUrl: '',
    apiKey: undefined,
    upstreamModel: `sandbox-${kind}`,
    price: { inputPer1m: 0n, outputPer1m: 0n },
    contextWindow: DEFAULT_CONTEXT_WINDOW,
    maxOutputTokens: DEFAULT_MAX_OUTPUT_TOKENS,
    timeoutMs: DEFAULT_MODEL_TIMEOUT_MS,
    extraParams: new Set(),
  };
}

/**
 * The built-in media models on the sandbox (SPEC §14): `svc-image` (a PNG from the prompt's hash,
 * 400 credits per 1024×1024 image at low quality up to 1,700 at high), `svc-tts` (a WAV tone, 150,000
 * credits per 1M characters), `svc-transcribe` (a fixed transcription, 600 credits a minute),
 * `svc-moderation` (flags the word `svc-flag`, free) and `svc-rerank` (word overlap, 20 credits a
 * search).
 */
export function builtInMediaModels(): ModelConfig[] {
  return [
    sandboxMedia('svc-image', 'image', {
      form: 'per_image',
      perImage: new Map([
        ['1024x1024/low', 400n],
        ['1024x1024/medium', 700n],
        ['1024x1024/high', 1700n],
        ['256x256/low', 100n],
      ]),
    }),
    sandboxMedia('svc-tts', 'speech', { form: 'per_1m_characters', credits: 150_000n }),
    sandboxMedia('svc-transcribe', 'transcription', { form: 'per_minute', credits: 600n }),
    sandboxMedia('svc-moderation', 'moderation', { form: 'free' }),
    sandboxMedia('svc-rerank', 'rerank', { form: 'per_search', credits: 20n }),
  ];
}

/** Every tool on its sandbox provider at its sandbox price, as each tool module declares them. */
export function builtInTools(): Map<string, ToolConfig> {
  return new Map(TOOL_SPECS.map((tool) => [tool.name, sandboxConfig(tool)] as const));
}
