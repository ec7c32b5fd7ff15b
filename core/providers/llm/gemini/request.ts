import { invalidArgument } from '../../../errors';
import type { JsonObject, WireChatRequest, WireContentPart, WireMessage } from '../types';
import { narrowedToAllowed } from '../translate';

/*
 * A chat-completions request as Google's GenerateContentRequest. System and developer messages
 * become `systemInstruction`; assistant turns are `model` contents with `functionCall` parts;
 * tool results are `functionResponse` parts named after the call they answer. A parameter or a
 * part Google's wire cannot carry is refused with a 400 naming it, never dropped.
 */

type Part = JsonObject;
interface Content {
  role: 'user' | 'model';
  parts: Part[];
}

// Parameters the upstream need not see: metadata of the call, or what Gemini does anyway.
// Cache and abuse-tracking hints (`prompt_cache_key`, `safety_identifier`) have no Gemini
// counterpart and change no answer.
const IGNORED = new Set([
  'user',
  'metadata',
  'store',
  'parallel_tool_calls',
  'service_tier',
  'stream',
  'stream_options',
  'prompt_cache_key',
  'prompt_cache_retention',
  'safety_identifier',
]);
const HANDLED = new Set([
  'model',
  'messages',
  'tools',
  'tool_choice',
  'max_tokens',
  'max_completion_tokens',
  'temperature',
  'top_p',
  'top_k',
  'stop',
  'n',
  'seed',
  'presence_penalty',
  'frequency_penalty',
  'response_format',
  'reasoning_effort',
]);

/** Google's stand-in for the signature of a thought the history does not have. */
export const SKIP_THOUGHT_SIGNATURE = 'skip_thought_signature_validator';

// OpenAI's reasoning efforts as Gemini thinking budgets (tokens); "none"/"minimal" turn thinking off.
const THINKING_BUDGET: Readonly<Record<string, number>> = {
  none: 0,
  minimal: 0,
  low: 1024,
  medium: 8192,
  high: 24576,
};

function dataUrl(url: string, param: string): Part {
  const match = /^data:([^;,]+);base64,(.*)$/s.exec(url);
  if (match === null)
    throw invalidArgument(param, `Invalid '${param}': this model's provider takes images only as base64 data URLs.`);
  return { inlineData: { mimeType: match[1], data: match[2] } };
}

function contentParts(message: WireMessage, index: number): Part[] {
  const content = message.content;
  if (content === undefined || content === null) return [];
  if (typeof content === 'string') return content === '' ? [] : [{ text: content }];
  return content.map((part: WireContentPart, j) => {
    const param = `messages[${index}].content[${j}]`;
    if (typeof part['text'] === 'string') return { text: part['text'] };
    if (part.type === 'image_url') {
      const url = (part['image_url'] as { url?: unknown } | undefined)?.url;
      return dataUrl(typeof url === 'string' ? url : '', `${param}.image_url.url`);
    }
    throw invalidArgument(
      param,
      `Invalid '${param}': a '${part.type}' part is not supported by this model's provider.`,
    );
  });
}

function parseArguments(text: string, param: string): JsonObject {
  try {
    const value: unknown = text.trim() === '' ? {} : JSON.parse(text);
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) return value as JsonObject;
  } catch {
    // Refused below.
  }
  throw invalidArgument(param, `Invalid '${param}': the arguments must be a JSON object.`);
}

function toolResult(text: string): JsonObject {
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) return value as JsonObject;
  } catch {
    // Plain text: wrapped below.
  }
  return { result: text };
}

function textOf(message: WireMessage): string {
  if (typeof message.content === 'string') return message.content;
  if (!Array.isArray(message.content)) return '';
  return message.content.map((p) => (typeof p['text'] === 'string' ? p['text'] : '')).join('');
}

function contents(messages: readonly WireMessage[]): { system: Part[]; contents: Content[] } {
  const system: Part[] = [];
  const out: Content[] = [];
  const callNames = new Map<string, string>();
  const push = (role: Content['role'], parts: Part[]): void => {
    if (parts.length === 0) return;
    const last = out[out.length - 1];
    // Google's turns alternate: parallel tool results, or a user turn after them, join one turn.
    if (last !== undefined && last.role === role) last.parts.push(...parts);
    else out.push({ role, parts });
  };
  messages.forEach((message, i) => {
    switch (message.role) {
      case 'system':
      case 'developer':
        system.push(...contentParts(message, i));
        return;
      case 'user':
        push('user', contentParts(message, i));
        return;
      case 'assistant': {
        const parts = contentParts(message, i);
        (message.tool_calls ?? []).forEach((call, j) => {
          callNames.set(call.id, call.function.name);
          const args = parseArguments(call.function.arguments, `messages[${i}].tool_calls[${j}].function.arguments`);
          // Thinking models (Gemini 3) refuse a replayed function call without the signature of
          // the thought that made it, which a chat history does not keep; Google's documented
          // stand-in (what Gemini CLI itself sends) skips the check. It goes on the first call of
          // a turn, where Google puts the real one.
          parts.push({
            functionCall: { name: call.function.name, args },
            ...(j === 0 ? { thoughtSignature: SKIP_THOUGHT_SIGNATURE } : {}),
          });
        });
        push('model', parts);
        return;
      }
      case 'tool': {
        const name = callNames.get(message.tool_call_id ?? '');
        if (name === undefined)
          throw invalidArgument(
            `messages[${i}].tool_call_id`,
            `Invalid 'messages[${i}].tool_call_id': no earlier assistant tool call has the id '${message.tool_call_id ?? ''}'.`,
          );
        push('user', [{ functionResponse: { name, response: toolResult(textOf(message)) } }]);
        return;
      }
    }
  });
  return { system, contents: out };
}

