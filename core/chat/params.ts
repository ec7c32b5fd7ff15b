import {
  ChatRole,
  type AllowedTools,
  type ChatCompletionParams,
  type ChatMessage,
  type ContentPart,
} from '../../gen/svc/core/v1/chat';
import { invalidArgument, SvcError } from '../errors';
import type {
  JsonObject,
  WireChatBody,
  WireContentPart,
  WireMessage,
  WireRole,
  WireTool,
} from '../providers/llm/types';
import {
  CHAT_FIELDS,
  checkChatDecimal,
  checkChatExtra,
  checkChatInteger,
  DEPRECATED_CHAT_PARAMS,
  DOCUMENTED_CHAT_PARAMS,
  RESERVED_CHAT_PARAMS,
} from '../conversation/fields';
import { customCallArguments, customToolFunction, type CustomGrammar } from './custom-tools';
import { checkToolChoice, checkTools } from './prepare';

const ROLES: Partial<Record<ChatRole, WireRole>> = {
  [ChatRole.CHAT_ROLE_SYSTEM]: 'system',
  [ChatRole.CHAT_ROLE_DEVELOPER]: 'developer',
  [ChatRole.CHAT_ROLE_USER]: 'user',
  [ChatRole.CHAT_ROLE_ASSISTANT]: 'assistant',
  [ChatRole.CHAT_ROLE_TOOL]: 'tool',
};

function part(p: ContentPart, param: string): WireContentPart {
  const value = p.part;
  switch (value?.$case) {
    case 'text':
      return { type: 'text', text: value.value };
    case 'imageUrl':
      if (value.value.url === '')
        throw invalidArgument(`${param}.image_url.url`, `Invalid '${param}.image_url.url': an image URL is required.`);
      return {
        type: 'image_url',
        image_url: { url: value.value.url, ...(value.value.detail !== '' ? { detail: value.value.detail } : {}) },
      };
    case 'other': {
      const other = value.value ?? {};
      if (typeof other['type'] !== 'string')
        throw invalidArgument(`${param}.type`, `Invalid '${param}.type': a content part needs a type.`);
      return other as WireContentPart;
    }
    default:
      throw invalidArgument(param, `Invalid '${param}': empty content part.`);
  }
}

function message(m: ChatMessage, i: number): WireMessage {
  const at = `messages[${i}]`;
  const role = ROLES[m.role];
  if (role === undefined) {
    throw invalidArgument(
      `${at}.role`,
      `Invalid '${at}.role': expected one of 'system', 'developer', 'user', 'assistant', 'tool'.`,
    );
  }
  const out: WireMessage = { role };
  if (m.content !== undefined) out.content = m.content;
  else if (m.parts.length > 0) out.content = m.parts.map((p, j) => part(p, `${at}.content[${j}]`));
  if (m.name !== '') out.name = m.name;
  if (role === 'assistant') {
    if (m.toolCalls.length > 0) {
      out.tool_calls = m.toolCalls.map((call, j) => {
        const param = `${at}.tool_calls[${j}]`;
        if (call.id === '') throw invalidArgument(`${param}.id`, `Invalid '${param}.id': a tool call needs an id.`);
        if (call.type === 'custom') {
          // A custom tool's call goes upstream as the call of the function it is offered as.
          if (call.custom === undefined || call.custom.name === '') {
            throw invalidArgument(
              `${param}.custom.name`,
              `Invalid '${param}.custom.name': a custom tool call needs the name of its tool.`,
            );
          }
          return {
            id: call.id,
            type: 'function' as const,
            function: { name: call.custom.name, arguments: customCallArguments(call.custom.input) },
          };
        }
        if (call.type !== '' && call.type !== 'function') {
          throw invalidArgument(
            `${param}.type`,
            `Invalid value: '${call.type}'. Supported values are: 'function' and 'custom'.`,
          );
        }
        if (call.function === undefined || call.function.name === '') {
          throw invalidArgument(
            `${param}.function.name`,
            `Invalid '${param}.function.name': a tool call needs a function name.`,
          );
        }
        return {
          id: call.id,
          type: 'function' as const,
          function: { name: call.function.name, arguments: call.function.arguments },
        };
      });
    }
    if (m.refusal !== undefined) out.refusal = m.refusal;
    if (out.content === undefined && out.tool_calls === undefined && out.refusal === undefined) {
      throw invalidArgument(
        `${at}.content`,
        `Invalid '${at}.content': an assistant message needs content or tool_calls.`,
      );
    }
    if (out.content === undefined) out.content = null;
    return out;
  }
  if (out.content === undefined)
    throw invalidArgument(`${at}.content`, `Missing '${at}.content': a ${role} message needs content.`);
  if (role === 'tool') {
    if (m.toolCallId === '')
      throw invalidArgument(`${at}.tool_call_id`, `Missing '${at}.tool_call_id': a tool message answers a tool call.`);
    out.tool_call_id = m.toolCallId;
  }
  return out;
}

