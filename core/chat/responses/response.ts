import { customInputOf } from '../custom-tools';
import type { JsonObject, WireCompletion, WireUsage } from '../../providers/llm/types';
import type { ItemIds, ResponseEcho } from './common';
import type { ToolMap } from './tools';

export type ResponseStatus = 'completed' | 'incomplete' | 'failed' | 'in_progress';

export function textItem(
  id: string,
  text: string,
  status: 'in_progress' | 'completed',
  logprobs: JsonObject[] = [],
  annotations: JsonObject[] = [],
): JsonObject {
  return {
    id,
    type: 'message',
    status,
    role: 'assistant',
    content: status === 'in_progress' && text === '' ? [] : [outputText(text, logprobs, annotations)],
  };
}

export function outputText(text: string, logprobs: JsonObject[] = [], annotations: JsonObject[] = []): JsonObject {
  return { type: 'output_text', text, annotations, logprobs };
}

export function refusalPart(refusal: string): JsonObject {
  return { type: 'refusal', refusal };
}

/**
 * The token logprobs of a chat choice's `logprobs.content`, in the Responses shape (the same
 * token/logprob/bytes/top_logprobs objects, without the chat-only fields).
 */
export function logprobsOf(logprobs: JsonObject | undefined): JsonObject[] {
  const content = logprobs?.['content'];
  if (!Array.isArray(content)) return [];
  const token = (raw: JsonObject): JsonObject => ({
    token: typeof raw['token'] === 'string' ? raw['token'] : '',
    logprob: typeof raw['logprob'] === 'number' ? raw['logprob'] : 0,
    bytes: Array.isArray(raw['bytes']) ? raw['bytes'] : [],
  });
  return content
    .filter((t): t is JsonObject => typeof t === 'object' && t !== null)
    .map((t) => ({
      ...token(t),
      top_logprobs: Array.isArray(t['top_logprobs'])
        ? (t['top_logprobs'] as unknown[])
            .filter((x): x is JsonObject => typeof x === 'object' && x !== null)
            .map(token)
        : [],
    }));
}

export function functionCallItem(
  id: string,
  callId: string,
  name: string,
  args: string,
  status: 'in_progress' | 'completed',
): JsonObject {
  return { id, type: 'function_call', status, call_id: callId, name, arguments: args };
}

/**
 * An upstream tool call as the Responses item it stands for: a `function_call` (with its
 * `namespace` when the tool came from one) or a `custom_tool_call`.
 */
export function toolCallItem(
  ids: Pick<ItemIds, 'call' | 'customCall'>,
  tools: ToolMap,
  callId: string,
  upstreamName: string,
  args: string,
  status: 'in_progress' | 'completed',
): JsonObject {
  const tool = tools.get(upstreamName);
  const namespace = tool?.namespace !== undefined ? { namespace: tool.namespace } : {};
  if (tool?.kind === 'custom') {
    return {
      id: ids.customCall(),
      type: 'custom_tool_call',
      status,
      call_id: callId,
      ...namespace,
      name: tool.name,
      input: status === 'completed' ? customInputOf(args) : '',
    };
  }
  return { ...functionCallItem(ids.call(), callId, tool?.name ?? upstreamName, args, status), ...namespace };
}

/** A source a hosted web search found. */
export interface WebSource {
  readonly url: string;
  readonly title: string;
}

export function webSearchItem(
  id: string,
  query: string,
  sources: readonly WebSource[],
  status: 'in_progress' | 'searching' | 'completed' | 'failed',
): JsonObject {
  return {
    id,
    type: 'web_search_call',
    status,
    action: { type: 'search', query, sources: sources.map((s) => ({ type: 'url', url: s.url })) },
  };
}

/** url_citation annotations for every place the text quotes a source's URL. */
export function urlCitations(text: string, sources: readonly WebSource[]): JsonObject[] {
  const found: JsonObject[] = [];
  for (const source of sources) {
    if (source.url === '') continue;
    for (let at = text.indexOf(source.url); at >= 0; at = text.indexOf(source.url, at + source.url.length)) {
      found.push({
        type: 'url_citation',
        start_index: at,
        end_index: at + source.url.length,
        url: source.url,
        title: source.title,
      });
    }
  }
  return found.sort((a, b) => Number(a['start_index']) - Number(b['start_index']));
}

export function reasoningItem(id: string, text: string, status: 'in_progress' | 'completed'): JsonObject {
  return {
    id,
    type: 'reasoning',
    status,
    summary: status === 'in_progress' && text === '' ? [] : [{ type: 'summary_text', text }],
  };
}

/** Output items of a chat completion's first choice. */
/**
 * The upstream's own annotations (a search model's `url_citation`s, chat shape
 * `{type, url_citation: {start_index, end_index, url, title}}`) in the Responses shape; other
 * annotation types are kept as they came.
 */
