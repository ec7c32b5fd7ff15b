import type { BillingResult } from '../../billing/types';
import { isSvcError } from '../../errors';
import type { JsonObject, WireChunk, WireUsage } from '../../providers/llm/types';
import type { StreamItem } from '../runner';
import type { SearchEvent } from './hosted-loop';
import { customInputOf } from '../custom-tools';
import { isHosted, type ToolMap } from './tools';
import {
  logprobsOf,
  reasoningItem,
  toolCallItem,
  webSearchItem,
  urlCitations,
  type WebSource,
  outputText,
  refusalPart,
  responsesUsage,
  statusFor,
  stoppedStatus,
  textItem,
  type ResponseState,
} from './response';
import type { ItemIds } from './common';

/**
 * What the Responses stream is made of: the runner's items (one `final` per model turn), and
 * the hosted web searches svc runs between turns.
 */
export type ResponseStreamItem =
  | StreamItem
  | SearchEvent
  /** A hosted mcp tool's server listing (hosted-mcp.ts); its calls are among the loop's events. */
  | { readonly kind: 'mcp_list_tools'; readonly itemId: string; readonly item: JsonObject }
  | {
      /** The end of a hosted loop: its one settle, and why it stopped early if it did. */
      readonly kind: 'loop_end';
      readonly billing: BillingResult;
      readonly stop?: { readonly code: string; readonly message: string };
    };

/** One Responses stream event, plus the billing on the last one. */
export interface ResponseEventOut {
  readonly event: JsonObject;
  readonly billing?: BillingResult;
}

export interface EventTranslation {
  readonly id: string;
  readonly createdAt: number;
  readonly ids: ItemIds;
  /** What the upstream's function names stand for (namespaced and custom tools). */
  readonly tools: ToolMap;
  /** Builds the Response object for a state. */
  build(state: ResponseState): JsonObject;
  /** Called once with the finished (completed or incomplete) response, before its event is sent. */
  onFinished(response: JsonObject, output: JsonObject[]): Promise<void>;
  now(): number;
}

interface OpenCall {
  readonly itemId: string;
  readonly outputIndex: number;
  readonly callId: string;
  /** The Responses name (without the namespace). */
  readonly name: string;
  readonly upstreamName: string;
  readonly custom: boolean;
  args: string;
}

/**
 * Turns a chat stream into the Responses event sequence: created, in_progress, then per output
 * item added → deltas → done, ending in completed / incomplete, or failed when the upstream
 * breaks mid-way. `first` is the run's first item, already received, so that failures before
 * any output surface as errors rather than events.
 */
