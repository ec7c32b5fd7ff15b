import type { Principal } from '../../auth/types';
import type { BillingResult } from '../../billing/types';
import { SvcError } from '../../errors';
import { skipSpace, withMembers } from '../../providers/llm/pass-through-text';
import type { ChatProvider, JsonObject, WireUsage } from '../../providers/llm/types';
import type { PreparedChat } from '../prepare';
import type { ChatRunner, RunContext } from '../runner';
import type { ResponseEventOut } from './events';
import { referencedItemIds } from './request';
import { responsesUsage } from './response';
import { newResponseId } from './common';
import type { ResponseStore } from './store';

/*
 * Responses passed through to an `openai-responses` upstream (DESIGN.md point 3): the client's
 * body goes upstream with svc's model and output limit (core/chat/native.ts), so reasoning items
 * with `encrypted_content`, `include`, and item and event types svc does not model survive both
 * ways. svc still holds, prices and settles from the translated request and the upstream's usage,
 * names the response with its own id and model, and keeps it (with `store`) in its own store.
 */

// Tools the upstream runs for the client's own code; hosted tools svc runs itself (web_search) or
// would let the upstream run at svc's expense keep the translated path.
const CLIENT_TOOLS = new Set(['function', 'custom', 'namespace']);

/**
 * Whether a CreateResponse body can be passed through: the model's upstream speaks Responses,
 * and nothing in the body refers to svc's own state (`previous_response_id`, `item_reference`)
 * or asks for a hosted tool.
 */
export function passesThrough(body: JsonObject, provider: ChatProvider): boolean {
  if (provider.native?.wire !== 'openai-responses') return false;
  const previous = body['previous_response_id'];
  if (previous !== undefined && previous !== null) return false;
  if (referencedItemIds(body).length > 0) return false;
  const tools = body['tools'];
  if (tools === undefined || tools === null) return true;
  return (
    Array.isArray(tools) &&
    tools.every((t) => typeof t === 'object' && t !== null && CLIENT_TOOLS.has(String((t as JsonObject)['type'])))
  );
}

export interface NativeContext {
  readonly chat: PreparedChat;
  readonly store: boolean;
  readonly conversation: JsonObject[];
  /**
   * Native compaction (compaction.ts): each `compaction` output item the upstream made, as svc
   * answers it (sealed for the account). Absent: output items go out as the upstream made them.
   */
  readonly wrap?: (item: JsonObject) => Promise<JsonObject>;
}

const isCompaction = (item: unknown): item is JsonObject =>
  typeof item === 'object' && item !== null && (item as JsonObject)['type'] === 'compaction';

/** `response`'s compaction output items wrapped by `wrap` (the response itself when there is nothing to wrap). */
export async function wrapCompactions(response: JsonObject, wrap: NativeContext['wrap']): Promise<JsonObject> {
  const output = response['output'];
  if (wrap === undefined || !Array.isArray(output) || !output.some(isCompaction)) return response;
  return { ...response, output: await Promise.all(output.map((item) => (isCompaction(item) ? wrap(item) : item))) };
}

/** An upstream stream event with its compaction items (the event's `item`, its response's output) wrapped. */
async function wrapEvent(event: JsonObject, wrap: NativeContext['wrap']): Promise<JsonObject> {
  if (wrap === undefined) return event;
  const item = event['item'];
  const response = event['response'];
  return {
    ...event,
    ...(isCompaction(item) ? { item: await wrap(item) } : {}),
    ...(typeof response === 'object' && response !== null
      ? { response: await wrapCompactions(response as JsonObject, wrap) }
      : {}),
  };
}

/**
 * The upstream's Response as svc's: svc's id and model, the cost in `usage`. An upstream that
 * reported no usage gets svc's own count (`counted`, marked `estimated`, SPEC §6) in its place.
 */
function asSvcResponse(
  response: JsonObject,
  id: string,
  context: NativeContext,
  cost?: bigint,
  counted?: WireUsage,
): JsonObject {
  const usage = response['usage'];
  const reported = typeof usage === 'object' && usage !== null;
  return {
    ...response,
    id,
    model: context.chat.model.id,
    store: context.store,
    ...(cost !== undefined && reported ? { usage: { ...(usage as JsonObject), cost: Number(cost) } } : {}),
    ...(cost !== undefined && !reported && counted !== undefined ? { usage: responsesUsage(counted, cost) } : {}),
  };
}

