import { NATIVE_HINTS, NATIVE_UNSUPPORTED } from '../../conversation/fields';
import { invalidArgument } from '../../errors';
import type { JsonObject, WireChatRequest, WireContentPart, WireMessage } from './types';

/*
 * What the native providers (anthropic, openai-responses) share when they translate a
 * chat-completions request: untrusted-JSON readers and the rule for parameters that their
 * upstream cannot carry.
 */

export type Obj = Record<string, unknown>;

export const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
export const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
export const count = (v: unknown): number | undefined =>
  typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : undefined;

/**
 * Parameters that change the answer in a way neither native upstream can honour (a request that
 * sets one to anything but its neutral value is refused with a 400 naming it, never served with
 * the parameter silently dropped), and hints that only tune how an upstream serves the call,
 * dropped where it has no counterpart: both columns of the core's chat field table.
 */
const UNSUPPORTED = NATIVE_UNSUPPORTED;
export const IGNORED_HINTS: ReadonlySet<string> = NATIVE_HINTS;

/** Throws the client's 400 when `request` sets a parameter that `upstream` cannot carry. */
export function refuseUnsupported(request: WireChatRequest, upstream: string, also: readonly string[] = []): void {
  for (const [param, set] of Object.entries(UNSUPPORTED)) {
    const value = request[param];
    if (value !== undefined && value !== null && set(value)) {
      throw invalidArgument(param, `Invalid '${param}': not supported by this model's ${upstream} upstream.`);
    }
  }
  for (const param of also) {
    const value = request[param];
    if (value !== undefined && value !== null)
      throw invalidArgument(param, `Invalid '${param}': not supported by this model's ${upstream} upstream.`);
  }
}

/** The parameters of `request` that a translator left unhandled, to pass upstream verbatim. */
export function remainingParams(request: WireChatRequest, handled: ReadonlySet<string>): JsonObject {
  const out: JsonObject = {};
  for (const [key, value] of Object.entries(request)) {
    if (value === undefined || handled.has(key) || IGNORED_HINTS.has(key) || key in UNSUPPORTED) continue;
    out[key] = value;
  }
  return out;
}

/** The plain text of a message's content (text parts joined), or undefined when it has other parts. */
export function plainText(content: WireMessage['content']): string | undefined {
  if (content === undefined || content === null) return '';
  if (typeof content === 'string') return content;
  let text = '';
  for (const part of content) {
    if (part.type !== 'text' || typeof part['text'] !== 'string') return undefined;
    text += part['text'];
  }
  return text;
}

/** A `data:` URL split into its media type and base64 payload, or undefined for any other URL. */
export function dataUrl(url: string): { mediaType: string; data: string } | undefined {
  const m = /^data:([^;,]+);base64,(.*)$/s.exec(url);
  return m?.[1] !== undefined && m[2] !== undefined ? { mediaType: m[1], data: m[2] } : undefined;
}

/** The URL of an `image_url` part. */
export function imageUrlOf(part: WireContentPart, param: string): { url: string; detail?: string } {
  const image = part['image_url'];
  const url = isObj(image) ? str(image['url']) : str(image);
  if (url === undefined || url === '')
    throw invalidArgument(`${param}.image_url.url`, `Invalid '${param}.image_url.url'.`);
  const detail = isObj(image) ? str(image['detail']) : undefined;
  return detail !== undefined ? { url, detail } : { url };
}

/**
 * OpenAI's `tool_choice: {"type": "allowed_tools", "allowed_tools": {"mode", "tools"}}` (chat
 * completions' shape, which the neutral form carries unchanged so that the offered tools, and with
 * them the prompt cache, stay the same from turn to turn): its mode and the function names it
 * allows, or undefined for any other choice.
 */
export function allowedTools(choice: unknown): { mode: string; names: string[] } | undefined {
  if (!isObj(choice) || choice['type'] !== 'allowed_tools' || !isObj(choice['allowed_tools'])) return undefined;
  const inner = choice['allowed_tools'];
  const tools = Array.isArray(inner['tools']) ? inner['tools'] : [];
  const names = tools.flatMap((tool: unknown) => {
    if (!isObj(tool)) return [];
    const fn = isObj(tool['function']) ? tool['function'] : isObj(tool['custom']) ? tool['custom'] : tool;
    return typeof fn['name'] === 'string' ? [fn['name']] : [];
  });
  return { mode: str(inner['mode']) ?? 'auto', names };
}

/**
 * For an upstream without `allowed_tools` (Anthropic, Gemini, the sandbox): the request offering
 * only the allowed tools, with the choice's mode as its `tool_choice`. Any other request as it is.
 */
export function narrowedToAllowed<T extends WireChatRequest>(request: T): T {
  const allowed = allowedTools(request.tool_choice);
  if (allowed === undefined) return request;
  const tools = (request.tools ?? []).filter((tool) => allowed.names.includes(tool.function.name));
  const { tools: _tools, tool_choice: _choice, ...rest } = request;
  return { ...rest, ...(tools.length > 0 ? { tools, tool_choice: allowed.mode } : {}) } as T;
}
