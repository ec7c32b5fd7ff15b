import { countTokens } from 'gpt-tokenizer/cjs/encoding/cl100k_base';

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

// cl100k_base's BPE is quadratic in the length of one pre-tokenized piece (a run of letters or of
// punctuation): 100,000 letters in a row take it some 20 s. Runs longer than this are counted in
// slices of this length (a slice ends a merge, so the count may differ by a token per slice),
// which keeps the count linear; ordinary text never has such runs and is counted exactly.
const LONG_RUN = 256;
const LONG_RUN_RE = /(\S{257,}|\s{257,})/;

function countText(text: string, stopAbove: number): number {
  if (!LONG_RUN_RE.test(text)) return countTokens(text);
  let total = 0;
  for (const [i, part] of text.split(LONG_RUN_RE).entries()) {
    // split() with a capture group puts the long runs at odd positions.
    if (i % 2 === 0) total += part === '' ? 0 : countTokens(part);
    else
      for (let at = 0; at < part.length && total <= stopAbove; at += LONG_RUN)
        total += countTokens(part.slice(at, at + LONG_RUN));
    if (total > stopAbove) return total;
  }
  return total;
}

/**
 * The tokens of one input: cl100k_base's count of a text (what OpenAI's embedding models use),
 * or the ids given. Counting may stop once the count passes `stopAbove` (a limit about to refuse it).
 */
export function inputTokens(input: EmbeddingInputValue, stopAbove = Number.POSITIVE_INFINITY): number {
  return typeof input === 'string' ? countText(input, stopAbove) : input.length;
}

/**
 * An upper bound of one input's tokens on any upstream, for the hold: a text's UTF-8 bytes (a
 * BPE or SentencePiece token is never shorter than one byte), or the ids given.
 */
export function inputTokenUpperBound(input: EmbeddingInputValue): number {
  return typeof input === 'string' ? Buffer.byteLength(input, 'utf8') : input.length;
}
