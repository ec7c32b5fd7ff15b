import type { Logger } from 'pino';
import type { BillingResult, Meter } from '../../billing/types';
import type { LimitsConfig } from '../../config/types';
import { isSvcError, SvcError } from '../../errors';
import type { JsonObject, WireMessage, WireToolCall } from '../../providers/llm/types';
import type { ToolService } from '../../tools/service';
import { affordableFrom, fitLimit, MIN_FITTED_OUTPUT_TOKENS, openLoopBudget, type LoopBudget } from '../budget';
import { withOutputLimit, type PreparedChat } from '../prepare';
import { holdAmount } from '../pricing';
import type { RunContext } from '../runner';
import { callMcpTool, type McpOptions } from './hosted-mcp';
import { queryOf, search } from './hosted-search';
import { generateImage, HOSTED_IMAGE_GENERATION, imageCallItem, type ImageGenerator } from './hosted-image';
import type { WebSource } from './response';
import type { ItemIds } from './common';
import type { ToolMap } from './tools';

/*
 * The agent loop svc runs for hosted tools (Responses' `web_search` and `mcp`, Gemini's
 * `googleSearch`), bounded and held up front (SPEC §6, agent loops):
 *
 * - at most `max_tool_calls` hosted calls, web searches and remote MCP calls together (the
 *   request's, capped by `limits.max_hosted_tool_calls`, default 8) and `limits.max_hosted_turns`
 *   model turns (default 4); calls the model asks for beyond the bound are not run (the model is
 *   told so), as OpenAI ignores them;
 * - ONE hold for the whole bound, placed before the first turn: every turn at its prompt bound
 *   (the request, plus what earlier turns said and found) and output limit, plus every hosted call
 *   at its price: a search at the web_search tariff, a remote MCP call at nothing (the remote
 *   server bills its own; hosted-mcp.ts). A wallet or cap that cannot cover it is refused up front
 *   and pays nothing; when the client set no output limit, the limit is fitted first, as for any
 *   call (small wallets);
 * - every turn and search is a step inside that hold (core/chat/budget.ts); the loop settles once,
 *   for the steps that ran, under the request id: one ledger entry, one usage record;
 * - a step that fails after earlier steps did work ends the loop: the client gets the work so far
 *   as an incomplete answer charged exactly what it carries; a failure before any work is the
 *   call's error, and costs nothing; a client that leaves stops the loop and pays for the steps
 *   that ran (the turn in progress as far as it streamed).
 */

/** Bytes of a hosted call's text (a search's, an MCP tool's) given to the model; longer text is cut (the hold counts on it). */
export const SEARCH_TEXT_BYTES = 4096;
// A token of what an earlier turn said, re-sent in a later turn's prompt, in bytes (the prompt
// bound counts bytes). An estimate: a later turn that does not fit what is left is fitted or ends
// the loop, so the hold is never exceeded whatever the text.
const BYTES_PER_OUTPUT_TOKEN = 4;
// Framing of one message in the prompt bound (promptTokenUpperBound counts 4 a message).
const MESSAGE_FRAMING = 64;

export const DEFAULT_MAX_HOSTED_TOOL_CALLS = 8;
export const DEFAULT_MAX_HOSTED_TURNS = 4;

/** How far one response's loop may go. */
export interface LoopBounds {
  /** Hosted calls (searches and MCP calls together) the loop may run. */
  readonly toolCalls: number;
  /** Model turns, the last one without tools; 1 when no search may run. */
  readonly turns: number;
}

export function loopBounds(maxToolCalls: number | null, limits: Pick<LimitsConfig, 'maxHostedToolCalls' | 'maxHostedTurns'>): LoopBounds {
  const most = limits.maxHostedToolCalls ?? DEFAULT_MAX_HOSTED_TOOL_CALLS;
  const toolCalls = maxToolCalls === null ? most : Math.min(maxToolCalls, most);
  // A turn that searches needs one after it to answer; more turns than searches + 1 cannot search.
  const turns = toolCalls === 0 ? 1 : Math.min(toolCalls + 1, Math.max(2, limits.maxHostedTurns ?? DEFAULT_MAX_HOSTED_TURNS));
  return { toolCalls, turns };
}

/** Why a loop ended before its answer, as the incomplete answer reports it. */
export interface LoopStop {
  readonly code: string;
  readonly message: string;
}

/** The text of a search result as the model gets it: cut at SEARCH_TEXT_BYTES. */
function capText(text: string): string {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= SEARCH_TEXT_BYTES) return text;
  // Cut on a character boundary: decoding drops a split last character as U+FFFD, trimmed here.
  return `${bytes.subarray(0, SEARCH_TEXT_BYTES).toString('utf8').replace(/\uFFFD+$/, '')}\n[cut: more than a hosted tool call may return to the model]`;
}