/** The request's tools as upstream functions, and which of them stand for custom tools. */
interface ChatTools {
  list: WireTool[];
  /** Names of the custom tools (a chat upstream sees each as a function of that name). */
  readonly custom: ReadonlySet<string>;
}

const GRAMMAR_SYNTAXES = ['lark', 'regex'];

/** Checks a custom tool's `format` (OpenAI's chat shape); returns its grammar, if it has one. */
function customFormat(format: JsonObject | undefined, at: string): CustomGrammar | undefined {
  if (format === undefined) return undefined;
  const unknown = (key: string): never => {
    throw new SvcError('unknown_parameter', `Unknown parameter: '${at}.${key}'.`, { param: `${at}.${key}` });
  };
  const type = format['type'];
  if (type === 'text') {
    for (const key of Object.keys(format)) if (key !== 'type') unknown(key);
    return undefined;
  }
  if (type !== 'grammar') {
    if (type === undefined) throw invalidArgument(`${at}.type`, `Missing required parameter: '${at}.type'.`);
    throw invalidArgument(
      `${at}.type`,
      `Invalid value: '${String(type)}'. Supported values are: 'text' and 'grammar'.`,
    );
  }
  for (const key of Object.keys(format)) if (key !== 'type' && key !== 'grammar') unknown(key);
  const grammar = format['grammar'];
  if (grammar === undefined || grammar === null)
    throw invalidArgument(`${at}.grammar`, `Missing required parameter: '${at}.grammar'.`);
  if (typeof grammar !== 'object' || Array.isArray(grammar))
    throw new SvcError('invalid_type', `Invalid type for '${at}.grammar': expected an object.`, {
      param: `${at}.grammar`,
    });
  const g = grammar as JsonObject;
  for (const key of Object.keys(g)) if (key !== 'definition' && key !== 'syntax') unknown(`grammar.${key}`);
  const definition = g['definition'];
  if (typeof definition !== 'string' || definition === '')
    throw invalidArgument(
      `${at}.grammar.definition`,
      `Invalid '${at}.grammar.definition': expected a non-empty string.`,
    );
  const syntax = g['syntax'];
  if (typeof syntax !== 'string' || !GRAMMAR_SYNTAXES.includes(syntax)) {
    throw invalidArgument(
      `${at}.grammar.syntax`,
      `Invalid value: '${String(syntax)}'. Supported values are: 'lark' and 'regex'.`,
    );
  }
  return { syntax, definition };
}

/** The names of the request's custom tools: the upstream's calls of these are custom tool calls. */
export function customToolNames(params: ChatCompletionParams | undefined): ReadonlySet<string> {
  return new Set(
    (params?.tools ?? []).flatMap((tool) =>
      tool.type === 'custom' && tool.custom !== undefined ? [tool.custom.name] : [],
    ),
  );
}

