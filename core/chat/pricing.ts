import type { TokenPrice } from '../config/types';
import { imageInputRate, readRate, write1hRate, writeRate } from '../config/tariff';
import type { WireUsage } from '../providers/llm/types';

const MILLION = 1_000_000n;

function ceilDiv(numerator: bigint, denominator: bigint): bigint {
  return (numerator + denominator - 1n) / denominator;
}

/**
 * The tokens of a call split as SPEC §6 and §13 price them: the five counts a usage record keeps
 * apart. Every provider fills `WireUsage` by one convention: `prompt_tokens` is every input token,
 * `prompt_tokens_details.cached_tokens` the cache reads and `prompt_tokens_details.cache_write_tokens`
 * the cache writes among them, `cache_write_1h_tokens` the one-hour writes among those (the rest are
 * five-minute writes); reasoning is inside `completion_tokens`.
 */
export interface TokenParts {
  readonly uncached: number;
  readonly cached: number;
  /** Every cache write: five-minute and one-hour. */
  readonly cacheWrite: number;
  /** The one-hour writes among `cacheWrite`. */
  readonly cacheWrite1h: number;
  readonly output: number;
}

/** Splits a usage into priced parts; parts an upstream over-reports are capped by the prompt. */
export function tokenParts(usage: WireUsage): TokenParts {
  const input = Math.max(0, usage.prompt_tokens);
  const details = usage.prompt_tokens_details;
  const cached = Math.min(input, Math.max(0, details?.cached_tokens ?? 0));
  const cacheWrite = Math.min(input - cached, Math.max(0, details?.cache_write_tokens ?? 0));
  const cacheWrite1h = Math.min(cacheWrite, Math.max(0, details?.cache_write_1h_tokens ?? 0));
  return {
    uncached: input - cached - cacheWrite,
    cached,
    cacheWrite,
    cacheWrite1h,
    output: Math.max(0, usage.completion_tokens),
  };
}

/**
 * SPEC §6/§13: ceil((uncached × input_per_1m + cached × cached_input_per_1m + 5m writes ×
 * cache_write_per_1m + 1h writes × cache_write_1h_per_1m + output × output_per_1m) / 1e6), at
 * least 1, in bigint. The sum is taken before the one division, so it equals the exact rational
 * ceiling.
 */
export function partsCost(price: TokenPrice, parts: TokenParts): bigint {
  const total =
    BigInt(parts.uncached) * price.inputPer1m +
    BigInt(parts.cached) * readRate(price) +
    BigInt(parts.cacheWrite - parts.cacheWrite1h) * writeRate(price) +
    BigInt(parts.cacheWrite1h) * write1hRate(price) +
    BigInt(parts.output) * price.outputPer1m;
  const cost = ceilDiv(total, MILLION);
  return cost < 1n ? 1n : cost;
}

/**
 * What a call's cache reads saved (SPEC §13): their price at the input rate minus their price at
 * the cache-read rate, in millionths of a credit (exact; summed over records, then divided).
 * Negative only for a tariff that prices reads above input.
 */
export function cacheSavedMicro(price: TokenPrice, parts: TokenParts): bigint {
  return BigInt(parts.cached) * (price.inputPer1m - readRate(price));
}

/** The price of a chat call's usage (SPEC §6). */
export function usageCost(price: TokenPrice, usage: WireUsage): bigint {
  return partsCost(price, tokenParts(usage));
}

/**
 * Every input token at the input price (`usageCost` of a usage with no cache parts), except the
 * `imageTokens` among them (a token-billed image model's input images, SPEC §14) at
 * `image_input_per_1m`: ceil((text × input_per_1m + images × image_input_per_1m + output ×
 * output_per_1m) / 1e6), at least 1.
 */
export function tokenCost(price: TokenPrice, inputTokens: number, outputTokens: number, imageTokens = 0): bigint {
  const images = Math.min(Math.max(0, inputTokens), Math.max(0, imageTokens));
  if (images === 0)
    return partsCost(price, { uncached: inputTokens, cached: 0, cacheWrite: 0, cacheWrite1h: 0, output: outputTokens });
  const total =
    BigInt(Math.max(0, inputTokens - images)) * price.inputPer1m +
    BigInt(images) * imageInputRate(price) +
    BigInt(Math.max(0, outputTokens)) * price.outputPer1m;
  const cost = ceilDiv(total, MILLION);
  return cost < 1n ? 1n : cost;
}

/**
 * The hold: the input upper bound at the highest of the input rates (the upstream decides what is
 * read from or written to which cache, so any split must fit: every prompt token may be a one-hour
 * write), plus every output token the call may produce (n × the limit).
 */
export function holdAmount(price: TokenPrice, inputUpperBound: number, outputLimit: number): bigint {
  let inputRate = price.inputPer1m;
  for (const rate of [readRate(price), writeRate(price), write1hRate(price)]) if (rate > inputRate) inputRate = rate;
  return tokenCost({ inputPer1m: inputRate, outputPer1m: price.outputPer1m }, inputUpperBound, outputLimit);
}