function toolConfig(choice: WireChatRequest['tool_choice']): JsonObject | undefined {
  if (choice === undefined) return undefined;
  if (choice === 'none') return { functionCallingConfig: { mode: 'NONE' } };
  if (choice === 'auto') return { functionCallingConfig: { mode: 'AUTO' } };
  if (choice === 'required') return { functionCallingConfig: { mode: 'ANY' } };
  const name = (choice as { function?: { name?: unknown } }).function?.name;
  return { functionCallingConfig: { mode: 'ANY', allowedFunctionNames: [String(name)] } };
}

function responseFormat(format: unknown): JsonObject {
  const f = (typeof format === 'object' && format !== null ? format : {}) as JsonObject;
  if (f['type'] === 'text') return {};
  if (f['type'] === 'json_object') return { responseMimeType: 'application/json' };
  if (f['type'] === 'json_schema') {
    const schema = (f['json_schema'] as { schema?: unknown } | undefined)?.schema;
    return { responseMimeType: 'application/json', ...(schema === undefined ? {} : { responseJsonSchema: schema }) };
  }
  throw invalidArgument('response_format', `Invalid 'response_format': unsupported type '${String(f['type'])}'.`);
}

function generationConfig(request: WireChatRequest): JsonObject {
  const config: JsonObject = {};
  const limit = request.max_completion_tokens ?? request.max_tokens;
  if (limit !== undefined) config['maxOutputTokens'] = limit;
  if (typeof request['temperature'] === 'number') config['temperature'] = request['temperature'];
  if (typeof request['top_p'] === 'number') config['topP'] = request['top_p'];
  // Only reaches here from a model that lists top_k in `extra_params`.
  if (typeof request['top_k'] === 'number') config['topK'] = request['top_k'];
  const stop = request['stop'];
  if (typeof stop === 'string') config['stopSequences'] = [stop];
  else if (Array.isArray(stop)) config['stopSequences'] = stop;
  if (typeof request['n'] === 'number' && request['n'] > 1) config['candidateCount'] = request['n'];
  if (typeof request['seed'] === 'number') config['seed'] = request['seed'];
  if (typeof request['presence_penalty'] === 'number') config['presencePenalty'] = request['presence_penalty'];
  if (typeof request['frequency_penalty'] === 'number') config['frequencyPenalty'] = request['frequency_penalty'];
  if (request['response_format'] !== undefined && request['response_format'] !== null)
    Object.assign(config, responseFormat(request['response_format']));
  const effort = request['reasoning_effort'];
  if (typeof effort === 'string') {
    const budget = THINKING_BUDGET[effort];
    if (budget === undefined)
      throw invalidArgument('reasoning_effort', `Invalid 'reasoning_effort': unsupported value '${effort}'.`);
    config['thinkingConfig'] = budget === 0 ? { thinkingBudget: 0 } : { thinkingBudget: budget, includeThoughts: true };
  }
  return config;
}

/** The GenerateContentRequest body of a chat request (the model goes in the URL). */
export function toGenerateContent(given: WireChatRequest): JsonObject {
  // Gemini has no allowed_tools: the model is offered only those tools instead.
  const request = narrowedToAllowed(given);
  for (const key of Object.keys(request)) {
    if (HANDLED.has(key) || IGNORED.has(key) || request[key] === undefined || request[key] === null) continue;
    throw invalidArgument(key, `Invalid '${key}': this parameter is not supported by this model's provider.`);
  }
  const { system, contents: turns } = contents(request.messages);
  if (turns.length === 0) throw invalidArgument('messages', `Invalid 'messages': at least one user message is needed.`);
  const body: JsonObject = { contents: turns };
  if (system.length > 0) body['systemInstruction'] = { parts: system };
  const tools = request.tools ?? [];
  if (tools.length > 0) {
    body['tools'] = [
      {
        functionDeclarations: tools.map((tool) => ({
          name: tool.function.name,
          ...(tool.function.description === undefined ? {} : { description: tool.function.description }),
          ...(tool.function.parameters === undefined ? {} : { parametersJsonSchema: tool.function.parameters }),
        })),
      },
    ];
  }
  const config = toolConfig(request.tool_choice);
  if (config !== undefined && tools.length > 0) body['toolConfig'] = config;
  const generation = generationConfig(request);
  if (Object.keys(generation).length > 0) body['generationConfig'] = generation;
  return body;
}
