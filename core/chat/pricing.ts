import type { TokenPrice } from '../config/types';
import type { WireUsage } from '../providers/llm/types';

const MILLION = 1_000_000n;

function ceilDiv(numerator: bigint, denominator: bigint): bigint {
  return (numerator + denominator - 1n) / denominator;
}

/**
 * The input tokens of a call split as SPEC §6 prices them. Every provider fills `WireUsage` by one
 * convention: `prompt_tokens` is every input token, `prompt_tokens_details.cached_tokens` the cache
 * reads and `prompt_tokens_details.cache_write_tokens` the cache writes among them; reasoning is
 * inside `completion_tokens`.
 */
export interface TokenParts {
  readonly uncached: number;
  readonly cached: number;
  readonly cacheWrite: number;
  readonly output: number;
}

/** Splits a usage into priced parts; parts an upstream over-reports are capped by the prompt. */
export function tokenParts(usage: WireUsage): TokenParts {
  const input = Math.max(0, usage.prompt_tokens);
  const cached = Math.min(input, Math.max(0, usage.prompt_tokens_details?.cached_tokens ?? 0));
  const cacheWrite = Math.min(input - cached, Math.max(0, usage.prompt_tokens_details?.cache_write_tokens ?? 0));
  return { uncached: input - cached - cacheWrite, cached, cacheWrite, output: Math.max(0, usage.completion_tokens) };
}

/**
 * SPEC §6: ceil((uncached × input_per_1m + cached × cached_input_per_1m + cache_write ×
 * cache_write_per_1m + output × output_per_1m) / 1e6), at least 1, in bigint. The sum is taken
 * before the one division, so it equals the exact rational ceiling.
 */
export function partsCost(price: TokenPrice, parts: TokenParts): bigint {
  const total =
    BigInt(parts.uncached) * price.inputPer1m +
    BigInt(parts.cached) * (price.cachedInputPer1m ?? price.inputPer1m) +
    BigInt(parts.cacheWrite) * (price.cacheWritePer1m ?? price.inputPer1m) +
    BigInt(parts.output) * price.outputPer1m;
  const cost = ceilDiv(total, MILLION);
  return cost < 1n ? 1n : cost;
}

/** The price of a chat call's usage (SPEC §6). */
export function usageCost(price: TokenPrice, usage: WireUsage): bigint {
  return partsCost(price, tokenParts(usage));
}

/** Every input token at the input price: `usageCost` of a usage with no cache parts. */
export function tokenCost(price: TokenPrice, inputTokens: number, outputTokens: number): bigint {
  return partsCost(price, { uncached: inputTokens, cached: 0, cacheWrite: 0, output: outputTokens });
}

/**
 * The hold: the input upper bound at the highest of the input rates (the upstream decides what is
 * cached or written to a cache, so any split must fit), plus every output token the call may
 * produce (n × the limit).
 */
export function holdAmount(price: TokenPrice, inputUpperBound: number, outputLimit: number): bigint {
  let inputRate = price.inputPer1m;
  for (const rate of [price.cachedInputPer1m, price.cacheWritePer1m])
    if (rate !== undefined && rate > inputRate) inputRate = rate;
  return tokenCost({ inputPer1m: inputRate, outputPer1m: price.outputPer1m }, inputUpperBound, outputLimit);
}
