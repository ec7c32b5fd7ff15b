import { invalidArgument, SvcError } from '../../errors';
import type { JsonObject, WireChatBody, WireContentPart, WireMessage, WireToolCall } from '../../providers/llm/types';
import { checkChatDecimal } from '../../conversation/fields';
import { customCallArguments } from '../custom-tools';
import { responseIdOfItem, type ResponseEcho } from './common';
import { tools, toolChoice, upstreamToolName, type HostedTools, type ToolMap } from './tools';
import { checkContentPartType, checkInputItemType, checkResponseFields } from './fields';
import type { McpListing } from './hosted-mcp';

/**
 * The Responses API over chat completions: a CreateResponse body is validated and translated
 * into a chat body. Conversation items are kept in the Responses item format (for storage and
 * `previous_response_id`); only what the upstream can serve is translated. The tools are
 * translated in ./tools.ts; hosted tool types neither the upstream nor svc can run
 * (`local_shell`, `file_search`, …) are listed in `dropped`, so the caller can say so.
 */

type Obj = JsonObject;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

export interface TranslatedRequest {
  readonly echo: ResponseEcho;
  readonly toolMap: ToolMap;
  /** The types of the request's tools that were not offered to the upstream. */
  readonly dropped: string[];
  /** The input items of this request, normalised (without the previous conversation). */
  readonly input: Obj[];
  /** The chat body for the whole conversation (previous items, then this input). */
  readonly body: WireChatBody;
  /** max_output_tokens, or 0 for the model's maximum. */
  readonly requestedMax: number;
}

const MESSAGE_ROLES = new Set(['user', 'assistant', 'system', 'developer']);

function normaliseContent(content: unknown, param: string): string | Obj[] {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content))
    throw invalidArgument(param, `Invalid '${param}': expected a string or an array of content parts.`);
  return content.map((part, j) => {
    const at = `${param}[${j}]`;
    if (!isObj(part) || typeof part['type'] !== 'string')
      throw invalidArgument(at, `Invalid '${at}': expected a content part object with a type.`);
    const type = part['type'];
    checkContentPartType(type, at);
    if ((type === 'input_text' || type === 'output_text' || type === 'text') && typeof part['text'] !== 'string') {
      throw invalidArgument(`${at}.text`, `Invalid '${at}.text': expected a string.`);
    }
    if (type === 'refusal' && typeof part['refusal'] !== 'string')
      throw invalidArgument(`${at}.refusal`, `Invalid '${at}.refusal': expected a string.`);
    if (type === 'input_image') {
      // A file_id names a file uploaded to OpenAI, which svc does not have.
      if (typeof part['image_url'] !== 'string') {
        throw new SvcError(
          part['file_id'] !== undefined && part['file_id'] !== null ? 'unsupported_value' : 'invalid_argument',
          part['file_id'] !== undefined && part['file_id'] !== null
            ? `Unsupported value: '${at}.file_id': files uploaded to OpenAI are not available here. Send the image as 'image_url' (a URL or a data URL).`
            : `Invalid '${at}.image_url': expected a URL or a data URL string.`,
          { param: part['file_id'] !== undefined && part['file_id'] !== null ? `${at}.file_id` : `${at}.image_url` },
        );
      }
    }
    if (type === 'input_file') {
      const data = part['file_data'];
      if (typeof data !== 'string' || data === '') {
        const named = ['file_id', 'file_url'].find((k) => part[k] !== undefined && part[k] !== null);
        throw new SvcError(
          named !== undefined ? 'unsupported_value' : 'invalid_argument',
          named !== undefined
            ? `Unsupported value: '${at}.${named}': files stored at OpenAI or fetched from a URL are not available here. Send the file inline as 'file_data' (a base64 data URL) with a 'filename'.`
            : `Invalid '${at}.file_data': expected the file as a base64 data URL.`,
          { param: `${at}.${named ?? 'file_data'}` },
        );
      }
    }
    return part;
  });
}