export interface HostedLoopDeps {
  readonly meter: Meter;
  readonly tools: Pick<ToolService, 'call' | 'list'>;
  readonly logger: Logger;
  /** How svc reaches the hosted mcp tool's servers. */
  readonly mcp: Omit<McpOptions, 'logger'>;
  /** The hosted image_generation tool's image model; absent: the tool is not served. */
  readonly images?: ImageGenerator | undefined;
}

export interface HostedLoop {
  readonly bounds: LoopBounds;
  /** The run of turn `turn` (its own request id for the step, the loop's meter). */
  turnRun(turn: number): RunContext;
  /** The chat of the first turn (its output limit fitted to the hold). */
  readonly first: PreparedChat;
  /** The chat of a later turn: the request plus `more`; `last` offers no tools. */
  next(more: WireMessage[], last: boolean): PreparedChat;
  /** Hosted calls still allowed. */
  left(): number;
  /**
   * Runs the hosted calls of a turn (as many as are left), yielding each one's start and end;
   * the messages for the next turn are pushed onto `more`.
   */
  hostedCalls(calls: readonly WireToolCall[], more: WireMessage[], ids: ItemIds): AsyncGenerator<SearchEvent>;
  /** What has been charged so far. */
  spent(): bigint;
  close(status: 'ok' | 'cancelled' | 'error'): Promise<BillingResult>;
}

export type SearchEvent =
  | { readonly kind: 'web_search_start'; readonly itemId: string; readonly query: string }
  | {
      readonly kind: 'web_search_done';
      readonly itemId: string;
      readonly item: JsonObject;
      readonly sources: readonly WebSource[];
      readonly cost: bigint;
    }
  | { readonly kind: 'mcp_call_start'; readonly itemId: string; readonly item: JsonObject }
  | { readonly kind: 'mcp_call_done'; readonly itemId: string; readonly item: JsonObject; readonly failed: boolean }
  | { readonly kind: 'image_call_start'; readonly itemId: string; readonly item: JsonObject }
  | { readonly kind: 'image_call_done'; readonly itemId: string; readonly item: JsonObject; readonly failed: boolean };

/** The most one search can cost: its flat price, or the cap of a token-billed one. */
function searchHold(tools: Pick<ToolService, 'list'>, map: ToolMap): bigint {
  if (![...map.values()].some((t) => t.kind === 'web_search')) return 0n;
  const listed = tools.list().find((t) => t.definition.name === 'web_search');
  if (listed === undefined) return 0n;
  return listed.price.kind === 'flat' ? listed.price.credits : listed.price.cap;
}

/**
 * The loop's hold for output limit `limit`: each turn at its prompt bound, which grows by what
 * the turns before it said and every search's text, plus every search at its price.
 */
function boundFor(chat: PreparedChat, prompt: number, bounds: LoopBounds, limit: number, perSearch: bigint): bigint {
  let total = BigInt(bounds.toolCalls) * perSearch;
  const grownPerTurn = limit * chat.choices * BYTES_PER_OUTPUT_TOKEN + MESSAGE_FRAMING;
  const found = bounds.toolCalls * (SEARCH_TEXT_BYTES + MESSAGE_FRAMING);
  for (let turn = 1; turn <= bounds.turns; turn++) {
    const input = prompt + (turn === 1 ? 0 : (turn - 1) * grownPerTurn + found);
    total += holdAmount(chat.model.price, input, limit * chat.choices);
  }
  return total;
}

/** A refused loop hold, in words that say what the whole loop reserves and how to make it smaller. */
function loopRefusal(
  error: SvcError,
  chat: PreparedChat,
  prompt: number,
  bounds: LoopBounds,
  needed: bigint,
  perSearch: bigint,
): SvcError {
  const smallest = boundFor(chat, prompt, bounds, MIN_FITTED_OUTPUT_TOKENS, perSearch);
  const credit =
    error.code === 'key_cap_exceeded'
      ? "raise the key's cap or wait for it to reset"
      : "top up the wallet (the console's Wallet page, or ask the operator)";
  return new SvcError(
    error.code,
    `${error.message}. A response with ${perSearch > 0n ? 'the hosted web_search tool' : 'hosted tools'} reserves the most it can cost before it starts: ` +
      `up to ${bounds.turns} model turns and ${bounds.toolCalls} ${perSearch > 0n ? 'searches' : 'hosted tool calls'}, ${needed.toString()} credits here` +
      `${chat.clientLimit ? ` (a lower ${chat.limitName} reserves less)` : ''}; the smallest such response needs ${smallest.toString()}. ` +
      `A lower max_tool_calls reserves less (0 runs no hosted call); or ${credit}. Nothing was charged.`,
    {
      ...(error.param === undefined ? {} : { param: error.param }),
      details: { ...(error.details ?? {}), smallest_call: Number(smallest) },
      cause: error,
    },
  );
}

