import { invalidArgument } from '../../../errors';
import { allowedTools, imageUrlOf, isObj, refuseUnsupported, remainingParams, str, type Obj } from '../translate';
import type { JsonObject, WireChatRequest, WireMessage } from '../types';

/*
 * A chat-completions request → an OpenAI Responses request (POST /responses).
 *
 * - Messages become input items: `system` / `developer` / `user` / `assistant` messages keep
 *   their role (text as `input_text`, images as `input_image`, PDFs as `input_file`; an
 *   assistant's text as `output_text`), assistant `tool_calls` become `function_call` items and
 *   `tool` messages `function_call_output` items, in order.
 * - `max_tokens` / `max_completion_tokens` → `max_output_tokens`; `reasoning_effort` →
 *   `reasoning: {effort, summary: "auto"}` (so the answer carries a reasoning summary, which comes
 *   back as `reasoning_content`); `response_format` and `verbosity` → `text`.
 * - `store: false`: svc keeps no state at the upstream for a translated chat call.
 * - Function tools keep `strict` as the client set it, false otherwise (the Responses API would
 *   make it true, and then reject the ordinary schemas chat clients send).
 * - `stop` has no Responses counterpart and is refused like the parameters in translate.ts.
 */

const HANDLED = new Set([
  'model',
  'messages',
  'max_tokens',
  'max_completion_tokens',
  'tools',
  'tool_choice',
  'parallel_tool_calls',
  'temperature',
  'top_p',
  'user',
  'reasoning_effort',
  'response_format',
  'verbosity',
  'stop',
]);

function contentParts(message: WireMessage, param: string): Obj[] | string {
  const content = message.content;
  if (content === undefined || content === null) return '';
  if (typeof content === 'string') return content;
  const textType = message.role === 'assistant' ? 'output_text' : 'input_text';
  return content.map((part, i): Obj => {
    const at = `${param}[${i}]`;
    if (part.type === 'text' && typeof part['text'] === 'string') return { type: textType, text: part['text'] };
    if (part.type === 'image_url' && message.role !== 'assistant') {
      const { url, detail } = imageUrlOf(part, at);
      return { type: 'input_image', image_url: url, detail: detail ?? 'auto' };
    }
    if (part.type === 'file' && message.role !== 'assistant' && isObj(part['file'])) {
      const file = part['file'];
      return {
        type: 'input_file',
        ...(str(file['file_data']) !== undefined ? { file_data: file['file_data'] } : {}),
        ...(str(file['file_id']) !== undefined ? { file_id: file['file_id'] } : {}),
        ...(str(file['filename']) !== undefined ? { filename: file['filename'] } : {}),
      };
    }
    throw invalidArgument(`${at}.type`, `Invalid '${at}.type': '${part.type}' parts are not supported by this model.`);
  });
}

/** The chat messages as Responses input items. */
export function toResponsesInput(messages: readonly WireMessage[]): Obj[] {
  const items: Obj[] = [];
  messages.forEach((message, i) => {
    const at = `messages[${i}]`;
    if (message.role === 'tool') {
      const content = message.content;
      const output =
        typeof content === 'string' || content === undefined || content === null
          ? (content ?? '')
          : contentParts({ ...message, role: 'user' }, `${at}.content`);
      items.push({ type: 'function_call_output', call_id: message.tool_call_id ?? '', output });
      return;
    }
    const content = contentParts(message, `${at}.content`);
    const empty = content === '' || (Array.isArray(content) && content.length === 0);
    if (!(message.role === 'assistant' && empty)) {
      items.push(
        message.role === 'assistant' && typeof content === 'string'
          ? { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: content }] }
          : { type: 'message', role: message.role, content },
      );
    }
    for (const call of message.tool_calls ?? []) {
      items.push({
        type: 'function_call',
        call_id: call.id,
        name: call.function.name,
        arguments: call.function.arguments,
      });
    }
  });
  return items;
}

function textFormat(format: unknown): Obj | undefined {
  if (!isObj(format)) return undefined;
  if (format['type'] === 'json_schema' && isObj(format['json_schema']))
    return { type: 'json_schema', ...format['json_schema'] };
  if (format['type'] === 'json_object' || format['type'] === 'text') return { type: format['type'] };
  throw invalidArgument('response_format.type', `Invalid 'response_format.type': '${String(format['type'])}'.`);
}

/** The Responses body for `request` (without `stream`). */
export function toResponsesRequest(request: WireChatRequest): JsonObject {
  refuseUnsupported(request, 'Responses API', ['stop']);
  const body: JsonObject = { model: request.model, input: toResponsesInput(request.messages), store: false };
  const limit = request.max_completion_tokens ?? request.max_tokens;
  if (typeof limit === 'number') body['max_output_tokens'] = limit;
  if (request.tools !== undefined && request.tools.length > 0) {
    body['tools'] = request.tools.map((tool) => ({
      type: 'function',
      name: tool.function.name,
      ...(tool.function.description !== undefined ? { description: tool.function.description } : {}),
      parameters: tool.function.parameters ?? { type: 'object', properties: {} },
      strict: tool.function.strict ?? false,
    }));
  }
  const choice = request.tool_choice;
  const allowed = allowedTools(choice);
  // The Responses API's own allowed_tools shape: the same tools, the same choice.
  if (allowed !== undefined)
    body['tool_choice'] = {
      type: 'allowed_tools',
      mode: allowed.mode,
      tools: allowed.names.map((name) => ({ type: 'function', name })),
    };
  else if (typeof choice === 'string') body['tool_choice'] = choice;
  else if (isObj(choice) && isObj(choice['function']))
    body['tool_choice'] = { type: 'function', name: choice['function']['name'] };
  for (const key of ['parallel_tool_calls', 'temperature', 'top_p'] as const) {
    if (request[key] !== undefined) body[key] = request[key];
  }
  const user = str(request['user']);
  if (user !== undefined && user !== '') body['user'] = user;
  const effort = str(request['reasoning_effort']);
  if (effort !== undefined) body['reasoning'] = { effort, summary: 'auto' };
  const format = textFormat(request['response_format']);
  const verbosity = str(request['verbosity']);
  if (format !== undefined || verbosity !== undefined)
    body['text'] = { ...(format !== undefined ? { format } : {}), ...(verbosity !== undefined ? { verbosity } : {}) };
  // These hints exist in the Responses API under the same names.
  for (const key of ['prompt_cache_key', 'prompt_cache_retention', 'service_tier', 'safety_identifier', 'metadata']) {
    if (request[key] !== undefined) body[key] = request[key];
  }
  return { ...remainingParams(request, HANDLED), ...body };
}
