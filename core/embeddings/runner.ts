import type { Logger } from 'pino';
import type { Principal } from '../auth/types';
import type { BillingResult, Meter } from '../billing/types';
import type { ModelConfig } from '../config/types';
import { invalidArgument, isSvcError } from '../errors';
import { tokenCost } from '../chat/pricing';
import { INLINE_COUNT_BYTES } from '../providers/llm/token-worker';
import { TOKENIZE_MAX_BYTES } from '../providers/llm/tokens';
import { pricingJson } from '../pricing/prices';
import {
  inputTokensOffThread,
  inputTokenUpperBound,
  TOKEN_ID_LIMIT,
  type EmbeddingInputValue,
  type EmbeddingProvider,
} from '../providers/llm/embeddings';

/** Inputs one request may carry (OpenAI's limit). */
export const MAX_EMBEDDING_INPUTS = 2048;
/** Tokens one request may carry over all its inputs (OpenAI's limit). */
export const MAX_EMBEDDING_REQUEST_TOKENS = 300_000;

/** A validated embeddings request, ready for the meter and the provider. */
export interface PreparedEmbedding {
  readonly model: ModelConfig;
  readonly provider: EmbeddingProvider;
  readonly inputs: readonly EmbeddingInputValue[];
  /** What goes upstream: absent leaves the upstream's default length. */
  readonly dimensions: number | undefined;
  readonly user: string | undefined;
  /** An upper bound of the input tokens, for the hold. */
  readonly inputUpperBound: number;
}

export interface EmbeddingRun {
  readonly principal: Principal;
  readonly requestId: string;
  readonly clientRequestId?: string | undefined;
  readonly signal: AbortSignal;
}

export interface EmbeddingResult {
  readonly vectors: number[][];
  readonly promptTokens: number;
  /** The upstream reported no count: `promptTokens` is svc's own. */
  readonly estimated: boolean;
  readonly billing: BillingResult;
}

/**
 * Checks an embeddings request against the model: inputs present, each non-empty and within the
 * model's tokens per input (`context_window`, counted with cl100k_base), token ids within
 * cl100k_base, at most MAX_EMBEDDING_INPUTS inputs and MAX_EMBEDDING_REQUEST_TOKENS tokens, and
 * `dimensions` one the model offers. Nothing is ever truncated: an input too long is a 400
 * naming it (`input[i]`).
 *
 * The tokenizer's work is bounded (issue 31): a text no longer in UTF-8 bytes than the context
 * window is within it without counting (a token is at least a byte); only longer texts, and the
 * rest when the request's total might pass MAX_EMBEDDING_REQUEST_TOKENS, are counted, longer
 * texts first, at most TOKENIZE_MAX_BYTES of text per request, large ones on the token worker,
 * and only after `credit` found the wallet covering the least the call can cost (a token per
 * input). Beyond that budget a text counts by its bytes: one longer than the context window is
 * refused (send fewer inputs per request), and the request limit is checked on what was counted
 * (the hold, by bytes, stays an upper bound either way).
 */