/**
 * Opens the loop: fixes its bounds, places its one hold (fitting the output limit when the client
 * set none), and hands out its turns and searches.
 */
export async function openHostedLoop(
  deps: HostedLoopDeps,
  input: {
    readonly chat: PreparedChat;
    readonly bounds: LoopBounds;
    readonly continueWith: (more: WireMessage[], last: boolean) => PreparedChat;
    readonly run: RunContext;
    readonly toolMap: ToolMap;
  },
): Promise<HostedLoop> {
  const { bounds, run } = input;
  // Every hosted call is held at the dearest kind: a search's price when the request has the
  // web_search tool, else nothing (remote MCP calls cost nothing here).
  const perSearch = searchHold(deps.tools, input.toolMap);
  let chat = input.chat;
  const prompt = await chat.inputUpperBound.value();
  // The hosted image_generation tool's own hold, placed first (the loop's output limit is then
  // fitted to what is left): every hosted call at the image's dearest, one usage record of kind
  // image when the loop ends, none at all when the model made no image call.
  const imageTool = input.toolMap.get(HOSTED_IMAGE_GENERATION);
  const images = imageTool?.kind === 'image_generation' ? deps.images : undefined;
  const imageOptions = imageTool?.image?.options ?? {};
  let imageBudget: LoopBudget | undefined;
  if (images !== undefined) {
    const each = images.bound(imageOptions, imageTool?.image?.at ?? 'tools');
    const maxCost = BigInt(bounds.toolCalls) * each;
    try {
      imageBudget = await openLoopBudget(
        deps.meter,
        {
          principal: run.principal,
          requestId: `${run.requestId}:image_generation`,
          clientRequestId: run.clientRequestId,
          kind: 'image',
          resource: images.modelId,
          provider: images.provider,
          maxCost,
          pricing: images.pricing,
        },
        deps.logger,
      );
    } catch (error) {
      if (!isSvcError(error) || (error.code !== 'insufficient_credit' && error.code !== 'key_cap_exceeded'))
        throw error;
      throw new SvcError(
        error.code,
        `${error.message}. A response with the hosted image_generation tool reserves the most its images can cost before it starts: up to ${bounds.toolCalls} images of ${images.modelId} at ${each.toString()} credits each, ${maxCost.toString()} here. A lower max_tool_calls reserves less (0 makes no image); or ${error.code === 'key_cap_exceeded' ? "raise the key's cap or wait for it to reset" : "top up the wallet (the console's Wallet page, or ask the operator)"}. Nothing was charged.`,
        {
          ...(error.param === undefined ? {} : { param: error.param }),
          details: { ...(error.details ?? {}), image_hold: Number(maxCost) },
          cause: error,
        },
      );
    }
  }
  let budget: LoopBudget | undefined;
  try {
    for (let attempt = 0; budget === undefined; attempt++) {
      const maxCost = boundFor(chat, prompt, bounds, chat.outputLimit, perSearch);
      try {
        budget = await openLoopBudget(
          deps.meter,
          {
            principal: run.principal,
            requestId: run.requestId,
            clientRequestId: run.clientRequestId,
            kind: run.kind,
            resource: chat.model.id,
            provider: chat.provider.name,
            maxCost,
            tokenBudget: run.tokenBudget,
          },
          deps.logger,
        );
      } catch (error) {
        if (!isSvcError(error) || (error.code !== 'insufficient_credit' && error.code !== 'key_cap_exceeded'))
          throw error;
        const affordable = affordableFrom(error);
        const fitted =
          chat.clientLimit || affordable === undefined || attempt >= 3
            ? undefined
            : fitLimit(
                (limit) => boundFor(chat, prompt, bounds, limit, perSearch),
                affordable,
                MIN_FITTED_OUTPUT_TOKENS,
                chat.outputLimit - 1,
              );
        if (fitted === undefined) throw loopRefusal(error, chat, prompt, bounds, maxCost, perSearch);
        chat = withOutputLimit(chat, fitted);
      }
    }
  } catch (error) {
    // The loop could not be held: the image hold goes too, unrecorded (nothing was asked of it).
    await imageBudget?.close('error', true);
    throw error;
  }
  const held = budget;
  const imageHeld = imageBudget;
  const limit = chat.outputLimit;
  const fittedLimit = !chat.clientLimit && limit < input.chat.outputLimit;
  let searches = 0;
  const stepRun = (requestId: string): RunContext => ({
    ...run,
    requestId,
    meter: held.meter,
    // Later turns read the token budget afresh: the earlier turns spent from it.
    tokenBudget: undefined,
  });

  return {
    bounds,
    first: chat,
    turnRun: (turn) => (turn === 1 ? { ...run, meter: held.meter } : stepRun(`${run.requestId}:turn:${turn}`)),
    next(more, last) {
      const next = input.continueWith(more, last);
      return fittedLimit ? withOutputLimit(next, Math.min(limit, next.outputLimit)) : next;
    },
    left: () => bounds.toolCalls - searches,
    async *hostedCalls(calls, more, ids) {
      for (const call of calls) {
        if (searches >= bounds.toolCalls) {
          // Beyond max_tool_calls: not run, and the model is told why (the conversation needs an
          // answer for every call it made).
          more.push({
            role: 'tool',
            tool_call_id: call.id,
            content: `Not run: this response may run at most ${bounds.toolCalls} hosted tool calls. Answer with what has been found.`,
          });
          continue;
        }
        const n = ++searches;
        const tool = input.toolMap.get(call.function.name);
        if (tool?.kind === 'image_generation' && images !== undefined && imageHeld !== undefined) {
          const itemId = ids.imageCall();
          yield { kind: 'image_call_start', itemId, item: imageCallItem(itemId, 'in_progress') };
          const done = await generateImage(
            images,
            imageOptions,
            call,
            {
              principal: run.principal,
              requestId: `${run.requestId}:image_generation:${n}`,
              clientRequestId: run.clientRequestId,
              signal: run.signal,
            },
            imageHeld.meter,
            itemId,
          );
          more.push(done.message);
          yield { kind: 'image_call_done', itemId, item: done.item, failed: done.failed };
          continue;
        }
        if (tool?.kind === 'mcp' && tool.mcp !== undefined) {
          const itemId = ids.mcpCall();
          const started = {
            type: 'mcp_call',
            id: itemId,
            server_label: tool.mcp.spec.label,
            name: tool.name,
            arguments: call.function.arguments,
            output: null,
            error: null,
            status: 'in_progress',
            approval_request_id: null,
          };
          yield { kind: 'mcp_call_start', itemId, item: started };
          const done = await callMcpTool(
            tool.mcp,
            tool.name,
            call,
            itemId,
            { ...deps.mcp, logger: deps.logger },
            run.signal,
            `${run.requestId}:mcp:${n}`,
          );
          more.push({ role: 'tool', tool_call_id: call.id, content: capText(done.text) });
          yield { kind: 'mcp_call_done', itemId, item: done.item, failed: done.failed };
          continue;
        }
        const itemId = ids.webSearch();
        yield { kind: 'web_search_start', itemId, query: queryOf(call) };
        const done = await search(deps.tools, call, { ...run, meter: held.meter }, n, itemId);
        more.push({ ...done.message, content: capText(String(done.message.content ?? '')) });
        yield { kind: 'web_search_done', itemId, item: done.item, sources: done.sources, cost: done.cost };
      }
    },
    spent: () => held.spent() + (imageHeld?.spent() ?? 0n),
    async close(status) {
      // The images first (their own settle and usage record), then the turns: the balance after
      // the loop's settle is the response's.
      const image = imageHeld === undefined ? undefined : await imageHeld.close(status, true);
      const turns = await held.close(status);
      if (image === undefined || image.cost === 0n) return turns;
      return {
        requestId: turns.requestId,
        cost: turns.cost + image.cost,
        balanceAfter: turns.cost === 0n ? image.balanceAfter : turns.balanceAfter,
      };
    },
  };
}

/** Why a step's failure ended the loop, in words for the incomplete answer. */
export function stopOf(error: unknown): LoopStop {
  if (isSvcError(error)) {
    switch (error.code) {
      case 'insufficient_credit':
      case 'key_cap_exceeded':
        return { code: 'budget', message: "The response's hold could not cover another step; the work so far is returned." };
      case 'context_length_exceeded':
        return { code: 'context_length_exceeded', message: `${error.message} The work so far is returned.` };
      default:
        if (error.code !== 'internal')
          return { code: 'upstream_error', message: `A later step failed (${error.code}); the work so far is returned.` };
    }
  }
  return { code: 'server_error', message: 'A later step failed; the work so far is returned.' };
}
