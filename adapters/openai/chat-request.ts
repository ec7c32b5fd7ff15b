import type { ChatCompletionParams, ChatMessage, ContentPart, Tool } from '../../gen/svc/core/v1/chat';
import { ChatRole } from '../../gen/svc/core/v1/chat';
import { checkChatInteger, INT32_MAX, invalidArgument, RESERVED_CHAT_PARAMS, SvcError } from '../../core/edge';

/*
 * JSON → proto for POST /chat/completions. Only what protobuf cannot carry is checked here (types;
 * a 0 that would read as "not set"; numbers past int32/int64), with the core's own table and
 * errors; the core validates values and ranges, with the same OpenAI parameter names.
 */

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

const ROLES: Record<string, ChatRole> = {
  system: ChatRole.CHAT_ROLE_SYSTEM,
  developer: ChatRole.CHAT_ROLE_DEVELOPER,
  user: ChatRole.CHAT_ROLE_USER,
  assistant: ChatRole.CHAT_ROLE_ASSISTANT,
  tool: ChatRole.CHAT_ROLE_TOOL,
};

function wrong(param: string, expected: string): never {
  throw new SvcError('invalid_type', `Invalid type for '${param}': expected ${expected}.`, { param });
}

function optString(body: Obj, key: string, param = key): string | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  return typeof v === 'string' ? v : wrong(param, 'a string');
}

function optNumber(body: Obj, key: string): number | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  return typeof v === 'number' && Number.isFinite(v) ? v : wrong(key, 'a number');
}

function optInteger(body: Obj, key: string): number | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  return typeof v === 'number' && Number.isInteger(v) ? v : wrong(key, 'an integer');
}

function optBoolean(body: Obj, key: string, param = key): boolean | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  return typeof v === 'boolean' ? v : wrong(param, 'a boolean');
}

function contentPart(raw: unknown, param: string): ContentPart {
  if (!isObj(raw) || typeof raw['type'] !== 'string') return wrong(param, 'a content part object with a type');
  if (raw['type'] === 'text') {
    return {
      part: {
        $case: 'text',
        value: typeof raw['text'] === 'string' ? raw['text'] : wrong(`${param}.text`, 'a string'),
      },
    };
  }
  if (raw['type'] === 'image_url') {
    const image = raw['image_url'];
    const url =
      typeof image === 'string'
        ? image
        : isObj(image) && typeof image['url'] === 'string'
          ? image['url']
          : wrong(`${param}.image_url`, 'an object with a url');
    const detail = isObj(image) && typeof image['detail'] === 'string' ? image['detail'] : '';
    return { part: { $case: 'imageUrl', value: { url, detail } } };
  }
  return { part: { $case: 'other', value: raw } };
}

function message(raw: unknown, i: number): ChatMessage {
  const at = `messages[${i}]`;
  if (!isObj(raw)) return wrong(at, 'an object');
  const roleName = raw['role'];
  if (typeof roleName !== 'string') return wrong(`${at}.role`, 'a string');
  const role = ROLES[roleName];
  if (role === undefined) {
    throw invalidArgument(
      `${at}.role`,
      `Invalid value for '${at}.role': '${roleName}'. Supported values are: 'system', 'developer', 'user', 'assistant', 'tool' and 'function'.`,
    );
  }
  const m: ChatMessage = {
    role,
    parts: [],
    name: optString(raw, 'name', `${at}.name`) ?? '',
    toolCalls: [],
    toolCallId: optString(raw, 'tool_call_id', `${at}.tool_call_id`) ?? '',
  };
  const content = raw['content'];
  if (typeof content === 'string') m.content = content;
  else if (Array.isArray(content)) m.parts = content.map((p, j) => contentPart(p, `${at}.content[${j}]`));
  else if (content !== undefined && content !== null) wrong(`${at}.content`, 'a string or an array of content parts');
  const refusal = optString(raw, 'refusal', `${at}.refusal`);
  if (refusal !== undefined) m.refusal = refusal;
  const calls = raw['tool_calls'];
  if (calls !== undefined && calls !== null) {
    if (!Array.isArray(calls)) wrong(`${at}.tool_calls`, 'an array');
    m.toolCalls = calls.map((call: unknown, j) => {
      const cp = `${at}.tool_calls[${j}]`;
      if (isObj(call) && call['type'] === 'custom') {
        // A custom tool's call: {id, type: "custom", custom: {name, input}}.
        const custom = call['custom'];
        if (!isObj(custom)) return wrong(`${cp}.custom`, 'an object with a name and an input');
        const name = optString(custom, 'name', `${cp}.custom.name`);
        if (name === undefined)
          throw invalidArgument(`${cp}.custom.name`, `Missing required parameter: '${cp}.custom.name'.`);
        const input = optString(custom, 'input', `${cp}.custom.input`);
        if (input === undefined)
          throw invalidArgument(`${cp}.custom.input`, `Missing required parameter: '${cp}.custom.input'.`);
        return { id: optString(call, 'id', `${cp}.id`) ?? '', type: 'custom', custom: { name, input } };
      }
      if (!isObj(call) || !isObj(call['function'])) return wrong(cp, 'an object with a function');
      const fn = call['function'];
      return {
        id: optString(call, 'id', `${cp}.id`) ?? '',
        type: optString(call, 'type', `${cp}.type`) ?? 'function',
        function: {
          name: optString(fn, 'name', `${cp}.function.name`) ?? '',
          arguments: optString(fn, 'arguments', `${cp}.function.arguments`) ?? '',
        },
      };
    });
  }
  return m;
}

