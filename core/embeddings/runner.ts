import type { Logger } from 'pino';
import type { Principal } from '../auth/types';
import type { BillingResult, Meter } from '../billing/types';
import type { ModelConfig } from '../config/types';
import { invalidArgument, isSvcError } from '../errors';
import { tokenCost } from '../chat/pricing';
import {
  inputTokens,
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
  readonly billing: BillingResult;
}

/**
 * Checks an embeddings request against the model: inputs present, each non-empty and within the
 * model's tokens per input (`context_window`, counted with cl100k_base), token ids within
 * cl100k_base, at most MAX_EMBEDDING_INPUTS inputs and MAX_EMBEDDING_REQUEST_TOKENS tokens, and
 * `dimensions` one the model offers. Nothing is ever truncated: an input too long is a 400
 * naming it (`input[i]`).
 */
export function prepareEmbedding(
  model: ModelConfig,
  provider: EmbeddingProvider,
  inputs: readonly EmbeddingInputValue[],
  dimensions: number,
  user: string,
): PreparedEmbedding {
  if (inputs.length === 0) throw invalidArgument('input', `Invalid 'input': expected at least one input.`);
  if (inputs.length > MAX_EMBEDDING_INPUTS)
    throw invalidArgument(
      'input',
      `Invalid 'input': ${inputs.length} inputs, more than the ${MAX_EMBEDDING_INPUTS} one request may carry.`,
    );
  let total = 0;
  let upper = 0;
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
    const tokens = inputTokens(input, model.contextWindow);
    if (tokens > model.contextWindow)
      throw invalidArgument(
        param,
        `Invalid '${param}': more than the ${model.contextWindow} tokens per input of '${model.id}'. Split it; svc never truncates.`,
      );
    total += tokens;
    upper += inputTokenUpperBound(input);
  });
  if (total > MAX_EMBEDDING_REQUEST_TOKENS)
    throw invalidArgument(
      'input',
      `Invalid 'input': ${total} tokens in all, more than the ${MAX_EMBEDDING_REQUEST_TOKENS} one request may carry.`,
    );
  const offered = model.dimensions ?? [];
  if (dimensions !== 0 && !offered.includes(dimensions)) {
    const list = offered.length === 0 ? 'only its native length (send no dimensions)' : offered.join(', ');
    throw invalidArgument(
      'dimensions',
      `Invalid 'dimensions': the model '${model.id}' does not offer ${dimensions}; it offers ${list}.`,
    );
  }
  // The sandbox has no native length of its own: it always makes the configured one.
  const sent = dimensions !== 0 ? dimensions : model.provider === 'sandbox' ? offered[0] : undefined;
  return {
    model,
    provider,
    inputs,
    dimensions: sent,
    user: user === '' ? undefined : user,
    inputUpperBound: upper,
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
  const billing = await call.finish({ cost, inputTokens: result.promptTokens, outputTokens: 0, status: 'ok' });
  return { vectors: result.vectors, promptTokens: result.promptTokens, billing };
}
