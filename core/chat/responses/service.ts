import { trace } from '@opentelemetry/api';
import type { Logger } from 'pino';
import type { Principal } from '../../auth/types';
import { requireModel, requireTool } from '../../auth/scope';
import type { BillingResult } from '../../billing/types';
import type { SvcConfig } from '../../config/types';
import { invalidArgument, SvcError } from '../../errors';
import { findChatModel } from '../../models/catalog';
import type { PriceBook } from '../../pricing/book';
import type {
  ChatProvider,
  JsonObject,
  WireMessage,
  WireTool,
  WireToolCall,
  WireUsage,
} from '../../providers/llm/types';
import { estimatePromptTokens } from '../../providers/llm/tokens';
import type { ToolService } from '../../tools/service';
import { prepareChat, type PreparedChat } from '../prepare';
import type { ChatRunner, RunContext } from '../runner';
import { addUsage, responseEvents, type ResponseEventOut, type ResponseStreamItem } from './events';
import { hostedOnly, withCitations } from './hosted-search';
import { loopBounds, openHostedLoop, stopOf, type HostedLoop, type LoopStop } from './hosted-loop';
import type { Meter } from '../../billing/types';
import type { CreditCheck } from '../../billing/admission';
import { inputItemList, type ItemPage } from './items';
import { modelOf, referencedItemIds, translateRequest } from './request';
import { itemIdsFor, newResponseId, responseIdOfItem, type ItemIds, type ResponseEcho } from './common';
import { HOSTED_WEB_SEARCH, isHosted, type ToolMap } from './tools';
import { checkResponseFields } from './fields';
import { listMcpServers, mcpListToolsItem, mcpSpecs, type McpListing } from './hosted-mcp';
import type { Resolver } from '../../net/guarded-fetch';
import {
  type WebSource,
  outputItemsOf,
  responseObject,
  responsesUsage,
  statusFor,
  stoppedStatus,
} from './response';
import type { ResponseStore } from './store';
import { createNative, passesThrough, streamNative, streamPassThrough, type PassedEvents } from './native';
import { withNativeBody } from '../native';
import { cacheReady, cacheReadyNative } from '../cache';
import { allowedTools } from '../../providers/llm/translate';
import { nativeCompactionWrapper } from './compaction';
import type { CompactionSeal } from './seal';
import type { ImageGenerator } from './hosted-image';

/** A validated CreateResponse request. */
export interface PreparedResponse {
  readonly chat: PreparedChat;
  readonly echo: ResponseEcho;
  readonly toolMap: ToolMap;
  /**
   * The chat of a later model turn: the request plus `more` messages (the searches svc ran);
   * `last` forbids further tool calls.
   */
  continueWith(more: WireMessage[], last: boolean): PreparedChat;
  /** Whether svc runs a hosted tool for this request (an agent loop, hosted-loop.ts). */
  readonly hosted: boolean;
  /** The hosted mcp tools' servers, as they listed their tools (each an `mcp_list_tools` item). */
  readonly mcp: readonly McpListing[];
  /** The conversation so far (stored previous items plus this request's input). */
  readonly conversation: JsonObject[];
  /** The body is passed through to a Responses upstream (native.ts) rather than translated. */
  readonly native: boolean;
  /** Passed through to an upstream that compacts natively: its compaction output items, sealed for the caller. */
  readonly wrap?: (item: JsonObject) => Promise<JsonObject>;
  /** The hosted image_generation tool's image model, priced at admission with the chat (SPEC §15). */
  readonly images?: ImageGenerator;
}