export async function prepareEmbedding(
  model: ModelConfig,
  provider: EmbeddingProvider,
  inputs: readonly EmbeddingInputValue[],
  dimensions: number,
  user: string,
  credit: (leastCost: bigint) => Promise<void> = () => Promise.resolve(),
): Promise<PreparedEmbedding> {
  if (inputs.length === 0) throw invalidArgument('input', `Invalid 'input': expected at least one input.`);
  if (inputs.length > MAX_EMBEDDING_INPUTS)
    throw invalidArgument(
      'input',
      `Invalid 'input': ${inputs.length} inputs, more than the ${MAX_EMBEDDING_INPUTS} one request may carry.`,
    );
  const window = model.contextWindow;
  const upper: number[] = [];
  inputs.forEach((input, i) => {
    const param = `input[${i}]`;
    if (input.length === 0) throw invalidArgument(param, `Invalid '${param}': an input must not be empty.`);
    if (typeof input !== 'string') {
      const bad = input.find((id) => !Number.isInteger(id) || id < 0 || id >= TOKEN_ID_LIMIT);
      if (bad !== undefined)
        throw invalidArgument(
          param,
          `Invalid '${param}': token id ${bad} is out of range (cl100k_base ids are 0 to ${TOKEN_ID_LIMIT - 1}).`,
        );
    }
    upper.push(inputTokenUpperBound(input));
  });
  const tooLong = (i: number, tokens: number | string): never => {
    throw invalidArgument(
      `input[${i}]`,
      `Invalid 'input[${i}]': more than the ${window} tokens per input of '${model.id}'${typeof tokens === 'string' ? tokens : ''}. Split it; svc never truncates.`,
    );
  };
  // Token ids are counted as given.
  inputs.forEach((input, i) => {
    if (typeof input !== 'string' && input.length > window) tooLong(i, input.length);
  });
  const offered = model.dimensions ?? [];
  if (dimensions !== 0 && !offered.includes(dimensions)) {
    const list = offered.length === 0 ? 'only its native length (send no dimensions)' : offered.join(', ');
    throw invalidArgument(
      'dimensions',
      `Invalid 'dimensions': the model '${model.id}' does not offer ${dimensions}; it offers ${list}.`,
    );
  }
  const total = upper.reduce((sum, n) => sum + n, 0);
  // Which texts to count: those that may pass the context window, longest first; then, if the
  // request might pass its token limit, the others too (all within the budget).
  const texts = inputs.flatMap((input, i) => (typeof input === 'string' ? [i] : []));
  const needed = texts.filter((i) => (upper[i] ?? 0) > window).sort((a, b) => (upper[b] ?? 0) - (upper[a] ?? 0));
  if (total > MAX_EMBEDDING_REQUEST_TOKENS) needed.push(...texts.filter((i) => (upper[i] ?? 0) <= window));
  const counts = new Map<number, number>();
  if (needed.length > 0) {
    let budget = TOKENIZE_MAX_BYTES;
    const plan = needed.filter((i) => {
      const bytes = upper[i] ?? 0;
      if (bytes > budget) return false;
      budget -= bytes;
      return true;
    });
    const planned = plan.reduce((sum, i) => sum + (upper[i] ?? 0), 0);
    if (planned > INLINE_COUNT_BYTES) await credit(tokenCost(model.price, inputs.length, 0));
    for (const i of plan) {
      const tokens = await inputTokensOffThread(inputs[i] as string, window);
      if (tokens > window) tooLong(i, tokens);
      counts.set(i, tokens);
    }
    for (const i of needed)
      if (!counts.has(i) && (upper[i] ?? 0) > window)
        tooLong(
          i,
          ` as far as svc can tell: it counts at most ${TOKENIZE_MAX_BYTES} bytes of text per request with the tokenizer, and beyond that an input counts as one token per UTF-8 byte (send fewer inputs in this request)`,
        );
  }
  // The request limit, on what is known exactly: counted texts and token ids.
  let known = 0;
  inputs.forEach((input, i) => {
    if (typeof input !== 'string') known += input.length;
    else if (counts.has(i)) known += counts.get(i) ?? 0;
    else if (total <= MAX_EMBEDDING_REQUEST_TOKENS) known += upper[i] ?? 0;
  });
  if (known > MAX_EMBEDDING_REQUEST_TOKENS)
    throw invalidArgument(
      'input',
      `Invalid 'input': ${known} tokens in all, more than the ${MAX_EMBEDDING_REQUEST_TOKENS} one request may carry.`,
    );
  // The sandbox has no native length of its own: it always makes the configured one.
  const sent = dimensions !== 0 ? dimensions : model.provider === 'sandbox' ? offered[0] : undefined;
  return {
    model,
    provider,
    inputs,
    dimensions: sent,
    user: user === '' ? undefined : user,
    inputUpperBound: total,
  };
}

/**
 * Runs a prepared request with the wallet in the loop: a hold for the input upper bound at the
 * input price before the upstream is contacted, then exactly one settle at
 * ceil(prompt_tokens × input_per_1m / 1e6), at least 1, from the upstream's usage, or a release
 * when the upstream fails (nothing charged).
 */
export async function runEmbedding(
  deps: { meter: Meter; logger: Logger },
  prepared: PreparedEmbedding,
  run: EmbeddingRun,
): Promise<EmbeddingResult> {
  const { model, provider } = prepared;
  const hold = tokenCost(model.price, prepared.inputUpperBound, 0);
  const call = await deps.meter.begin({
    principal: run.principal,
    requestId: run.requestId,
    clientRequestId: run.clientRequestId,
    kind: 'embedding',
    resource: model.id,
    provider: provider.name,
    maxCost: hold,
    pricing: pricingJson(model),
  });
  let result;
  try {
    result = await provider.embed(
      {
        model: model.upstreamModel,
        inputs: prepared.inputs,
        ...(prepared.dimensions === undefined ? {} : { dimensions: prepared.dimensions }),
        ...(prepared.user === undefined ? {} : { user: prepared.user }),
      },
      run.signal,
    );
  } catch (error) {
    await call.fail({
      errorCode: isSvcError(error) ? error.code : 'internal',
      status: run.signal.aborted ? 'cancelled' : 'error',
    });
    throw error;
  }
  // Never charged above the hold (the meter logs and counts a usage priced above it).
  const cost = tokenCost(model.price, result.promptTokens, 0);
  const estimated = result.estimated === true;
  const billing = await call.finish({
    cost,
    inputTokens: result.promptTokens,
    outputTokens: 0,
    status: 'ok',
    estimated,
  });
  return { vectors: result.vectors, promptTokens: result.promptTokens, estimated, billing };
}