export async function* responseEvents(
  first: IteratorResult<ResponseStreamItem>,
  rest: AsyncIterator<ResponseStreamItem>,
  t: EventTranslation,
): AsyncGenerator<ResponseEventOut> {
  let sequence = 0;
  const output: JsonObject[] = [];
  const ev = (type: string, fields: JsonObject): ResponseEventOut => ({
    event: { type, sequence_number: sequence++, ...fields },
  });
  const state = (status: ResponseState['status'], extra: Partial<ResponseState> = {}): ResponseState => ({
    id: t.id,
    createdAt: t.createdAt,
    status,
    output: [...output],
    usage: null,
    error: null,
    incomplete: null,
    completedAt: null,
    ...extra,
  });

  yield ev('response.created', { response: t.build(state('in_progress')) });
  yield ev('response.in_progress', { response: t.build(state('in_progress')) });

  // The open assistant message: its content parts in order (text or refusal), the last one open.
  let message:
    | {
        itemId: string;
        outputIndex: number;
        parts: { kind: 'text' | 'refusal'; text: string; logprobs: JsonObject[]; annotations: JsonObject[] }[];
      }
    | undefined;
  // What the hosted web searches found, for the url_citation annotations of the answer.
  const sources: WebSource[] = [];
  // Upstream tool call indexes of the current turn that are hosted searches, not client calls.
  const hidden = new Set<number>();
  const calls = new Map<number, OpenCall>();
  let finishReason: string | null = null;
  let serviceTier: string | undefined;

  const partJson = (part: {
    kind: 'text' | 'refusal';
    text: string;
    logprobs: JsonObject[];
    annotations: JsonObject[];
  }): JsonObject =>
    part.kind === 'text' ? outputText(part.text, part.logprobs, part.annotations) : refusalPart(part.text);

  function* closePart(): Generator<ResponseEventOut> {
    const part = message?.parts[message.parts.length - 1];
    if (message === undefined || part === undefined) return;
    const at = { item_id: message.itemId, output_index: message.outputIndex, content_index: message.parts.length - 1 };
    if (part.kind === 'text') {
      part.annotations = urlCitations(part.text, sources);
      for (const [annotationIndex, annotation] of part.annotations.entries())
        yield ev('response.output_text.annotation.added', { ...at, annotation_index: annotationIndex, annotation });
      yield ev('response.output_text.done', { ...at, text: part.text, logprobs: part.logprobs });
    } else yield ev('response.refusal.done', { ...at, refusal: part.text });
    yield ev('response.content_part.done', { ...at, part: partJson(part) });
  }

  function* closeText(): Generator<ResponseEventOut> {
    if (message === undefined) return;
    yield* closePart();
    const item = { ...textItem(message.itemId, '', 'completed'), content: message.parts.map(partJson) };
    output[message.outputIndex] = item;
    yield ev('response.output_item.done', { output_index: message.outputIndex, item });
    message = undefined;
  }

  function* onContent(kind: 'text' | 'refusal', delta: string, logprobs: JsonObject[]): Generator<ResponseEventOut> {
    if (message === undefined) {
      message = { itemId: t.ids.message(), outputIndex: output.length, parts: [] };
      const item = textItem(message.itemId, '', 'in_progress');
      output.push(item);
      yield ev('response.output_item.added', { output_index: message.outputIndex, item });
    }
    let part = message.parts[message.parts.length - 1];
    if (part === undefined || part.kind !== kind) {
      yield* closePart();
      part = { kind, text: '', logprobs: [], annotations: [] };
      message.parts.push(part);
      yield ev('response.content_part.added', {
        item_id: message.itemId,
        output_index: message.outputIndex,
        content_index: message.parts.length - 1,
        part: partJson(part),
      });
    }
    part.text += delta;
    part.logprobs.push(...logprobs);
    const at = { item_id: message.itemId, output_index: message.outputIndex, content_index: message.parts.length - 1 };
    if (kind === 'text') yield ev('response.output_text.delta', { ...at, delta, logprobs });
    else yield ev('response.refusal.delta', { ...at, delta });
  }

  // The open reasoning item: the upstream's reasoning text, as one summary part.
  let reasoning: { itemId: string; outputIndex: number; text: string } | undefined;

  function* onReasoning(delta: string): Generator<ResponseEventOut> {
    if (reasoning === undefined) {
      yield* closeText();
      reasoning = { itemId: t.ids.reasoning(), outputIndex: output.length, text: '' };
      const item = reasoningItem(reasoning.itemId, '', 'in_progress');
      output.push(item);
      yield ev('response.output_item.added', { output_index: reasoning.outputIndex, item });
      yield ev('response.reasoning_summary_part.added', {
        item_id: reasoning.itemId,
        output_index: reasoning.outputIndex,
        summary_index: 0,
        part: { type: 'summary_text', text: '' },
      });
    }
    reasoning.text += delta;
    yield ev('response.reasoning_summary_text.delta', {
      item_id: reasoning.itemId,
      output_index: reasoning.outputIndex,
      summary_index: 0,
      delta,
    });
  }

  function* closeReasoning(): Generator<ResponseEventOut> {
    if (reasoning === undefined) return;
    const at = { item_id: reasoning.itemId, output_index: reasoning.outputIndex, summary_index: 0 };
    yield ev('response.reasoning_summary_text.done', { ...at, text: reasoning.text });
    yield ev('response.reasoning_summary_part.done', { ...at, part: { type: 'summary_text', text: reasoning.text } });
    const item = reasoningItem(reasoning.itemId, reasoning.text, 'completed');
    output[reasoning.outputIndex] = item;
    yield ev('response.output_item.done', { output_index: reasoning.outputIndex, item });
    reasoning = undefined;
  }

  function* closeCalls(): Generator<ResponseEventOut> {
    for (const call of calls.values()) {
      const at = { item_id: call.itemId, output_index: call.outputIndex };
      if (call.custom) {
        // The upstream streams the JSON arguments; the input inside is only known once they are whole.
        const input = customInputOf(call.args);
        if (input !== '') yield ev('response.custom_tool_call_input.delta', { ...at, delta: input });
        yield ev('response.custom_tool_call_input.done', { ...at, input });
      } else {
        yield ev('response.function_call_arguments.done', { ...at, name: call.name, arguments: call.args });
      }
      const sameId = (): string => call.itemId;
      const item = toolCallItem(
        { call: sameId, customCall: sameId },
        t.tools,
        call.callId,
        call.upstreamName,
        call.args,
        'completed',
      );
      output[call.outputIndex] = item;
      yield ev('response.output_item.done', { output_index: call.outputIndex, item });
    }
    calls.clear();
  }

  function* onChunk(chunk: WireChunk): Generator<ResponseEventOut> {
    if (chunk.service_tier !== undefined) serviceTier = chunk.service_tier;
    const choice = chunk.choices.find((c) => c.index === 0);
    if (choice === undefined) return;
    const thought = choice.delta.reasoning_content ?? '';
    if (thought !== '') yield* onReasoning(thought);
    const content = choice.delta.content ?? '';
    if (content !== '' || (choice.delta.refusal ?? '') !== '') yield* closeReasoning();
    if (content !== '') yield* onContent('text', content, logprobsOf(choice.logprobs));
    const refusal = choice.delta.refusal ?? '';
    if (refusal !== '') yield* onContent('refusal', refusal, []);
    for (const delta of choice.delta.tool_calls ?? []) {
      if (hidden.has(delta.index)) continue;
      let call = calls.get(delta.index);
      if (call === undefined && isHosted(t.tools.get(delta.function?.name ?? ''))) {
        // svc runs it (the service's web_search_* / mcp_call_* items); the client never sees the call.
        hidden.add(delta.index);
        continue;
      }
      if (call === undefined) {
        yield* closeReasoning();
        yield* closeText();
        const upstreamName = delta.function?.name ?? '';
        const item = toolCallItem(t.ids, t.tools, delta.id ?? t.ids.callId(), upstreamName, '', 'in_progress');
        call = {
          itemId: String(item['id']),
          outputIndex: output.length,
          callId: String(item['call_id']),
          name: String(item['name']),
          upstreamName,
          custom: item['type'] === 'custom_tool_call',
          args: '',
        };
        calls.set(delta.index, call);
        output.push(item);
        yield ev('response.output_item.added', { output_index: call.outputIndex, item });
      }
      const piece = delta.function?.arguments ?? '';
      if (piece !== '') {
        call.args += piece;
        if (call.custom) continue;
        yield ev('response.function_call_arguments.delta', {
          item_id: call.itemId,
          output_index: call.outputIndex,
          delta: piece,
        });
      }
    }
    if (choice.finish_reason !== null) finishReason = choice.finish_reason;
  }

  function* onSearchStart(itemId: string, query: string): Generator<ResponseEventOut> {
    yield* closeReasoning();
    yield* closeText();
    const outputIndex = output.length;
    const item = webSearchItem(itemId, query, [], 'in_progress');
    output.push(item);
    searches.set(itemId, outputIndex);
    yield ev('response.output_item.added', { output_index: outputIndex, item });
    yield ev('response.web_search_call.in_progress', { output_index: outputIndex, item_id: itemId });
    yield ev('response.web_search_call.searching', { output_index: outputIndex, item_id: itemId });
  }

  function* onSearchDone(itemId: string, item: JsonObject, found: readonly WebSource[]): Generator<ResponseEventOut> {
    const outputIndex = searches.get(itemId) ?? output.length;
    sources.push(...found);
    output[outputIndex] = item;
    yield ev('response.web_search_call.completed', { output_index: outputIndex, item_id: itemId });
    yield ev('response.output_item.done', { output_index: outputIndex, item });
  }

  function* onMcpList(itemId: string, item: JsonObject): Generator<ResponseEventOut> {
    const outputIndex = output.length;
    output.push(item);
    yield ev('response.output_item.added', { output_index: outputIndex, item: { ...item, tools: [] } });
    yield ev('response.mcp_list_tools.in_progress', { output_index: outputIndex, item_id: itemId });
    yield ev('response.mcp_list_tools.completed', { output_index: outputIndex, item_id: itemId });
    yield ev('response.output_item.done', { output_index: outputIndex, item });
  }

  function* onMcpCallStart(itemId: string, item: JsonObject): Generator<ResponseEventOut> {
    yield* closeReasoning();
    yield* closeText();
    const outputIndex = output.length;
    const args = String(item['arguments'] ?? '');
    output.push(item);
    searches.set(itemId, outputIndex);
    yield ev('response.output_item.added', { output_index: outputIndex, item: { ...item, arguments: '' } });
    if (args !== '') yield ev('response.mcp_call_arguments.delta', { output_index: outputIndex, item_id: itemId, delta: args });
    yield ev('response.mcp_call_arguments.done', { output_index: outputIndex, item_id: itemId, arguments: args });
    yield ev('response.mcp_call.in_progress', { output_index: outputIndex, item_id: itemId });
  }

  function* onMcpCallDone(itemId: string, item: JsonObject, failed: boolean): Generator<ResponseEventOut> {
    const outputIndex = searches.get(itemId) ?? output.length;
    output[outputIndex] = item;
    yield ev(failed ? 'response.mcp_call.failed' : 'response.mcp_call.completed', { output_index: outputIndex, item_id: itemId });
    yield ev('response.output_item.done', { output_index: outputIndex, item });
  }

  // The hosted image_generation tool: the item added in progress, `in_progress` and `generating`
  // while svc makes the image, then `completed` and the item done with the image (a failed call:
  // the item done, `failed`, with no image).
  function* onImageStart(itemId: string, item: JsonObject): Generator<ResponseEventOut> {
    yield* closeReasoning();
    yield* closeText();
    const outputIndex = output.length;
    output.push(item);
    searches.set(itemId, outputIndex);
    yield ev('response.output_item.added', { output_index: outputIndex, item });
    yield ev('response.image_generation_call.in_progress', { output_index: outputIndex, item_id: itemId });
    yield ev('response.image_generation_call.generating', { output_index: outputIndex, item_id: itemId });
  }

  function* onImageDone(itemId: string, item: JsonObject, failed: boolean): Generator<ResponseEventOut> {
    const outputIndex = searches.get(itemId) ?? output.length;
    output[outputIndex] = item;
    if (!failed)
      yield ev('response.image_generation_call.completed', { output_index: outputIndex, item_id: itemId });
    yield ev('response.output_item.done', { output_index: outputIndex, item });
  }

  const searches = new Map<string, number>();
  let current = first;
  let usage: WireUsage | undefined;
  let cost = 0n;
  let billing: BillingResult | undefined;
  let stop: { readonly code: string; readonly message: string } | undefined;
  try {
    while (current.done !== true) {
      const item = current.value;
      if (item.kind === 'chunk') yield* onChunk(item.chunk);
      else if (item.kind === 'web_search_start') yield* onSearchStart(item.itemId, item.query);
      else if (item.kind === 'mcp_list_tools') yield* onMcpList(item.itemId, item.item);
      else if (item.kind === 'mcp_call_start') yield* onMcpCallStart(item.itemId, item.item);
      else if (item.kind === 'mcp_call_done') yield* onMcpCallDone(item.itemId, item.item, item.failed);
      else if (item.kind === 'image_call_start') yield* onImageStart(item.itemId, item.item);
      else if (item.kind === 'image_call_done') yield* onImageDone(item.itemId, item.item, item.failed);
      else if (item.kind === 'web_search_done') {
        cost += item.cost;
        yield* onSearchDone(item.itemId, item.item, item.sources);
      } else if (item.kind === 'loop_end') {
        // The loop settled once for all its steps: that is what the response cost.
        billing = item.billing;
        cost = item.billing.cost;
        stop = item.stop;
      } else {
        // One model turn ended (its own charge): the response reports the sum of its turns.
        hidden.clear();
        usage = usage === undefined ? item.usage : addUsage(usage, item.usage);
        cost += item.cost;
        billing = {
          requestId: billing?.requestId ?? item.billing.requestId,
          cost,
          balanceAfter: item.billing.balanceAfter,
        };
      }
      current = await rest.next();
    }
  } catch (error) {
    if (isSvcError(error) && error.code === 'cancelled') throw error;
    const message =
      isSvcError(error) && error.code !== 'internal'
        ? error.message
        : 'The server had an error while processing the response.';
    yield ev('response.failed', {
      response: t.build(state('failed', { error: { code: 'server_error', message } })),
    });
    return;
  }
  yield* closeReasoning();
  yield* closeText();
  yield* closeCalls();
  const { status, incomplete } = stop === undefined ? statusFor(finishReason) : stoppedStatus(stop);
  const response = t.build(
    state(status, {
      usage: usage !== undefined ? responsesUsage(usage, cost) : null,
      incomplete,
      completedAt: status === 'completed' ? Math.floor(t.now() / 1000) : null,
      ...(serviceTier !== undefined ? { serviceTier } : {}),
    }),
  );
  await t.onFinished(response, [...output]);
  const last = ev(status === 'completed' ? 'response.completed' : 'response.incomplete', { response });
  yield billing !== undefined ? { ...last, billing: { ...billing, cost } } : last;
}

