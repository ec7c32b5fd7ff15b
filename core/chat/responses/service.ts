import { trace } from '@opentelemetry/api';
import type { Logger } from 'pino';
import type { Principal } from '../../auth/types';
import { requireModel, requireTool } from '../../auth/scope';
import type { BillingResult } from '../../billing/types';
import type { SvcConfig } from '../../config/types';
import { invalidArgument, SvcError } from '../../errors';
import { findChatModel } from '../../models/catalog';
import type { ChatProvider, JsonObject, WireMessage, WireToolCall, WireUsage } from '../../providers/llm/types';
import { estimatePromptTokens } from '../../providers/llm/tokens';
import type { ToolService } from '../../tools/service';
import { prepareChat, type PreparedChat } from '../prepare';
import type { ChatRunner, RunContext } from '../runner';
import { addUsage, responseEvents, type ResponseEventOut, type ResponseStreamItem } from './events';
import { hostedOnly, MAX_SEARCH_TURNS, queryOf, search, turnRun, withCitations } from './hosted-search';
import { inputItemList, type ItemPage } from './items';
import { modelOf, referencedItemIds, translateRequest, type ResponseEcho } from './request';
import { HOSTED_WEB_SEARCH, type ToolMap } from './tools';
import {
  itemIdsFor,
  newResponseId,
  type ItemIds,
  type WebSource,
  responseIdOfItem,
  outputItemsOf,
  responseObject,
  responsesUsage,
  statusFor,
} from './response';
import type { ResponseStore } from './store';
import { createNative, passesThrough, streamNative } from './native';
import { withNativeBody } from '../native';
import { refuseAboveModelMax } from '../output-limit';

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
  /** The conversation so far (stored previous items plus this request's input). */
  readonly conversation: JsonObject[];
  /** The body is passed through to a Responses upstream (native.ts) rather than translated. */
  readonly native: boolean;
}

export interface ResponsesService {
  /** `requestId` names the request in the log line that lists the tools left out. */
  prepare(body: JsonObject, principal: Principal, requestId?: string): Promise<PreparedResponse>;
  create(prepared: PreparedResponse, run: RunContext): Promise<{ response: JsonObject; billing: BillingResult }>;
  stream(prepared: PreparedResponse, run: RunContext): AsyncGenerator<ResponseEventOut>;
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
});