function tool(raw: unknown, i: number): Tool {
  const at = `tools[${i}]`;
  if (!isObj(raw)) return wrong(at, 'an object');
  const type = optString(raw, 'type', `${at}.type`) ?? '';
  if (type === 'custom') return customTool(raw, at);
  if (type !== 'function') return { type, function: undefined };
  const fn = raw['function'];
  if (!isObj(fn)) return wrong(`${at}.function`, 'an object');
  onlyKnown(fn, FUNCTION_TOOL_FIELDS, `${at}.function`);
  const name = optString(fn, 'name', `${at}.function.name`);
  if (name === undefined)
    throw invalidArgument(`${at}.function.name`, `Missing required parameter: '${at}.function.name'.`);
  const parameters = fn['parameters'];
  if (parameters !== undefined && parameters !== null && !isObj(parameters))
    wrong(`${at}.function.parameters`, 'a JSON Schema object');
  const strict = optBoolean(fn, 'strict', `${at}.function.strict`);
  return {
    type,
    function: {
      name,
      description: optString(fn, 'description', `${at}.function.description`) ?? '',
      ...(isObj(parameters) ? { parameters } : {}),
      ...(strict !== undefined ? { strict } : {}),
    },
  };
}

const FUNCTION_TOOL_FIELDS = new Set(['name', 'description', 'parameters', 'strict']);
const CUSTOM_TOOL_FIELDS = new Set(['name', 'description', 'format']);

/** A key the tool object cannot carry is refused as OpenAI refuses it, never dropped (SPEC §7d). */
function onlyKnown(obj: Obj, known: ReadonlySet<string>, at: string): void {
  for (const key of Object.keys(obj)) {
    if (!known.has(key))
      throw new SvcError('unknown_parameter', `Unknown parameter: '${at}.${key}'.`, { param: `${at}.${key}` });
  }
}

/** `{"type": "custom", "custom": {name, description?, format?}}`; the core checks the format. */
function customTool(raw: Obj, at: string): Tool {
  const custom = raw['custom'];
  if (custom === undefined || custom === null)
    throw invalidArgument(`${at}.custom`, `Missing required parameter: '${at}.custom'.`);
  if (!isObj(custom)) return wrong(`${at}.custom`, 'an object');
  onlyKnown(custom, CUSTOM_TOOL_FIELDS, `${at}.custom`);
  const name = optString(custom, 'name', `${at}.custom.name`);
  if (name === undefined)
    throw invalidArgument(`${at}.custom.name`, `Missing required parameter: '${at}.custom.name'.`);
  const format = custom['format'];
  if (format !== undefined && format !== null && !isObj(format)) wrong(`${at}.custom.format`, 'an object');
  return {
    type: 'custom',
    function: undefined,
    custom: {
      name,
      description: optString(custom, 'description', `${at}.custom.description`) ?? '',
      ...(isObj(format) ? { format } : {}),
    },
  };
}

