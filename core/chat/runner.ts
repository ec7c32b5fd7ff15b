import { randomBase64url } from '../ids';
import type { Logger } from 'pino';
import type { Principal } from '../auth/types';
import type { CreditCheck } from '../billing/admission';
import type { TokenPrice } from '../config/types';
import type { BillingResult, Meter, MeteredCall, MeterStart } from '../billing/types';
import { isSvcError, SvcError } from '../errors';
import { affordableFrom, fitLimit, isCreditRefusal, MIN_FITTED_OUTPUT_TOKENS } from './budget';
import { INLINE_COUNT_BYTES } from '../providers/llm/token-worker';
import { estimateUsage } from '../providers/llm/tokens';
import type { PassThroughBatch, WireChunk, WireCompletion, WireUsage } from '../providers/llm/types';
import { withOutputLimit, type PreparedChat } from './prepare';
import { cacheSavedMicro, holdAmount, partsCost, tokenCost, tokenParts, usageCost } from './pricing';
import { readRate, write1hRate, writeRate } from '../config/tariff';
import { pricingJson } from '../pricing/prices';

/** Who pays and under which request id. */
export interface RunContext {
  readonly principal: Principal;
  readonly requestId: string;
  /** The id the client gave the request, for correlation only (never billing). */
  readonly clientRequestId?: string | undefined;
  /** 'chat' or 'responses', for the usage record. */
  readonly kind: string;
  /** Aborted when the caller goes away; aborts the upstream request. */
  readonly signal: AbortSignal;
  /** The call's token budget as its context read it: admits the first turn without a second read. */
  readonly tokenBudget?: MeterStart['tokenBudget'];
  /** The meter of an agent loop's budget (core/chat/budget.ts) its steps draw from; absent: the wallet's. */
  readonly meter?: Meter | undefined;
}

export interface CompletedRun {
  readonly completion: WireCompletion;
  readonly cost: bigint;
  readonly billing: BillingResult;
}

/**
 * `complete` on the fast path: the upstream's answer as it came (`data`, svc's usage to go between
 * its two pieces) or, where it needed the translation's normalising, the completion.
 */
export type PassedRun =
  | CompletedRun
  | {
      readonly data: readonly [string, string];
      readonly usage: WireUsage;
      readonly cost: bigint;
      readonly billing: BillingResult;
    };

/**
 * What a streamed run yields: chunks with choices, then one `final` after the charge is settled.
 * On the fast path (`passThrough`) the chunks come as `pass`: each the upstream's own JSON text
 * (svc's model id in it) or, where the upstream needed the translation's normalising, a chunk.
 */
export type StreamItem =
  | { readonly kind: 'chunk'; readonly chunk: WireChunk }
  | {
      readonly kind: 'final';
      readonly chunk: WireChunk;
      readonly usage: WireUsage;
      readonly cost: bigint;
      readonly billing: BillingResult;
      /** On the fast path, the upstream's own closing event (`PassThroughBatch.closing`), if its wire has one. */
      readonly closing?: PassThroughBatch['closing'];
    };

export interface ChatRunner {
  complete(prepared: PreparedChat, run: RunContext): Promise<CompletedRun>;
  stream(prepared: PreparedChat, run: RunContext): AsyncGenerator<StreamItem>;
  /**
   * `stream` on the fast path (core/chat/fast-path.ts): the same hold, settle, release and
   * cancellation, over the provider's pass-through (the upstream's chunks as they come).
   */
  passThrough(prepared: PreparedChat, run: RunContext, includeUsage: boolean): AsyncGenerator<PassThroughItem>;
  /** `complete` on the fast path: the same hold, settle and release, over the provider's pass-through. */
  passThroughComplete(prepared: PreparedChat, run: RunContext): Promise<PassedRun>;
}

/** What the fast path's stream yields: `stream`'s final item, after chunks as they came. */
export type PassThroughItem =
  | {
      readonly kind: 'pass';
      readonly chunks: readonly (string | WireChunk)[];
      /** The SSE event name of each chunk, for a wire that names them (`PassThroughBatch.events`). */
      readonly events?: readonly string[] | undefined;
    }
  | Extract<StreamItem, { kind: 'final' }>;