async function keep(
  store: ResponseStore,
  principal: Principal,
  id: string,
  response: JsonObject,
  context: NativeContext,
): Promise<void> {
  if (!context.store) return;
  const output = Array.isArray(response['output']) ? (response['output'] as JsonObject[]) : [];
  await store.save(principal, id, { response, conversation: [...context.conversation, ...output] });
}

/**
 * One passed-through CreateResponse. On the fast path (`pass`, core/chat/fast-path.ts) the answer
 * also comes as `data`: the upstream's JSON text with svc's id, model, `store` and usage (its
 * cost added) edited in where it wrote them (`withSvcMembers`), when the upstream reported usage,
 * no compaction item is to be wrapped, and the text can be edited so.
 */
export async function createNative(
  deps: { runner: ChatRunner; responses: ResponseStore },
  context: NativeContext,
  run: RunContext,
  pass = false,
): Promise<{ response: JsonObject; billing: BillingResult; data?: string }> {
  const result = await deps.runner.complete(context.chat, run);
  const upstream = result.completion.native;
  if (upstream === undefined) throw new SvcError('internal', 'a passed-through call returned no native answer');
  const id = newResponseId();
  const response = asSvcResponse(await wrapCompactions(upstream, context.wrap), id, context, result.cost);
  await keep(deps.responses, run.principal, id, response, context);
  const text = result.completion.nativeText;
  const data =
    pass && text !== undefined && !(context.wrap !== undefined && mayName(text, '"compaction"'))
      ? withSvcMembers(text, upstream, response, false)
      : undefined;
  return data === undefined ? { response, billing: result.billing } : { response, billing: result.billing, data };
}

/**
 * One passed-through streamed CreateResponse: the upstream's events as they came (svc's id and
 * model in their `response`), the terminal `response.completed` / `.incomplete` held back until
 * the charge is settled, then sent with the billing.
 */
export async function* streamNative(
  deps: { runner: ChatRunner; responses: ResponseStore },
  context: NativeContext,
  run: RunContext,
): AsyncGenerator<ResponseEventOut> {
  const id = newResponseId();
  let terminal: JsonObject | undefined;
  const rewrite = (event: JsonObject, cost?: bigint, counted?: WireUsage): JsonObject => {
    const response = event['response'];
    return typeof response === 'object' && response !== null
      ? { ...event, response: asSvcResponse(response as JsonObject, id, context, cost, counted) }
      : event;
  };
  for await (const item of deps.runner.stream(context.chat, run)) {
    if (item.kind === 'chunk') {
      for (const raw of item.chunk.native ?? []) {
        const event = await wrapEvent(raw, context.wrap);
        if (event['type'] === 'response.completed' || event['type'] === 'response.incomplete') terminal = event;
        else yield { event: rewrite(event) };
      }
      continue;
    }
    if (terminal === undefined) throw new SvcError('internal', 'a passed-through stream ended without its last event');
    const last = rewrite(terminal, item.cost, item.usage);
    await keep(deps.responses, run.principal, id, last['response'] as JsonObject, context);
    yield { event: last, billing: item.billing };
  }
}

/**
 * Whether JSON `text` may contain the string `quoted` (`"response"`, `"compaction"`): it does, or
 * it has a `\u` escape, which could spell it without its letters (`"\u0072esponse"`). A text that
 * may is parsed; one that cannot is forwarded untouched.
 */
const mayName = (text: string, quoted: string): boolean => text.includes(quoted) || text.includes('\\u');

/** Events on the fast path: the upstream's JSON texts with their SSE names, the billing on the last. */
export interface PassedEvents {
  readonly data: readonly string[];
  readonly names: readonly string[];
  readonly billing?: BillingResult;
}

const isObject = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * An event's text (`data`, whose `response` is `upstream`; with `nested` false, a Response's own) with its `response`'s members that svc
 * owns set as in `mine` (svc's id, model, `store`, and on the terminal event the usage: the cost
 * added into the upstream's usage as it wrote it, or svc's own count in place of none), each
 * edited where the upstream wrote it, the rest of the text as it was. Undefined when the text
 * cannot be edited so (a key written twice or escaped).
 */