/** A tool the model may call, named in `tool_choice.allowed_tools.tools[i]`. */
function allowedTool(raw: unknown, at: string): { type: string; name: string } {
  if (!isObj(raw)) return wrong(at, 'a tool object with a type');
  const type = optString(raw, 'type', `${at}.type`) ?? 'function';
  if (type !== 'function' && type !== 'custom')
    throw invalidArgument(`${at}.type`, `Invalid value: '${type}'. Supported values are: 'function' and 'custom'.`);
  const named = raw[type];
  if (!isObj(named) || typeof named['name'] !== 'string') return wrong(`${at}.${type}.name`, 'a string');
  return { type, name: named['name'] };
}

/**
 * The deprecated function-calling messages, as the tool-calling ones they were replaced by: an
 * assistant `function_call` becomes a one-call `tool_calls`, and a `function` role message its
 * `tool` answer (a result with no call before it gets the call it answers, so every upstream
 * sees a well-formed pair). OpenAI still accepts both; the neutral form has only tools.
 */
function legacyFunctionMessages(messages: readonly unknown[]): unknown[] {
  const pending = new Map<string, string>();
  const out: unknown[] = [];
  messages.forEach((raw, i) => {
    if (!isObj(raw)) return void out.push(raw);
    const call = raw['function_call'];
    if (raw['role'] === 'assistant' && isObj(call) && raw['tool_calls'] === undefined) {
      const { function_call: _legacy, ...rest } = raw;
      const id = `call_function_${i}`;
      if (typeof call['name'] === 'string') pending.set(call['name'], id);
      return void out.push({ ...rest, tool_calls: [{ id, type: 'function', function: call }] });
    }
    if (raw['role'] !== 'function') return void out.push(raw);
    const name = raw['name'];
    if (typeof name !== 'string' || name === '')
      throw invalidArgument(`messages[${i}].name`, `Missing required parameter: 'messages[${i}].name'.`);
    let id = pending.get(name);
    pending.delete(name);
    if (id === undefined) {
      id = `call_function_${i}`;
      out.push({
        role: 'assistant',
        content: null,
        tool_calls: [{ id, type: 'function', function: { name, arguments: '{}' } }],
      });
    }
    out.push({ role: 'tool', tool_call_id: id, content: raw['content'] ?? '' });
  });
  return out;
}

export interface ParsedChatRequest {
  readonly params: ChatCompletionParams;
  readonly stream: boolean;
  readonly includeUsage: boolean;
}