/** What the metered stream needs of one item a provider yields. */
interface StreamStep<I> {
  /** The usage the item carries, if any (the last one seen is billed). */
  readonly usage?: WireUsage | null | undefined;
  /** The upstream's count of the prompt before the end, if the item carries it (`WireChunk.prompt`). */
  readonly prompt?: WireUsage | undefined;
  /** Whether the item carries a finish reason: the end of the answer, its usage still to come. */
  readonly ends?: boolean | undefined;
  /** The output text the item carries, for svc's own count. */
  readonly text: string;
  /** What goes to the caller, if anything. */
  readonly item?: I;
  /** The header of the last chunk with choices so far, which the final usage chunk repeats. */
  readonly last?: Pick<WireChunk, 'id' | 'created' | 'system_fingerprint' | 'service_tier'> | undefined;
  /** The upstream's closing event, which goes with the final item (`PassThroughBatch.closing`). */
  readonly closing?: PassThroughBatch['closing'];
}

export function newCompletionId(): string {
  return `chatcmpl-${randomBase64url(14)}`;
}

function errorCodeOf(error: unknown): string {
  return isSvcError(error) ? error.code : 'internal';
}

function deltaText(chunk: WireChunk): string {
  let text = '';
  for (const choice of chunk.choices) {
    // Reasoning text is output the model produced: an estimate counts it like the answer.
    text += (choice.delta.content ?? '') + (choice.delta.refusal ?? '') + (choice.delta.reasoning_content ?? '');
    for (const call of choice.delta.tool_calls ?? [])
      text += (call.function?.name ?? '') + (call.function?.arguments ?? '');
  }
  return text;
}

/** The cheaper of two usages at `price` (the first on a tie). */
function cheaper(price: TokenPrice, a: WireUsage, b: WireUsage): WireUsage {
  return usageCost(price, b) < usageCost(price, a) ? b : a;
}

/**
 * What a caller that left a stream pays (SPEC §6: leaving never costs more than finishing): the
 * prompt and the text it was handed (answer, refusal, reasoning, tool calls; never the framing).
 *
 * - The upstream's usage, where it came and prices lower than svc's count (a finished stream is
 *   charged that usage).
 * - Else the prompt as the upstream counted it before the end (`prompt`: Anthropic's
 *   `message_start`, Gemini's running totals), cache reads and writes apart (finishing would be
 *   charged that prompt too), with the handed text counted by svc's tokenizer.
 * - Else svc's count of both, with the prompt priced at the cheapest input rate of the tariff
 *   (cache reads, as a rule): the upstream has not said how much of the prompt it read from its
 *   cache, and finishing could have found all of it there. The record keeps svc's count.
 *
 * The hold caps it as it caps every charge.
 */
export function departedCharge(
  prepared: PreparedChat,
  delivered: string,
  reported: WireUsage | undefined,
  prompt?: WireUsage,
): { usage: WireUsage; cost: bigint } {
  const price = prepared.model.price;
  const counted = estimateUsage(prepared.request.messages, prepared.request.tools, delivered);
  if (reported !== undefined) {
    const usage = cheaper(price, counted, reported);
    return { usage, cost: usageCost(price, usage) };
  }
  if (prompt !== undefined) {
    const split: WireUsage = {
      prompt_tokens: prompt.prompt_tokens,
      completion_tokens: counted.completion_tokens,
      total_tokens: prompt.prompt_tokens + counted.completion_tokens,
      ...(prompt.prompt_tokens_details !== undefined ? { prompt_tokens_details: prompt.prompt_tokens_details } : {}),
    };
    return { usage: split, cost: usageCost(price, split) };
  }
  const tokens = tokenParts(counted);
  const cheapest = [price.inputPer1m, readRate(price), writeRate(price), write1hRate(price)].reduce((a, b) =>
    b < a ? b : a,
  );
  const cost = partsCost(
    { inputPer1m: cheapest, outputPer1m: price.outputPer1m },
    { uncached: tokens.uncached, cached: 0, cacheWrite: 0, cacheWrite1h: 0, output: tokens.output },
  );
  return { usage: counted, cost };
}

/**
 * The token counts of a usage record: every input token, the output, the cache parts (reads,
 * writes, the one-hour writes among them), what the reads saved at `price`, and whether svc
 * counted them.
 */
function usageTokens(
  usage: WireUsage,
  price: TokenPrice,
): {
  inputTokens: number;
  outputTokens: number;
  cachedTokens: number;
  cacheWriteTokens: number;
  cacheWrite1hTokens: number;
  cacheSavedMicro: bigint;
  reasoningTokens?: number;
  estimated: boolean;
} {
  const parts = tokenParts(usage);
  return {
    inputTokens: usage.prompt_tokens,
    outputTokens: usage.completion_tokens,
    cachedTokens: parts.cached,
    cacheWriteTokens: parts.cacheWrite,
    cacheWrite1hTokens: parts.cacheWrite1h,
    cacheSavedMicro: cacheSavedMicro(price, parts),
    ...(usage.completion_tokens_details === undefined
      ? {}
      : { reasoningTokens: usage.completion_tokens_details.reasoning_tokens }),
    estimated: usage.estimated === true,
  };
}