function tools(params: ChatCompletionParams): ChatTools {
  const list = params.tools.map((tool, i): WireTool => {
    if (tool.type === 'custom') {
      // Offered as a function of one string `input` (custom-tools.ts), like the Responses API's.
      const def = tool.custom;
      if (def === undefined)
        throw invalidArgument(`tools[${i}].custom`, `Missing required parameter: 'tools[${i}].custom'.`);
      const grammar = customFormat(def.format, `tools[${i}].custom.format`);
      return customToolFunction(def.name, def.description !== '' ? def.description : undefined, grammar);
    }
    if (tool.type !== 'function')
      throw invalidArgument(
        `tools[${i}].type`,
        `Invalid value: '${tool.type}'. Supported values are: 'function' and 'custom'.`,
      );
    const fn = tool.function;
    if (fn === undefined) throw invalidArgument(`tools[${i}].function`, `Missing 'tools[${i}].function'.`);
    return {
      type: 'function',
      function: {
        name: fn.name,
        ...(fn.description !== '' ? { description: fn.description } : {}),
        ...(fn.parameters !== undefined ? { parameters: fn.parameters } : {}),
        ...(fn.strict !== undefined ? { strict: fn.strict } : {}),
      },
    };
  });
  checkTools(list, (i, field) =>
    params.tools[i]?.type === 'custom' ? `tools[${i}].custom.name` : `tools[${i}].function.${field}`,
  );
  return { list, custom: customToolNames(params) };
}

/** Checks that the request has a tool of this type and name (`param` names the reference). */
function checkNamed(tools: ChatTools, type: string, name: string, param: string): void {
  const known = tools.list.some((t) => t.function.name === name);
  if (known && (type === 'custom') === tools.custom.has(name)) return;
  throw invalidArgument(param, `Invalid '${param}': ${type} tool '${name}' is not among the tools.`);
}

/**
 * `tool_choice: {"type": "allowed_tools", …}`: the model may call only these tools. It goes
 * upstream in chat completions' shape with every tool still offered (SPEC §13: the tool list, and
 * with it the prompt cache, stays the same from turn to turn); a provider whose upstream has no
 * `allowed_tools` offers only these instead (`narrowedToAllowed`). Function and custom tools
 * (offered as functions) may be named.
 */
function allowedChoice(tools: ChatTools, allowed: AllowedTools): JsonObject {
  if (allowed.mode !== 'auto' && allowed.mode !== 'required')
    throw invalidArgument(
      'tool_choice.allowed_tools.mode',
      `Invalid value: '${allowed.mode}'. Supported values are: 'auto' and 'required'.`,
    );
  const named =
    allowed.tools.length > 0 ? allowed.tools : allowed.functionNames.map((name) => ({ type: 'function', name }));
  if (named.length === 0)
    throw invalidArgument(
      'tool_choice.allowed_tools.tools',
      `Invalid 'tool_choice.allowed_tools.tools': expected at least one tool.`,
    );
  named.forEach((tool, i) => {
    const at = `tool_choice.allowed_tools.tools[${i}]`;
    if (tool.type !== 'function' && tool.type !== 'custom')
      throw invalidArgument(
        `${at}.type`,
        `Invalid value: '${tool.type}'. Supported values are: 'function' and 'custom'.`,
      );
    checkNamed(tools, tool.type, tool.name, at);
  });
  return {
    type: 'allowed_tools',
    allowed_tools: {
      mode: allowed.mode,
      tools: named.map((tool) => ({ type: 'function', function: { name: tool.name } })),
    },
  };
}

/** CHAT_FIELDS' typed decimals, name and neutral field, listed once (not per call). */
const TYPED_DECIMALS = Object.entries(CHAT_FIELDS).flatMap(([name, field]) =>
  field.neutral === undefined ? [] : [[name, field.neutral] as const],
);

/**
 * Validates chat-completions parameters and builds the upstream body (without model and limit).
 * `allowed` holds the extra parameters the operator allows for this model (`extra_params`); any
 * other field OpenAI does not document is refused as OpenAI refuses it, never sent on.
 */