export function annotationsOf(annotations: readonly JsonObject[] | undefined): JsonObject[] {
  return (annotations ?? []).map((a) => {
    const cite = a['url_citation'];
    if (a['type'] !== 'url_citation' || typeof cite !== 'object' || cite === null) return a;
    const c = cite as JsonObject;
    return {
      type: 'url_citation',
      start_index: typeof c['start_index'] === 'number' ? c['start_index'] : 0,
      end_index: typeof c['end_index'] === 'number' ? c['end_index'] : 0,
      url: typeof c['url'] === 'string' ? c['url'] : '',
      title: typeof c['title'] === 'string' ? c['title'] : '',
    };
  });
}

export function outputItemsOf(completion: WireCompletion, ids: ItemIds, tools: ToolMap): JsonObject[] {
  const choice = completion.choices[0];
  const message = choice?.message;
  if (message === undefined) return [];
  const items: JsonObject[] = [];
  if (message.reasoning_content !== undefined)
    items.push(reasoningItem(ids.reasoning(), message.reasoning_content, 'completed'));
  if (typeof message.refusal === 'string' && message.refusal !== '') {
    items.push({
      id: ids.message(),
      type: 'message',
      status: 'completed',
      role: 'assistant',
      content: [{ type: 'refusal', refusal: message.refusal }],
    });
  } else if (message.content !== null && message.content !== '') {
    items.push(
      textItem(
        ids.message(),
        message.content,
        'completed',
        logprobsOf(choice?.logprobs),
        annotationsOf(message.annotations),
      ),
    );
  }
  for (const call of message.tool_calls ?? [])
    items.push(
      toolCallItem(ids, tools, call.id || ids.callId(), call.function.name, call.function.arguments, 'completed'),
    );
  return items;
}

/** The Responses status for a chat finish reason. */
export function statusFor(finishReason: string | null | undefined): {
  status: ResponseStatus;
  incomplete: JsonObject | null;
} {
  if (finishReason === 'length') return { status: 'incomplete', incomplete: { reason: 'max_output_tokens' } };
  if (finishReason === 'content_filter') return { status: 'incomplete', incomplete: { reason: 'content_filter' } };
  return { status: 'completed', incomplete: null };
}

/**
 * The status of a response whose hosted loop stopped at a failed step: incomplete, with the work
 * so far. OpenAI's schema knows two reasons; `max_output_tokens` (the answer was cut short) is the
 * one a client acts on, and `svc_reason` / `message` say what really stopped it.
 */
export function stoppedStatus(stop: { readonly code: string; readonly message: string }): {
  status: ResponseStatus;
  incomplete: JsonObject;
} {
  return { status: 'incomplete', incomplete: { reason: 'max_output_tokens', svc_reason: stop.code, message: stop.message } };
}

export function responsesUsage(usage: WireUsage, cost: bigint): JsonObject {
  return {
    input_tokens: usage.prompt_tokens,
    input_tokens_details: {
      cached_tokens: usage.prompt_tokens_details?.cached_tokens ?? 0,
      cache_write_tokens: usage.prompt_tokens_details?.cache_write_tokens ?? 0,
    },
    output_tokens: usage.completion_tokens,
    output_tokens_details: { reasoning_tokens: usage.completion_tokens_details?.reasoning_tokens ?? 0 },
    total_tokens: usage.prompt_tokens + usage.completion_tokens,
    // Credits charged; a number is exact here (far below 2^53).
    cost: Number(cost),
    // The upstream reported no usage: svc's own count, charged as such (SPEC §6).
    ...(usage.estimated === true ? { estimated: true } : {}),
  };
}

export interface ResponseState {
  readonly id: string;
  readonly createdAt: number;
  readonly status: ResponseStatus;
  readonly output: JsonObject[];
  readonly usage: JsonObject | null;
  readonly error: JsonObject | null;
  readonly incomplete: JsonObject | null;
  readonly completedAt: number | null;
  /** The upstream's service tier, once it has answered. */
  readonly serviceTier?: string;
}

/** An OpenAI Response object. */
export function responseObject(echo: ResponseEcho, state: ResponseState): JsonObject {
  return {
    id: state.id,
    object: 'response',
    created_at: state.createdAt,
    status: state.status,
    completed_at: state.completedAt,
    error: state.error,
    incomplete_details: state.incomplete,
    instructions: echo.instructions,
    max_output_tokens: echo.maxOutputTokens,
    max_tool_calls: echo.maxToolCalls,
    model: echo.model,
    output: state.output,
    parallel_tool_calls: echo.parallelToolCalls,
    previous_response_id: echo.previousResponseId,
    reasoning: echo.reasoning,
    service_tier: state.serviceTier ?? 'default',
    store: echo.store,
    temperature: echo.temperature,
    text: echo.text,
    tool_choice: echo.toolChoice,
    tools: echo.tools,
    top_p: echo.topP,
    truncation: echo.truncation ?? 'disabled',
    background: false,
    top_logprobs: echo.topLogprobs,
    prompt_cache_key: echo.promptCacheKey,
    metadata: echo.metadata,
    // The schema has no null for these two: they are left out until there is a value.
    ...(state.usage !== null ? { usage: state.usage } : {}),
    ...(echo.user !== null ? { user: echo.user } : {}),
  };
}
