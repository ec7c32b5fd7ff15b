import { type z } from 'zod';
import { isOwnChatParam } from '../conversation/fields';
import { TOOL_SPECS } from '../tools/catalog';
import type { ToolSpec } from '../tools/definitions';
import {
  DEFAULT_BREAKER,
  DEFAULT_CONTEXT_WINDOW,
  DEFAULT_EMBEDDING_INPUT_TOKENS,
  DEFAULT_LIMITS,
  DEFAULT_MAX_OUTPUT_TOKENS,
  DEFAULT_MODEL_TIMEOUT_MS,
  DEFAULT_OAUTH,
  DEFAULT_TOOL_TIMEOUT_MS,
  builtInModels,
  builtInTools,
  defaultToolCap,
} from './defaults';
import {
  EnvText,
  Fraction,
  at,
  decimal,
  choice,
  count,
  describe,
  flag,
  field,
  httpUrl,
  integer,
  list,
  mapping,
  named,
  readDecimal,
  readInteger,
  readText,
  refuse,
  refusing,
  text,
  within,
  isPlainObject,
} from './fields';
import {
  COMPACTION_MODES,
  EMBEDDING_PROVIDERS,
  MEDIA_PROVIDERS,
  MODEL_KINDS,
  MODEL_PROVIDERS,
  NATIVE_COMPACTION_PROVIDERS,
  OUTPUT_LIMIT_FIELDS,
} from './providers';
import type {
  ConsoleConfig,
  DollarPricing,
  GatewayConfig,
  GatewayName,
  LimitsConfig,
  MediaKind,
  MediaPrice,
  ModelConfig,
  OAuthConfig,
  PaymentsConfig,
  PricingConfig,
  ResponsesConfig,
  ChatConfig,
  AnthropicConfig,
  SvcConfig,
  TokenPrice,
  ToolConfig,
  UnitDollars,
  ToolPrice,
  UpstreamConfig,
  UsdPrice,
} from './types';
import { dollarPrice, IMAGE_INPUT_KEY, PRICE_KEYS, tariffKeys as tariffKeysOf, unitPrice } from './tariff';
import { Decimal } from './decimal';

/**
 * The configuration file of SPEC §4 as one zod schema: what each section may hold, what is
 * required and what each value must be, and (through its transforms) the typed `SvcConfig` it
 * becomes. `load.ts` parses the YAML and substitutes `${NAME}`; everything else is here.
 */

// Money and counts stay far below 2^53 so that they print as exact JSON numbers.
const MAX_PRICE = BigInt(Number.MAX_SAFE_INTEGER);
// Dollars per 1M units, a markup (100 = 10,000 %) and toman per dollar: far above any real one,
// low enough that every credit price they make stays below MAX_PRICE.
const MAX_USD = 1_000_000n;
const MAX_MARGIN = 100n;
const MAX_RATE = 10_000_000n;
const MODEL_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$/;
const PARAM_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$/;
// Set by the provider from the request itself; a configured value would corrupt the exchange.
const RESERVED_HEADERS = new Set(['host', 'content-length', 'content-type', 'transfer-encoding', 'connection']);

/** A list item as text when it came from the environment (checked, never shown). */
const unwrap = (item: unknown): unknown => (item instanceof EnvText ? item.text : item);

const credits = () => integer({ min: 0n, max: MAX_PRICE });

/** Credits per 1M tokens; each entry says which of its rates it requires. */
const tariff = {
  input_per_1m: credits(),
  output_per_1m: credits(),
};

function tokenPrice(
  read: { input_per_1m?: bigint | undefined; output_per_1m?: bigint | undefined },
  defaultOutput?: bigint,
): TokenPrice {
  const inputPer1m = read.input_per_1m ?? refuse('is required', 'input_per_1m');
  const outputPer1m = read.output_per_1m ?? defaultOutput ?? refuse('is required', 'output_per_1m');
  return { inputPer1m, outputPer1m };
}

// ---- models ------------------------------------------------------------------------------

/** `headers:` extra request headers of an upstream (names lower-cased). */
const headers = named((name, value) => {
  if (!HEADER_NAME.test(name)) return refuse('is not a valid HTTP header name');
  if (RESERVED_HEADERS.has(name.toLowerCase())) return refuse('is set by svc itself and cannot be configured');
  const header = readText(value) ?? refuse('is required');
  if (/[\r\n\0]/.test(header)) return refuse('must not contain line breaks');
  return header;
});

// Parameters an upstream takes beyond OpenAI's (e.g. vLLM's top_k, min_p): without this list
// they are refused, as OpenAI refuses them.
const extraParams = list('parameter names', (item) => {
  const name = unwrap(item);
  if (!(typeof name === 'string' && PARAM_NAME.test(name)))
    return refuse(`must be a parameter name of letters, digits and "_" (got ${describe(item)})`);
  if (isOwnChatParam(name)) return refuse(`'${name}' is an OpenAI chat parameter already: list only others`);
  return name;
});

