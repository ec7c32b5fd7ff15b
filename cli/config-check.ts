import { describeMediaPrice, loadConfig, loadEnv, type SvcConfig } from '../core';
import type { CommandContext } from './context';
import { table, toJson, type JsonOut } from './output';

/** A token tariff in words: `150000 in / 600000 out per 1M tokens`. */
function tariffText(price: { inputPer1m: bigint; outputPer1m: bigint }): string {
  return `${price.inputPer1m} in / ${price.outputPer1m} out per 1M tokens`;
}

/** What the configuration holds, with no secret in it (API keys and header values are never shown). */
function summary(config: SvcConfig): { readonly [key: string]: JsonOut } {
  return {
    source: config.source,
    models: [...config.models.values()].map((model) => ({
      id: model.id,
      kind: model.kind ?? 'chat',
      aliases: [...model.aliases],
      price: {
        input_per_1m: model.price.inputPer1m,
        output_per_1m: model.price.outputPer1m,
        cached_input_per_1m: model.price.cachedInputPer1m ?? model.price.inputPer1m,
        cache_write_per_1m: model.price.cacheWritePer1m ?? model.price.inputPer1m,
        cache_write_1h_per_1m: model.price.cacheWrite1hPer1m ?? model.price.cacheWritePer1m ?? model.price.inputPer1m,
      },
      // A media model's own price form (SPEC §14), where it is not priced by tokens.
      ...(model.mediaPrice === undefined || model.mediaPrice.form === 'tokens'
        ? {}
        : { media_price: describeMediaPrice(model.mediaPrice) }),
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
  const models = table(
    ['model', 'kind', 'upstreams', 'price'],
    [...config.models.values()].map((m) => [
      [m.id, ...m.aliases].join(', '),
      m.kind ?? 'chat',
      m.upstreams.map((u) => u.name).join(' '),
      m.mediaPrice === undefined || m.mediaPrice.form === 'tokens'
        ? tariffText(m.price)
        : describeMediaPrice(m.mediaPrice),
    ]),
  );
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
