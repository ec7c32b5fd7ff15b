import { invalidArgument } from '../../../errors';
import {
  dataUrl,
  imageUrlOf,
  isObj,
  narrowedToAllowed,
  plainText,
  refuseUnsupported,
  remainingParams,
  str,
  type Obj,
} from '../translate';
import type { JsonObject, WireChatRequest, WireContentPart, WireMessage } from '../types';

/*
 * A chat-completions request → an Anthropic Messages request (POST /v1/messages).
 *
 * - `system` and `developer` messages become the top-level `system` text blocks, in order.
 * - `tool` messages become `tool_result` blocks of a user turn; assistant `tool_calls` become
 *   `tool_use` blocks (their JSON arguments parsed into `input`). Consecutive turns of one role
 *   are merged into one, as the Messages API alternates user and assistant.
 * - `max_tokens` is required upstream: the client's (already capped by svc) or the model's
 *   `max_output_tokens`, which is also what the hold counted.
 * - `reasoning_effort` becomes `thinking: {type: "enabled", budget_tokens}` (see THINKING_BUDGET),
 *   which Anthropic allows only without a forced tool and without sampling changes, so with it
 *   `temperature` and `top_p` are not sent.
 * - Parameters with no Messages counterpart that change the answer are refused (translate.ts);
 *   anything else unhandled (an operator's `extra_params`, e.g. `top_k`) goes upstream verbatim.
 */

/**
 * Thinking budgets per OpenAI reasoning effort. Anthropic needs 1024 ≤ budget < max_tokens, so
 * the budget is capped at max_tokens − 1 and thinking is left off when that is below 1024.
 */
export const THINKING_BUDGET: Readonly<Record<string, number>> = {
  minimal: 1024,
  low: 2048,
  medium: 8192,
  high: 24576,
  xhigh: 32768,
};
const MIN_THINKING_BUDGET = 1024;

const HANDLED = new Set([
  'model',
  'messages',
  'max_tokens',
  'max_completion_tokens',
  'tools',
  'tool_choice',
  'parallel_tool_calls',
  'stop',
  'temperature',
  'top_p',
  'user',
  'reasoning_effort',
  'response_format',
  'verbosity',
]);

type Block = Obj & { type: string };
interface Turn {
  role: 'user' | 'assistant';
  content: Block[];
}

function imageBlock(part: WireContentPart, param: string): Block {
  const { url } = imageUrlOf(part, param);
  const inline = dataUrl(url);
  return inline !== undefined
    ? { type: 'image', source: { type: 'base64', media_type: inline.mediaType, data: inline.data } }
    : { type: 'image', source: { type: 'url', url } };
}

// A chat `file` part carries a PDF as a data: URL; Anthropic takes it as a document block.
function fileBlock(part: WireContentPart, param: string): Block {
  const file = isObj(part['file']) ? part['file'] : {};
  const inline = dataUrl(str(file['file_data']) ?? '');
  if (inline === undefined)
    throw invalidArgument(`${param}.file`, `Invalid '${param}.file': only inline file_data reaches this upstream.`);
  return { type: 'document', source: { type: 'base64', media_type: inline.mediaType, data: inline.data } };
}

function contentBlocks(content: WireMessage['content'], param: string): Block[] {
  if (content === undefined || content === null) return [];
  if (typeof content === 'string') return content === '' ? [] : [{ type: 'text', text: content }];
  return content.map((part, i): Block => {
    const at = `${param}[${i}]`;
    if (part.type === 'text' && typeof part['text'] === 'string') return { type: 'text', text: part['text'] };
    if (part.type === 'image_url') return imageBlock(part, at);
    if (part.type === 'file') return fileBlock(part, at);
    throw invalidArgument(`${at}.type`, `Invalid '${at}.type': '${part.type}' parts are not supported by this model.`);
  });
}

function toolUse(message: WireMessage, at: string): Block[] {
  return (message.tool_calls ?? []).map((call, j) => {
    let input: unknown;
    try {
      input = call.function.arguments === '' ? {} : JSON.parse(call.function.arguments);
    } catch {
      input = undefined;
    }
    if (!isObj(input)) {
      const param = `${at}.tool_calls[${j}].function.arguments`;
      throw invalidArgument(param, `Invalid '${param}': expected a JSON object.`);
    }
    return { type: 'tool_use', id: call.id, name: call.function.name, input };
  });
}

function toolResult(message: WireMessage, at: string): Block {
  const text = plainText(message.content);
  const content = text !== undefined ? text : contentBlocks(message.content, `${at}.content`);
  return { type: 'tool_result', tool_use_id: message.tool_call_id ?? '', content };
}

/** The chat messages as Anthropic's `system` blocks and alternating turns. */
export function toAnthropicMessages(messages: readonly WireMessage[]): { system: Block[]; turns: Turn[] } {
  const system: Block[] = [];
  const turns: Turn[] = [];
  const push = (role: Turn['role'], blocks: Block[]): void => {
    const last = turns[turns.length - 1];
    if (last?.role === role) last.content.push(...blocks);
    else turns.push({ role, content: blocks });
  };
  messages.forEach((message, i) => {
    const at = `messages[${i}]`;
    switch (message.role) {
      case 'system':
      case 'developer': {
        const text = plainText(message.content);
        if (text === undefined)
          throw invalidArgument(`${at}.content`, `Invalid '${at}.content': a system message takes text only.`);
        if (text !== '') system.push({ type: 'text', text });
        break;
      }
      case 'user':
        push('user', contentBlocks(message.content, `${at}.content`));
        break;
      case 'assistant':
        push('assistant', [...contentBlocks(message.content, `${at}.content`), ...toolUse(message, at)]);
        break;
      case 'tool':
        push('user', [toolResult(message, at)]);
        break;
    }
  });
  return { system, turns };
}

