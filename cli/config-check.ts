import {
  Decimal,
  describeMediaPrice,
  fullTariff,
  listPrices,
  loadConfig,
  loadEnv,
  type ModelPrices,
  type SvcConfig,
  type TokenPrice,
} from '../core';
import type { CommandContext } from './context';
import { table, toJson, type JsonOut } from './output';

/**
 * A token tariff in words: `150000 in / 600000 out per 1M tokens` (a token-billed image model that
 * prices its input images apart: `… in / N image in / … out`).
 */
function tariffText(price: TokenPrice): string {
  const images = price.imageInputPer1m === undefined ? '' : ` / ${price.imageInputPer1m} image in`;
  return `${price.inputPer1m} in${images} / ${price.outputPer1m} out per 1M tokens`;
}

// A dollar price's key in the words of tariffText and describeMediaPrice.
const USD_WORDS: Readonly<Record<string, string>> = {
  input_per_1m: 'in',
  image_input_per_1m: 'image in',
  output_per_1m: 'out',
  cached_input_per_1m: 'cached in',
  cache_write_per_1m: 'cache write',
  cache_write_1h_per_1m: 'cache write 1h',
  per_1m_characters: 'per 1M characters',
  per_minute: 'per minute',
  per_search: 'per search',
};

/**
 * Where a model priced from the dollar gets its credit prices (SPEC §15): `from $5 in / $40 out
 * per 1M tokens at rate 98000, margin 0.2` (per image: `from $0.04 per image 1024x1024/standard,
 * … at …`); undefined for a model priced in credits.
 */
function dollarText(prices: ModelPrices | undefined, rate: bigint | undefined): string | undefined {
  if (prices === undefined || prices.priceUsd === null || rate === undefined) return undefined;
  const tokens: string[] = [];
  const units: string[] = [];
  // Token keys in the order tariffText reads (in, image in, out, then the cache keys).
  const order = Object.keys(USD_WORDS);
  const entries = Object.entries(prices.priceUsd).sort(([a], [b]) => order.indexOf(a) - order.indexOf(b));
  for (const [key, usd] of entries) {
    if (!(usd instanceof Decimal)) {
      for (const [size, each] of Object.entries(usd)) units.push(`$${each.toString()} per image ${size}`);
    } else if (key.endsWith('_per_1m') && key !== 'per_1m_characters') {
      tokens.push(`$${usd.toString()} ${USD_WORDS[key] ?? key}`);
    } else units.push(`$${usd.toString()} ${USD_WORDS[key] ?? key}`);
  }
  const from = [...(tokens.length === 0 ? [] : [`${tokens.join(' / ')} per 1M tokens`]), ...units].join(', ');
  return `from ${from} at rate ${rate}, margin ${prices.margin?.toString() ?? '0'}`;
}

/** What the configuration holds, with no secret in it (API keys and header values are never shown). */
function summary(config: SvcConfig): { readonly [key: string]: JsonOut } {
  const dollars = new Map(listPrices(config, config.pricing?.rate).map((m) => [m.id, m]));
  return {
    source: config.source,
    // The file's rate and default margin (SPEC §15): the credit prices below are at this rate; a
    // rate stored in the database (`svc price rate set`) wins at run time (`svc price list`).
    pricing: {
      rate: config.pricing?.rate ?? null,
      margin: (config.pricing?.margin ?? Decimal.ZERO).toJSON(),
      rate_from: 'file',
    },
    models: [...config.models.values()].map((model) => ({
      id: model.id,
      kind: model.kind ?? 'chat',
      aliases: [...model.aliases],
      price: { ...fullTariff(model.price, model.kind) },
      // A media model's own price form (SPEC §14), where it is not priced by tokens.
      ...(model.mediaPrice === undefined || model.mediaPrice.form === 'tokens'
        ? {}
        : { media_price: describeMediaPrice(model.mediaPrice) }),
      // Priced from the dollar (SPEC §15): the dollar prices as configured and the margin in force.
      ...usdJson(dollars.get(model.id)),
      context_window: model.contextWindow,
      max_output_tokens: model.maxOutputTokens,
      upstreams: model.upstreams.map((u) => ({
        name: u.name,
        provider: u.provider,
        upstream_model: u.upstreamModel,
        priority: u.priority,
        weight: u.weight,
        api_key: u.apiKey !== undefined,
        headers: Object.keys(u.headers),
      })),
    })),
    tools: [...config.tools.values()].map((tool) => ({
      name: tool.name,
      provider: tool.provider,
      base_url: tool.baseUrl === '' ? null : tool.baseUrl,
      api_key: tool.apiKey !== undefined,
      price:
        tool.price.kind === 'flat'
          ? { per_call: tool.price.credits }
          : {
              input_per_1m: tool.price.tariff.inputPer1m,
              output_per_1m: tool.price.tariff.outputPer1m,
              cap: tool.price.cap,
            },
    })),
    limits: {
      requests_per_minute: config.limits.requestsPerMinute,
      tokens_per_minute: config.limits.tokensPerMinute ?? null,
      max_body_bytes: config.limits.maxBodyBytes,
      hold_ttl_seconds: config.limits.holdTtlSeconds,
      stream_stall_seconds: config.limits.streamStallSeconds,
      redis_failure: config.limits.redisFailure ?? 'open',
      upstream_connections: config.limits.upstreamConnections,
      upstream_queue_ms: config.limits.upstreamQueueMs,
      max_connections: config.limits.maxConnections,
      max_connections_per_address: config.limits.maxConnectionsPerAddress,
      headers_timeout_seconds: config.limits.headersTimeoutSeconds,
      request_timeout_seconds: config.limits.requestTimeoutSeconds,
      body_idle_seconds: config.limits.bodyIdleSeconds,
    },
    payments:
      config.payments === undefined
        ? null
        : {
            public_url: config.payments.publicUrl,
            min_toman: config.payments.minToman,
            max_toman: config.payments.maxToman,
            expire_minutes: config.payments.expireMinutes,
            // Merchants are credentials: said to be set, never shown.
            gateways: [...config.payments.gateways.values()].map((g) => ({
              name: g.name,
              base_url: g.baseUrl,
              merchant: true,
              callback_url: `${config.payments?.publicUrl ?? ''}/console/payments/${g.name}/return`,
            })),
          },
    console: { signup: config.console?.signup ?? 'closed' },
  };
}

