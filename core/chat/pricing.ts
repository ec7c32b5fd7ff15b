import type { TokenPrice } from '../config/types';

const MILLION = 1_000_000n;

function ceilDiv(numerator: bigint, denominator: bigint): bigint {
  return (numerator + denominator - 1n) / denominator;
}

/**
 * SPEC §6: ceil(input × input_per_1m / 1e6 + output × output_per_1m / 1e6), at least 1.
 * The sum is taken before the one division, so it equals the exact rational ceiling.
 */
export function tokenCost(price: TokenPrice, inputTokens: number, outputTokens: number): bigint {
  const total = BigInt(inputTokens) * price.inputPer1m + BigInt(outputTokens) * price.outputPer1m;
  const cost = ceilDiv(total, MILLION);
  return cost < 1n ? 1n : cost;
}

/** The hold: the cost of the input upper bound plus every output token the call may produce (n × the limit). */
export function holdAmount(price: TokenPrice, inputUpperBound: number, outputLimit: number): bigint {
  return tokenCost(price, inputUpperBound, outputLimit);
}