function outputTokensHeld(prepared: PreparedChat): string {
  const total = prepared.outputLimit * prepared.choices;
  return prepared.choices > 1 ? `${total} (${prepared.choices} choices of ${prepared.outputLimit})` : String(total);
}

/** The hold of a prepared call: its prompt bound (`inputUpperBound`'s value) plus every output token it may produce. */
export function holdOf(prepared: PreparedChat, bound: number): bigint {
  return holdAmount(prepared.model.price, bound, prepared.outputLimit * prepared.choices);
}

/**
 * A refused hold of a chat call says why it was so large and what the smallest call would need,
 * in the words of the client's wire (`limitName`): the reservation covers the longest answer the
 * call allows; a limit the client set can be lowered, and credit is what the rest needs.
 */
function withHoldHint(error: unknown, prepared: PreparedChat, bound: number | undefined): unknown {
  if (!isCreditRefusal(error)) return error;
  // Refused before the prompt was counted (the credit check): the least such a call can cost.
  const smallest = holdAmount(
    prepared.model.price,
    bound ?? prepared.request.messages.length,
    MIN_FITTED_OUTPUT_TOKENS * prepared.choices,
  );
  const lower = prepared.clientLimit
    ? `; a lower ${prepared.limitName} reserves less (only what is used is charged)`
    : '';
  const credit =
    error.code === 'key_cap_exceeded'
      ? "raise the key's cap or wait for it to reset"
      : "top up the wallet (the console's Wallet page, or ask the operator)";
  return new SvcError(
    error.code,
    `${error.message}. A call reserves the most it can cost: its prompt plus ${outputTokensHeld(prepared)} output tokens${lower}. ` +
      // Before the prompt was counted only a floor is known: said as such, never as the figure.
      `The smallest call with this prompt (${MIN_FITTED_OUTPUT_TOKENS} output tokens) needs ${bound === undefined ? 'at least ' : ''}${smallest.toString()} credits: ${credit}.`,
    {
      ...(error.param === undefined ? {} : { param: error.param }),
      details: { ...(error.details ?? {}), smallest_call: Number(smallest) },
      cause: error,
    },
  );
}

/**
 * Runs chat requests against their provider with the wallet in the loop: a hold for the upper
 * bound before the upstream is contacted, then exactly one settle (actual usage) or release
 * (failure). A caller that leaves a stream once the upstream has begun it pays for the prompt and
 * the output it was handed until then (`departedCharge`: never more than finishing); an upstream
 * failure, or a caller that leaves before the upstream sent anything, costs nothing.
 */