/** What one upstream of a model says, in a list entry or (the single-upstream form) in the model itself. */
const upstreamShape = {
  provider: choice('provider', MODEL_PROVIDERS),
  base_url: httpUrl(),
  api_key: text(),
  upstream_model: text(),
  max_tokens_field: choice('max_tokens_field', OUTPUT_LIMIT_FIELDS),
  headers,
  timeout_ms: count(1),
  extra_params: extraParams,
  max_concurrency: count(1),
  // Whether an upstream takes the `developer` role (a capability of the server, not the model).
  developer_role: flag(),
  // Whether the upstream compacts itself (remote compaction passed through; SPEC §7d), a capability
  // of the server: not every Responses-speaking server has it.
  compaction: choice('compaction', COMPACTION_MODES),
};
type UpstreamFields = { readonly [K in keyof typeof upstreamShape]?: z.output<(typeof upstreamShape)[K]> };

// A weight is a share, so a fraction is as good as an integer; zero or less would never be picked.
const weight = field((value): number | undefined => {
  if (value === undefined) return undefined;
  let n: number | undefined;
  if (typeof value === 'bigint') n = Number(value);
  else if (typeof value === 'number') n = value;
  // A share need not be exact: the fraction's text as a float.
  else if (value instanceof Fraction) n = Number(value.text);
  else if (value instanceof EnvText && /^\s*\d+(\.\d+)?\s*$/.test(value.text)) n = Number(value.text);
  if (n === undefined || !Number.isFinite(n)) return refuse(`must be a positive number (got ${describe(value)})`);
  if (n <= 0 || n > 1_000_000) return refuse(`must be a positive number up to 1000000 (got ${n})`);
  return n;
});

/** An entry of `upstreams:`: one upstream and where it stands in the routing. */
const listedUpstream = mapping({
  ...upstreamShape,
  priority: integer({ min: 0n, max: 1_000_000n }),
  weight,
});

function readUpstream(modelId: string, index: number, read: UpstreamFields, priority = 1, share = 1): UpstreamConfig {
  const provider = read.provider ?? refuse('is required', 'provider');
  const remote = provider !== 'sandbox';
  if (remote && read.base_url === undefined) refuse(`is required for provider ${provider}`, 'base_url');
  if (remote && read.upstream_model === undefined) refuse(`is required for provider ${provider}`, 'upstream_model');
  if (read.compaction === 'native' && !NATIVE_COMPACTION_PROVIDERS.includes(provider))
    refuse(
      `native compaction is the Responses API's own: only provider ${NATIVE_COMPACTION_PROVIDERS.join(', ')} has it (provider ${provider} gets svc's, the default "svc")`,
      'compaction',
    );
  const host = read.base_url === undefined ? '' : `@${new URL(read.base_url).host}`;
  return {
    name: `${modelId}#${index + 1}:${provider}${host}`,
    provider,
    baseUrl: read.base_url ?? '',
    apiKey: read.api_key,
    upstreamModel: read.upstream_model ?? modelId,
    priority,
    weight: share,
    ...(read.max_tokens_field === undefined ? {} : { maxTokensField: read.max_tokens_field }),
    headers: Object.fromEntries(
      [...(read.headers ?? new Map<string, string>())].map(([name, value]) => [name.toLowerCase(), value]),
    ),
    timeoutMs: read.timeout_ms ?? DEFAULT_MODEL_TIMEOUT_MS,
    extraParams: new Set(read.extra_params ?? []),
    ...(read.max_concurrency === undefined ? {} : { maxConcurrency: read.max_concurrency }),
    // OpenAI itself has the role; most compatible servers refuse it, so elsewhere it is opt-in.
    ...((read.developer_role ?? (read.base_url !== undefined && new URL(read.base_url).host === 'api.openai.com'))
      ? { developerRole: true }
      : {}),
    ...(read.compaction === 'native' ? { nativeCompaction: true } : {}),
  };
}

const MODEL_NAME_RULE = '1-100 letters, digits, ".", "_", ":" or "-"';

const aliases = list('model names', (item) => {
  const alias = unwrap(item);
  if (!(typeof alias === 'string' && MODEL_ID.test(alias)))
    return refuse(`must be ${MODEL_NAME_RULE} (got ${describe(item)})`);
  return alias;
});

// `dimensions: 1536` or `dimensions: [3072, 1536, 768]` (the first is the default).
const dimensions = field((value): number[] | undefined => {
  if (value === undefined) return undefined;
  const lengths: unknown[] = Array.isArray(value) ? value : [value];
  if (lengths.length === 0) return refuse('must name at least one vector length');
  return lengths.map((item, i) => {
    const n = typeof item === 'bigint' ? Number(item) : item;
    if (typeof n === 'number' && Number.isInteger(n) && n >= 1 && n <= 65_536) return n;
    const refusal = `must be an integer from 1 to 65536 (got ${describe(item)})`;
    return Array.isArray(value) ? refuse(refusal, i) : refuse(refusal);
  });
});

const chatPrice = mapping({
  ...tariff,
  cached_input_per_1m: credits(),
  cache_write_per_1m: credits(),
  cache_write_1h_per_1m: credits(),
  // Image models only (readModel refuses it elsewhere, naming it).
  image_input_per_1m: credits(),
});

const MEDIA_KINDS: readonly string[] = ['image', 'speech', 'transcription', 'moderation', 'rerank'];

/** `SIZE/QUALITY` of a per-image price, e.g. `1024x1024/high` (`auto` for either). */
const IMAGE_PRICE_KEY = /^(auto|\d{2,5}x\d{2,5})\/(auto|low|medium|high|standard|hd)$/;

