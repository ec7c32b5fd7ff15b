import { countInWorker, INLINE_COUNT_BYTES } from './token-worker';
import { countTokensLinear } from './tokens';

/*
 * What the core exchanges with an embedding upstream. Inputs are texts or token ids (OpenAI's
 * `input` takes both); the result is one vector per input, in order, and the input tokens the
 * upstream counted (or svc counted, where the upstream reports none).
 */

/** One input: a text, or the token ids of one (cl100k_base, as OpenAI's clients send them). */
export type EmbeddingInputValue = string | readonly number[];

export interface EmbedCall {
  /** The upstream's model name. */
  readonly model: string;
  readonly inputs: readonly EmbeddingInputValue[];
  /** The vector length asked for; absent: the upstream's default. */
  readonly dimensions?: number;
  /** OpenAI's `user`, where the upstream takes it. */
  readonly user?: string;
}

export interface EmbedResult {
  /** One vector per input, in the order of the inputs. */
  readonly vectors: number[][];
  /** Input tokens, as the upstream reported them (or counted locally when it reports none). */
  readonly promptTokens: number;
  /** True when the upstream reported no count and `promptTokens` is svc's own (SPEC §6, `usage.estimated`). */
  readonly estimated?: boolean;
}

/**
 * One embedding upstream. `embed` aborts the upstream request when `signal` fires; failures are
 * SvcError `upstream_*` like a ChatProvider's.
 */
export interface EmbeddingProvider {
  /** "openai", "gemini" or "sandbox", for usage records and logs. */
  readonly name: string;
  embed(call: EmbedCall, signal: AbortSignal): Promise<EmbedResult>;
}

/** The ids of OpenAI's cl100k_base vocabulary (special tokens included) are 0 … this − 1. */
export const TOKEN_ID_LIMIT = 100_277;

/**
 * The tokens of one input: cl100k_base's count of a text (what OpenAI's embedding models use),
 * or the ids given. Counting may stop once the count passes `stopAbove` (a limit about to refuse it).
 */
export function inputTokens(input: EmbeddingInputValue, stopAbove = Number.POSITIVE_INFINITY): number {
  return typeof input === 'string' ? countTokensLinear(input, stopAbove) : input.length;
}

/**
 * An upper bound of one input's tokens on any upstream, for the hold: a text's UTF-8 bytes (a
 * BPE or SentencePiece token is never shorter than one byte), or the ids given.
 */
export function inputTokenUpperBound(input: EmbeddingInputValue): number {
  return typeof input === 'string' ? Buffer.byteLength(input, 'utf8') : input.length;
}

/**
 * `inputTokens`, with a large text counted on the token worker rather than the event loop (the
 * count of one input; `stopAbove` as for `inputTokens`).
 */
export async function inputTokensOffThread(
  input: EmbeddingInputValue,
  stopAbove = Number.POSITIVE_INFINITY,
): Promise<number> {
  if (typeof input !== 'string') return input.length;
  if (Buffer.byteLength(input, 'utf8') <= INLINE_COUNT_BYTES) return countTokensLinear(input, stopAbove);
  return countInWorker(input, stopAbove);
}

/** The tokens of every input, counted as `inputTokensOffThread` does (a provider's usage when its upstream reports none). */
export async function countInputsOffThread(inputs: readonly EmbeddingInputValue[]): Promise<number> {
  let total = 0;
  for (const input of inputs) total += await inputTokensOffThread(input);
  return total;
}
