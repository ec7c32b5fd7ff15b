import type { JsonObject } from '../types';

/*
 * The fast path's chunk check (core/chat/fast-path.ts): an upstream's chunk goes to the client as
 * its own JSON text, only when that text says exactly what the translated path would write from
 * it (`readChunk`, then the adapter's `chunkJson`), less the fields the translation drops and plus
 * the ones it cannot carry. Any chunk with a quirk the translation smooths over (a missing index,
 * an empty finish reason, `reasoning` for `reasoning_content`, a usage on a chunk with choices, a
 * model key written twice, …) returns undefined: the provider hands it over normalised instead.
 */

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const isIndex = (v: unknown): boolean => typeof v === 'number' && Number.isInteger(v) && v >= 0;

/** Whether `text` holds `needle` exactly once. */
function once(text: string, needle: string): boolean {
  const at = text.indexOf(needle);
  return at !== -1 && text.indexOf(needle, at + needle.length) === -1;
}

function canonicalToolCall(call: unknown): boolean {
  if (!isObj(call) || !isIndex(call['index'])) return false;
  const id = call['id'];
  if (id !== undefined && (typeof id !== 'string' || id === '' || call['type'] !== 'function')) return false;
  const fn = call['function'];
  if (fn === undefined) return true;
  if (!isObj(fn)) return false;
  const name = fn['name'];
  const args = fn['arguments'];
  return (
    (name === undefined || (typeof name === 'string' && name !== '')) &&
    (args === undefined || typeof args === 'string')
  );
}

function canonicalChoice(choice: unknown): boolean {
  if (!isObj(choice) || !isIndex(choice['index'])) return false;
  const finish = choice['finish_reason'];
  if (finish !== null && (typeof finish !== 'string' || finish === '')) return false;
  const delta = choice['delta'];
  if (!isObj(delta)) return false;
  const content = delta['content'];
  if (content !== undefined && content !== null && typeof content !== 'string') return false;
  // `reasoning` (OpenRouter's name) is what the translation renames to `reasoning_content`.
  if (delta['reasoning'] !== undefined) return false;
  const calls = delta['tool_calls'];
  if (calls !== undefined && (!Array.isArray(calls) || !calls.every(canonicalToolCall))) return false;
  return true;
}

/** A chunk the fast path forwards, and what svc reads of it. */
export interface ForwardedChunk {
  /** The JSON text that goes to the client. */
  readonly out: string;
  /** Its output text, as `chunkText` reads it from `readChunk`'s chunk. */
  readonly text: string;
  /** Whether a choice finished in it. */
  readonly finished: boolean;
}

const str = (v: unknown): string => (typeof v === 'string' ? v : '');

/**
 * `chunkText(readChunk(json))` of a chunk `forwardable` accepted, read from the JSON directly:
 * content, refusal, reasoning_content (not ''), each tool call's name and arguments.
 */
function textOf(choices: readonly Obj[]): { text: string; finished: boolean } {
  let text = '';
  let finished = false;
  for (const choice of choices) {
    if (choice['finish_reason'] !== null) finished = true;
    const delta = choice['delta'] as Obj;
    text += str(delta['content']) + str(delta['refusal']) + str(delta['reasoning_content']);
    const calls = delta['tool_calls'] as Obj[] | undefined;
    if (calls !== undefined)
      for (const call of calls) {
        const fn = call['function'] as Obj | undefined;
        if (fn !== undefined) text += str(fn['name']) + str(fn['arguments']);
      }
  }
  return { text, finished };
}

/**
 * The chunk to forward (its JSON text with svc's model id in place of the upstream's and
 * `"usage":null` dropped when the client did not ask for usage, and what svc reads of it), or
 * undefined when it must go through `readChunk` and be normalised. A chunk accepted here is one
 * `readChunk` accepts, with no usage. `json` is `data` parsed; `modelJson` is
 * `JSON.stringify(modelId)`.
 */
export function forwardable(
  data: string,
  json: JsonObject,
  includeUsage: boolean,
  modelId: string,
  modelJson: string,
): ForwardedChunk | undefined {
  const out = forwardedText(data, json, includeUsage, modelId, modelJson);
  return out === undefined ? undefined : { out, ...textOf(json['choices'] as Obj[]) };
}

function forwardedText(
  data: string,
  json: JsonObject,
  includeUsage: boolean,
  modelId: string,
  modelJson: string,
): string | undefined {
  const id = json['id'];
  if (typeof id !== 'string' || id === '' || !isIndex(json['created'])) return undefined;
  // An event of several data lines is JSON with line breaks in it: not one SSE line as it is.
  if (data.includes('\n') || data.includes('\r')) return undefined;
  if (json['object'] !== 'chat.completion.chunk') return undefined;
  const choices = json['choices'];
  if (!Array.isArray(choices) || choices.length === 0 || !choices.every(canonicalChoice)) return undefined;
  let text = data;
  // Every chunk carries `usage: null` for a client that asked for usage (its own comes last), and
  // none otherwise, as OpenAI sends them.
  const usage = json['usage'];
  if (usage === undefined ? includeUsage : usage !== null) return undefined;
  if (usage === null && !includeUsage) {
    const field = ',"usage":null';
    if (!once(text, '"usage"') || !once(text, field)) return undefined;
    const at = text.indexOf(field);
    text = text.slice(0, at) + text.slice(at + field.length);
  }
  const model = json['model'];
  if (typeof model !== 'string' || !once(text, '"model"')) return undefined;
  if (model === modelId) return text;
  const pattern = `"model":${JSON.stringify(model)}`;
  const at = text.indexOf(pattern);
  if (at === -1) return undefined;
  return text.slice(0, at) + '"model":' + modelJson + text.slice(at + pattern.length);
}
