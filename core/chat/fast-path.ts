import type { ChatCompletionParams } from '../../gen/svc/core/v1/chat';
import type { JsonObject } from '../providers/llm/types';
import type { PreparedChat } from './prepare';

/**
 * The fast path (issue 35, DESIGN.md point 3): an OpenAI chat-completions stream whose model's
 * upstreams all speak that wire (`openai`) passes through. Everything is decided as for any call,
 * from the params (auth, validation, model, allow-list, output limit, hold, caps, idempotency);
 * then the client's own body goes upstream with only the model, svc's output limit (under the
 * upstream's `max_tokens_field`), `developer` → `system` where the upstream wants it, and
 * `stream_options: {include_usage: true}` changed (`openai/provider.ts`), and the answer's chunks
 * go back as the upstream wrote them, svc's model id in place of the upstream's, with
 * `"usage": null` dropped for a client that did not ask for usage (`openai/pass-through.ts`); a
 * chunk with a quirk the translation would smooth over is normalised as the translation would.
 * Usage is read on the way; the final usage chunk, the money and the records are the translated
 * path's own (`runner.ts`).
 *
 * This function is the one place that decides: it returns the body to pass through, or
 * undefined for a call the translation serves. Translated are:
 * - the fast path switched off (`chat.fast_path: false`, or `SVC_FAST_PATH=0`, which wins);
 * - another client wire (Anthropic, Gemini: their own native path) or a body the adapter did not
 *   offer (`raw_body` empty: gRPC callers, WebSocket mode, non-stream calls);
 * - a model with an upstream that is not `openai` (or a sandbox);
 * - `n` above 1;
 * - what the translation rewrites rather than forwards: the deprecated function-calling messages
 *   (`role: "function"`, an assistant's `function_call`), a `tool_choice` of type `allowed_tools`
 *   (the translation narrows the tools itself), `parallel_tool_calls` without tools (dropped),
 *   and any top-level `null` (omitted by the translation).
 */
export function fastPathBody(
  enabled: boolean,
  params: ChatCompletionParams,
  prepared: PreparedChat,
): { readonly body: JsonObject; readonly includeUsage: boolean } | undefined {
  if (!enabled || params.rawBody === '' || params.nativeBody !== undefined) return undefined;
  if (params.clientWire !== '' && params.clientWire !== 'openai') return undefined;
  if (prepared.provider.passThrough === undefined || prepared.choices > 1) return undefined;
  let body: unknown;
  try {
    body = JSON.parse(params.rawBody);
  } catch {
    return undefined;
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
  const object = body as JsonObject;
  for (const key in object) if (object[key] === null) return undefined;
  const choice = object['tool_choice'];
  if (typeof choice === 'object' && choice !== null && (choice as JsonObject)['type'] === 'allowed_tools')
    return undefined;
  const tools = object['tools'];
  if (object['parallel_tool_calls'] !== undefined && !(Array.isArray(tools) && tools.length > 0)) return undefined;
  const messages = object['messages'];
  if (!Array.isArray(messages)) return undefined;
  for (const message of messages as unknown[]) {
    if (typeof message !== 'object' || message === null) return undefined;
    const m = message as JsonObject;
    if (m['role'] === 'function' || m['function_call'] !== undefined) return undefined;
  }
  const options = object['stream_options'];
  const includeUsage =
    typeof options === 'object' && options !== null && (options as JsonObject)['include_usage'] === true;
  return { body: object, includeUsage };
}

/** Whether the fast path is on: `SVC_FAST_PATH` (0 or 1) when set, else `chat.fast_path` (default on). */
export function fastPathEnabled(configured: boolean | undefined, env: NodeJS.ProcessEnv = process.env): boolean {
  const flag = env['SVC_FAST_PATH'];
  if (flag === '0' || flag === 'false') return false;
  if (flag === '1' || flag === 'true') return true;
  return configured ?? true;
}