/**
 * Validates one input item; returns it normalised, or undefined for item types that are dropped.
 * `references` holds the stored items that `item_reference` items name.
 */
function normaliseItem(
  item: unknown,
  i: number,
  references: ReadonlyMap<string, Obj>,
  native = false,
): Obj | undefined {
  const at = `input[${i}]`;
  if (!isObj(item)) throw invalidArgument(at, `Invalid '${at}': expected an object.`);
  const type = item['type'] ?? (item['role'] !== undefined ? 'message' : undefined);
  if (typeof type === 'string') checkInputItemType(type, at);
  else if (type !== undefined) throw invalidArgument(`${at}.type`, `Invalid '${at}.type': expected a string.`);
  switch (type) {
    case 'item_reference': {
      const id = item['id'];
      if (typeof id !== 'string') throw invalidArgument(`${at}.id`, `Invalid '${at}.id': expected a string.`);
      const found = references.get(id);
      if (found !== undefined) return normaliseItem(found, i, new Map());
      // An id svc made but cannot find (not stored, or another account's) is an error; a
      // reference to anything else (e.g. another provider's reasoning item) is dropped.
      if (responseIdOfItem(id) !== undefined)
        throw new SvcError('not_found', `Item with id '${id}' not found.`, { param: `${at}.id` });
      return undefined;
    }
    case 'message': {
      const role = item['role'];
      if (typeof role !== 'string' || !MESSAGE_ROLES.has(role)) {
        throw invalidArgument(
          `${at}.role`,
          `Invalid '${at}.role': expected one of 'user', 'assistant', 'system', 'developer'.`,
        );
      }
      return { type: 'message', role, content: normaliseContent(item['content'], `${at}.content`) };
    }
    case 'function_call': {
      for (const field of ['call_id', 'name', 'arguments']) {
        if (typeof item[field] !== 'string')
          throw invalidArgument(`${at}.${field}`, `Invalid '${at}.${field}': expected a string.`);
      }
      const namespace = item['namespace'];
      if (namespace !== undefined && namespace !== null && typeof namespace !== 'string')
        throw invalidArgument(`${at}.namespace`, `Invalid '${at}.namespace': expected a string.`);
      return {
        type: 'function_call',
        call_id: item['call_id'],
        ...(typeof namespace === 'string' ? { namespace } : {}),
        name: item['name'],
        arguments: item['arguments'],
      };
    }
    case 'custom_tool_call': {
      for (const field of ['call_id', 'name', 'input']) {
        if (typeof item[field] !== 'string')
          throw invalidArgument(`${at}.${field}`, `Invalid '${at}.${field}': expected a string.`);
      }
      const namespace = item['namespace'];
      if (namespace !== undefined && namespace !== null && typeof namespace !== 'string')
        throw invalidArgument(`${at}.namespace`, `Invalid '${at}.namespace': expected a string.`);
      return {
        type: 'custom_tool_call',
        call_id: item['call_id'],
        ...(typeof namespace === 'string' ? { namespace } : {}),
        name: item['name'],
        input: item['input'],
      };
    }
    case 'custom_tool_call_output':
    case 'function_call_output': {
      if (typeof item['call_id'] !== 'string')
        throw invalidArgument(`${at}.call_id`, `Invalid '${at}.call_id': expected a string.`);
      const output = item['output'];
      if (typeof output !== 'string' && !Array.isArray(output))
        throw invalidArgument(`${at}.output`, `Invalid '${at}.output': expected a string or an array.`);
      if (Array.isArray(output)) {
        const bad = output.findIndex((part) => !isObj(part));
        if (bad >= 0)
          throw invalidArgument(
            `${at}.output[${bad}]`,
            `Invalid '${at}.output[${bad}]': expected a content part object.`,
          );
      }
      return { type, call_id: item['call_id'], output };
    }
    // compaction.ts expands compaction items and takes a final trigger off before translation.
    case 'compaction_trigger':
      throw invalidArgument(at, `Invalid '${at}': a compaction_trigger must be the final input item.`);
    case 'compaction':
      // Passed through, an upstream's own compaction item (compaction.ts opened svc's seal around
      // it) goes to the upstream as it is; the translation has no place for it.
      if (native) return { ...item };
      throw invalidArgument(
        at,
        `Invalid '${at}': this compaction item was made by the model's upstream and goes to it only as it is, but this request is served through svc's translation (it uses previous_response_id, item_reference or a hosted tool), which cannot carry it. Leave those out, or send the uncompacted input.`,
      );
    case undefined:
      throw invalidArgument(`${at}.type`, `Missing '${at}.type'.`);
    default:
      // `reasoning` and `web_search_call` (fields.ts says why): kept in the conversation, never
      // given to a chat upstream.
      return { ...item };
  }
}