export function chatParamsToWire(params: ChatCompletionParams, allowed: ReadonlySet<string> = new Set()): WireChatBody {
  if (params.messages.length === 0)
    throw invalidArgument('messages', `Invalid 'messages': expected a non-empty array of messages.`);
  const body: WireChatBody = { messages: params.messages.map(message) };
  // The typed decimals (temperature, top_p, the penalties): checked by the table's range and
  // sent under their own name, so such a parameter is its line in CHAT_FIELDS and nothing here.
  for (const [name, neutral] of TYPED_DECIMALS) {
    const value = params[neutral];
    checkChatDecimal(name, value);
    if (value !== undefined) body[name] = value;
  }
  // 0 is "not set" in the neutral form.
  if (params.n !== 0) checkChatInteger('n', params.n);
  if (params.maxTokens !== 0)
    checkChatInteger(
      params.maxTokensParam === 'max_completion_tokens' ? 'max_completion_tokens' : 'max_tokens',
      params.maxTokens,
    );
  if (params.n > 1) body['n'] = params.n;
  if (params.stop.length > 4)
    throw invalidArgument('stop', `Invalid 'stop': at most 4 stop sequences, got ${params.stop.length}.`);
  if (params.stop.length > 0) body['stop'] = params.stop;
  if (params.seed !== undefined) body['seed'] = Number(params.seed);
  if (params.user !== '') body['user'] = params.user;
  const offered = tools(params);
  const list = offered.list;
  const choice = params.toolChoice?.choice;
  const allowedOnes = choice?.$case === 'allowedTools' ? allowedChoice(offered, choice.value) : undefined;
  // A forced custom tool is the function it is offered as.
  if (choice?.$case === 'customName') checkNamed(offered, 'custom', choice.value, 'tool_choice');
  if (choice?.$case === 'functionName') checkNamed(offered, 'function', choice.value, 'tool_choice');
  if (list.length > 0) body.tools = list;
  const toolChoice = checkToolChoice(
    choice === undefined
      ? undefined
      : choice.$case === 'mode'
        ? choice.value
        : choice.$case === 'allowedTools'
          ? choice.value.mode
          : { type: 'function', function: { name: choice.value } },
    list,
    'tool_choice',
  );
  if (toolChoice !== undefined) body.tool_choice = allowedOnes ?? toolChoice;
  if (params.parallelToolCalls !== undefined && list.length > 0) body['parallel_tool_calls'] = params.parallelToolCalls;
  const format = params.responseFormat;
  if (format !== undefined && format.type !== '') {
    if (format.type === 'text' || format.type === 'json_object') body['response_format'] = { type: format.type };
    else if (format.type === 'json_schema') {
      const schema = format.jsonSchema;
      if (schema === undefined || typeof schema['name'] !== 'string' || schema['name'] === '') {
        throw invalidArgument(
          'response_format.json_schema',
          `Invalid 'response_format.json_schema': an object with a 'name' is required.`,
        );
      }
      body['response_format'] = { type: 'json_schema', json_schema: schema };
    } else {
      throw invalidArgument(
        'response_format.type',
        `Invalid 'response_format.type': expected 'text', 'json_object' or 'json_schema', got '${format.type}'.`,
      );
    }
  }
  for (const [key, value] of Object.entries(params.extra ?? ({} as JsonObject))) {
    if (value === undefined || RESERVED_CHAT_PARAMS.has(key)) continue;
    const deprecated = DEPRECATED_CHAT_PARAMS[key];
    if (deprecated !== undefined) throw new SvcError('unsupported_parameter', deprecated, { param: key });
    if (!DOCUMENTED_CHAT_PARAMS.has(key) && !allowed.has(key)) {
      throw new SvcError('unknown_parameter', `Unrecognized request argument supplied: ${key}`, { param: key });
    }
    checkChatExtra(key, value);
    body[key] = value;
  }
  return body;
}