/** A media model's price form as `price:` gives it (SPEC §14); undefined: absent beside price_usd. */
function mediaPriceOf(kind: MediaKind, given: unknown, dollars: boolean): MediaPrice | undefined {
  // Absent beside price_usd: every price comes from the dollar.
  if (given === undefined && dollars) return undefined;
  if (kind === 'moderation' && (given === undefined || given === 0 || given === 0n)) return { form: 'free' };
  if (given === undefined) return refuse(`is required (${MEDIA_PRICE_WORDS[kind]}, or price_usd)`);
  if (!isPlainObject(given)) return refuse(`must be a mapping (${MEDIA_PRICE_WORDS[kind]})`);
  const keys = Object.keys(given);
  const own = MEDIA_PRICE_KEY[kind];
  if (own !== undefined && keys.includes(own)) {
    if (keys.length !== 1) return refuse(`takes ${own} alone`);
    const value = given[own];
    if (kind === 'image') {
      if (!isPlainObject(value) || Object.keys(value).length === 0)
        return refuse('must map "SIZE/QUALITY" to credits, e.g. { "1024x1024/high": 1700 }', own);
      const perImage = new Map<string, bigint>();
      for (const [key, credits] of Object.entries(value)) {
        if (!IMAGE_PRICE_KEY.test(key)) refuse('is not "SIZE/QUALITY" (e.g. "1024x1024/high")', own, key);
        perImage.set(key, readInteger(credits, { min: 0n, max: MAX_PRICE }) ?? refuse('is required', own, key));
      }
      return { form: 'per_image', perImage };
    }
    const credits = readInteger(value, { min: 0n, max: MAX_PRICE }) ?? refuse('is required', own);
    return { form: own as 'per_1m_characters' | 'per_minute' | 'per_search', credits };
  }
  if (kind === 'rerank') return refuse(`must be { per_search: N }`);
  return { form: 'tokens' };
}

const MEDIA_PRICE_KEY: Readonly<Record<MediaKind, string | undefined>> = {
  image: 'per_image',
  speech: 'per_1m_characters',
  transcription: 'per_minute',
  moderation: undefined,
  rerank: 'per_search',
};

const MEDIA_PRICE_WORDS: Readonly<Record<MediaKind, string>> = {
  image: '{ per_image: { "SIZE/QUALITY": N } } or a token tariff',
  speech: '{ per_1m_characters: N } or a token tariff',
  transcription: '{ per_minute: N } or a token tariff',
  moderation: '0 or a token tariff',
  rerank: '{ per_search: N }',
};

const MEDIA_USD_WORDS: Readonly<Record<MediaKind, string>> = {
  image: '{ per_image: { "SIZE/QUALITY": USD } } or a token tariff in US dollars',
  speech: '{ per_1m_characters: USD } or a token tariff in US dollars',
  transcription: '{ per_minute: USD } or a token tariff in US dollars',
  moderation: 'a token tariff in US dollars',
  rerank: '{ per_search: USD }',
};

/** Dollars per 1M tokens: a token tariff's `price_usd`. */
const usdTariff = mapping(Object.fromEntries(PRICE_KEYS.map(([name]) => [name, decimal(MAX_USD)])));

/**
 * A media model's `price_usd` (SPEC §14, §15): its own unit priced in dollars (per image by
 * `SIZE/QUALITY`, per 1M characters, per minute, per search), or `tokens` for a token tariff in
 * dollars (read as a chat model's).
 */
function mediaUsdOf(kind: MediaKind, given: unknown): Omit<UnitDollars, 'credits'> | 'tokens' {
  if (!isPlainObject(given)) return refuse(`must be a mapping (${MEDIA_USD_WORDS[kind]})`);
  const keys = Object.keys(given);
  const own = MEDIA_PRICE_KEY[kind];
  if (own !== undefined && keys.includes(own)) {
    if (keys.length !== 1) return refuse(`takes ${own} alone`);
    const value = given[own];
    if (kind === 'image') {
      if (!isPlainObject(value) || Object.keys(value).length === 0)
        return refuse('must map "SIZE/QUALITY" to US dollars per image, e.g. { "1024x1024/high": 0.167 }', own);
      const usd = new Map<string, Decimal>();
      for (const [key, dollars] of Object.entries(value)) {
        if (!IMAGE_PRICE_KEY.test(key)) refuse('is not "SIZE/QUALITY" (e.g. "1024x1024/high")', own, key);
        usd.set(key, at(own, () => at(key, () => readDecimal(dollars, MAX_USD))) ?? refuse('is required', own, key));
      }
      return { form: 'per_image', usd };
    }
    const usd = at(own, () => readDecimal(value, MAX_USD)) ?? refuse('is required', own);
    return { form: own as UnitDollars['form'], usd: new Map([[own, usd]]) };
  }
  const foreign = keys.find((key) => Object.values(MEDIA_PRICE_KEY).includes(key));
  if (foreign !== undefined) return refuse(`is not a price of ${kind} models (${MEDIA_USD_WORDS[kind]})`, foreign);
  if (kind === 'rerank') return refuse(`must be ${MEDIA_USD_WORDS[kind]}`);
  const tariffKeys: readonly string[] = tariffKeysOf(kind).map(([name]) => name);
  const unknown = keys.find((key) => !tariffKeys.includes(key));
  if (unknown !== undefined)
    return refuse(
      `unknown key (expected ${own === undefined ? '' : `${own}, or `}a token tariff's: ${tariffKeys.join(', ')})`,
      unknown,
    );
  return 'tokens';
}