function toolChoice(choice: unknown, parallel: unknown): Obj | undefined {
  let out: Obj | undefined;
  if (choice === 'auto') out = { type: 'auto' };
  else if (choice === 'required') out = { type: 'any' };
  else if (choice === 'none') out = { type: 'none' };
  else if (isObj(choice) && isObj(choice['function'])) out = { type: 'tool', name: choice['function']['name'] };
  if (parallel === false) out = { ...(out ?? { type: 'auto' }), disable_parallel_tool_use: true };
  return out;
}

/**
 * The Messages body for `request` (without `stream`). `maxOutputTokens` is the model's output
 * limit, sent when the client named none, since the Messages API requires one.
 */
export function toAnthropicRequest(given: WireChatRequest, maxOutputTokens: number): JsonObject {
  // The Messages API has no allowed_tools: the model is offered only those tools instead.
  const request = narrowedToAllowed(given);
  refuseUnsupported(request, 'Anthropic');
  const format = request['response_format'];
  if (isObj(format) && format['type'] !== 'text')
    throw invalidArgument(
      'response_format',
      `Invalid 'response_format': not supported by this model's Anthropic upstream.`,
    );
  const { system, turns } = toAnthropicMessages(request.messages);
  const maxTokens =
    (typeof request.max_completion_tokens === 'number' ? request.max_completion_tokens : undefined) ??
    (typeof request.max_tokens === 'number' ? request.max_tokens : undefined) ??
    maxOutputTokens;
  const body: JsonObject = { model: request.model, max_tokens: maxTokens, messages: turns };
  if (system.length > 0) body['system'] = system;
  if (request.tools !== undefined && request.tools.length > 0) {
    body['tools'] = request.tools.map((tool) => ({
      name: tool.function.name,
      ...(tool.function.description !== undefined ? { description: tool.function.description } : {}),
      input_schema: tool.function.parameters ?? { type: 'object', properties: {} },
    }));
  }
  const choice = toolChoice(request.tool_choice, request['parallel_tool_calls']);
  if (choice !== undefined) body['tool_choice'] = choice;
  const stop = request['stop'];
  if (typeof stop === 'string') body['stop_sequences'] = [stop];
  else if (Array.isArray(stop) && stop.length > 0) body['stop_sequences'] = stop;
  const effort = str(request['reasoning_effort']);
  const budget = effort !== undefined ? Math.min(THINKING_BUDGET[effort] ?? 0, maxTokens - 1) : 0;
  const forced = choice?.['type'] === 'any' || choice?.['type'] === 'tool';
  if (budget >= MIN_THINKING_BUDGET && !forced) body['thinking'] = { type: 'enabled', budget_tokens: budget };
  else {
    if (request['temperature'] !== undefined) body['temperature'] = request['temperature'];
    if (request['top_p'] !== undefined) body['top_p'] = request['top_p'];
  }
  const user = str(request['user']);
  if (user !== undefined && user !== '') body['metadata'] = { user_id: user };
  return { ...remainingParams(request, HANDLED), ...body };
}

const EPHEMERAL = { type: 'ephemeral' } as const;

/** `block` with a cache breakpoint (one it already has is kept). */
function marked(block: unknown): unknown {
  if (!isObj(block) || block['cache_control'] !== undefined) return block;
  return { ...block, cache_control: EPHEMERAL };
}

/** `list` with its last element marked. */
function lastMarked(list: readonly unknown[]): unknown[] {
  return list.map((item, i) => (i === list.length - 1 ? marked(item) : item));
}

/**
 * A translated Messages body with svc's prompt-cache breakpoints (SPEC §13): Anthropic caches
 * nothing unless asked, and a request from OpenAI chat, Responses or Gemini carries no
 * `cache_control`. At most four ephemeral (five-minute) breakpoints: the last tool, the last
 * system block, and the last block of each of the last two user turns, so that each turn reads
 * what the turn before wrote. A breakpoint moves with the conversation; Anthropic's cache
 * is keyed by the content, not by where the markers are, so the prefix still matches.
 */
export function withBreakpoints(body: JsonObject): JsonObject {
  const out: JsonObject = { ...body };
  const tools = body['tools'];
  if (Array.isArray(tools) && tools.length > 0) out['tools'] = lastMarked(tools);
  const system = body['system'];
  if (Array.isArray(system) && system.length > 0) out['system'] = lastMarked(system);
  const messages = body['messages'];
  if (Array.isArray(messages)) {
    let left = 2;
    const turns = [...messages];
    for (let i = turns.length - 1; i >= 0 && left > 0; i--) {
      const turn = turns[i];
      if (!isObj(turn) || turn['role'] !== 'user' || !Array.isArray(turn['content']) || turn['content'].length === 0)
        continue;
      turns[i] = { ...turn, content: lastMarked(turn['content']) };
      left--;
    }
    out['messages'] = turns;
  }
  return out;
}