export interface ResponsesService {
  /**
   * `requestId` names the request in the log line that lists the tools left out; `upstream` is the
   * body as a native upstream gets it (its own compaction items unwrapped, compaction.ts).
   */
  prepare(
    body: JsonObject,
    principal: Principal,
    requestId?: string,
    upstream?: JsonObject,
    sessionId?: string,
  ): Promise<PreparedResponse>;
  /**
   * `pass`: the caller takes the fast path's answer (core/chat/fast-path.ts `usesResponsesFastPath`
   * decides), the Response's text as `data` beside it where it can be written so (native.ts).
   */
  create(
    prepared: PreparedResponse,
    run: RunContext,
    pass?: boolean,
  ): Promise<{ response: JsonObject; billing: BillingResult; data?: string }>;
  stream(prepared: PreparedResponse, run: RunContext): AsyncGenerator<ResponseEventOut>;
  /**
   * `stream` on the fast path (core/chat/fast-path.ts `usesResponsesFastPath` decides): the
   * upstream's events as it wrote them, svc's fields in place (native.ts `streamPassThrough`).
   */
  passThrough(prepared: PreparedResponse, run: RunContext): AsyncGenerator<PassedEvents>;
  get(id: string, principal: Principal): Promise<JsonObject>;
  inputItems(id: string, principal: Principal, page: ItemPage): Promise<JsonObject>;
  /** Deletes a stored response (not found when it is not the caller's). */
  delete(id: string, principal: Principal): Promise<void>;
  /** Cancels a background response; none of the stored ones is (background is refused). */
  cancel(id: string, principal: Principal): Promise<JsonObject>;
  /** The prompt tokens a body would use (the same estimate the hold starts from); nothing runs. */
  countInputTokens(body: JsonObject, principal: Principal): Promise<number>;
}

const nativeContext = (prepared: PreparedResponse): Parameters<typeof createNative>[1] => ({
  chat: prepared.chat,
  store: prepared.echo.store,
  conversation: prepared.conversation,
  ...(prepared.wrap === undefined ? {} : { wrap: prepared.wrap }),
});

/** The tool choice of the turns after the first: a forced one becomes `auto`. */
function forcedOnce(choice: unknown): { tool_choice?: string | JsonObject } {
  // allowed_tools keeps its list (the prompt the same), its mode no longer forcing a call.
  const allowed = allowedTools(choice);
  if (allowed !== undefined)
    return {
      tool_choice: {
        ...(choice as JsonObject),
        allowed_tools: { ...((choice as JsonObject)['allowed_tools'] as JsonObject), mode: 'auto' },
      },
    };
  return choice === 'required' || (typeof choice === 'object' && choice !== null) ? { tool_choice: 'auto' } : {};
}

/** An allowed_tools choice naming only tools still offered (its mode alone when none is left). */
function withoutUnoffered(
  choice: string | JsonObject | undefined,
  tools: readonly WireTool[],
): string | JsonObject | undefined {
  const allowed = allowedTools(choice);
  if (allowed === undefined) return choice;
  const names = allowed.names.filter((name) => tools.some((t) => t.function.name === name));
  if (names.length === 0) return allowed.mode;
  return {
    type: 'allowed_tools',
    allowed_tools: { mode: allowed.mode, tools: names.map((name) => ({ type: 'function', function: { name } })) },
  };
}

// The chat body's `messages` is the Responses request's `input`.
function withInputParam<T>(prepare: () => T): T {
  try {
    return prepare();
  } catch (error) {
    if (error instanceof SvcError && error.code === 'context_length_exceeded')
      throw new SvcError(error.code, error.message, { param: 'input', cause: error });
    throw error;
  }
}