/** A media price form in words, for a refusal naming two that disagree. */
function formWords(price: MediaPrice): string {
  return price.form === 'free' ? '0 (free)' : price.form === 'tokens' ? 'a token tariff' : price.form;
}

const modelEntry = mapping({
  kind: choice('kind', MODEL_KINDS),
  price: field((value) => value),
  // A token tariff in dollars, or (a media model) its own unit in dollars: read by readModel.
  price_usd: field((value) => value),
  margin: decimal(MAX_MARGIN),
  context_window: count(1),
  max_output_tokens: count(1),
  dimensions,
  aliases,
  breaker: mapping({ failures: count(1), open_s: count(1) }).optional(),
  cache: mapping({
    key: choice('key', ['account', 'session', 'off'] as const),
    breakpoints: choice('breakpoints', ['auto', 'off'] as const),
  }).optional(),
  upstreams: list('mappings', (item) => within(listedUpstream, item)),
  ...upstreamShape,
});

function readModel(id: string, read: z.output<typeof modelEntry>): ModelConfig {
  const kind = read.kind ?? 'chat';
  if (kind !== 'embedding' && read.dimensions !== undefined)
    refuse('is only for embedding models (kind: embedding)', 'dimensions');
  const media = MEDIA_KINDS.includes(kind) ? (kind as MediaKind) : undefined;
  // Input images are priced apart on token-billed image models only (SPEC §14).
  if (kind !== 'image')
    for (const [section, value] of [
      ['price', read.price],
      ['price_usd', read.price_usd],
    ] as const)
      if (isPlainObject(value) && IMAGE_INPUT_KEY in value)
        refuse(
          `prices the input images of a token-billed image model: only image models (kind: image) take it, this one is kind: ${kind}`,
          section,
          IMAGE_INPUT_KEY,
        );
  // A media model's dollar prices: its own unit (per image, …) or a token tariff (SPEC §14, §15).
  const mediaUsd =
    media === undefined || read.price_usd === undefined
      ? undefined
      : at('price_usd', () => mediaUsdOf(media, read.price_usd));
  const inCredits =
    media === undefined ? undefined : at('price', () => mediaPriceOf(media, read.price, mediaUsd !== undefined));
  let mediaPrice = inCredits;
  let unit: UnitDollars | undefined;
  if (mediaUsd !== undefined) {
    const usdForm = mediaUsd === 'tokens' ? 'tokens' : mediaUsd.form;
    if (inCredits !== undefined && inCredits.form !== usdForm)
      refuse(
        `is ${usdForm === 'tokens' ? 'a token tariff' : usdForm} but price is ${formWords(inCredits)}: give both in one form (credits in price win key by key)`,
        'price_usd',
      );
    if (mediaUsd === 'tokens') mediaPrice = { form: 'tokens' };
    else {
      const credits =
        inCredits === undefined
          ? new Map<string, bigint>()
          : inCredits.form === 'per_image'
            ? new Map(inCredits.perImage)
            : inCredits.form === 'per_1m_characters' ||
                inCredits.form === 'per_minute' ||
                inCredits.form === 'per_search'
              ? new Map([[inCredits.form, inCredits.credits]])
              : new Map<string, bigint>();
      unit = { ...mediaUsd, credits };
      // Resolved against pricing.rate once the whole file is read (configFile).
      mediaPrice = unitPrice(unit, 0n, Decimal.ZERO);
    }
  }
  // A media model priced per image, character, minute or search (SPEC §14) has no token tariff.
  const ownForm = mediaPrice !== undefined && mediaPrice.form !== 'tokens';
  if (read.margin !== undefined && read.price_usd === undefined)
    refuse('applies to price_usd only (this model is priced in credits)', 'margin');
  const usdTokens =
    read.price_usd === undefined || ownForm ? undefined : at('price_usd', () => within(usdTariff, read.price_usd));
  const given = ownForm || read.price === undefined ? undefined : at('price', () => within(chatPrice, read.price));
  // Credits given under `price:` (all of them, or with price_usd those that win over it).
  const credits: { -readonly [K in keyof TokenPrice]?: bigint } = {};
  for (const [name, key] of PRICE_KEYS) {
    const value = given?.[name];
    if (value !== undefined) credits[key] = value;
  }
  let dollar: DollarPricing | undefined;
  let price: TokenPrice;
  if (ownForm) {
    price = { inputPer1m: 0n, outputPer1m: 0n };
    if (unit !== undefined)
      dollar = { usd: {}, credits: {}, unit, ...(read.margin === undefined ? {} : { margin: read.margin }) };
  } else if (usdTokens !== undefined) {
    const usd: { -readonly [K in keyof UsdPrice]?: Decimal } = {};
    for (const [name, key] of PRICE_KEYS) {
      const value = usdTokens[name];
      if (value !== undefined) usd[key] = value;
    }
    // Only a chat model must price its output: the other kinds produce no output tokens.
    for (const [name, key] of PRICE_KEYS.slice(0, kind === 'chat' ? 2 : 1))
      if (usd[key] === undefined && credits[key] === undefined)
        refuse(`is required (in price_usd, or in credits under price)`, 'price_usd', name);
    dollar = { usd, credits, ...(read.margin === undefined ? {} : { margin: read.margin }) };
    // Resolved against pricing.rate once the whole file is read (configFile).
    price = { inputPer1m: 0n, outputPer1m: 0n };
  } else {
    price = at('price', () => {
      const tariffGiven =
        given ?? refuse('is required ({ input_per_1m, output_per_1m } in credits per 1M tokens, or price_usd)');
      // An embedding (or other non-chat) model produces no output tokens: its output price may be left out.
      return { ...credits, ...tokenPrice(tariffGiven, kind === 'chat' ? undefined : 0n) };
    });
  }
  const contextWindow =
    read.context_window ?? (kind === 'embedding' ? DEFAULT_EMBEDDING_INPUT_TOKENS : DEFAULT_CONTEXT_WINDOW);
  const maxOutputTokens = read.max_output_tokens ?? Math.min(DEFAULT_MAX_OUTPUT_TOKENS, contextWindow);
  if (maxOutputTokens > contextWindow) refuse(`must not exceed context_window (${contextWindow})`, 'max_output_tokens');
  read.aliases?.forEach((alias, i) => {
    if (alias === id) refuse(`'${alias}' is the model's own id`, 'aliases', i);
    if (read.aliases?.indexOf(alias) !== i) refuse(`'${alias}' is listed twice`, 'aliases', i);
  });
  let upstreams: UpstreamConfig[];
  if (read.upstreams !== undefined) {
    // One form or the other: a model-level provider next to a list would be silently ignored.
    for (const key of Object.keys(upstreamShape) as (keyof typeof upstreamShape)[])
      if (read[key] !== undefined) refuse('belongs inside each entry of upstreams when upstreams is given', key);
    if (read.upstreams.length === 0) refuse('must list at least one upstream', 'upstreams');
    upstreams = read.upstreams.map((entry, i) =>
      at('upstreams', () => at(i, () => readUpstream(id, i, entry, Number(entry.priority ?? 1n), entry.weight ?? 1))),
    );
  } else {
    upstreams = [readUpstream(id, 0, read)];
  }
  if (kind === 'embedding')
    upstreams.forEach((upstream, i) => {
      if (!EMBEDDING_PROVIDERS.includes(upstream.provider))
        refuse(
          `${upstream.provider} serves no embeddings (an embedding model's upstreams are ${EMBEDDING_PROVIDERS.join(', ')})`,
          ...(read.upstreams === undefined ? [] : ['upstreams', i]),
          'provider',
        );
    });
  else if (media !== undefined)
    upstreams.forEach((upstream, i) => {
      const allowed = MEDIA_PROVIDERS[media];
      if (!allowed.includes(upstream.provider))
        refuse(
          `${upstream.provider} serves no ${media} model (a ${media} model's upstreams are ${allowed.join(', ')})`,
          ...(read.upstreams === undefined ? [] : ['upstreams', i]),
          'provider',
        );
    });
  else
    upstreams.forEach((upstream, i) => {
      if (upstream.provider === 'cohere')
        refuse(
          `cohere serves rerank only (kind: rerank)`,
          ...(read.upstreams === undefined ? [] : ['upstreams', i]),
          'provider',
        );
    });
  const first = upstreams[0] as UpstreamConfig;
  const extra = new Set<string>();
  for (const upstream of upstreams) for (const name of upstream.extraParams) extra.add(name);
  return {
    id,
    aliases: read.aliases ?? [],
    upstreams,
    breaker: {
      failures: read.breaker?.failures ?? DEFAULT_BREAKER.failures,
      openS: read.breaker?.open_s ?? DEFAULT_BREAKER.openS,
    },
    provider: first.provider,
    baseUrl: first.baseUrl,
    apiKey: first.apiKey,
    upstreamModel: first.upstreamModel,
    price,
    ...(dollar === undefined ? {} : { dollar }),
    contextWindow,
    maxOutputTokens,
    ...(first.maxTokensField === undefined ? {} : { maxTokensField: first.maxTokensField }),
    timeoutMs: first.timeoutMs,
    extraParams: extra,
    ...(read.cache === undefined
      ? {}
      : { cache: { key: read.cache.key ?? 'account', breakpoints: read.cache.breakpoints ?? 'auto' } }),
    ...(kind === 'embedding'
      ? { kind, ...(read.dimensions === undefined ? {} : { dimensions: read.dimensions }) }
      : {}),
    ...(media === undefined ? {} : { kind: media, ...(mediaPrice === undefined ? {} : { mediaPrice }) }),
  };
}