/** The usage of two model turns together. */
export function addUsage(a: WireUsage, b: WireUsage): WireUsage {
  const cached = (a.prompt_tokens_details?.cached_tokens ?? 0) + (b.prompt_tokens_details?.cached_tokens ?? 0);
  const written =
    (a.prompt_tokens_details?.cache_write_tokens ?? 0) + (b.prompt_tokens_details?.cache_write_tokens ?? 0);
  const written1h =
    (a.prompt_tokens_details?.cache_write_1h_tokens ?? 0) + (b.prompt_tokens_details?.cache_write_1h_tokens ?? 0);
  const reasoning =
    (a.completion_tokens_details?.reasoning_tokens ?? 0) + (b.completion_tokens_details?.reasoning_tokens ?? 0);
  return {
    prompt_tokens: a.prompt_tokens + b.prompt_tokens,
    completion_tokens: a.completion_tokens + b.completion_tokens,
    total_tokens: a.total_tokens + b.total_tokens,
    ...(a.prompt_tokens_details !== undefined || b.prompt_tokens_details !== undefined
      ? {
          prompt_tokens_details: {
            cached_tokens: cached,
            ...(written > 0 ? { cache_write_tokens: written } : {}),
            ...(written1h > 0 ? { cache_write_1h_tokens: written1h } : {}),
          },
        }
      : {}),
    ...(a.completion_tokens_details !== undefined || b.completion_tokens_details !== undefined
      ? { completion_tokens_details: { reasoning_tokens: reasoning } }
      : {}),
    // svc counted either turn itself: the sum is an estimate too.
    ...(a.estimated === true || b.estimated === true ? { estimated: true } : {}),
  };
}