function partToChat(part: Obj): WireContentPart | undefined {
  switch (part['type']) {
    case 'input_text':
    case 'output_text':
    case 'text':
      return { type: 'text', text: String(part['text'] ?? '') };
    case 'refusal':
      return { type: 'text', text: String(part['refusal'] ?? '') };
    case 'input_image': {
      const url = part['image_url'];
      if (typeof url !== 'string') return undefined;
      return {
        type: 'image_url',
        image_url: { url, ...(typeof part['detail'] === 'string' ? { detail: part['detail'] } : {}) },
      };
    }
    case 'input_file':
      return {
        type: 'file',
        file: {
          file_data: String(part['file_data']),
          ...(typeof part['filename'] === 'string' ? { filename: part['filename'] } : {}),
        },
      };
    default:
      return undefined;
  }
}

function textOf(content: string | Obj[]): string {
  if (typeof content === 'string') return content;
  return content
    .map((p) => (typeof p['text'] === 'string' ? p['text'] : typeof p['refusal'] === 'string' ? p['refusal'] : ''))
    .join('');
}

function toolCallOf(item: Obj): WireToolCall {
  const namespace = typeof item['namespace'] === 'string' ? item['namespace'] : undefined;
  return {
    id: String(item['call_id']),
    type: 'function',
    function: {
      name: upstreamToolName(String(item['name']), namespace),
      arguments:
        item['type'] === 'custom_tool_call' ? customCallArguments(String(item['input'])) : String(item['arguments']),
    },
  };
}

/**
 * Items → chat messages: consecutive tool calls (function and custom) join one assistant turn;
 * orphan outputs go.
 */
export function itemsToMessages(items: readonly Obj[]): WireMessage[] {
  const messages: WireMessage[] = [];
  const calls = new Set<string>();
  // The notes of images the hosted image_generation tool made, each the start of an assistant turn.
  const notes = new Set<WireMessage>();
  for (const item of items) {
    if (item['type'] === 'image_generation_call') {
      // The image itself never goes to a chat upstream; the model is reminded what it drew (so
      // that "make it bluer" can be drawn again), in the assistant turn that follows.
      const prompt = item['revised_prompt'];
      if (item['status'] !== 'completed' || typeof prompt !== 'string') continue;
      const note: WireMessage = {
        role: 'assistant',
        content: `[An image was generated and shown to the user, from the prompt: ${JSON.stringify(prompt)}]`,
      };
      notes.add(note);
      messages.push(note);
    } else if (item['type'] === 'message') {
      const role = item['role'] as WireMessage['role'];
      const content = item['content'] as string | Obj[];
      const last = messages[messages.length - 1];
      if (role === 'assistant' && last !== undefined && notes.has(last))
        last.content = `${String(last.content)}\n${textOf(content)}`;
      else if (role === 'assistant') messages.push({ role, content: textOf(content) });
      else if (typeof content === 'string') messages.push({ role, content });
      else {
        const parts = content.map(partToChat).filter((p): p is WireContentPart => p !== undefined);
        messages.push({
          role,
          content: parts.every((p) => p.type === 'text') ? parts.map((p) => String(p['text'])).join('\n') : parts,
        });
      }
    } else if (item['type'] === 'function_call' || item['type'] === 'custom_tool_call') {
      const call = toolCallOf(item);
      calls.add(call.id);
      const last = messages[messages.length - 1];
      if (last?.role === 'assistant') {
        last.tool_calls = [...(last.tool_calls ?? []), call];
      } else {
        messages.push({ role: 'assistant', content: null, tool_calls: [call] });
      }
    } else if (item['type'] === 'function_call_output' || item['type'] === 'custom_tool_call_output') {
      const id = String(item['call_id']);
      if (!calls.has(id)) continue;
      const output = item['output'];
      messages.push({
        role: 'tool',
        tool_call_id: id,
        content: typeof output === 'string' ? output : textOf(output as Obj[]),
      });
    }
  }
  return messages;
}