/** `models:` by public id; every public name (id or alias) is unique across them. */
const models = named((id, value) => {
  if (!MODEL_ID.test(id)) return refuse(`a model id is ${MODEL_NAME_RULE}`);
  return readModel(id, within(modelEntry, value));
}).transform(
  refusing((read) => {
    if (read === undefined) return undefined;
    // Every public name and where it was declared, so that a clash names both.
    const names = new Map<string, string>([...read.keys()].map((id) => [id, `models.${id}`]));
    for (const [id, model] of read)
      model.aliases.forEach((alias, i) => {
        const clash = names.get(alias);
        if (clash !== undefined) refuse(`'${alias}' is already a model name (${clash})`, id, 'aliases', i);
        names.set(alias, `models.${id}.aliases.${i}`);
      });
    return read;
  }),
);

// ---- tools -------------------------------------------------------------------------------

const toolTariff = mapping({ ...tariff, cap: integer({ min: 1n, max: MAX_PRICE }) });

/** A tool's `price`: flat credits per call, or a token tariff with the most one call may hold. */
const toolPrice = field((value): ToolPrice | undefined => {
  if (value === undefined) return undefined;
  if (isPlainObject(value)) {
    const read = within(toolTariff, value);
    const rates = tokenPrice(read);
    return { kind: 'tokens', tariff: rates, cap: read.cap ?? defaultToolCap(rates.inputPer1m, rates.outputPer1m) };
  }
  return { kind: 'flat', credits: readInteger(value, { min: 0n, max: MAX_PRICE }) ?? refuse('is required') };
});