/** The tool choice of the turns after the first: a forced one becomes `auto`. */
function forcedOnce(choice: unknown): { tool_choice?: string } {
  return choice === 'required' || (typeof choice === 'object' && choice !== null) ? { tool_choice: 'auto' } : {};
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
  config: Pick<SvcConfig, 'models'>;
  providers: ReadonlyMap<string, ChatProvider>;
  runner: ChatRunner;
  responses: ResponseStore;
  /** Runs the hosted web_search tool, billed like an MCP call of it. */
  tools: Pick<ToolService, 'call'>;
  logger: Logger;
  now: () => number;
}): ResponsesService {
  const seconds = (): number => Math.floor(deps.now() / 1000);

  /** The model's turns, with svc's web searches between them, as one stream. */
  async function* turns(prepared: PreparedResponse, run: RunContext, ids: ItemIds): AsyncGenerator<ResponseStreamItem> {
    let chat = prepared.chat;
    const more: WireMessage[] = [];
    let searches = 0;
    for (let turn = 1; ; turn++) {
      const calls = new Map<number, WireToolCall>();
      let text = '';
      for await (const item of deps.runner.stream(chat, turnRun(run, turn))) {
        if (item.kind === 'chunk') {
          const choice = item.chunk.choices.find((c) => c.index === 0);
          text += choice?.delta.content ?? '';
          for (const delta of choice?.delta.tool_calls ?? []) {
            const call = calls.get(delta.index) ?? { id: '', type: 'function', function: { name: '', arguments: '' } };
            if (delta.id !== undefined) call.id = delta.id;
            if (delta.function?.name !== undefined) call.function.name += delta.function.name;
            call.function.arguments += delta.function?.arguments ?? '';
            calls.set(delta.index, call);
          }
        }
        yield item;
      }
      const hosted = hostedOnly([...calls.values()], prepared.toolMap);
      if (hosted.length === 0 || turn > MAX_SEARCH_TURNS) return;
      more.push({ role: 'assistant', content: text === '' ? null : text, tool_calls: hosted });
      for (const call of hosted) {
        const itemId = ids.webSearch();
        const query = queryOf(call);
        yield { kind: 'web_search_start', itemId, query };
        const done = await search(deps.tools, call, run, ++searches, itemId);
        more.push(done.message);
        yield { kind: 'web_search_done', itemId, item: done.item, sources: done.sources, cost: done.cost };
      }
      chat = prepared.continueWith(more, turn === MAX_SEARCH_TURNS);
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

  async function prepare(body: JsonObject, principal: Principal, requestId?: string): Promise<PreparedResponse> {
    const model = findChatModel(deps.config, modelOf(body));
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
    const translated = translateRequest(body, previous, await resolveReferences(body, principal));
    // A key without web_search is refused before the first model turn, not between turns with
    // that turn already charged.
    for (const tool of translated.toolMap.values())
      if (tool.kind === 'web_search') requireTool(principal, HOSTED_WEB_SEARCH);
    refuseAboveModelMax(model, translated.requestedMax, 'max_output_tokens');
    const chat = withInputParam(() =>
      prepareChat(model, provider, translated.body, translated.requestedMax, 'max_output_tokens'),
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
    const native = passesThrough(body, provider);
    return {
      chat: native ? withNativeBody(chat, body, 'openai-responses') : chat,
      echo: translated.echo,
      toolMap: translated.toolMap,
      continueWith,
      conversation: [...previous, ...translated.input],
      native,
    };
  }

  return {
    prepare,

    async create(prepared, run) {
      if (prepared.native) return createNative(deps, nativeContext(prepared), run);
      const createdAt = seconds();
      const id = newResponseId();
      const ids = itemIdsFor(id);
      const output: JsonObject[] = [];
      const sources: WebSource[] = [];
      const more: WireMessage[] = [];
      let chat = prepared.chat;
      let usage: WireUsage | undefined;
      let cost = 0n;
      let searches = 0;
      let result: Awaited<ReturnType<ChatRunner['complete']>>;
      for (let turn = 1; ; turn++) {
        result = await deps.runner.complete(chat, turnRun(run, turn));
        usage = usage === undefined ? result.completion.usage : addUsage(usage, result.completion.usage);
        cost += result.cost;
        const message = result.completion.choices[0]?.message;
        const hosted = hostedOnly(message?.tool_calls ?? [], prepared.toolMap);
        if (hosted.length === 0 || turn > MAX_SEARCH_TURNS) break;
        const choice = result.completion.choices[0];
        if (choice !== undefined) {
          // What the model said (or reasoned) before it searched is part of the output too.
          const { tool_calls: _searches, ...said } = choice.message;
          output.push(
            ...outputItemsOf({ ...result.completion, choices: [{ ...choice, message: said }] }, ids, prepared.toolMap),
          );
        }
        more.push({ role: 'assistant', content: message?.content ?? null, tool_calls: hosted });
        for (const call of hosted) {
          const done = await search(deps.tools, call, run, ++searches, ids.webSearch());
          output.push(done.item);
          sources.push(...done.sources);
          cost += done.cost;
          more.push(done.message);
        }
        chat = prepared.continueWith(more, turn === MAX_SEARCH_TURNS);
      }
      const { completion } = result;
      const billing = { ...result.billing, requestId: run.requestId, cost };
      output.push(...withCitations(outputItemsOf(completion, ids, prepared.toolMap), sources));
      const { status, incomplete } = statusFor(completion.choices[0]?.finish_reason);
      const response = responseObject(prepared.echo, {
        id,
        createdAt,
        status,
        output,
        incomplete,
        error: null,
        usage: responsesUsage(usage, cost),
        completedAt: status === 'completed' ? seconds() : null,
        ...(completion.service_tier !== undefined ? { serviceTier: completion.service_tier } : {}),
      });
      if (prepared.echo.store)
        await deps.responses.save(run.principal, id, { response, conversation: [...prepared.conversation, ...output] });
      return { response, billing };
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
