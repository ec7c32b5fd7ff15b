import type { ChatCompletionParams, ChatMessage, ContentPart, Tool } from '../../gen/svc/core/v1/chat';
import { ChatRole } from '../../gen/svc/core/v1/chat';
import { invalidArgument, SvcError } from '../../core/edge';
import { resolveDeferredTools } from './tool-search';

/*
 * Anthropic Messages JSON → the core's chat params. Only shapes are checked here; the core
 * decides model, limits, price and hold (a `max_tokens` above the model's limit is clamped there,
 * and the hold follows the clamped value).
 */

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Fields that need state or tools in Anthropic's own account (shared by every svc account, and
 * billed outside svc): refused by name, also for an `anthropic` upstream.
 */
const REFUSED = new Set(['mcp_servers', 'container']);

/**
 * Fields only an `anthropic` upstream honours (no chat upstream has them): sent on the native
 * pass-through path, refused by the core for a translated model (`ChatCompletionParams.native_only`).
 */
const NATIVE_ONLY = new Set(['top_k']);

/*
 * Every other field (Claude Code sends `thinking`, `context_management`, `output_config` and
 * newer ones on every turn) has no counterpart on a chat upstream: it is accepted and ignored,
 * and named in the `x-svc-ignored-fields` response header so that nothing is dropped silently.
 * `cache_control` on blocks is a caching hint, ignored likewise.
 */
const KNOWN = new Set([
  'model',
  'messages',
  'max_tokens',
  'system',
  'stop_sequences',
  'stream',
  'temperature',
  'top_p',
  'tools',
  'tool_choice',
  'metadata',
]);

function wrong(param: string, expected: string): never {
  throw new SvcError('invalid_type', `${param}: Input should be ${expected}.`, { param });
}

function unsupported(param: string, why: string): never {
  throw new SvcError('unsupported_parameter', `${param}: ${why}`, { param });
}

function str(v: unknown, param: string): string {
  return typeof v === 'string' ? v : wrong(param, 'a valid string');
}

/** An Anthropic image block as a chat image part (a data: URL for base64 sources). */
function imagePart(block: Obj, at: string): ContentPart {
  const source = block['source'];
  if (!isObj(source)) return wrong(`${at}.source`, 'an object');
  if (source['type'] === 'base64') {
    const media = str(source['media_type'], `${at}.source.media_type`);
    const data = str(source['data'], `${at}.source.data`);
    return { part: { $case: 'imageUrl', value: { url: `data:${media};base64,${data}`, detail: '' } } };
  }
  if (source['type'] === 'url')
    return { part: { $case: 'imageUrl', value: { url: str(source['url'], `${at}.source.url`), detail: '' } } };
  return unsupported(`${at}.source.type`, `image sources of type '${String(source['type'])}' are not supported here.`);
}

function blocks(content: unknown, at: string): Obj[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  if (!Array.isArray(content)) return wrong(at, 'a valid string or a list of content blocks');
  return content.map((b, j) =>
    isObj(b) && typeof b['type'] === 'string' ? b : wrong(`${at}.${j}`, 'a content block'),
  );
}

function textOf(list: Obj[], at: string): string {
  return list
    .map((b, j) =>
      b['type'] === 'text'
        ? str(b['text'], `${at}.${j}.text`)
        : unsupported(`${at}.${j}.type`, `only text blocks are supported here, got '${String(b['type'])}'.`),
    )
    .join('\n\n');
}

/** The content of a `tool_result` block: a string, or text (and image) blocks. */
function toolResultContent(block: Obj, at: string): Pick<ChatMessage, 'content' | 'parts'> {
  const content = block['content'];
  const prefix = block['is_error'] === true ? 'Error: ' : '';
  if (content === undefined || content === null) return { content: prefix, parts: [] };
  if (typeof content === 'string') return { content: prefix + content, parts: [] };
  const list = blocks(content, `${at}.content`);
  if (list.every((b) => b['type'] === 'text')) return { content: prefix + textOf(list, `${at}.content`), parts: [] };
  const parts = list.map((b, j): ContentPart => {
    const p = `${at}.content.${j}`;
    if (b['type'] === 'text') return { part: { $case: 'text', value: str(b['text'], `${p}.text`) } };
    if (b['type'] === 'image') return imagePart(b, p);
    return unsupported(`${p}.type`, `'${String(b['type'])}' blocks are not supported in a tool_result here.`);
  });
  if (prefix !== '') parts.unshift({ part: { $case: 'text', value: prefix } });
  return { parts };
}

const empty = (role: ChatRole): ChatMessage => ({ role, parts: [], name: '', toolCalls: [], toolCallId: '' });