/** One tool's entry, checked against the providers its tool module accepts. */
function toolEntry(tool: ToolSpec) {
  return mapping({
    provider: choice('provider', Object.keys(tool.providers)),
    base_url: httpUrl(),
    api_key: text(),
    model: text(),
    price: toolPrice,
    // A tool's price is in credits: price_usd is refused in words, not as an unknown key.
    price_usd: field((): never =>
      refuse(
        'is not supported for tools (maps, shopping, web_search and the rest are priced in credits per call or per 1M tokens): give price in credits',
      ),
    ),
    timeout_ms: count(1),
  }).transform(
    refusing((read): ToolConfig => {
      const provider = read.provider ?? refuse('is required', 'provider');
      const spec = tool.providers[provider] ?? refuse('is not a known provider', 'provider');
      const baseUrl =
        read.base_url ??
        spec.defaultBaseUrl ??
        refuse(`is required for provider ${provider} (it is self-hosted)`, 'base_url');
      if (spec.needsApiKey && read.api_key === undefined) refuse(`is required for provider ${provider}`, 'api_key');
      if (read.model !== undefined && spec.defaultModel === undefined)
        refuse(`is not used by provider ${provider}`, 'model');
      const price =
        read.price ?? refuse('is required (flat credits per call, or { input_per_1m, output_per_1m, cap })', 'price');
      return {
        name: tool.name,
        provider,
        baseUrl,
        apiKey: read.api_key,
        model: read.model ?? spec.defaultModel,
        price,
        timeoutMs: read.timeout_ms ?? DEFAULT_TOOL_TIMEOUT_MS,
      };
    }),
  );
}

/** `tools:` one entry per tool svc serves; an entry replaces that tool's built-in sandbox entry. */
const tools = mapping(Object.fromEntries(TOOL_SPECS.map((tool) => [tool.name, toolEntry(tool).optional()])), 'tool');

// ---- limits ------------------------------------------------------------------------------

const limits = mapping({
  requests_per_minute: count(1),
  tokens_per_minute: count(1),
  count_requests_per_minute: count(1),
  concurrent_per_key: count(0),
  concurrent_per_account: count(0),
  max_body_bytes: count(1024),
  max_upload_bytes: count(1024),
  max_audio_seconds: count(1),
  hold_ttl_seconds: count(1),
  stream_stall_seconds: count(1),
  upstream_connections: count(1),
  upstream_queue_ms: count(1),
  max_connections: count(1),
  max_connections_per_address: count(1),
  headers_timeout_seconds: count(1),
  request_timeout_seconds: count(1),
  body_idle_seconds: count(1),
  redis_failure: choice('redis_failure', ['open', 'closed'] as const),
  max_hosted_tool_calls: count(0),
  max_hosted_turns: count(2),
}).transform((read): LimitsConfig => ({
  requestsPerMinute: read.requests_per_minute ?? DEFAULT_LIMITS.requestsPerMinute,
  maxBodyBytes: read.max_body_bytes ?? DEFAULT_LIMITS.maxBodyBytes,
  holdTtlSeconds: read.hold_ttl_seconds ?? DEFAULT_LIMITS.holdTtlSeconds,
  streamStallSeconds: read.stream_stall_seconds ?? DEFAULT_LIMITS.streamStallSeconds,
  upstreamConnections: read.upstream_connections ?? DEFAULT_LIMITS.upstreamConnections,
  upstreamQueueMs: read.upstream_queue_ms ?? DEFAULT_LIMITS.upstreamQueueMs,
  maxConnections: read.max_connections ?? DEFAULT_LIMITS.maxConnections,
  maxConnectionsPerAddress: read.max_connections_per_address ?? DEFAULT_LIMITS.maxConnectionsPerAddress,
  headersTimeoutSeconds: read.headers_timeout_seconds ?? DEFAULT_LIMITS.headersTimeoutSeconds,
  requestTimeoutSeconds: read.request_timeout_seconds ?? DEFAULT_LIMITS.requestTimeoutSeconds,
  bodyIdleSeconds: read.body_idle_seconds ?? DEFAULT_LIMITS.bodyIdleSeconds,
  ...(read.tokens_per_minute === undefined ? {} : { tokensPerMinute: read.tokens_per_minute }),
  ...(read.count_requests_per_minute === undefined ? {} : { countRequestsPerMinute: read.count_requests_per_minute }),
  ...(read.redis_failure === undefined ? {} : { redisFailure: read.redis_failure }),
  ...(read.concurrent_per_key === undefined ? {} : { concurrentPerKey: read.concurrent_per_key }),
  ...(read.concurrent_per_account === undefined ? {} : { concurrentPerAccount: read.concurrent_per_account }),
  ...(read.max_hosted_tool_calls === undefined ? {} : { maxHostedToolCalls: read.max_hosted_tool_calls }),
  ...(read.max_hosted_turns === undefined ? {} : { maxHostedTurns: read.max_hosted_turns }),
  ...(read.max_upload_bytes === undefined ? {} : { maxUploadBytes: read.max_upload_bytes }),
  ...(read.max_audio_seconds === undefined ? {} : { maxAudioSeconds: read.max_audio_seconds }),
}));