/** A function_call_output or custom_tool_call_output must answer a call of the conversation. */
function checkCustomOutputs(previous: readonly Obj[], rawInput: unknown, input: readonly Obj[]): void {
  if (!Array.isArray(rawInput)) return;
  const customCalls = new Set(
    [...previous, ...input].filter((i) => i['type'] === 'custom_tool_call').map((i) => String(i['call_id'])),
  );
  const functionCalls = new Set(
    [...previous, ...input].filter((i) => i['type'] === 'function_call').map((i) => String(i['call_id'])),
  );
  rawInput.forEach((item: unknown, i) => {
    // OpenAI's own answer to an output no call of the conversation asked for.
    if (isObj(item) && item['type'] === 'function_call_output' && !functionCalls.has(String(item['call_id'])))
      throw invalidArgument(
        'input',
        `No tool call found for function call output with call_id ${String(item['call_id'])}.`,
      );
    if (!isObj(item) || item['type'] !== 'custom_tool_call_output') return;
    const callId = String(item['call_id']);
    if (!customCalls.has(callId)) {
      throw invalidArgument(
        `input[${i}].call_id`,
        `Invalid 'input[${i}].call_id': no custom_tool_call with call_id '${callId}' found in the conversation.`,
      );
    }
  });
}

function optionalNumber(body: Obj, key: string): number | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number')
    throw new SvcError('invalid_type', `Invalid type for '${key}': expected a number.`, { param: key });
  return v;
}

const VERBOSITY = new Set(['low', 'medium', 'high']);
const EFFORT = new Set(['none', 'minimal', 'low', 'medium', 'high', 'xhigh']);
const SUMMARY = new Set(['auto', 'concise', 'detailed']);

// OpenAI's documented `include` values. Only the logprobs one adds anything here: the others name
// outputs of built-in tools and reasoning items, which a chat upstream never produces.
const INCLUDABLE = new Set([
  'file_search_call.results',
  'web_search_call.results',
  'web_search_call.action.sources',
  'message.input_image.image_url',
  'computer_call_output.output.image_url',
  'code_interpreter_call.outputs',
  'reasoning.encrypted_content',
  'message.output_text.logprobs',
]);

function oneOf(value: unknown, allowed: ReadonlySet<string>, param: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string')
    throw new SvcError('invalid_type', `Invalid type for '${param}': expected a string.`, { param });
  if (!allowed.has(value)) {
    throw invalidArgument(
      param,
      `Invalid value: '${value}'. Supported values are: ${[...allowed].map((v) => `'${v}'`).join(', ')}.`,
    );
  }
  return value;
}