/** Parses a POST /chat/completions body. */
export function parseChatRequest(body: unknown): ParsedChatRequest {
  if (!isObj(body)) return wrong('body', 'a JSON object');
  const model = optString(body, 'model');
  if (model === undefined || model === '') throw invalidArgument('model', `Missing required parameter: 'model'.`);
  const rawMessages = body['messages'];
  if (rawMessages === undefined || rawMessages === null)
    throw invalidArgument('messages', `Missing required parameter: 'messages'.`);
  if (!Array.isArray(rawMessages)) wrong('messages', 'an array of messages');

  const maxKey =
    body['max_completion_tokens'] !== undefined && body['max_completion_tokens'] !== null
      ? 'max_completion_tokens'
      : 'max_tokens';
  // A 0 would read as "not set", and past int32 a value cannot cross to the core: refused here,
  // by the core's table; every other value is the core's to judge.
  const carried = (value: number | undefined): boolean =>
    value === undefined || (value !== 0 && value >= -INT32_MAX - 1 && value <= INT32_MAX);
  const maxTokens = optInteger(body, maxKey);
  if (!carried(maxTokens)) checkChatInteger(maxKey, maxTokens ?? 0);
  const n = optInteger(body, 'n');
  if (!carried(n)) checkChatInteger('n', n ?? 0);
  const seed = optInteger(body, 'seed');
  // int64 on the wire: -2^63 is a double exactly, 2^63 is already out of range.
  if (seed !== undefined && (seed < -(2 ** 63) || seed >= 2 ** 63))
    throw invalidArgument('seed', `Invalid 'seed': expected a 64-bit integer, but got ${seed} instead.`);

  const rawStop = body['stop'];
  let stop: string[] = [];
  if (typeof rawStop === 'string') stop = [rawStop];
  else if (Array.isArray(rawStop))
    stop = rawStop.map((s, i) => (typeof s === 'string' ? s : wrong(`stop[${i}]`, 'a string')));
  else if (rawStop !== undefined && rawStop !== null) wrong('stop', 'a string or an array of strings');

  const rawTools = body['tools'];
  if (rawTools !== undefined && rawTools !== null && !Array.isArray(rawTools)) wrong('tools', 'an array');

  const params: ChatCompletionParams = {
    model,
    messages: legacyFunctionMessages(rawMessages).map(message),
    maxTokens: maxTokens ?? 0,
    maxTokensParam: maxKey,
    clientWire: 'openai',
    stop,
    n: n ?? 0,
    tools: Array.isArray(rawTools) ? rawTools.map(tool) : [],
    user: optString(body, 'user') ?? '',
    nativeOnly: [],
    nativeHeaders: {},
    passThrough: false,
    includeUsage: false,
  };
  const numbers = {
    temperature: 'temperature',
    topP: 'top_p',
    presencePenalty: 'presence_penalty',
    frequencyPenalty: 'frequency_penalty',
  } as const;
  for (const [field, key] of Object.entries(numbers) as [keyof typeof numbers, string][]) {
    const value = optNumber(body, key);
    if (value !== undefined) params[field] = value;
  }
  if (seed !== undefined) params.seed = BigInt(seed);
  const parallel = optBoolean(body, 'parallel_tool_calls');
  if (parallel !== undefined) params.parallelToolCalls = parallel;

  const choice = body['tool_choice'];
  if (typeof choice === 'string') params.toolChoice = { choice: { $case: 'mode', value: choice } };
  else if (isObj(choice) && choice['type'] === 'allowed_tools') {
    const allowed = choice['allowed_tools'];
    if (!isObj(allowed)) return wrong('tool_choice.allowed_tools', 'an object');
    const list = allowed['tools'];
    if (!Array.isArray(list)) return wrong('tool_choice.allowed_tools.tools', 'an array');
    const tools = list.map((t: unknown, i) => allowedTool(t, `tool_choice.allowed_tools.tools[${i}]`));
    const mode = optString(allowed, 'mode', 'tool_choice.allowed_tools.mode') ?? '';
    params.toolChoice = { choice: { $case: 'allowedTools', value: { mode, functionNames: [], tools } } };
  } else if (isObj(choice) && choice['type'] === 'custom') {
    const custom = choice['custom'];
    if (!isObj(custom) || typeof custom['name'] !== 'string') wrong('tool_choice.custom.name', 'a string');
    params.toolChoice = { choice: { $case: 'customName', value: custom['name'] } };
  } else if (isObj(choice)) {
    const fn = choice['function'];
    if (!isObj(fn) || typeof fn['name'] !== 'string') wrong('tool_choice.function.name', 'a string');
    params.toolChoice = { choice: { $case: 'functionName', value: fn['name'] } };
  } else if (choice !== undefined && choice !== null)
    wrong(
      'tool_choice',
      "a string or {type: 'function', function: {name}}, {type: 'custom', custom: {name}} or {type: 'allowed_tools', allowed_tools}",
    );

  const format = body['response_format'];
  if (isObj(format)) {
    const type = optString(format, 'type', 'response_format.type') ?? '';
    const schema = format['json_schema'];
    if (schema !== undefined && !isObj(schema)) wrong('response_format.json_schema', 'an object');
    params.responseFormat = { type, ...(isObj(schema) ? { jsonSchema: schema } : {}) };
  } else if (format !== undefined && format !== null) wrong('response_format', 'an object');

  const extra: Obj = {};
  for (const [key, value] of Object.entries(body))
    if (!RESERVED_CHAT_PARAMS.has(key) && value !== undefined) extra[key] = value;
  if (Object.keys(extra).length > 0) params.extra = extra;

  const stream = optBoolean(body, 'stream') ?? false;
  const options = body['stream_options'];
  if (options !== undefined && options !== null && !isObj(options)) wrong('stream_options', 'an object');
  const includeUsage = isObj(options)
    ? (optBoolean(options, 'include_usage', 'stream_options.include_usage') ?? false)
    : false;
  return { params, stream, includeUsage };
}
