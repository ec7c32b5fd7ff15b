import type { Billing } from '../../gen/svc/core/v1/common';
import type {
  CreateChatCompletionResponse,
  CreateResponseResponse,
  StreamChatCompletionResponse,
  StreamResponseResponse,
  Usage,
} from '../../gen/svc/core/v1/chat';
import type { JsonObject } from '../providers/llm/types';
import type { Replay } from './idempotency';

/*
 * What an idempotent replay reports: the stored answer as it was, but a cost of 0 wherever the
 * first call reported its charge (usage, billing, and through billing the x-svc-cost header),
 * and the balance now (x-svc-balance), since the replay charged nothing and the wallet has moved
 * since.
 */

function billing(stored: Billing | undefined, replay: Replay): Billing | undefined {
  return stored === undefined ? undefined : { requestId: replay.requestId, cost: 0n, balanceAfter: replay.balance };
}

function usage(stored: Usage | undefined): Usage | undefined {
  return stored === undefined ? undefined : { ...stored, cost: 0n };
}

/** A Responses `usage` object (or a Response holding one) with cost 0. */
function responseJson(response: JsonObject | undefined): JsonObject | undefined {
  if (response === undefined) return undefined;
  const u = response['usage'];
  if (typeof u !== 'object' || u === null || !('cost' in u)) return response;
  return { ...response, usage: { ...(u as JsonObject), cost: 0 } };
}

export function replayedCompletion(stored: CreateChatCompletionResponse, replay: Replay): CreateChatCompletionResponse {
  const completion = stored.completion;
  return {
    ...(completion === undefined ? {} : { completion: { ...completion, usage: usage(completion.usage) } }),
    ...(stored.billing === undefined ? {} : { billing: billing(stored.billing, replay) }),
    data: stored.data,
    ...(stored.usage === undefined ? {} : { usage: usage(stored.usage) }),
  };
}

export function replayedChunk(stored: StreamChatCompletionResponse, replay: Replay): StreamChatCompletionResponse {
  const chunk = stored.chunk;
  return {
    ...(chunk === undefined ? {} : { chunk: { ...chunk, usage: usage(chunk.usage) } }),
    ...(stored.billing === undefined ? {} : { billing: billing(stored.billing, replay) }),
    chunks: [],
    data: stored.data,
    dataEvents: stored.dataEvents,
  };
}

export function replayedResponse(stored: CreateResponseResponse, replay: Replay): CreateResponseResponse {
  return {
    ...(stored.response === undefined ? {} : { response: responseJson(stored.response) }),
    ...(stored.billing === undefined ? {} : { billing: billing(stored.billing, replay) }),
    // The fast path's Response text, its cost in it.
    data: stored.data === '' ? '' : JSON.stringify(responseJson(JSON.parse(stored.data) as JsonObject)),
  };
}

/** A stored fast-path event's text (one that carries the Response, with its cost) as replayed. */
function eventText(data: string): string {
  const event = JSON.parse(data) as JsonObject;
  const response = event['response'];
  if (typeof response !== 'object' || response === null) return data;
  const replayed = responseJson(response as JsonObject);
  return replayed === response ? data : JSON.stringify({ ...event, response: replayed });
}

/** One stored Responses stream event: the final ones carry the Response, and with it its cost. */
export function replayedEvent(stored: StreamResponseResponse, replay: Replay): StreamResponseResponse {
  const event = stored.event;
  const response = event?.['response'];
  return {
    // The fast path's terminal event (the message with the billing) is text with its cost in it.
    data: stored.billing === undefined ? stored.data : stored.data.map(eventText),
    dataEvents: stored.dataEvents,
    ...(event === undefined
      ? {}
      : {
          event:
            typeof response === 'object' && response !== null
              ? { ...event, response: responseJson(response as JsonObject) }
              : event,
        }),
    ...(stored.billing === undefined ? {} : { billing: billing(stored.billing, replay) }),
    events: [],
  };
}