/** A dollar-priced model's `price_usd` (as configured) and margin in force, as JSON; nothing for one priced in credits. */
function usdJson(prices: ModelPrices | undefined): { readonly [key: string]: JsonOut } {
  if (prices === undefined || prices.priceUsd === null) return {};
  return {
    price_usd: Object.fromEntries(
      Object.entries(prices.priceUsd).map(([key, usd]) => [
        key,
        usd instanceof Decimal
          ? usd.toJSON()
          : Object.fromEntries(Object.entries(usd).map(([size, each]) => [size, each.toJSON()])),
      ]),
    ),
    margin: prices.margin?.toJSON() ?? null,
  };
}

/** What the file's rate is worth at run time, in words (the models' credit prices above are at it). */
function rateText(config: SvcConfig): string | undefined {
  const rate = config.pricing?.rate;
  const anyDollar = [...config.models.values()].some((m) => m.dollar !== undefined);
  if (rate === undefined && !anyDollar) return undefined;
  return (
    `pricing: rate ${rate ?? 'none'} toman per US dollar (the file's pricing.rate), margin ` +
    `${(config.pricing?.margin ?? Decimal.ZERO).toString()} by default; prices from the dollar are shown at this rate. ` +
    `The file's rate is only the first: once a rate is stored in the database (svc price rate set), the stored ` +
    `rate wins at run time (svc price list shows the prices in force)`
  );
}

/**
 * `svc config check [--file PATH]`: validates the configuration file (SVC_CONFIG by default) as
 * `svc serve` would at start, without starting anything, and says what it configures. A bad file
 * is the same error, naming the key, and a non-zero exit.
 */
export function configCheck(ctx: CommandContext): Promise<void> {
  const path = ctx.args.strings.get('file') ?? loadEnv(ctx.env).configPath;
  const config = loadConfig(path, ctx.env);
  if (ctx.json) {
    ctx.out(toJson({ ok: true, ...summary(config) }));
    return Promise.resolve();
  }
  const dollars = new Map(listPrices(config, config.pricing?.rate).map((m) => [m.id, m]));
  const models = table(
    ['model', 'kind', 'upstreams', 'price'],
    [...config.models.values()].map((m) => {
      const credits =
        m.mediaPrice === undefined || m.mediaPrice.form === 'tokens'
          ? tariffText(m.price)
          : describeMediaPrice(m.mediaPrice);
      const from = dollarText(dollars.get(m.id), config.pricing?.rate);
      return [
        [m.id, ...m.aliases].join(', '),
        m.kind ?? 'chat',
        m.upstreams.map((u) => u.name).join(' '),
        from === undefined ? credits : `${credits} (${from})`,
      ];
    }),
  );
  const rate = rateText(config);
  const tools = table(
    ['tool', 'provider', 'price'],
    [...config.tools.values()].map((t) => [
      t.name,
      t.provider,
      t.price.kind === 'flat' ? `${t.price.credits} per call` : `${tariffText(t.price.tariff)}, hold ${t.price.cap}`,
    ]),
  );
  const { limits } = config;
  ctx.out(
    [
      `configuration ${config.source}: valid`,
      '',
      models,
      ...(rate === undefined ? [] : [rate]),
      '',
      tools,
      '',
      `limits: ${limits.requestsPerMinute} requests/min per key` +
        `${limits.tokensPerMinute === undefined ? '' : `, ${limits.tokensPerMinute} tokens/min`}` +
        `, bodies up to ${limits.maxBodyBytes} bytes, holds live ${limits.holdTtlSeconds} s`,
      `connections: ${limits.upstreamConnections} per upstream origin (a call waits ${limits.upstreamQueueMs} ms at most), ` +
        `${limits.maxConnections} from clients (${limits.maxConnectionsPerAddress} per address); ` +
        `request head ${limits.headersTimeoutSeconds} s, request ${limits.requestTimeoutSeconds} s, body idle ${limits.bodyIdleSeconds} s`,
      config.payments === undefined
        ? 'payments: none (no self-serve top-up)'
        : `payments: ${[...config.payments.gateways.keys()].join(', ')}, ${config.payments.minToman}-${config.payments.maxToman} toman, ` +
          `callback ${config.payments.publicUrl}/console/payments/{gateway}/return`,
      `sign-up: ${config.console?.signup ?? 'closed'}`,
    ].join('\n'),
  );
  return Promise.resolve();
}