function withSvcMembers(data: string, upstream: JsonObject, mine: JsonObject, nested = true): string | undefined {
  const members: Record<string, string | ((value: string) => string | undefined)> = {};
  for (const key of ['id', 'model', 'store']) if (upstream[key] !== mine[key]) members[key] = JSON.stringify(mine[key]);
  const usage = mine['usage'];
  if (usage !== upstream['usage']) {
    const cost = isObject(usage) ? usage['cost'] : undefined;
    members['usage'] =
      isObject(upstream['usage']) && typeof cost === 'number'
        ? (text) => withMembers(text, 0, { cost: String(cost) })?.text
        : JSON.stringify(usage);
  }
  // A stream event holds its Response as `response`; a non-stream answer is one.
  return nested
    ? withMembers(data, skipSpace(data, 0), { response: (text) => withMembers(text, 0, members)?.text })?.text
    : withMembers(data, skipSpace(data, 0), members)?.text;
}

/**
 * `streamNative` on the fast path (core/chat/fast-path.ts): the upstream's events go to the client
 * as the JSON text the upstream wrote (its spacing, key order, unknown fields and event types),
 * except what svc owns, edited into that text (`withSvcMembers`): an event that holds a `response`
 * object gets svc's id, model and `store` in it, and the terminal `response.completed` /
 * `.incomplete` (the provider's `closing`) comes only after the charge is settled, with svc's usage
 * and cost (svc's own count when the upstream sent none), kept as on the native path. Only events
 * that may hold one are parsed again (their text names `"response"`, or has a `\u` escape that
 * could spell it); with native compaction (`wrap`), an event whose text may name `"compaction"` is wrapped and written from its JSON, as is
 * an event whose members cannot be edited in place (a key written twice or escaped).
 */
export async function* streamPassThrough(
  deps: { runner: ChatRunner; responses: ResponseStore },
  context: NativeContext,
  run: RunContext,
): AsyncGenerator<PassedEvents> {
  const id = newResponseId();
  const rewrite = (event: JsonObject, cost?: bigint, counted?: WireUsage): JsonObject => {
    const response = event['response'];
    return typeof response === 'object' && response !== null
      ? { ...event, response: asSvcResponse(response as JsonObject, id, context, cost, counted) }
      : event;
  };
  for await (const item of deps.runner.passThrough(context.chat, run, true)) {
    if (item.kind === 'pass') {
      const data: string[] = [];
      for (const chunk of item.chunks) {
        // The provider writes only text: a chunk is a translated path's, which this one never has.
        if (typeof chunk !== 'string') throw new SvcError('internal', 'a passed-through event was not text');
        const compaction = context.wrap !== undefined && mayName(chunk, '"compaction"');
        if (!compaction && !mayName(chunk, '"response"')) {
          data.push(chunk);
          continue;
        }
        const upstream = JSON.parse(chunk) as JsonObject;
        const event = rewrite(await wrapEvent(upstream, context.wrap));
        const response = upstream['response'];
        data.push(
          compaction
            ? JSON.stringify(event)
            : isObject(response)
              ? (withSvcMembers(chunk, response, event['response'] as JsonObject) ?? JSON.stringify(event))
              : chunk,
        );
      }
      yield { data, names: item.events ?? [] };
      continue;
    }
    const closing = item.closing;
    if (closing === undefined) throw new SvcError('internal', 'a passed-through stream ended without its last event');
    const upstream = JSON.parse(closing.data) as JsonObject;
    const compaction = context.wrap !== undefined && mayName(closing.data, '"compaction"');
    const last = rewrite(await wrapEvent(upstream, context.wrap), item.cost, item.usage);
    const response = last['response'] as JsonObject;
    await keep(deps.responses, run.principal, id, response, context);
    const text = compaction ? undefined : withSvcMembers(closing.data, upstream['response'] as JsonObject, response);
    yield { data: [text ?? JSON.stringify(last)], names: [closing.event], billing: item.billing };
  }
}