function textOptions(body: Obj): { chat: Obj | undefined; verbosity: string | undefined; echo: Obj } {
  const format = textFormat(body);
  const text = body['text'];
  const verbosity = isObj(text) ? oneOf(text['verbosity'], VERBOSITY, 'text.verbosity') : undefined;
  return {
    chat: format.chat,
    verbosity,
    echo: verbosity !== undefined ? { ...format.echo, verbosity } : format.echo,
  };
}

function reasoningOf(body: Obj): Obj | null {
  const raw = body['reasoning'];
  if (raw === undefined || raw === null) return null;
  if (!isObj(raw))
    throw new SvcError('invalid_type', `Invalid type for 'reasoning': expected an object.`, { param: 'reasoning' });
  const effort = oneOf(raw['effort'], EFFORT, 'reasoning.effort');
  const summary = oneOf(raw['summary'], SUMMARY, 'reasoning.summary');
  return { effort: effort ?? null, summary: summary ?? null };
}

// `truncation`: "auto" is accepted and changes nothing (fields.ts says why).
function checkTruncation(body: Obj): void {
  const truncation = body['truncation'];
  if (truncation === undefined || truncation === null || truncation === 'disabled' || truncation === 'auto') return;
  throw invalidArgument(
    'truncation',
    `Invalid value: '${String(truncation)}'. Supported values are: 'auto' and 'disabled'.`,
  );
}

function includes(body: Obj): Set<string> {
  const raw = body['include'];
  if (raw === undefined || raw === null) return new Set();
  if (!Array.isArray(raw))
    throw new SvcError('invalid_type', `Invalid type for 'include': expected an array of strings.`, {
      param: 'include',
    });
  return new Set(raw.map((value: unknown, i) => oneOf(value, INCLUDABLE, `include[${i}]`) ?? ''));
}

function textFormat(body: Obj): { chat: Obj | undefined; echo: Obj } {
  const text = body['text'];
  if (text === undefined || text === null) return { chat: undefined, echo: { format: { type: 'text' } } };
  if (!isObj(text)) throw invalidArgument('text', `Invalid 'text': expected an object.`);
  const format = text['format'];
  if (format === undefined || format === null) return { chat: undefined, echo: { format: { type: 'text' } } };
  if (!isObj(format)) throw invalidArgument('text.format', `Invalid 'text.format': expected an object.`);
  switch (format['type']) {
    case 'text':
      return { chat: undefined, echo: { format: { type: 'text' } } };
    case 'json_object':
      return { chat: { type: 'json_object' }, echo: { format: { type: 'json_object' } } };
    case 'json_schema': {
      if (typeof format['name'] !== 'string' || !isObj(format['schema'])) {
        throw invalidArgument(
          'text.format',
          `Invalid 'text.format': json_schema needs a 'name' and a 'schema' object.`,
        );
      }
      const schema: Obj = { name: format['name'], schema: format['schema'] };
      if (typeof format['strict'] === 'boolean') schema['strict'] = format['strict'];
      if (typeof format['description'] === 'string') schema['description'] = format['description'];
      return {
        chat: { type: 'json_schema', json_schema: schema },
        echo: { format: { type: 'json_schema', ...schema } },
      };
    }
    default:
      throw invalidArgument(
        'text.format.type',
        `Invalid 'text.format.type': expected 'text', 'json_object' or 'json_schema'.`,
      );
  }
}

/** The model id a body names (checked first, so an unknown model is reported before the rest). */
export function modelOf(body: Obj): string {
  const model = body['model'];
  if (typeof model !== 'string' || model === '')
    throw invalidArgument('model', `Missing or invalid 'model': expected a model id string.`);
  return model;
}

/** The ids of the `item_reference` items of a body's input. */
export function referencedItemIds(body: Obj): string[] {
  const input = body['input'];
  if (!Array.isArray(input)) return [];
  return input.flatMap((item) =>
    isObj(item) && item['type'] === 'item_reference' && typeof item['id'] === 'string' ? [item['id']] : [],
  );
}