export function createResponsesService(deps: {
  config: Pick<SvcConfig, 'models' | 'limits'> & Partial<Pick<SvcConfig, 'responses' | 'anthropic'>>;
  providers: ReadonlyMap<string, ChatProvider>;
  runner: ChatRunner;
  responses: ResponseStore;
  /** Runs the hosted web_search tool at its MCP tariff, inside the response's hold. */
  tools: Pick<ToolService, 'call' | 'list'>;
  /** The wallet's meter: an agent loop places its one hold through it. */
  meter: Meter;
  /** Checks the wallet before svc contacts a server the request names (hosted mcp); absent: no check. */
  credit?: CreditCheck;
  logger: Logger;
  now: () => number;
  /** Prices the response at its admission, once for every step (SPEC §15). */
  prices: Pick<PriceBook, 'price'>;
  /** Tests: name resolution for the hosted mcp tool's servers. */
  mcpResolve?: Resolver;
  /** Seals the compaction items of upstreams that compact natively; absent: they go out as made. */
  seal?: CompactionSeal;
  /** The hosted image_generation tool's image model (`responses.image_generation_model`); absent: refused. */
  images?: ImageGenerator;
}): ResponsesService {
  const seconds = (): number => Math.floor(deps.now() / 1000);
  const mcp = {
    insecure: deps.config.responses?.mcpInsecureServers ?? false,
    ...(deps.mcpResolve === undefined ? {} : { resolve: deps.mcpResolve }),
  };

  /** Opens the agent loop of a request that has a hosted tool (one hold for its whole bound). */
  function openLoop(prepared: PreparedResponse, run: RunContext): Promise<HostedLoop> {
    // The image model as priced at admission; never the configuration's own prices.
    const { images: _unpriced, ...loopDeps } = deps;
    return openHostedLoop(
      { ...loopDeps, mcp, ...(prepared.images === undefined ? {} : { images: prepared.images }) },
      {
        chat: prepared.chat,
        bounds: loopBounds(prepared.echo.maxToolCalls, deps.config.limits),
        continueWith: prepared.continueWith,
        run,
        toolMap: prepared.toolMap,
      },
    );
  }

  /**
   * The model's turns, with svc's web searches between them, as one stream. With a hosted tool
   * the turns run inside the loop's hold, and the stream ends with `loop_end` (what the loop was
   * charged, and why it stopped early if it did).
   */
  async function* turns(prepared: PreparedResponse, run: RunContext, ids: ItemIds): AsyncGenerator<ResponseStreamItem> {
    if (!prepared.hosted) {
      yield* deps.runner.stream(prepared.chat, run);
      return;
    }
    const loop = await openLoop(prepared, run);
    let status: 'ok' | 'cancelled' | 'error' = 'cancelled';
    let stop: LoopStop | undefined;
    let worked = false;
    try {
      for (const listing of prepared.mcp) {
        const itemId = ids.mcpList();
        yield { kind: 'mcp_list_tools', itemId, item: mcpListToolsItem(itemId, listing) };
      }
      let chat = loop.first;
      const more: WireMessage[] = [];
      for (let turn = 1; ; turn++) {
        const calls = new Map<number, WireToolCall>();
        let text = '';
        try {
          for await (const item of deps.runner.stream(chat, loop.turnRun(turn))) {
            if (item.kind === 'chunk') {
              const choice = item.chunk.choices.find((c) => c.index === 0);
              text += choice?.delta.content ?? '';
              for (const delta of choice?.delta.tool_calls ?? []) {
                const call = calls.get(delta.index) ?? {
                  id: '',
                  type: 'function',
                  function: { name: '', arguments: '' },
                };
                if (delta.id !== undefined) call.id = delta.id;
                if (delta.function?.name !== undefined) call.function.name += delta.function.name;
                call.function.arguments += delta.function?.arguments ?? '';
                calls.set(delta.index, call);
              }
            }
            worked = true;
            yield item;
          }
          const hosted = hostedOnly([...calls.values()], prepared.toolMap);
          if (hosted.length === 0 || turn >= loop.bounds.turns) break;
          more.push({ role: 'assistant', content: text === '' ? null : text, tool_calls: hosted });
          yield* loop.hostedCalls(hosted, more, ids);
          chat = withInputParam(() => loop.next(more, turn + 1 >= loop.bounds.turns || loop.left() === 0));
        } catch (error) {
          if (run.signal.aborted || (error instanceof SvcError && error.code === 'cancelled')) throw error;
          // Nothing done yet: the call's own error, and nothing is charged.
          if (!worked && loop.spent() === 0n) {
            status = 'error';
            throw error;
          }
          stop = stopOf(error);
          deps.logger.warn(
            { err: error, requestId: run.requestId, stop: stop.code },
            'responses: a step of the hosted loop failed; the work so far is returned',
          );
          break;
        }
      }
      status = 'ok';
    } finally {
      // Whatever ended the loop (an answer, a failure, a client that left): one settle, for the steps that ran.
      const billing = await loop.close(status);
      if (status === 'ok') yield { kind: 'loop_end', billing, ...(stop === undefined ? {} : { stop }) };
    }
  }

  // Output items named by `item_reference`, read from the caller's stored responses.
  async function resolveReferences(body: JsonObject, principal: Principal): Promise<Map<string, JsonObject>> {
    const found = new Map<string, JsonObject>();
    const byResponse = new Map<string, string[]>();
    for (const id of referencedItemIds(body)) {
      const responseId = responseIdOfItem(id);
      if (responseId !== undefined) byResponse.set(responseId, [...(byResponse.get(responseId) ?? []), id]);
    }
    for (const [responseId, ids] of byResponse) {
      const stored = await deps.responses.load(principal, responseId, 'input').catch((error: unknown) => {
        if (error instanceof SvcError && error.code === 'not_found') return undefined;
        throw error;
      });
      const output = Array.isArray(stored?.response['output']) ? (stored.response['output'] as JsonObject[]) : [];
      for (const item of output)
        if (typeof item['id'] === 'string' && ids.includes(item['id'])) found.set(item['id'], item);
    }
    return found;
  }

  async function prepare(
    body: JsonObject,
    principal: Principal,
    requestId?: string,
    upstream?: JsonObject,
    sessionId?: string,
  ): Promise<PreparedResponse> {
    // Priced now, once: the response's every step settles at this price (SPEC §15).
    const model = await deps.prices.price(findChatModel(deps.config, modelOf(body)), principal.accountId);
    requireModel(principal, model.id, modelOf(body));
    const provider = deps.providers.get(model.id);
    if (provider === undefined) throw new SvcError('internal', `no provider for model ${model.id}`);
    const previousId = body['previous_response_id'];
    if (previousId !== undefined && previousId !== null && typeof previousId !== 'string') {
      throw invalidArgument('previous_response_id', `Invalid 'previous_response_id': expected a string.`);
    }
    const previous =
      typeof previousId === 'string'
        ? (await deps.responses.load(principal, previousId, 'previous_response_id')).conversation
        : [];
    // The hosted mcp tools' servers are listed before anything is held: a server that cannot list
    // its tools fails the request (424) at no cost. The body's own fields are checked first,
    // unless it goes to a Responses upstream as it is (its fields, known or not, are the upstream's).
    const native = passesThrough(body, provider);
    if (!native) checkResponseFields(body);
    // An upstream's own compaction item in the stored conversation cannot be translated.
    const compacted = native ? -1 : previous.findIndex((item) => item['type'] === 'compaction');
    if (compacted >= 0)
      throw invalidArgument(
        'previous_response_id',
        `Invalid 'previous_response_id': that response's conversation holds a compaction item made by the model's upstream, which goes to it only as it is, but a request with previous_response_id is served through svc's translation. Send the conversation (with the compaction item) as input instead.`,
      );
    const specs = mcpSpecs(body);
    // Contacting a server a request names is work done for the caller: a wallet that cannot pay
    // for the least call (1 credit) gets no request sent anywhere on its behalf.
    if (specs.length > 0) await deps.credit?.(principal, 1n);
    const listings = await listMcpServers(specs, { ...mcp, logger: deps.logger }, requestId);
    const made = translateRequest(
      body,
      previous,
      await resolveReferences(body, principal),
      new Map(listings.map((l) => [l.spec.index, l])),
      native,
      { imageGeneration: deps.images !== undefined },
    );
    // No per-request noise upstream, and the account's cache key (cache.ts, SPEC §13).
    const caller = { accountId: principal.accountId, sessionId };
    const translated = { ...made, body: cacheReady(made.body, deps.config, model, caller) };
    // A key without web_search is refused before the first model turn, not between turns with
    // that turn already charged.
    let hosted = false;
    let images: ImageGenerator | undefined;
    let upstreamBody = translated.body;
    for (const tool of translated.toolMap.values())
      if (tool.kind === 'web_search') {
        requireTool(principal, HOSTED_WEB_SEARCH);
        hosted = true;
      } else if (tool.kind === 'image_generation' && deps.images !== undefined) {
        // A key that may not use the image model is refused before anything is held.
        requireModel(principal, deps.images.modelId);
        // Priced now, with the chat: its hold and every image settle at this price.
        images = await deps.images.priced(principal.accountId);
        hosted = true;
      }
    if (listings.length > 0) hosted = true;
    // max_tool_calls 0: the hosted tools run no call, so they are not offered (no loop, no loop
    // hold; an mcp tool's listing still opens a one-turn loop, which reports it).
    if (hosted && translated.echo.maxToolCalls === 0) {
      hosted = listings.length > 0;
      const tools = (translated.body.tools ?? []).filter((t) => !isHosted(translated.toolMap.get(t.function.name)));
      const { tools: _all, tool_choice: given, ...rest } = translated.body;
      const choice = withoutUnoffered(given, tools);
      upstreamBody =
        tools.length === 0 ? rest : { ...rest, tools, ...(choice === undefined ? {} : { tool_choice: choice }) };
    }
    const chat = withInputParam(() =>
      prepareChat(model, provider, upstreamBody, translated.requestedMax, 'max_output_tokens'),
    );
    if (translated.dropped.length > 0) {
      // Said, never silent: the model answers without these tools.
      const types = [...new Set(translated.dropped)];
      deps.logger.warn(
        { requestId, model: model.id, droppedTools: types },
        'responses: hosted tools the upstream cannot run were not offered to the model',
      );
      trace.getActiveSpan()?.addEvent('svc.responses.tools_dropped', { 'svc.tools.dropped': types });
    }
    const continueWith = (more: WireMessage[], last: boolean): PreparedChat =>
      prepareChat(
        model,
        provider,
        {
          ...translated.body,
          messages: [...translated.body.messages, ...more],
          // A forced choice (a tool, or `required`) holds for the first turn only, as at OpenAI:
          // forcing the hosted search on every turn would run (and charge) it to the bound.
          ...(last ? { tool_choice: 'none' } : forcedOnce(translated.body.tool_choice)),
        },
        translated.requestedMax,
        'max_output_tokens',
      );
    const wrap =
      native && provider.native?.compact !== undefined && deps.seal !== undefined
        ? nativeCompactionWrapper(deps.seal, principal, model, provider.native.wire)
        : undefined;
    return {
      chat: native
        ? withNativeBody(
            chat,
            cacheReadyNative(upstream ?? body, 'openai-responses', deps.config, model, caller),
            'openai-responses',
          )
        : chat,
      ...(wrap === undefined ? {} : { wrap }),
      echo: translated.echo,
      toolMap: translated.toolMap,
      continueWith,
      hosted,
      mcp: listings,
      conversation: [...previous, ...translated.input],
      native,
      ...(images === undefined ? {} : { images }),
    };
  }

  return {
    prepare,

    async create(prepared, run, pass = false) {
      if (prepared.native) return createNative(deps, nativeContext(prepared), run, pass);
      const createdAt = seconds();
      const id = newResponseId();
      const ids = itemIdsFor(id);
      if (!prepared.hosted) {
        const result = await deps.runner.complete(prepared.chat, run);
        const { completion } = result;
        const output = outputItemsOf(completion, ids, prepared.toolMap);
        const { status, incomplete } = statusFor(completion.choices[0]?.finish_reason);
        const response = responseObject(prepared.echo, {
          id,
          createdAt,
          status,
          output,
          incomplete,
          error: null,
          usage: responsesUsage(completion.usage, result.cost),
          completedAt: status === 'completed' ? seconds() : null,
          ...(completion.service_tier !== undefined ? { serviceTier: completion.service_tier } : {}),
        });
        if (prepared.echo.store)
          await deps.responses.save(run.principal, id, {
            response,
            conversation: [...prepared.conversation, ...output],
          });
        return { response, billing: result.billing };
      }
      const output: JsonObject[] = [];
      const sources: WebSource[] = [];
      const more: WireMessage[] = [];
      const loop = await openLoop(prepared, run);
      for (const listing of prepared.mcp) output.push(mcpListToolsItem(ids.mcpList(), listing));
      let usage: WireUsage | undefined;
      let last: Awaited<ReturnType<ChatRunner['complete']>> | undefined;
      let stop: LoopStop | undefined;
      let closing: 'ok' | 'cancelled' | 'error' = 'cancelled';
      let billing: BillingResult;
      try {
        let chat = loop.first;
        for (let turn = 1; ; turn++) {
          try {
            const result = await deps.runner.complete(chat, loop.turnRun(turn));
            usage = usage === undefined ? result.completion.usage : addUsage(usage, result.completion.usage);
            const choice = result.completion.choices[0];
            const hosted = hostedOnly(choice?.message.tool_calls ?? [], prepared.toolMap);
            if (hosted.length === 0 || turn >= loop.bounds.turns) {
              last = result;
              break;
            }
            if (choice !== undefined) {
              // What the model said (or reasoned) before it searched is part of the output too.
              const { tool_calls: _searches, ...said } = choice.message;
              output.push(
                ...outputItemsOf(
                  { ...result.completion, choices: [{ ...choice, message: said }] },
                  ids,
                  prepared.toolMap,
                ),
              );
            }
            more.push({ role: 'assistant', content: choice?.message.content ?? null, tool_calls: hosted });
            for await (const event of loop.hostedCalls(hosted, more, ids)) {
              if (event.kind === 'mcp_call_done' || event.kind === 'image_call_done') output.push(event.item);
              if (event.kind !== 'web_search_done') continue;
              output.push(event.item);
              sources.push(...event.sources);
            }
            chat = withInputParam(() => loop.next(more, turn + 1 >= loop.bounds.turns || loop.left() === 0));
          } catch (error) {
            if (run.signal.aborted || (error instanceof SvcError && error.code === 'cancelled')) throw error;
            // Nothing done yet: the call's own error, and nothing is charged.
            if (loop.spent() === 0n) {
              closing = 'error';
              throw error;
            }
            stop = stopOf(error);
            deps.logger.warn(
              { err: error, requestId: run.requestId, stop: stop.code },
              'responses: a step of the hosted loop failed; the work so far is returned',
            );
            break;
          }
        }
        closing = 'ok';
      } finally {
        billing = await loop.close(closing);
      }
      const cost = billing.cost;
      if (last !== undefined)
        output.push(...withCitations(outputItemsOf(last.completion, ids, prepared.toolMap), sources));
      const finished = stop === undefined ? statusFor(last?.completion.choices[0]?.finish_reason) : stoppedStatus(stop);
      const response = responseObject(prepared.echo, {
        id,
        createdAt,
        status: finished.status,
        output,
        incomplete: finished.incomplete,
        error: null,
        usage: usage === undefined ? null : responsesUsage(usage, cost),
        completedAt: finished.status === 'completed' ? seconds() : null,
        ...(last?.completion.service_tier !== undefined ? { serviceTier: last.completion.service_tier } : {}),
      });
      if (prepared.echo.store)
        await deps.responses.save(run.principal, id, { response, conversation: [...prepared.conversation, ...output] });
      return { response, billing };
    },

    passThrough(prepared, run) {
      if (!prepared.native) throw new SvcError('internal', 'only a passed-through body has a fast path');
      return streamPassThrough(deps, nativeContext(prepared), run);
    },

    async *stream(prepared, run) {
      if (prepared.native) {
        yield* streamNative(deps, nativeContext(prepared), run);
        return;
      }
      const id = newResponseId();
      const createdAt = seconds();
      const ids = itemIdsFor(id);
      const iterator = turns(prepared, run, ids)[Symbol.asyncIterator]();
      const first = await iterator.next();
      try {
        yield* responseEvents(first, iterator, {
          id,
          createdAt,
          ids,
          tools: prepared.toolMap,
          now: deps.now,
          build: (state) => responseObject(prepared.echo, state),
          onFinished: async (response, output) => {
            if (prepared.echo.store)
              await deps.responses.save(run.principal, id, {
                response,
                conversation: [...prepared.conversation, ...output],
              });
          },
        });
      } finally {
        await iterator.return?.(undefined);
      }
    },

    async get(id, principal) {
      return (await deps.responses.load(principal, id, 'response_id')).response;
    },

    async inputItems(id, principal, page) {
      const stored = await deps.responses.load(principal, id, 'response_id');
      const output = stored.response['output'];
      return inputItemList(id, stored.conversation, Array.isArray(output) ? output.length : 0, page);
    },

    async delete(id, principal) {
      if (!(await deps.responses.delete(principal, id)))
        throw new SvcError('not_found', `No response found with id '${id}'.`, { param: 'response_id' });
    },

    async cancel(id, principal) {
      const { response } = await deps.responses.load(principal, id, 'response_id');
      if (response['background'] !== true) {
        throw invalidArgument(
          'response_id',
          `Only background responses can be cancelled. Response '${id}' was not created with background=true and has already finished.`,
        );
      }
      return response;
    },

    async countInputTokens(body, principal) {
      const { chat } = await prepare(body, principal);
      return estimatePromptTokens(chat.request.messages, chat.request.tools ?? []);
    },
  };
}
