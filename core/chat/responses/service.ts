import type { Principal } from '../../auth/types';
import type { BillingResult } from '../../billing/types';
import type { SvcConfig } from '../../config/types';
import { invalidArgument, SvcError } from '../../errors';
import { findModel } from '../../models/catalog';
import type { ChatProvider, JsonObject } from '../../providers/llm/types';
import { prepareChat, type PreparedChat } from '../prepare';
import type { ChatRunner, RunContext } from '../runner';
import { responseEvents, type ResponseEventOut } from './events';
import { modelOf, referencedItemIds, translateRequest, type ResponseEcho } from './request';
import {
  itemIdsFor,
  newResponseId,
  responseIdOfItem,
  outputItemsOf,
  responseObject,
  responsesUsage,
  statusFor,
} from './response';
import type { ResponseStore } from './store';

/** A validated CreateResponse request. */
export interface PreparedResponse {
  readonly chat: PreparedChat;
  readonly echo: ResponseEcho;
  /** The conversation so far (stored previous items plus this request's input). */
  readonly conversation: JsonObject[];
}

export interface ResponsesService {
  prepare(body: JsonObject, principal: Principal): Promise<PreparedResponse>;
  create(prepared: PreparedResponse, run: RunContext): Promise<{ response: JsonObject; billing: BillingResult }>;
  stream(prepared: PreparedResponse, run: RunContext): AsyncGenerator<ResponseEventOut>;
  get(id: string, principal: Principal): Promise<JsonObject>;
}

export function createResponsesService(deps: {
  config: Pick<SvcConfig, 'models'>;
  providers: ReadonlyMap<string, ChatProvider>;
  runner: ChatRunner;
  responses: ResponseStore;
  now: () => number;
}): ResponsesService {
  const seconds = (): number => Math.floor(deps.now() / 1000);

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

  return {
    async prepare(body, principal) {
      const model = findModel(deps.config, modelOf(body));
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
      const chat = prepareChat(model, provider, translated.body, translated.requestedMax, 'max_output_tokens');
      return { chat, echo: translated.echo, conversation: [...previous, ...translated.input] };
    },

    async create(prepared, run) {
      const createdAt = seconds();
      const { completion, cost, billing } = await deps.runner.complete(prepared.chat, run);
      const id = newResponseId();
      const output = outputItemsOf(completion, itemIdsFor(id));
      const { status, incomplete } = statusFor(completion.choices[0]?.finish_reason);
      const response = responseObject(prepared.echo, {
        id,
        createdAt,
        status,
        output,
        incomplete,
        error: null,
        usage: responsesUsage(completion.usage, cost),
        completedAt: status === 'completed' ? seconds() : null,
      });
      if (prepared.echo.store)
        await deps.responses.save(run.principal, id, { response, conversation: [...prepared.conversation, ...output] });
      return { response, billing };
    },

    async *stream(prepared, run) {
      const id = newResponseId();
      const createdAt = seconds();
      const iterator = deps.runner.stream(prepared.chat, run)[Symbol.asyncIterator]();
      const first = await iterator.next();
      try {
        yield* responseEvents(first, iterator, {
          id,
          createdAt,
          ids: itemIdsFor(id),
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
  };
}