/**
 * One Anthropic message as chat messages: a user turn's `tool_result` blocks become `tool`
 * messages (ahead of its other content, as chat upstreams expect them right after the call);
 * an assistant turn's `tool_use` blocks become its tool calls. Earlier `thinking` blocks are not
 * sent back: chat upstreams take no reasoning as input.
 */
function translate(raw: unknown, i: number, toolUseIds: Set<string>): ChatMessage[] {
  const at = `messages.${i}`;
  if (!isObj(raw)) return wrong(at, 'a valid dictionary');
  const role = raw['role'];
  if (raw['content'] === undefined) throw invalidArgument(`${at}.content`, `${at}.content: Field required`);
  const list = blocks(raw['content'], `${at}.content`);
  if (role === 'system') return [{ ...empty(ChatRole.CHAT_ROLE_SYSTEM), content: textOf(list, `${at}.content`) }];
  if (role === 'assistant') {
    const m = empty(ChatRole.CHAT_ROLE_ASSISTANT);
    const texts: string[] = [];
    list.forEach((b, j) => {
      const p = `${at}.content.${j}`;
      if (b['type'] === 'text') texts.push(str(b['text'], `${p}.text`));
      else if (b['type'] === 'tool_use') {
        const id = str(b['id'], `${p}.id`);
        const input = b['input'] ?? {};
        if (!isObj(input)) wrong(`${p}.input`, 'a valid dictionary');
        toolUseIds.add(id);
        m.toolCalls.push({
          id,
          type: 'function',
          function: { name: str(b['name'], `${p}.name`), arguments: JSON.stringify(input) },
        });
      } else if (b['type'] !== 'thinking' && b['type'] !== 'redacted_thinking')
        unsupported(`${p}.type`, `'${String(b['type'])}' blocks are not supported in assistant messages here.`);
    });
    if (texts.length > 0) m.content = texts.join('');
    return [m];
  }
  if (role !== 'user')
    throw invalidArgument(`${at}.role`, `${at}.role: Input should be 'user' or 'assistant', got '${String(role)}'.`);
  const out: ChatMessage[] = [];
  const parts: ContentPart[] = [];
  list.forEach((b, j) => {
    const p = `${at}.content.${j}`;
    if (b['type'] === 'tool_result') {
      const id = str(b['tool_use_id'], `${p}.tool_use_id`);
      if (!toolUseIds.has(id)) {
        throw invalidArgument(
          `${p}.tool_use_id`,
          `${p}.tool_use_id: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${id}. Each \`tool_result\` block must have a corresponding \`tool_use\` block in the previous message.`,
        );
      }
      out.push({ ...empty(ChatRole.CHAT_ROLE_TOOL), toolCallId: id, ...toolResultContent(b, p) });
    } else if (b['type'] === 'text') parts.push({ part: { $case: 'text', value: str(b['text'], `${p}.text`) } });
    else if (b['type'] === 'image') parts.push(imagePart(b, p));
    else unsupported(`${p}.type`, `'${String(b['type'])}' blocks are not supported in user messages here.`);
  });
  if (parts.length > 0) {
    const user = empty(ChatRole.CHAT_ROLE_USER);
    if (parts.every((p) => p.part?.$case === 'text'))
      user.content = parts.map((p) => (p.part?.$case === 'text' ? p.part.value : '')).join('\n\n');
    else user.parts = parts;
    out.push(user);
  }
  return out;
}

function tool(raw: unknown, i: number): Tool {
  const at = `tools.${i}`;
  if (!isObj(raw)) return wrong(at, 'a valid dictionary');
  const type = raw['type'];
  if (type !== undefined && type !== null && type !== 'custom')
    unsupported(`${at}.type`, `server tools ('${String(type)}') are not available here; define a custom tool.`);
  const name = str(raw['name'], `${at}.name`);
  const schema = raw['input_schema'];
  if (schema === undefined) throw invalidArgument(`${at}.input_schema`, `${at}.input_schema: Field required`);
  if (!isObj(schema)) wrong(`${at}.input_schema`, 'a valid dictionary');
  const description = raw['description'];
  return {
    type: 'function',
    function: {
      name,
      description: description === undefined || description === null ? '' : str(description, `${at}.description`),
      parameters: schema,
    },
  };
}

export interface ParsedMessagesRequest {
  readonly params: ChatCompletionParams;
  readonly stream: boolean;
  /** Top-level fields accepted but not carried out. */
  readonly ignored: readonly string[];
}

/**
 * Parses a POST /v1/messages (or count_tokens) body. With `forCount`, `max_tokens` is not
 * required, as Anthropic's count_tokens does not take it.
 */