// ---- oauth -------------------------------------------------------------------------------

const oauth = mapping({
  registrations_per_address_per_hour: count(1),
  registrations_per_minute: count(1),
  insecure_metadata_documents: flag(),
}).transform((read): OAuthConfig => ({
  registrationsPerAddressPerHour:
    read.registrations_per_address_per_hour ?? DEFAULT_OAUTH.registrationsPerAddressPerHour,
  registrationsPerMinute: read.registrations_per_minute ?? DEFAULT_OAUTH.registrationsPerMinute,
  insecureMetadataDocuments: read.insecure_metadata_documents ?? DEFAULT_OAUTH.insecureMetadataDocuments,
}));

// ---- responses ---------------------------------------------------------------------------

// A compaction key: 32 bytes (AES-256), in base64.
const sealKey = (id: string, value: unknown): Buffer => {
  if (!/^[A-Za-z0-9_-]{1,40}$/.test(id)) return refuse('must be a key id of 1-40 letters, digits, "_" or "-"');
  const secret = readText(value) ?? refuse('is required');
  const bytes = Buffer.from(secret, 'base64');
  if (bytes.length !== 32 || !/^[A-Za-z0-9+/=_-]+$/.test(secret.trim()))
    return refuse('must be 32 random bytes in base64 (e.g. `openssl rand -base64 32`)');
  return bytes;
};

const responses = mapping({
  websockets: flag(),
  compaction_keys: named(sealKey),
  compaction_key: text(),
  mcp_insecure_servers: flag(),
  image_generation_model: text(),
}).transform(
  refusing((read): ResponsesConfig => {
    const keys = read.compaction_keys ?? new Map<string, Buffer>();
    const current = read.compaction_key ?? keys.keys().next().value;
    if (current !== undefined && !keys.has(current))
      refuse(`names no key of compaction_keys (got ${current})`, 'compaction_key');
    return {
      websockets: read.websockets ?? true,
      compactionKeys: keys,
      ...(current === undefined ? {} : { compactionKey: current }),
      ...(read.mcp_insecure_servers === true ? { mcpInsecureServers: true } : {}),
      ...(read.image_generation_model === undefined ? {} : { imageGenerationModel: read.image_generation_model }),
    };
  }),
);

// ---- chat --------------------------------------------------------------------------------

const chatSection = mapping({ fast_path: flag() }).transform((read): ChatConfig => ({
  fastPath: read.fast_path ?? true,
}));

// ---- anthropic ---------------------------------------------------------------------------

const anthropicSection = mapping({ strip_billing_header: flag() }).transform((read): AnthropicConfig => ({
  stripBillingHeader: read.strip_billing_header ?? true,
}));

// ---- payments ----------------------------------------------------------------------------

// ZarinPal's own bound per transaction is 100,000,000 toman (-41); Zibal's least is above 1,000 rial.
const MAX_TOMAN = 100_000_000n;
const MIN_TOMAN = 101n;
const ZARINPAL_MERCHANT = /^[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12}$/i;

const gatewayShape = { base_url: httpUrl(), timeout_ms: count(1) };

function readGateway(
  name: GatewayName,
  merchant: string | undefined,
  merchantKey: string,
  read: { base_url?: string | undefined; timeout_ms?: number | undefined },
  defaultBaseUrl: string,
): GatewayConfig {
  return {
    name,
    merchant: merchant ?? refuse(`is required (the merchant ${name} gave this terminal)`, merchantKey),
    baseUrl: read.base_url ?? defaultBaseUrl,
    timeoutMs: read.timeout_ms ?? 10_000,
  };
}

const zarinpal = mapping({ merchant_id: text(), ...gatewayShape }).transform(
  refusing((read) => {
    if (read.merchant_id !== undefined && !ZARINPAL_MERCHANT.test(read.merchant_id.trim()))
      refuse('must be the 36-character merchant id ZarinPal gave (a UUID)', 'merchant_id');
    return readGateway('zarinpal', read.merchant_id?.trim(), 'merchant_id', read, 'https://payment.zarinpal.com');
  }),
);
const zibal = mapping({ merchant: text(), ...gatewayShape }).transform(
  refusing((read) => readGateway('zibal', read.merchant?.trim(), 'merchant', read, 'https://gateway.zibal.ir')),
);