/** Validates a CreateResponse body and translates it, after `previous` (the stored conversation). */
export function translateRequest(
  body: Obj,
  previous: readonly Obj[],
  references: ReadonlyMap<string, Obj> = new Map(),
  mcp: ReadonlyMap<number, McpListing> = new Map(),
  /**
   * The body goes to a Responses upstream as it is (native.ts): its top-level fields, known or
   * not, reach the upstream, so none is refused here (DESIGN.md point 3: unknown fields survive).
   */
  native = false,
  /** The hosted tools svc serves beyond the built-in ones (the image_generation tool). */
  hosted: HostedTools = {},
): TranslatedRequest {
  const model = modelOf(body);
  if (!native) checkResponseFields(body);
  const rawInput = body['input'];
  let input: Obj[];
  if (typeof rawInput === 'string') input = [{ type: 'message', role: 'user', content: rawInput }];
  else if (Array.isArray(rawInput)) {
    input = rawInput
      .map((item, i) => normaliseItem(item, i, references, native))
      .filter((i): i is Obj => i !== undefined);
  } else if (rawInput === undefined && previous.length > 0) input = [];
  else throw invalidArgument('input', `Invalid 'input': expected a string or an array of input items.`);

  const instructions = body['instructions'];
  if (instructions !== undefined && instructions !== null && typeof instructions !== 'string') {
    throw invalidArgument('instructions', `Invalid 'instructions': expected a string.`);
  }
  checkCustomOutputs(previous, rawInput, input);
  const messages = itemsToMessages([...previous, ...input]);
  if (typeof instructions === 'string' && instructions !== '')
    messages.unshift({ role: 'system', content: instructions });
  if (messages.length === 0)
    throw invalidArgument('input', `Invalid 'input': there is nothing for the model to answer.`);

  const temperature = optionalNumber(body, 'temperature');
  const topP = optionalNumber(body, 'top_p');
  checkChatDecimal('temperature', temperature);
  checkChatDecimal('top_p', topP);
  const maxOut = optionalNumber(body, 'max_output_tokens');
  if (maxOut !== undefined && !Number.isInteger(maxOut))
    throw new SvcError('invalid_type', `Invalid type for 'max_output_tokens': expected an integer.`, {
      param: 'max_output_tokens',
    });
  // OpenAI's own floor.
  if (maxOut !== undefined && maxOut < 16) {
    throw new SvcError(
      'integer_below_min_value',
      `Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got ${maxOut} instead.`,
      { param: 'max_output_tokens' },
    );
  }
  const maxToolCalls = optionalNumber(body, 'max_tool_calls');
  if (maxToolCalls !== undefined && (!Number.isInteger(maxToolCalls) || maxToolCalls < 0)) {
    throw invalidArgument(
      'max_tool_calls',
      `Invalid 'max_tool_calls': expected a non-negative integer, got ${maxToolCalls}.`,
    );
  }
  const parallel = body['parallel_tool_calls'];
  if (parallel !== undefined && parallel !== null && typeof parallel !== 'boolean')
    throw invalidArgument('parallel_tool_calls', `Invalid 'parallel_tool_calls': expected a boolean.`);
  const store = body['store'];
  if (store !== undefined && store !== null && typeof store !== 'boolean')
    throw invalidArgument('store', `Invalid 'store': expected a boolean.`);
  const user = body['user'] ?? body['safety_identifier'];
  if (user !== undefined && user !== null && typeof user !== 'string')
    throw invalidArgument('user', `Invalid 'user': expected a string.`);
  const metadata = body['metadata'];
  if (
    metadata !== undefined &&
    metadata !== null &&
    (!isObj(metadata) || Object.values(metadata).some((v) => typeof v !== 'string'))
  ) {
    throw invalidArgument('metadata', `Invalid 'metadata': expected an object of string values.`);
  }

  checkTruncation(body);
  const t = tools(body, mcp, hosted);
  const choice = toolChoice(body, t);
  const format = textOptions(body);
  const reasoning = reasoningOf(body);
  const include = includes(body);
  const topLogprobs = optionalNumber(body, 'top_logprobs');
  if (topLogprobs !== undefined && (!Number.isInteger(topLogprobs) || topLogprobs < 0 || topLogprobs > 20)) {
    throw new SvcError(
      topLogprobs > 20 ? 'integer_above_max_value' : 'invalid_argument',
      `Invalid 'top_logprobs': expected an integer between 0 and 20, got ${topLogprobs}.`,
      { param: 'top_logprobs' },
    );
  }
  const cacheKey = body['prompt_cache_key'];
  if (cacheKey !== undefined && cacheKey !== null && typeof cacheKey !== 'string')
    throw new SvcError('invalid_type', `Invalid type for 'prompt_cache_key': expected a string.`, {
      param: 'prompt_cache_key',
    });
  const tier = oneOf(
    body['service_tier'],
    new Set(['auto', 'default', 'flex', 'scale', 'priority', 'fast', 'ultrafast']),
    'service_tier',
  );
  const chat: WireChatBody = { messages };
  if (temperature !== undefined) chat['temperature'] = temperature;
  if (topP !== undefined) chat['top_p'] = topP;
  if (t.wire.length > 0) {
    chat.tools = t.wire;
    if (choice.chat !== undefined) chat.tool_choice = choice.chat;
    if (typeof parallel === 'boolean') chat['parallel_tool_calls'] = parallel;
  }
  if (format.chat !== undefined) chat['response_format'] = format.chat;
  if (format.verbosity !== undefined) chat['verbosity'] = format.verbosity;
  if (typeof user === 'string' && user !== '') chat['user'] = user;
  if (typeof reasoning?.['effort'] === 'string') chat['reasoning_effort'] = reasoning['effort'];
  if (include.has('message.output_text.logprobs') || (topLogprobs !== undefined && topLogprobs > 0)) {
    chat['logprobs'] = true;
    if (topLogprobs !== undefined) chat['top_logprobs'] = topLogprobs;
  }
  if (typeof cacheKey === 'string') chat['prompt_cache_key'] = cacheKey;
  const retention = oneOf(body['prompt_cache_retention'], new Set(['in_memory', '24h']), 'prompt_cache_retention');
  if (retention !== undefined) chat['prompt_cache_retention'] = retention;
  if (tier !== undefined) chat['service_tier'] = tier;
  // Carried as chat completions has them (core/conversation/fields.ts).
  for (const name of ['prompt_cache_options', 'moderation'] as const) {
    const value = body[name];
    if (value === undefined || value === null) continue;
    if (!isObj(value))
      throw new SvcError('invalid_type', `Invalid type for '${name}': expected an object.`, { param: name });
    chat[name] = value;
  }

  return {
    toolMap: t.map,
    dropped: t.dropped,
    echo: {
      model,
      instructions: typeof instructions === 'string' ? instructions : null,
      tools: t.echo,
      toolChoice: choice.echo,
      temperature: temperature ?? null,
      topP: topP ?? null,
      parallelToolCalls: typeof parallel === 'boolean' ? parallel : true,
      maxOutputTokens: maxOut ?? null,
      text: format.echo,
      metadata: (metadata ?? {}) as Record<string, string>,
      store: store !== false,
      previousResponseId: typeof body['previous_response_id'] === 'string' ? body['previous_response_id'] : null,
      user: typeof user === 'string' ? user : null,
      reasoning,
      topLogprobs: topLogprobs ?? null,
      promptCacheKey: typeof cacheKey === 'string' ? cacheKey : null,
      truncation: body['truncation'] === 'auto' ? 'auto' : 'disabled',
      serviceTier: tier ?? null,
      maxToolCalls: maxToolCalls ?? null,
    },
    input,
    body: chat,
    requestedMax: maxOut ?? 0,
  };
}