export function createChatRunner(deps: {
  meter: Meter;
  logger: Logger;
  now: () => number;
  /** Checks the wallet before a large prompt is counted (issue 31); absent: no check before the hold. */
  credit?: CreditCheck;
}): ChatRunner {
  // The price of the usage. The wallet never charges more than the hold (SPEC §6: the hold is the
  // most a call can cost): a usage priced above it (an upstream that overran the limit it was
  // sent) is charged at the hold, and the meter logs, counts and marks it; the billing result, and
  // so the cost the client is shown, is what was charged.
  const priced = (prepared: PreparedChat, usage: WireUsage): bigint => usageCost(prepared.model.price, usage);

  /**
   * Places the hold. When the client set no output limit and the wallet (or the key's cap, or the
   * loop's budget) cannot cover the model's longest answer, the call is fitted instead: the
   * largest limit the refusal says is affordable (at least 16 tokens) is sent upstream, and the
   * answer ends with finish_reason "length" if it runs out (SPEC §6, small wallets).
   */
  async function begin(
    prepared: PreparedChat,
    run: RunContext,
  ): Promise<{ call: MeteredCall; hold: bigint; prepared: PreparedChat }> {
    const meter = run.meter ?? deps.meter;
    let current = prepared;
    let bound: number;
    try {
      // A prompt large enough for the token worker is counted only for a wallet that covers the
      // least the call can cost (a token per message, no output): a refused call costs no CPU. A
      // step of a loop is inside the loop's hold already.
      if (deps.credit !== undefined && run.meter === undefined && prepared.inputUpperBound.bytes > INLINE_COUNT_BYTES)
        await deps.credit(run.principal, tokenCost(prepared.model.price, prepared.request.messages.length, 0));
      bound = await prepared.inputUpperBound.value();
    } catch (error) {
      throw withHoldHint(error, prepared, undefined);
    }
    for (let attempt = 0; ; attempt++) {
      const hold = holdOf(current, bound);
      try {
        const call = await meter.begin({
          principal: run.principal,
          requestId: run.requestId,
          clientRequestId: run.clientRequestId,
          kind: run.kind,
          resource: current.model.id,
          provider: current.provider.name,
          maxCost: hold,
          tokenBudget: run.tokenBudget,
          pricing: pricingJson(current.model),
        });
        return { call, hold, prepared: current };
      } catch (error) {
        const affordable = affordableFrom(error);
        const fitted =
          current.clientLimit || affordable === undefined || attempt >= 3
            ? undefined
            : fitLimit(
                (limit) => holdOf(withOutputLimit(current, limit), bound),
                affordable,
                MIN_FITTED_OUTPUT_TOKENS,
                current.outputLimit - 1,
              );
        if (fitted === undefined) throw withHoldHint(error, current, bound);
        current = withOutputLimit(current, fitted);
      }
    }
  }

  /** The hold, the provider's answer, then exactly one settle on its usage or one release. */
  async function settled<T extends { readonly usage: WireUsage }>(
    asked: PreparedChat,
    run: RunContext,
    answer: (prepared: PreparedChat) => Promise<T>,
  ): Promise<{ answer: T; prepared: PreparedChat; billing: BillingResult }> {
    const { call, prepared } = await begin(asked, run);
    let answered: T;
    try {
      answered = await answer(prepared);
    } catch (error) {
      await call.fail({ errorCode: errorCodeOf(error), status: run.signal.aborted ? 'cancelled' : 'error' });
      throw error;
    }
    const cost = priced(prepared, answered.usage);
    const billing = await call.finish({ cost, ...usageTokens(answered.usage, prepared.model.price), status: 'ok' });
    return { answer: answered, prepared, billing };
  }

  return {
    async complete(asked, run) {
      const { answer, prepared, billing } = await settled(asked, run, (p) =>
        p.provider.complete(p.request, run.signal),
      );
      return {
        completion: { ...answer, id: newCompletionId(), model: prepared.model.id },
        cost: billing.cost,
        billing,
      };
    },

    async passThroughComplete(asked, run) {
      const { answer, prepared, billing } = await settled(asked, run, (p) => {
        const complete = p.provider.passThrough?.complete;
        if (complete === undefined) throw new SvcError('internal', `provider ${p.provider.name} has no fast path`);
        return complete(p.request, run.signal);
      });
      if ('data' in answer) return { data: answer.data, usage: answer.usage, cost: billing.cost, billing };
      // A completion the provider normalised keeps the upstream's id, as a normalised chunk does.
      return {
        completion: { ...answer, id: answer.id === '' ? newCompletionId() : answer.id, model: prepared.model.id },
        cost: billing.cost,
        billing,
      };
    },

    stream(asked, run) {
      return metered(
        asked,
        run,
        (prepared) => prepared.provider.stream(prepared.request, run.signal),
        (chunk: WireChunk, id, prepared): StreamStep<StreamItem> => {
          if (chunk.choices.length === 0) return { usage: chunk.usage, text: '' };
          // The upstream's early count of the prompt is svc's to bill by, never the caller's to see.
          const { prompt, ...rest } = chunk;
          const out: WireChunk = { ...rest, id, model: prepared.model.id };
          // The final chunk repeats its created and fingerprint (its tier is the caller's to add).
          const { service_tier: _tier, ...last } = out;
          const ends = out.choices.some((c) => c.finish_reason !== null && c.finish_reason !== undefined);
          return { usage: chunk.usage, text: deltaText(out), item: { kind: 'chunk', chunk: out }, last, prompt, ends };
        },
      );
    },

    passThrough(asked, run, includeUsage) {
      return metered(
        asked,
        run,
        (prepared) => {
          const calls = prepared.provider.passThrough;
          if (calls === undefined)
            throw new SvcError('internal', `provider ${prepared.provider.name} has no fast path`);
          return calls.stream(prepared.request, includeUsage, run.signal);
        },
        (batch: PassThroughBatch, id, prepared): StreamStep<PassThroughItem> => {
          // A chunk the provider normalised is written like a translated one (svc's id where it had none).
          const chunks = batch.chunks.map((c) =>
            typeof c === 'string' ? c : { ...c, id: c.id === '' ? id : c.id, model: prepared.model.id },
          );
          const last = batch.last === undefined ? undefined : { ...batch.last, id: batch.last.id || id };
          return {
            usage: batch.usage,
            prompt: batch.prompt,
            ends: batch.ends,
            text: batch.text,
            ...(chunks.length > 0 ? { item: { kind: 'pass' as const, chunks, events: batch.events } } : {}),
            last,
            closing: batch.closing,
          };
        },
      );
    },
  };

  /**
   * A metered stream: the hold, the provider's items (`step` says what each carries and yields),
   * then exactly one settle on the last usage (svc's own count when there was none), one charge
   * for what the caller was handed when it leaves after the upstream began, or one release.
   */
  async function* metered<T, I>(
    asked: PreparedChat,
    run: RunContext,
    open: (prepared: PreparedChat) => AsyncIterable<T>,
    step: (value: T, id: string, prepared: PreparedChat) => StreamStep<I>,
  ): AsyncGenerator<I | Extract<StreamItem, { kind: 'final' }>> {
    {
      const { call, prepared } = await begin(asked, run);
      const id = newCompletionId();
      let iterator: AsyncIterator<T>;
      try {
        iterator = open(prepared)[Symbol.asyncIterator]();
      } catch (error) {
        // A provider that refuses before it returns a stream has produced nothing: free the hold now.
        await call.fail({ errorCode: errorCodeOf(error), status: 'error' });
        throw error;
      }
      // The output text handed to the caller so far (what a caller that leaves pays for).
      let produced = '';
      let usage: WireUsage | undefined;
      let prompt: WireUsage | undefined;
      let last: StreamStep<I>['last'];
      let closing: StreamStep<I>['closing'];
      let closed = false;
      let drained = false;
      // Whether the upstream has begun the stream (sent a chunk): only then has it produced anything.
      let started = false;
      // An item that ends the answer, held until the usage after it came (`StreamStep.ends`).
      let ending: { readonly item: I; readonly text: string } | undefined;

      const chargeProduced = async (): Promise<void> => {
        closed = true;
        const { usage: partial, cost } = departedCharge(prepared, produced, usage, prompt);
        await call.finish({
          cost,
          ...usageTokens(partial, prepared.model.price),
          estimated: false,
          status: 'cancelled',
        });
      };

      try {
        for (;;) {
          const next = await iterator.next();
          if (next.done === true) break;
          started = true;
          const read = step(next.value, id, prepared);
          if (read.usage) usage = read.usage;
          if (read.prompt) prompt = read.prompt;
          if (read.closing !== undefined) closing = read.closing;
          if (read.item === undefined) continue;
          if (read.last !== undefined) last = read.last;
          if (ending !== undefined) {
            produced += ending.text;
            yield ending.item;
            ending = undefined;
          }
          // The end of the answer waits for the usage that follows it (OpenAI chat sends it in a
          // chunk of its own): a caller that stops reading at the finish reason still gets the
          // charge finishing has, not the estimate of one that left.
          if (read.ends === true && usage === undefined) {
            ending = { item: read.item, text: read.text };
            continue;
          }
          produced += read.text;
          yield read.item;
        }
        if (ending !== undefined) {
          produced += ending.text;
          yield ending.item;
        }
        drained = true;
      } catch (error) {
        const cancelled = run.signal.aborted || (isSvcError(error) && error.code === 'cancelled');
        // The caller left mid-stream: it pays for what it was handed until then. Before the
        // upstream sent anything (the caller left during the hold, the connect or the wait for the
        // headers, or as the upstream failed), nothing was produced and nothing is charged.
        if (cancelled && started) await chargeProduced();
        else {
          closed = true;
          await call.fail({ errorCode: errorCodeOf(error), status: cancelled ? 'cancelled' : 'error' });
        }
        throw cancelled ? new SvcError('cancelled', 'The request was cancelled', { cause: error }) : error;
      } finally {
        // Reached without `closed` only when the consumer left the loop early.
        if (!closed && !drained) {
          await iterator.return?.();
          await chargeProduced();
        }
      }
      closed = true;
      // Every provider ends with a usage chunk (svc's own count when the upstream sent none).
      const final = usage ?? estimateUsage(prepared.request.messages, prepared.request.tools, produced);
      const cost = priced(prepared, final);
      const billing = await call.finish({ cost, ...usageTokens(final, prepared.model.price), status: 'ok' });
      yield {
        kind: 'final',
        chunk: {
          id: last?.id ?? id,
          created: last?.created ?? Math.floor(deps.now() / 1000),
          model: prepared.model.id,
          choices: [],
          usage: final,
          ...(last?.system_fingerprint !== undefined ? { system_fingerprint: last.system_fingerprint } : {}),
          ...(last?.service_tier !== undefined ? { service_tier: last.service_tier } : {}),
        },
        usage: final,
        cost: billing.cost,
        billing,
        ...(closing === undefined ? {} : { closing }),
      };
    }
  }
}