const payments = mapping({
  public_url: httpUrl(),
  min_toman: integer({ min: MIN_TOMAN, max: MAX_TOMAN }),
  max_toman: integer({ min: MIN_TOMAN, max: MAX_TOMAN }),
  expire_minutes: count(5),
  gateways: mapping({ zarinpal: zarinpal.optional(), zibal: zibal.optional() }, 'gateway').optional(),
}).transform(
  refusing((read): PaymentsConfig => {
    const publicUrl = read.public_url ?? refuse('is required (the address payers come back to)', 'public_url');
    const minToman = read.min_toman ?? 10_000n;
    const maxToman = read.max_toman ?? 50_000_000n;
    if (maxToman < minToman) refuse(`must be at least min_toman (${minToman})`, 'max_toman');
    const gateways = new Map<GatewayName, GatewayConfig>();
    for (const entry of Object.values(read.gateways ?? {})) if (entry !== undefined) gateways.set(entry.name, entry);
    if (gateways.size === 0) refuse('must configure at least one gateway (zarinpal, zibal)', 'gateways');
    return { publicUrl, minToman, maxToman, expireMinutes: read.expire_minutes ?? 60, gateways };
  }),
);

const consoleSection = mapping({ signup: choice('signup', ['open', 'closed'] as const) }).transform(
  (read): ConsoleConfig => ({ signup: read.signup ?? 'closed' }),
);

// ---- pricing ----------------------------------------------------------------------------

/**
 * `pricing:` (SPEC §15). A negative margin (selling below cost) is refused in the file: the file
 * has no --force, and a margin below cost belongs to a deliberate command, not a typo.
 */
const pricingSection = mapping({ rate: integer({ min: 1n, max: MAX_RATE }), margin: decimal(MAX_MARGIN) }).transform(
  (read): PricingConfig => ({
    ...(read.rate === undefined ? {} : { rate: read.rate }),
    margin: read.margin ?? Decimal.ZERO,
  }),
);

/** The one credit price of a unit form other than per image. */
const unitCredits = (price: MediaPrice): bigint =>
  price.form === 'per_1m_characters' || price.form === 'per_minute' || price.form === 'per_search' ? price.credits : 0n;

/** Every dollar-priced model's credit price at the file's rate; without a rate, the first such model is refused. */
function priceFromFile(
  models: ReadonlyMap<string, ModelConfig>,
  pricing: PricingConfig | undefined,
): ReadonlyMap<string, ModelConfig> {
  const out = new Map<string, ModelConfig>();
  for (const [id, model] of models) {
    if (model.dollar === undefined) {
      out.set(id, model);
      continue;
    }
    const rate =
      pricing?.rate ??
      refuse('needs pricing.rate (toman per US dollar) to turn dollars into credits', 'models', id, 'price_usd');
    const margin = model.dollar.margin ?? pricing?.margin ?? Decimal.ZERO;
    const unit = model.dollar.unit;
    if (unit !== undefined) {
      const mediaPrice = unitPrice(unit, rate, margin);
      const each = mediaPrice.form === 'per_image' ? [...mediaPrice.perImage.values()] : [unitCredits(mediaPrice)];
      if (each.some((credits) => credits > MAX_PRICE))
        refuse(`makes a credit price above ${MAX_PRICE}`, 'models', id, 'price_usd');
      out.set(id, { ...model, mediaPrice });
      continue;
    }
    const price = dollarPrice(model.dollar, rate, margin);
    if (Object.values(price).some((credits) => credits > MAX_PRICE))
      refuse(`makes a credit price above ${MAX_PRICE}`, 'models', id, 'price_usd');
    out.set(id, { ...model, price });
  }
  return out;
}

// ---- the file ----------------------------------------------------------------------------

/**
 * The whole file. A top-level section that is absent keeps its built-in default; `models`, when
 * present, is the complete list of models; `tools` entries replace the built-in sandbox tool of
 * the same name, so one real provider is one entry away and the other tools keep working.
 */
export const configFile = mapping({
  models,
  tools: tools.optional(),
  limits: limits.optional(),
  oauth: oauth.optional(),
  responses: responses.optional(),
  chat: chatSection.optional(),
  anthropic: anthropicSection.optional(),
  payments: payments.optional(),
  console: consoleSection.optional(),
  pricing: pricingSection.optional(),
}).transform(
  refusing((read): Omit<SvcConfig, 'source'> => {
    const merged = builtInTools();
    for (const tool of Object.values(read.tools ?? {})) if (tool !== undefined) merged.set(tool.name, tool);
    const models = priceFromFile(read.models ?? builtInModels(), read.pricing);
    // The Responses API's hosted image_generation tool is served by an image model of this file.
    const imageModel = read.responses?.imageGenerationModel;
    if (imageModel !== undefined) {
      const kind = models.get(imageModel)?.kind;
      if (kind === undefined && !models.has(imageModel))
        refuse(`names no model of models (got ${imageModel})`, 'responses', 'image_generation_model');
      if (kind !== 'image')
        refuse(`must name a model of kind image (${imageModel} is of kind ${kind ?? 'chat'})`, 'responses', 'image_generation_model');
    }
    return {
      models,
      tools: merged,
      limits: read.limits ?? DEFAULT_LIMITS,
      oauth: read.oauth ?? DEFAULT_OAUTH,
      ...(read.responses === undefined ? {} : { responses: read.responses }),
      ...(read.chat === undefined ? {} : { chat: read.chat }),
      ...(read.anthropic === undefined ? {} : { anthropic: read.anthropic }),
      ...(read.payments === undefined ? {} : { payments: read.payments }),
      ...(read.console === undefined ? {} : { console: read.console }),
      ...(read.pricing === undefined ? {} : { pricing: read.pricing }),
    };
  }),
);