export function parseMessagesRequest(body: unknown, forCount = false): ParsedMessagesRequest {
  if (!isObj(body)) return wrong('body', 'a valid dictionary');
  const model = body['model'];
  if (model === undefined || model === null || model === '') throw invalidArgument('model', 'model: Field required');
  const maxTokens = body['max_tokens'];
  if (!forCount && (maxTokens === undefined || maxTokens === null))
    throw invalidArgument('max_tokens', 'max_tokens: Field required');
  if (maxTokens !== undefined && maxTokens !== null) {
    if (typeof maxTokens !== 'number' || !Number.isInteger(maxTokens)) wrong('max_tokens', 'a valid integer');
    if (maxTokens < 1) throw invalidArgument('max_tokens', 'max_tokens: Input should be greater than or equal to 1');
  }
  const rawMessages = body['messages'];
  if (rawMessages === undefined || rawMessages === null) throw invalidArgument('messages', 'messages: Field required');
  if (!Array.isArray(rawMessages)) wrong('messages', 'a valid list');

  const ignored: string[] = [];
  const nativeOnly: string[] = [];
  for (const key of Object.keys(body)) {
    if (REFUSED.has(key)) unsupported(key, `'${key}' is not supported by svc's Anthropic-compatible API.`);
    if (NATIVE_ONLY.has(key) && body[key] !== null) {
      const value = body[key];
      if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) wrong(key, 'a valid integer');
      // Counting does not depend on sampling: count_tokens takes the field and ignores it.
      (forCount ? ignored : nativeOnly).push(key);
    } else if (!KNOWN.has(key)) ignored.push(key);
  }

  const messages: ChatMessage[] = [];
  const system = body['system'];
  if (system !== undefined && system !== null) {
    const text = textOf(blocks(system, 'system'), 'system');
    messages.push({ ...empty(ChatRole.CHAT_ROLE_SYSTEM), content: text });
  }
  const rawTools = body['tools'];
  if (rawTools !== undefined && rawTools !== null && !Array.isArray(rawTools)) wrong('tools', 'a valid list');
  // Deferred tools are offered once the history loads them (tool-search.ts).
  const deferred = resolveDeferredTools(Array.isArray(rawTools) ? rawTools : [], rawMessages, (param, message) => {
    throw invalidArgument(param, message);
  });
  const toolUseIds = new Set<string>();
  deferred.messages.forEach((m, i) => messages.push(...translate(m, i, toolUseIds)));
  const tools = deferred.tools.map(tool);

  const rawStop = body['stop_sequences'];
  let stop: string[] = [];
  if (Array.isArray(rawStop)) stop = rawStop.map((s, i) => str(s, `stop_sequences.${i}`));
  else if (rawStop !== undefined && rawStop !== null) wrong('stop_sequences', 'a valid list');

  const metadata = body['metadata'];
  let user = '';
  if (isObj(metadata)) {
    const id = metadata['user_id'];
    if (id !== undefined && id !== null) user = str(id, 'metadata.user_id');
  } else if (metadata !== undefined && metadata !== null) wrong('metadata', 'a valid dictionary');

  const params: ChatCompletionParams = {
    model: str(model, 'model'),
    messages,
    maxTokens: typeof maxTokens === 'number' ? maxTokens : 0,
    maxTokensParam: 'max_tokens',
    clientWire: 'anthropic',
    stop,
    n: 0,
    tools,
    user,
    nativeOnly,
    nativeHeaders: {},
    passThrough: false,
    includeUsage: false,
  };
  for (const [field, key] of [
    ['temperature', 'temperature'],
    ['topP', 'top_p'],
  ] as const) {
    const v = body[key];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'number' || !Number.isFinite(v)) wrong(key, 'a valid number');
    params[field] = v;
  }

  const choice = body['tool_choice'];
  if (choice !== undefined && choice !== null) {
    if (!isObj(choice)) wrong('tool_choice', 'a valid dictionary');
    const type = choice['type'];
    if (type === 'auto') params.toolChoice = { choice: { $case: 'mode', value: 'auto' } };
    else if (type === 'any') params.toolChoice = { choice: { $case: 'mode', value: 'required' } };
    else if (type === 'none') params.toolChoice = { choice: { $case: 'mode', value: 'none' } };
    else if (type === 'tool')
      params.toolChoice = { choice: { $case: 'functionName', value: str(choice['name'], 'tool_choice.name') } };
    else
      throw invalidArgument(
        'tool_choice.type',
        `tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none', got '${String(type)}'.`,
      );
    const disable = choice['disable_parallel_tool_use'];
    if (disable !== undefined && disable !== null) {
      if (typeof disable !== 'boolean') wrong('tool_choice.disable_parallel_tool_use', 'a valid boolean');
      if (tools.length > 0) params.parallelToolCalls = !disable;
    }
  }

  const stream = body['stream'];
  if (stream !== undefined && stream !== null && typeof stream !== 'boolean') wrong('stream', 'a valid boolean');
  return { params, stream: stream === true, ignored };
}
